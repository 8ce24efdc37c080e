"""Kafka in the run's reports: per-cluster totals and the follower-lag histogram, MirrorMaker 2 flows with their
redelivered / skipped bounds, what was not judged (as coverage gaps), the HTML section with its plots, terminal
lines, the lab scorecard matching Kafka findings on (check, cluster, topic, partition[, broker][, group]) and the
MM2 failover comparison."""
import json

import pytest

from audit import systems
from audit.report.html import render_html
from audit.systems.kafka.report import (SECTION, claims, kafka_metrics, lag_bucket, not_judged, truth_item,
                                         truth_key)
from audit.report.summary import SummaryInputError, build_summary, scorecard
from audit.report.text import render_text
from audit.validate.outcome import SuiteOutcome, ValidationOutcome
from tests.report.systems import staged

SYSTEMS = systems.of(["kafka"])
RUN = {"estate": "lab", "run_id": "r1", "attempt_id": "a1"}
GX = ValidationOutcome([SuiteOutcome("violations", "violations", "passed")], "index.html")


def part(cluster, p, lag=0, **kw):
    return {"cluster": cluster, "topic": "t", "partition": p, "replica_count": 3, "collected_replicas": 3,
            "under_replicated": False, "offline": False, "max_lag": lag, "min_divergence_offset": None,
            "findings": 0, "not_judged": 0, **kw}


def fo(group, r=(0, 0), s=(0, 0), topic="orders", partition=0, exact=True, cluster="east", source="west"):
    return {"cluster": cluster, "source": source, "group": group, "topic": topic, "partition": partition,
            "exact": exact, "redelivered_min": r[0], "redelivered_max": r[1], "skipped_min": s[0],
            "skipped_max": s[1]}


def kv(check, count, cluster="east", **ev):
    return {"run_id": "r1", "system": "kafka", "cluster": cluster, "check": check, "severity": "critical",
            "subject": f"{ev.get('topic')}-{ev.get('partition')}", "entry_count": count, "message": "m",
            "evidence": json.dumps(ev)}


@pytest.mark.parametrize("lag, bucket", [(0, "0"), (-3, "0"), (1, "1-9"), (9, "1-9"), (10, "10-99"),
                                         (12_345, "10k-99999"), (100_000, ">=100k"), (10 ** 9, ">=100k")])
def test_lag_buckets(lag, bucket):
    assert lag_bucket(lag) == bucket


def test_cluster_totals_histogram_and_findings_by_check():
    # every follower has a divergence offset (most at their log end): only a truncating one makes it diverged
    m = kafka_metrics([part("east", 0, min_divergence_offset=90, truncating_followers=0),
                       part("east", 1, lag=42, under_replicated=True, min_divergence_offset=7, truncating_followers=1),
                       part("west", 0, offline=True, collected_replicas=1)], None, None,
                      [kv("kafka.divergent_logs", 3, topic="t", partition=1, broker=2),
                       kv("kafka.divergent_logs", 1, topic="t", partition=2, broker=2),
                       {"system": "pulsar", "cluster": "p", "check": "pulsar.failover_loss"}])
    east = m["clusters"]["east"]
    assert {k: east[k] for k in ("partitions", "replicas", "under_replicated", "diverged", "findings")} == {
        "partitions": 2, "replicas": 6, "under_replicated": 1, "diverged": 1, "findings": 2}
    assert east["lag_histogram"]["0"] == 1 and east["lag_histogram"]["10-99"] == 1
    assert east["by_check"] == {"kafka.divergent_logs": 2}
    assert m["clusters"]["west"]["offline"] == 1 and "p" not in m["clusters"]
    assert m["mm2"] == {} and "not_judged" not in m


def test_mm2_flows_totals_and_top_groups():
    rows = [fo("a", r=(2, 2)), fo("b", s=(1, 3), exact=False), fo("c"), fo("d", r=(5, 5), source="north")]
    flows = kafka_metrics(None, rows, None)["mm2"]
    assert list(flows) == ["north->east", "west->east"]
    w = flows["west->east"]
    assert {k: w[k] for k in ("group_partitions", "inexact", "redelivered_min", "redelivered_max", "skipped_max")} \
        == {"group_partitions": 3, "inexact": 1, "redelivered_min": 2, "redelivered_max": 2, "skipped_max": 3}
    assert [t["group"] for t in w["top"]] == ["b", "a"]   # by redelivered + skipped (max), zero rows left out


