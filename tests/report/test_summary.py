import json

import pytest

from audit.systems.bookkeeper.report import replica_metrics, violation_key
from audit.report.summary import SummaryInputError, build_summary, scorecard
from audit.validate.outcome import ExpectationOutcome, SuiteOutcome, ValidationOutcome
from tests.report.systems import SYSTEMS

RUN = {"estate": "lab", "run_id": "r1", "attempt_id": "a1"}


def v(check, severity, ledger, count=0, cluster="bk-a", bookie=None, system="bookkeeper"):
    ev = {"ledger_id": ledger, **({"bookie": bookie} if bookie else {})}
    return {"run_id": "r1", "system": system, "cluster": cluster, "check": check, "severity": severity,
            "subject": f"ledger {ledger}", "entry_count": count, "message": "m", "evidence": json.dumps(ev)}


def gx(status="passed"):
    e = ExpectationOutcome("unexpected_rows_expectation", "*", "critical", "d", status == "passed",
                           0 if status == "passed" else 2)
    return ValidationOutcome([SuiteOutcome("violations", "violations", status, expectations=[e])], "index.html")


@pytest.mark.parametrize("violations, gaps, validation, status, complete", [
    ([], [], gx(), "clean", True),
    ([v("bk.entries_lost", "critical", 1, 5)], [], gx("failed"), "violations", True),
    ([], [{"system": "bookkeeper", "cluster": "bk-a", "source": "bookie", "what": "b1", "error": "timeout"}],
     gx(), "incomplete", False),
    ([], [], gx("skipped"), "incomplete", False),
    ([], [], None, "incomplete", False),
    ([v("bk.placement_violation", "minor", 2)], [{"source": "s", "what": "w", "error": "e"}], gx(),
     "violations", False),
])
def test_exit_status(violations, gaps, validation, status, complete):
    s = build_summary(RUN, violations, gaps, validation, None, systems=SYSTEMS)
    assert (s["status"], s["complete"]) == (status, complete)
    assert s["estate"] == "lab" and s["run_id"] == "r1"
    assert "lab" not in s


def test_counts_by_system_cluster_check_severity_and_gx_failures():
    vs = [v("bk.entries_lost", "critical", 1, 5), v("bk.entries_below_ack_quorum", "major", 1, 9),
          v("bk.entries_below_ack_quorum", "major", 2, 3, cluster="bk-b"), v("bk.placement_violation", "minor", 3)]
    s = build_summary(RUN, vs, [], gx("failed").to_json(), None, systems=SYSTEMS, parts={"metrics": {"x": 1}})
    c = s["counts"]
    assert c["total"] == 4 and c["entries"] == 17
    assert c["by_severity"] == {"critical": 1, "major": 2, "minor": 1, "warning": 0}
    assert c["by_check"] == {"bk.entries_below_ack_quorum": 2, "bk.entries_lost": 1, "bk.placement_violation": 1}
    assert c["by_cluster"]["bookkeeper/bk-a"] == {"critical": 1, "major": 1, "minor": 1, "warning": 0}
    assert c["by_cluster"]["bookkeeper/bk-b"]["major"] == 1
    assert c["by_system"] == {"bookkeeper": 4}
    assert s["metrics"] == {"x": 1}
    assert s["validation"]["failed_expectations"] == [{"suite": "violations", "check": "*", "severity": "critical",
                                                      "expectation_type": "unexpected_rows_expectation",
                                                      "unexpected_count": 2, "exception": None}]
    json.dumps(s)


TRUTH = {"cluster": "bk-a", "faults": [{"kind": "bookie_crash"}, {"kind": "delete_entries"}], "findings": [
    {"check": "bk.entries_lost", "cluster": "bk-a", "ledger_id": 1, "entry_count": 5},
    {"check": "bk.entries_below_ack_quorum", "cluster": "bk-a", "ledger_id": 1, "entry_count": 9},
    {"check": "bk.ensemble_dead_bookie", "cluster": "bk-a", "ledger_id": 1, "bookie": "b3:3181"},
    {"check": "bk.placement_violation", "cluster": "bk-a", "ledger_id": 4},
]}


