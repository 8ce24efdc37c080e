"""The lab scorecard matches a Kafka finding on its offsets too, where the ground truth names them: a finding at
other offsets is a miss and a false alarm, not a detection."""
import json

import pytest

from audit import systems
from audit.systems.kafka.report import claims, truth_item, truth_key
from audit.report.summary import build_summary
from audit.validate.outcome import SuiteOutcome, ValidationOutcome

SYSTEMS = systems.of(["kafka"])
RUN = {"estate": "lab", "run_id": "r1", "attempt_id": "a1"}
GX = ValidationOutcome([SuiteOutcome("violations", "violations", "passed")], "index.html")


def kv(check, count, **ev):
    """A findings row as the Kafka audit writes it (audit_rows.violation: offsets always in the evidence)."""
    return {"run_id": "r1", "system": "kafka", "cluster": "east", "check": check, "severity": "critical",
            "subject": f"{ev.get('topic')}-{ev.get('partition')}", "entry_count": count, "message": "m",
            "evidence": json.dumps(ev)}


LOST = {"check": "kafka.committed_data_lost", "cluster": "east", "topic": "t", "partition": 0, "broker": 1,
        "offset_from": 6, "offset_to": 9, "entry_count": 4}
AHEAD = {"check": "kafka.mm2_target_group_ahead", "cluster": "east", "topic": "orders", "partition": 0,
         "group": "g", "source": "west", "offset_from": 40, "offset_to": 44, "entry_count": 5}


def lab(findings, violations):
    truth = {"system": "kafka", "cluster": "east", "findings": findings}
    card = build_summary(RUN, violations, [], GX, [truth], systems=SYSTEMS)["lab"]
    return {k: card[k] for k in ("injected", "detected", "wrong_count", "missed", "false_alarms")}


@pytest.mark.parametrize("violations, expect", [
    ([kv("kafka.committed_data_lost", 4, topic="t", partition=0, broker=1, offset_from=6, offset_to=9),
      kv("kafka.mm2_target_group_ahead", 5, topic="orders", partition=0, group="g", source="west", offset_from=40,
         offset_to=44)],
     dict(injected=2, detected=2, wrong_count=0, missed=0, false_alarms=0)),
    # the same checks, partitions and counts at other offsets: missed, and false alarms
    ([kv("kafka.committed_data_lost", 4, topic="t", partition=0, broker=1, offset_from=7, offset_to=10),
      kv("kafka.mm2_target_group_ahead", 5, topic="orders", partition=0, group="g", source="west", offset_from=40,
         offset_to=45)],
     dict(injected=2, detected=0, wrong_count=0, missed=2, false_alarms=2)),
    # at the right offsets with another count: a wrong count
    ([kv("kafka.committed_data_lost", 3, topic="t", partition=0, broker=1, offset_from=6, offset_to=9)],
     dict(injected=2, detected=0, wrong_count=1, missed=1, false_alarms=0)),
])
def test_offsets_are_part_of_the_match(violations, expect):
    assert lab([LOST, AHEAD], violations) == expect


def test_a_truth_without_offsets_matches_on_the_other_keys():
    bare = {k: v for k, v in LOST.items() if not k.startswith("offset_")}
    partition = {k: v for k, v in bare.items() if k != "broker"}
    v = kv("kafka.committed_data_lost", 4, topic="t", partition=0, broker=1, offset_from=7, offset_to=10)
    assert lab([bare], [v])["detected"] == 1
    assert lab([partition], [v])["detected"] == 1     # the truth about the partition as a whole
    assert lab([LOST], [v])["missed"] == 1


def test_keys_with_offsets():
    v = kv("kafka.divergent_logs", 3, topic="t", partition=1, broker=2, offset_from=6, offset_to=8)
    whole = ("kafka", "kafka.divergent_logs", "east", "t", 1, 2, None, None)
    partition = whole[:5] + (None,) + whole[6:]
    assert claims(v) == [(whole + (6, 8), 3), (partition + (6, 8), 3), (whole, 3), (partition, 3)]
    assert truth_key({**LOST, "check": "kafka.divergent_logs", "partition": 1, "broker": 2, "offset_to": 8}) == \
        whole + (6, 8)
    # evidence with null offsets (a finding about no offset range) claims the keys without them
    assert claims(kv("kafka.divergent_logs", 3, topic="t", partition=1, offset_from=None, offset_to=None)) == [
        (partition, 3)]
    assert truth_item(LOST) == {"topic": "t", "partition": 0, "broker": 1, "offset_from": 6, "offset_to": 9}