def test_not_judged_grouped_by_cluster_and_what():
    rows = [{"cluster": "east", "topic": "t", "partition": p, "broker": 1, "what": "one replica", "entry_count": 0}
            for p in range(5)] + [{"cluster": "east", "group": "g", "topic": "o", "partition": 0, "what": "read order",
                                   "entry_count": 7}]
    got = not_judged(rows)
    assert [(g["what"], g["items"], g["entry_count"]) for g in got] == [("one replica", 5, 0), ("read order", 1, 7)]
    assert got[0]["examples"] == ["t-0 broker 1", "t-1 broker 1", "t-2 broker 1"]
    assert got[1]["examples"] == ["group g o-0"]


def test_summary_html_and_text_from_staged_metrics(tmp_path):
    out = staged(tmp_path / "run", violations=[kv("kafka.committed_data_lost", 4, topic="<t>", partition=0,
                                                  broker=1)],
                 kafka_partitions=[part("east", 0, lag=3)], kafka_mm2_failover=[fo("<g>", r=(1, 2))],
                 kafka_coverage=[{"cluster": "east", "topic": "t", "partition": 0, "broker": 2, "group": None,
                                  "what": "one replica's evidence only", "entry_count": 0}])
    s = build_summary(RUN, out.violations, [], GX, None, systems=SYSTEMS, outputs=out)
    assert s["kafka"]["clusters"]["east"]["findings"] == 1
    assert s["kafka"]["mm2"]["west->east"]["redelivered_max"] == 2
    html = render_html(s, out.violations, systems=SYSTEMS)
    assert 'id="kafka-lag-histogram"' in html and 'id="kafka-mm2-0"' in html
    assert "<td>&lt;g&gt;</td>" in html and "<td><g></td>" not in html   # values escaped
    text = render_text(s, SYSTEMS)
    assert "kafka east: 1 partition(s), 3 replica(s) read, 1 finding(s)" in text
    assert "kafka mm2 west->east: 1 group partition(s), redelivered 1..2, skipped 0" in text
    assert "kafka not judged: 1 item(s) (one replica's evidence only)" in text
    gaps = SECTION.coverage(out)
    assert gaps == [{"system": "kafka", "cluster": "east", "source": "1 item(s), e.g. t-0 broker 2",
                     "what": "one replica's evidence only", "error": "not judged"}]


def test_no_kafka_metrics_no_kafka_section(tmp_path):
    out = staged(tmp_path / "none")
    s = build_summary(RUN, [], [], GX, None, systems=SYSTEMS, outputs=out)
    assert "kafka" not in s and SECTION.html(s, []) == "" and SECTION.text(s) == [] and SECTION.coverage(out) == []


TRUTH = {"system": "kafka", "cluster": "east", "faults": [{"kind": "unclean_election"}], "findings": [
    {"check": "kafka.committed_data_lost", "cluster": "east", "topic": "t", "partition": 0, "entry_count": 4},
    {"check": "kafka.divergent_logs", "cluster": "east", "topic": "t", "partition": 1, "broker": 2,
     "entry_count": 3},
    {"check": "kafka.mm2_target_group_ahead", "cluster": "east", "topic": "orders", "partition": 0, "group": "g",
     "source": "west", "entry_count": 5}],
    "mm2_failover": [{"cluster": "east", "source": "west", "group": "g", "topic": "orders", "partition": 0,
                      "redelivered": 0, "skipped": 5},
                     {"cluster": "east", "source": "west", "group": "h", "topic": "orders", "partition": 0,
                      "redelivered": 2, "skipped": 0},
                     {"cluster": "east", "source": "west", "group": "k", "topic": "orders", "partition": 0,
                      "redelivered": 0, "skipped": 0}]}


