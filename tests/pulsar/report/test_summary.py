"""Pulsar in the summary: per-pair failover totals and top subscriptions, snapshot health, the lab scorecard
matching Pulsar findings on (check, cluster, topic, subscription, target_cluster) and the failover comparison."""
import json

import pytest

from audit.systems.pulsar.report import pulsar_key, pulsar_metrics, snapshot_health
from audit.report.summary import SummaryInputError, build_summary, scorecard
from audit.report.text import render_text
from audit.validate.outcome import SuiteOutcome, ValidationOutcome
from tests.report.systems import SYSTEMS, staged

RUN = {"estate": "lab", "run_id": "r1", "attempt_id": "a1"}
T1, T2 = "persistent://acme/orders/created", "persistent://acme/orders/paid"
GX = ValidationOutcome([SuiteOutcome("violations", "violations", "passed")], "index.html")


def fo(topic, sub, r=0, s=0, lost=0, source="east", target="west", complete=True, compared=50):
    return {"topic": topic, "subscription": sub, "source_cluster": source, "target_cluster": target,
            "compared": compared, "redelivered": r, "skipped": s, "lost": lost, "complete": complete}


def pv(check, severity, count, cluster="east", **ev):
    return {"run_id": "r1", "system": "pulsar", "cluster": cluster, "check": check, "severity": severity,
            "subject": f'{ev.get("topic")} sub={ev.get("subscription")}', "entry_count": count, "message": "m",
            "evidence": json.dumps(ev)}


def test_pairs_totals_and_top_subscriptions():
    rows = [fo(T1, "a", r=5, s=1, lost=1), fo(T1, "b", r=0, s=0), fo(T2, "c", r=2, s=4, lost=4, complete=False),
            fo(T2, "d", r=6), fo(T1, "e", r=1, source="west", target="east")]
    m = pulsar_metrics(rows, None)
    assert list(m["pairs"]) == ["east->west", "west->east"]
    ew = m["pairs"]["east->west"]
    assert {k: ew[k] for k in ("subscriptions", "compared", "redelivered", "skipped", "lost", "incomplete")} == {
        "subscriptions": 4, "compared": 200, "redelivered": 13, "skipped": 5, "lost": 5, "incomplete": 1}
    # ties on redelivered + skipped (6) are broken by lost, then topic / subscription; zero rows are left out
    assert [(t["subscription"], t["redelivered"], t["skipped"], t["lost"]) for t in ew["top"]] == [
        ("c", 2, 4, 4), ("a", 5, 1, 1), ("d", 6, 0, 0)]
    assert m["snapshots"] == {}


def test_top_is_capped_at_ten():
    rows = [fo(T1, f"s{i:02}", r=i + 1) for i in range(14)]
    top = pulsar_metrics(rows, [])["pairs"]["east->west"]["top"]
    assert [t["subscription"] for t in top] == [f"s{i:02}" for i in range(13, 3, -1)]


@pytest.mark.parametrize("row, health", [
    ({"requests": 40, "snapshots": 38, "timed_out": 0}, "ok"),
    ({"requests": 40, "snapshots": 30, "timed_out": 2}, "timing_out"),
    ({"requests": 5, "snapshots": 0, "timed_out": 0}, "no_snapshot"),
    ({"requests": 0, "snapshots": 0, "timed_out": None}, "idle"),
])
def test_snapshot_health(row, health):
    assert snapshot_health(row) == health


def test_summary_pulsar_section_only_when_metrics_exist(tmp_path):
    snaps = [{"cluster": "east", "topic": T1, "requests": 10, "responses": 10, "snapshots": 9, "updates": 4,
              "unanswered_requests": 1, "timed_out": 0, "newest_snapshot_age_s": 3, "replicated_subscriptions": 2}]
    s = build_summary(RUN, [], [], GX, None, systems=SYSTEMS, outputs=staged(
        tmp_path / "both", pulsar_failover=[fo(T1, "a", r=1)], pulsar_snapshots=snaps))
    assert s["pulsar"]["snapshots"] == {"east": {T1: {**{k: v for k, v in snaps[0].items()
                                                         if k not in ("cluster", "topic")}, "health": "ok"}}}
    assert s["pulsar"]["pairs"]["east->west"]["redelivered"] == 1
    assert "pulsar east->west: 1 subscription(s), 1 redelivered, 0 skipped, 0 lost" in render_text(s, SYSTEMS)
    assert "pulsar" not in build_summary(RUN, [], [], GX, None, systems=SYSTEMS, outputs=staged(tmp_path / "none"))
    assert build_summary(RUN, [], [], GX, None, systems=SYSTEMS, outputs=staged(tmp_path / "empty", pulsar_failover=[])
                         )["pulsar"] == {"pairs": {}, "snapshots": {}}


