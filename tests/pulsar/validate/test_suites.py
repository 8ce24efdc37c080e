"""The Pulsar GX suites over small Spark DataFrames: every expectation of pulsar_failover and
pulsar_violations with its exact unexpected count, and the suites left out of a run without Pulsar."""
import json
from pathlib import Path

import pytest

from audit.validate.gx_runner import applicable_suites, run_validations
from audit.systems.pulsar.domain.checks import CHECKS
from audit.systems.pulsar.suites import PULSAR_FAILOVER, PULSAR_VIOLATIONS

PULSAR_CHECKS = {c: k.severity for c, k in CHECKS.items()}   # check id -> severity

PROJECT = Path(__file__).resolve().parents[3] / "expectations"
FAILOVER = ("run_id string, topic string, subscription string, source_cluster string, target_cluster string, "
            "replicated boolean, source_mdp string, target_mdp string, expected_target_mdp string, "
            "exact_target_mdp string, window_from string, window_to string, compared long, only_on_source long, "
            "only_on_target long, redelivered long, skipped long, lost long, redelivered_ranges string, "
            "skipped_ranges string, to_acknowledge string, to_acknowledge_count long, complete boolean, "
            "redelivery_beyond_tolerance long, unsettled long, after_source_window long")
VIOLATIONS = ("run_id string, system string, cluster string, check string, severity string, subject string, "
              "entry_count long, message string, evidence string")
T = "persistent://acme/orders/created"


def fo(sub, target_mdp="7:4", exact="7:4", compared=10, on_target=0, redelivered=0, skipped=0, lost=0,
       acks="[]", count=0, window_from="5:-1", expected=None, beyond=None):
    # by default every redelivery is beyond what PIP-33 explains and the tolerance
    return ("r1", T, sub, "east", "west", True, "5:9", target_mdp, expected, exact, window_from, "5:20", compared,
            0, on_target, redelivered, skipped, lost, "[]", "[]", acks, count, True,
            redelivered if beyond is None else beyond, 0, 0)


CLEAN = fo("clean")
ROWS = [CLEAN,
        fo("findings", redelivered=2, skipped=3, lost=1, acks='["7:5","7:6"]', count=2, expected="7:2"),
        # inconsistent: 3+2 > compared 4, lost > skipped, 3 acks listed for a count of 2, client id form, no exact
        fo("broken", target_mdp="7:4:0", exact=None, compared=4, redelivered=3, skipped=2, lost=3,
           acks='["1:1","1:2","1:3"]', count=2),
        fo("garbled", on_target=-1, window_from="abc", acks="not json"),
        fo("pip33-lag", redelivered=4, beyond=0)]     # redelivered by design (PIP-33): a metric, not a violation


def pv(check, severity, count=1, **evidence):
    return ("r1", "pulsar", "east", check, severity, f"{T} sub=s east->west", count, "m", json.dumps(evidence))


FULL = {"topic": T, "subscription": "s", "target_cluster": "west"}
FINDINGS = [pv("pulsar.failover_loss", "critical", **FULL),
            pv("pulsar.failover_skip", "minor", **FULL),                    # wrong severity
            pv("pulsar.bogus", "major", **FULL),                            # not a contract check id
            pv("pulsar.snapshot_timeout", "warning"),                       # evidence without topic
            pv("pulsar.target_cursor_ahead", "major", topic=T, subscription="s"),   # no target cluster
            pv("pulsar.failover_redelivery", "minor", 0, **FULL),          # a finding of zero messages
            ("r1", "bookkeeper", "bk-a", "bk.entries_lost", "critical", "ledger 1", 3, "m", "{}")]


@pytest.fixture(scope="module")
def outcome(spark, tmp_path_factory):
    tables = {"pulsar_failover": spark.createDataFrame(ROWS, FAILOVER),
              "violations": spark.createDataFrame(FINDINGS, VIOLATIONS)}
    return run_validations(spark, tables, PROJECT, tmp_path_factory.mktemp("docs"))


def _by_description(outcome, name):
    (suite,) = [s for s in outcome.suites if s.name == name]
    return suite, {e.description: (e.success, e.unexpected_count) for e in suite.expectations}


def test_failover_suite_counts(outcome):
    suite, got = _by_description(outcome, "pulsar_failover")
    assert suite.status == "failed" and suite.table == "pulsar_failover"
    expected = {e.description: (True, 0) for e in PULSAR_FAILOVER.expectations}
    expected.update({
        "every failover row has exact_target_mdp": (False, 1),
        "only_on_target is never negative": (False, 1),
        "target_mdp is a broker position 'ledgerId:entryId'": (False, 1),
        "window_from is a broker position 'ledgerId:entryId'": (False, 1),
        "lost messages are a subset of the skipped ones": (False, 1),
        "redelivered, skipped and unsettled messages are among the compared ones (disjoint: acked on one side, "
        "or acked on the source between its reads)": (False, 1),
        "to_acknowledge is a JSON list of at most 10,000 positions, never more than to_acknowledge_count":
            (False, 2),
        "a failover loses no message": (False, 2),
        "a failover skips no message": (False, 2),
        "a failover redelivers no message beyond what PIP-33 explains and the namespace tolerates": (False, 2),
    })
    assert got == expected


def test_pulsar_violations_suite_counts(outcome):
    suite, got = _by_description(outcome, "pulsar_violations")
    assert suite.status == "failed" and suite.table == "violations"
    expected = {f"no {c} finding": (True, 0) for c in PULSAR_CHECKS}
    expected.update({
        "every Pulsar finding uses a contract check id with the contract severity": (False, 2),
        "Pulsar evidence names the topic, and the subscription and target cluster of failover findings":
            (False, 2),
        "a failover finding counts at least one message": (False, 1),
        **{f"no {c} finding": (False, 1) for c in ("pulsar.failover_loss", "pulsar.failover_skip",
                                                    "pulsar.snapshot_timeout", "pulsar.target_cursor_ahead",
                                                    "pulsar.failover_redelivery")},
    })
    assert got == expected
    meta = {(e.check, e.severity) for e in suite.expectations if e.description.startswith("no ")}
    assert meta == set(PULSAR_CHECKS.items())


def test_bad_severity_sample_names_the_rows(outcome):
    (suite,) = [s for s in outcome.suites if s.name == "pulsar_violations"]
    (e,) = [e for e in suite.expectations if e.description.startswith("every Pulsar finding")]
    assert sorted(r["check"] for r in e.sample) == ["pulsar.bogus", "pulsar.failover_skip"]


def test_the_other_suites_still_run_and_a_missing_table_is_skipped(outcome):
    status = {s.name: s.status for s in outcome.suites}
    assert status == {"bk_ledger_replicas": "skipped", "violations": "failed", "pulsar_failover": "failed",
                      "pulsar_violations": "failed"}


@pytest.mark.parametrize("tables, names", [
    ({"bk_ledger_replicas": 1, "violations": 1}, ["bk_ledger_replicas", "violations"]),
    ({"bk_ledger_replicas": 1, "violations": 1, "pulsar_failover": None}, ["bk_ledger_replicas", "violations"]),
    ({"violations": 1, "pulsar_failover": 1},
     ["bk_ledger_replicas", "violations", "pulsar_failover", "pulsar_violations"]),
])
def test_pulsar_suites_apply_only_with_pulsar_metrics(tables, names):
    assert [s.name for s in applicable_suites(tables)] == names
    assert PULSAR_FAILOVER.applies_when == PULSAR_VIOLATIONS.applies_when == ("pulsar_failover",)