@pytest.mark.parametrize("violations, expect", [
    # everything found, right counts (placement has no count: any count matches)
    ([v("bk.entries_lost", "critical", 1, 5), v("bk.entries_below_ack_quorum", "major", 1, 9),
      v("bk.ensemble_dead_bookie", "major", 1, bookie="b3:3181"), v("bk.placement_violation", "minor", 4, 2)],
     dict(injected=4, detected=4, wrong_count=0, missed=0, false_alarms=0, perfect=True)),
    # wrong count, wrong bookie (missed + false alarm), nothing for placement
    ([v("bk.entries_lost", "critical", 1, 4), v("bk.entries_below_ack_quorum", "major", 1, 9),
      v("bk.ensemble_dead_bookie", "major", 1, bookie="b9:3181")],
     dict(injected=4, detected=1, wrong_count=1, missed=2, false_alarms=1, perfect=False)),
    # a finding on another ledger is a false alarm; a duplicate cannot be claimed twice
    ([v("bk.entries_lost", "critical", 1, 5), v("bk.entries_lost", "critical", 1, 5),
      v("bk.entries_lost", "critical", 7, 1)],
     dict(injected=4, detected=1, wrong_count=0, missed=3, false_alarms=2, perfect=False)),
    # findings of clusters without ground truth are not scored
    ([v("bk.entries_lost", "critical", 1, 5, cluster="prod")],
     dict(injected=4, detected=0, wrong_count=0, missed=4, false_alarms=0, perfect=False)),
])
def test_lab_scorecard(violations, expect):
    lab = build_summary(RUN, violations, [], gx(), TRUTH, systems=SYSTEMS)["lab"]
    assert {k: lab[k] for k in expect} == expect
    assert lab["faults"] == 2 and lab["clusters"] == ["bk-a"]
    by_check = lab["by_check"]
    assert sum(c["injected"] for c in by_check.values()) == 4
    assert sum(c["false_alarms"] for c in by_check.values()) == expect["false_alarms"]


def test_wrong_count_item_names_both_counts():
    lab = scorecard([TRUTH], [v("bk.entries_lost", "critical", 1, 4)], SYSTEMS)
    assert lab["wrong_count_items"] == [{"check": "bk.entries_lost", "cluster": "bk-a", "ledger_id": 1,
                                         "expected_entry_count": 5, "entry_count": 4}]


@pytest.mark.parametrize("truth", [TRUTH, [TRUTH], {"bk-a": TRUTH}])
def test_ground_truth_shapes(truth):
    assert build_summary(RUN, [], [], gx(), truth, systems=SYSTEMS)["lab"]["injected"] == 4


def test_ledger_from_subject_when_evidence_lacks_it():
    row = {"check": "bk.entries_lost", "cluster": "c", "subject": "ledger 00042 segment 0", "evidence": "not json"}
    assert violation_key(row, False) == ("bk.entries_lost", "c", 42)
    assert violation_key(row, True) == ("bk.entries_lost", "c", 42, None)


@pytest.mark.parametrize("violations, truth, source, field", [
    ([{"system": "bookkeeper", "cluster": "c", "check": "x"}], None, "violations[0]", "severity"),
    ([{"system": "bookkeeper", "cluster": "c", "check": "x", "severity": "fatal"}], None, "violations[0]",
     "severity"),
    ([], {"cluster": "c", "findings": [{"check": "x", "cluster": "c"}]}, "ground_truth[0].findings[0]",
     "ledger_id"),
    ([], {"c": {"findings": "all"}}, "ground_truth[0]", "findings"),
])
def test_bad_input_names_source_and_field(violations, truth, source, field):
    with pytest.raises(SummaryInputError) as err:
        build_summary(RUN, violations, [], gx(), truth, systems=SYSTEMS)
    assert (err.value.source, err.value.field) == (source, field)