@pytest.mark.parametrize("violations, expect", [
    # the lost offsets name the leader's broker, the truth the partition only: matched without the broker
    ([kv("kafka.committed_data_lost", 4, topic="t", partition=0, broker=1),
      kv("kafka.divergent_logs", 3, topic="t", partition=1, broker=2),
      kv("kafka.mm2_target_group_ahead", 5, topic="orders", partition=0, group="g", source="west")],
     dict(injected=3, detected=3, wrong_count=0, missed=0, false_alarms=0)),
    # the divergent replica on another broker is a miss and a false alarm; a wrong count is a wrong count
    ([kv("kafka.committed_data_lost", 3, topic="t", partition=0),
      kv("kafka.divergent_logs", 3, topic="t", partition=1, broker=3)],
     dict(injected=3, detected=0, wrong_count=1, missed=2, false_alarms=1)),
    # a failover count is what the syncs prove (Check.at_least): 1 to 5 of the 5 true skips match, 6 or 0 do not
    ([kv("kafka.mm2_target_group_ahead", 3, topic="orders", partition=0, group="g", source="west")],
     dict(injected=3, detected=1, wrong_count=0, missed=2, false_alarms=0)),
    ([kv("kafka.mm2_target_group_ahead", 6, topic="orders", partition=0, group="g", source="west")],
     dict(injected=3, detected=0, wrong_count=1, missed=2, false_alarms=0)),
    ([kv("kafka.mm2_target_group_ahead", 0, topic="orders", partition=0, group="g", source="west")],
     dict(injected=3, detected=0, wrong_count=1, missed=2, false_alarms=0)),
])
def test_findings_scored_by_evidence_keys(violations, expect):
    lab = build_summary(RUN, violations, [], GX, [TRUTH], systems=SYSTEMS)["lab"]
    assert {k: lab[k] for k in expect} == expect


def test_keys_and_items():
    v = kv("kafka.divergent_logs", 3, topic="t", partition=1, broker=2)
    assert claims(v) == [(("kafka", "kafka.divergent_logs", "east", "t", 1, 2, None, None), 3),
                         (("kafka", "kafka.divergent_logs", "east", "t", 1, None, None, None), 3)]
    assert truth_key(TRUTH["findings"][0]) == ("kafka", "kafka.committed_data_lost", "east", "t", 0, None, None,
                                               None)
    assert truth_item(TRUTH["findings"][2]) == {"topic": "orders", "partition": 0, "group": "g", "source": "west"}


def test_another_systems_truth_with_a_failover_list_is_not_read(tmp_path):
    pulsar = {"system": "pulsar", "cluster": "p", "findings": [], "mm2_failover": "not a list"}
    both = systems.of(["pulsar", "kafka"])
    assert scorecard([pulsar], [], both, staged(tmp_path / "p")).get("mm2_failover") is None


def test_mm2_failover_comparison(tmp_path):
    rows = [fo("g", s=(5, 5)), fo("h", r=(1, 3), exact=False), fo("z", r=(4, 4)), fo("q", cluster="other")]
    out = staged(tmp_path / "fo", kafka_mm2_failover=rows)
    card = scorecard([TRUTH], [], SYSTEMS, out)["mm2_failover"]
    assert {k: card[k] for k in ("expected", "matched", "mismatched", "missing", "unexpected", "perfect")} == {
        "expected": 3, "matched": 2, "mismatched": 0, "missing": 1, "unexpected": 1, "perfect": False}
    assert card["missing_items"][0]["group"] == "k" and card["unexpected_items"][0]["group"] == "z"
    out = staged(tmp_path / "wrong", kafka_mm2_failover=[fo("g", s=(4, 4)), fo("h", r=(2, 2)), fo("k")])
    s = build_summary(RUN, [], [], GX, [TRUTH], systems=SYSTEMS, outputs=out)
    card = s["lab"]["mm2_failover"]
    assert (card["matched"], card["mismatched"]) == (2, 1)
    assert card["mismatched_items"][0]["got"] == {"redelivered": 0, "skipped": 4}
    assert "Lab scorecard: Kafka MirrorMaker 2 failover counts" in render_html(s, [], systems=SYSTEMS)
    assert "lab kafka mm2 failover: 2/3 matched, mismatched 1" in render_text(s, SYSTEMS)


@pytest.mark.parametrize("truth, source, field", [
    ({**TRUTH, "mm2_failover": {"g": 1}}, "ground_truth[0]", "mm2_failover"),
    ({**TRUTH, "mm2_failover": [{"cluster": "east", "source": "west", "group": "g", "topic": "o", "partition": 0,
                                 "redelivered": 1}]}, "ground_truth[0].mm2_failover[0]", "skipped"),
])
def test_bad_truth_names_source_and_field(tmp_path, truth, source, field):
    with pytest.raises(SummaryInputError) as info:
        scorecard([truth], [], SYSTEMS, staged(tmp_path / "x"))
    assert (info.value.source, info.value.field) == (source, field)