PTRUTH = {"system": "pulsar", "cluster": "east", "faults": [{"kind": "ack_on_target"}], "findings": [
    {"check": "pulsar.failover_skip", "cluster": "east", "topic": T1, "subscription": "a", "target_cluster": "west",
     "entry_count": 4},
    {"check": "pulsar.failover_redelivery", "cluster": "east", "topic": T1, "subscription": "a",
     "target_cluster": "west", "entry_count": 2},
    {"check": "pulsar.snapshot_timeout", "cluster": "east", "topic": T2},
], "failover": [
    {"topic": T1, "subscription": "a", "source_cluster": "east", "target_cluster": "west", "redelivered": 2,
     "skipped": 4, "lost": 0},
    {"topic": T1, "subscription": "b", "source_cluster": "east", "target_cluster": "west", "redelivered": 0,
     "skipped": 0, "lost": 0},
    {"topic": T2, "subscription": "c", "source_cluster": "east", "target_cluster": "west", "redelivered": 1,
     "skipped": 0, "lost": 0},
]}
BK_TRUTH = {"system": "bookkeeper", "cluster": "bk-a", "findings": [
    {"check": "bk.entries_lost", "cluster": "bk-a", "ledger_id": 1, "entry_count": 5}]}
BK_HIT = {"system": "bookkeeper", "cluster": "bk-a", "check": "bk.entries_lost", "severity": "critical",
          "subject": "ledger 1", "entry_count": 5, "evidence": json.dumps({"ledger_id": 1})}
PAIR = {"topic": T1, "subscription": "a", "target_cluster": "west"}


@pytest.mark.parametrize("violations, expect", [
    ([pv("pulsar.failover_skip", "major", 4, **PAIR), pv("pulsar.failover_redelivery", "minor", 2, **PAIR),
      pv("pulsar.snapshot_timeout", "warning", 3, topic=T2), BK_HIT],
     dict(injected=4, detected=4, wrong_count=0, missed=0, false_alarms=0)),
    # wrong count; the right check on another target cluster is a miss plus a false alarm
    ([pv("pulsar.failover_skip", "major", 3, **PAIR),
      pv("pulsar.failover_redelivery", "minor", 2, **{**PAIR, "target_cluster": "south"}), BK_HIT],
     dict(injected=4, detected=1, wrong_count=1, missed=2, false_alarms=1)),
    # a finding in the subject only (no evidence keys) cannot be matched
    ([pv("pulsar.snapshot_timeout", "warning", 1)], dict(injected=4, detected=0, missed=4, false_alarms=1)),
])
def test_pulsar_findings_scored_by_evidence_keys(violations, expect):
    lab = build_summary(RUN, violations, [], GX, [PTRUTH, BK_TRUTH], systems=SYSTEMS)["lab"]
    assert {k: lab[k] for k in expect} == expect
    assert lab["clusters"] == ["bk-a", "east"] and lab["faults"] == 1


def test_pulsar_wrong_count_item_names_the_subscription():
    lab = scorecard([PTRUTH], [pv("pulsar.failover_skip", "major", 3, **PAIR)], SYSTEMS)
    assert lab["wrong_count_items"] == [{"check": "pulsar.failover_skip", "cluster": "east", "topic": T1,
                                         "subscription": "a", "target_cluster": "west", "expected_entry_count": 4,
                                         "entry_count": 3}]


def test_pulsar_key_from_evidence_and_from_truth():
    v = pv("pulsar.failover_loss", "critical", 1, **PAIR)
    assert pulsar_key(v) == ("pulsar", "pulsar.failover_loss", "east", T1, "a", "west")
    assert pulsar_key(PTRUTH["findings"][2]) == ("pulsar", "pulsar.snapshot_timeout", "east", T2, None, None)