def test_replica_metrics_histogram_counts_audited_ledgers_only():
    rows = [{"cluster": "a", "audited": True, "least_replicas": 3, "entries": 10, "entries_lost": 0},
            {"cluster": "a", "audited": True, "least_replicas": 0, "entries": 10, "entries_lost": 4,
             "entries_below_ack_quorum": 6},
            {"cluster": "a", "audited": False, "least_replicas": None},
            {"cluster": "b", "audited": True, "least_replicas": 3, "entries": 5}]
    m = replica_metrics(rows)
    assert m["replica_histogram"] == {"0": 1, "3": 2}
    assert m["clusters"]["a"] == {"ledgers": 3, "audited": 2, "entries": 20, "entries_lost": 4,
                                  "entries_below_ack_quorum": 6, "entries_below_write_quorum": 0,
                                  "ledgers_with_lost_entries": 1}


def test_one_ledger_finding_with_per_bookie_parts_answers_each_bookie():
    truth = {"cluster": "bk-a", "findings": [
        {"check": "bk.entries_outside_ensemble", "cluster": "bk-a", "ledger_id": 3, "bookie": "b4", "entry_count": 6},
        {"check": "bk.entries_outside_ensemble", "cluster": "bk-a", "ledger_id": 3, "bookie": "b5", "entry_count": 2}]}
    ev = {"ledger_id": 3, "outside": [{"bookie": "b4", "entry_count": 6}, {"bookie": "b5", "entry_count": 1}]}
    row = {**v("bk.entries_outside_ensemble", "major", 3, 7), "evidence": json.dumps(ev)}
    lab = scorecard([truth], [row], SYSTEMS)
    assert (lab["detected"], lab["wrong_count"], lab["missed"], lab["false_alarms"]) == (1, 1, 0, 0)
    assert lab["wrong_count_items"][0]["bookie"] == "b5"


def test_replica_metrics_information_outside_ensemble_and_unknown_ctime():
    from audit.systems.bookkeeper.report import text
    rows = [{"cluster": "a", "state": "CLOSED", "audited": True, "least_replicas": 2, "entries": 10,
             "entries_outside_ensemble": 3, "ctime": 5},
            {"cluster": "a", "state": "OPEN", "audited": False, "ctime": None},
            {"cluster": "a", "state": "OPEN", "audited": False, "ctime": 7},
            {"cluster": "b", "state": "OPEN", "audited": False}]          # written before the ctime column
    m = replica_metrics(rows)
    assert (m["outside_ensemble"], m["open_ctime_unknown"]) == ({"a": 3}, {"a": 1})
    lines = text({"metrics": m})
    assert "  a: 3 entries held outside the ensemble the metadata assigns (information: findings/bk_outside_ensemble)" \
        in lines
    assert "  a: 1 open ledgers with unknown creation time (not judged for open too long)" in lines
    assert not any(line.startswith("  b: ") and "unknown" in line for line in lines)


def test_text_names_the_alert_stages_notices_and_routes():
    from audit.report.text import render_text

    base = {"estate": "lab", "run_id": "r", "status": "violations", "counts": {}}
    told = render_text({**base, "alerts": {"notices": {"new": 2, "resolved": 1},
                                           "routes": [{"route": "am", "status": "sent"},
                                                      {"route": "mail", "status": "skipped"}]}}, [])
    assert "  alerts: 2 new, 1 resolved (routes: am sent, mail skipped)" in told.splitlines()
    quiet = render_text({**base, "alerts": {"notices": {}, "routes": []}}, [])
    assert "  alerts: nothing new to tell" in quiet.splitlines()
    assert "alerts" not in render_text(base, [])


def test_text_says_what_each_check_means():
    from audit.report.text import render_text

    means = SYSTEMS[0].checks["bk.entries_lost"].meaning
    text = render_text({"counts": {"by_check": {"bk.entries_lost": 2, "gone.check": 1}}}, SYSTEMS).splitlines()
    assert f"  {'bk.entries_lost':<36} 2  ({means})" in text and f"  {'gone.check':<36} 1" in text