def test_failover_comparison_matched_mismatched_missing_unexpected(tmp_path):
    rows = [fo(T1, "a", r=2, s=4), fo(T1, "b", r=0, s=1), fo(T1, "z", r=7),
            fo(T2, "x", r=9, source="prod", target="west")]            # not a lab source: not scored
    findings = [pv("pulsar.failover_skip", "major", 4, **PAIR), pv("pulsar.failover_redelivery", "minor", 2, **PAIR),
                pv("pulsar.snapshot_timeout", "warning", 3, topic=T2)]
    lab = scorecard([PTRUTH], findings, SYSTEMS, staged(tmp_path, pulsar_failover=rows))
    f = lab["failover"]
    assert {k: f[k] for k in ("expected", "matched", "mismatched", "missing", "unexpected", "perfect")} == {
        "expected": 3, "matched": 1, "mismatched": 1, "missing": 1, "unexpected": 1, "perfect": False}
    assert f["mismatched_items"] == [{"topic": T1, "subscription": "b", "source_cluster": "east",
                                      "target_cluster": "west", "expected": {"redelivered": 0, "skipped": 0, "lost": 0},
                                      "got": {"redelivered": 0, "skipped": 1, "lost": 0}}]
    assert [(i["subscription"], i["expected"]["redelivered"]) for i in f["missing_items"]] == [("c", 1)]
    assert [(i["subscription"], i["redelivered"]) for i in f["unexpected_items"]] == [("z", 7)]
    assert lab["detected"] == 3 and lab["perfect"] is False    # findings perfect, failover counts are not


def test_failover_comparison_perfect(tmp_path):
    rows = [fo(T1, "a", r=2, s=4), fo(T1, "b"), fo(T2, "c", r=1)]
    findings = [pv("pulsar.failover_skip", "major", 4, **PAIR), pv("pulsar.failover_redelivery", "minor", 2, **PAIR),
                pv("pulsar.snapshot_timeout", "warning", 3, topic=T2)]
    lab = build_summary(RUN, findings, [], GX, PTRUTH, systems=SYSTEMS,
                        outputs=staged(tmp_path, pulsar_failover=rows))["lab"]
    assert lab["failover"]["matched"] == 3 and lab["perfect"] is True
    assert "failover" not in scorecard([BK_TRUTH], [BK_HIT], SYSTEMS)        # BookKeeper truth: no failover comparison


@pytest.mark.parametrize("truth, source, field", [
    ({"system": "pulsar", "cluster": "east", "findings": [{"check": "pulsar.failover_loss", "cluster": "east"}]},
     "ground_truth[0].findings[0]", "topic"),
    ({"system": "pulsar", "cluster": "east", "findings": [], "failover": [{**PTRUTH["failover"][0], "lost": None}]},
     "ground_truth[0].failover[0]", "lost"),
    ({"system": "pulsar", "cluster": "east", "findings": [], "failover": {"a": 1}}, "ground_truth[0]", "failover"),
])
def test_bad_pulsar_truth_names_source_and_field(truth, source, field):
    with pytest.raises(SummaryInputError) as err:
        build_summary(RUN, [], [], GX, truth, systems=SYSTEMS)
    assert (err.value.source, err.value.field) == (source, field)


def test_not_judged_rows_reach_the_summary_html_and_text(tmp_path):
    """metrics/pulsar_coverage (what the audit could not judge, e.g. an ambiguous pairing) is shown, never scored."""
    gap = {"run_id": "r1", "cluster": "east", "topic": T1, "subscription": None, "target_cluster": "west",
           "what": "pairing_ambiguous", "entry_count": 12, "detail": "sequence ids <repeat>"}
    s = build_summary(RUN, [], [], GX, None, systems=SYSTEMS, outputs=staged(
        tmp_path, pulsar_failover=[fo(T1, "a")], pulsar_coverage=[gap]))
    assert s["pulsar"]["not_judged"] == [{k: gap[k] for k in ("cluster", "topic", "subscription", "target_cluster",
                                                               "what", "entry_count", "detail")}]
    assert "  pulsar not judged: 1 (pairing_ambiguous); see the report" in render_text(s, SYSTEMS).splitlines()
    from audit.report.html import render_html

    page = render_html(s, [], SYSTEMS)
    assert "<h3>Not judged</h3>" in page and "sequence ids &lt;repeat&gt;" in page


def test_what_the_audit_could_not_judge_makes_the_run_incomplete(tmp_path):
    gap = {"run_id": "r1", "cluster": "east", "topic": T1, "subscription": "s", "target_cluster": "west",
           "what": "pairing_ambiguous", "entry_count": 12, "detail": "sequence ids repeat"}
    outputs = staged(tmp_path, pulsar_failover=[fo(T1, "a")], pulsar_coverage=[gap])
    (section,) = [s.report for s in SYSTEMS if s.name == "pulsar"]
    gaps = section.coverage(outputs)
    assert gaps == [{"system": "pulsar", "cluster": "east", "source": f"{T1} sub=s -> west",
                     "what": "pairing_ambiguous", "error": "sequence ids repeat"}]
    s = build_summary(RUN, [], gaps, GX, None, systems=SYSTEMS, outputs=outputs)
    assert s["status"] == "incomplete" and not s["complete"]
