"""The alert lifecycle as one table of cases: previous state + tonight's signals -> notices and the state kept."""
from __future__ import annotations

import pytest

from audit.findings import fingerprint
from audit.alerts.lifecycle import (INCOMPLETE, Policy, Signal, Tracked, from_gaps, from_violations,
                                    transition)

DAY = 24 * 3600 * 1000
NOW = 100 * DAY
POLICY = Policy(repeat_interval_ms=7 * DAY, worse_factor=2.0)


def sig(subject="ledger 7", severity="major", count=10, cluster="bk-a", check="bk.entries_below_ack_quorum",
        system="bookkeeper"):
    return Signal(system, cluster, check, subject, severity, count)


def gap(cluster="bk-a", source="bookie-4:3181", system="bookkeeper"):
    return Signal(system, cluster, INCOMPLETE, source, "major", 1)


def was(s: Signal, notified_days_ago=1, severity=None, count=None, first_days_ago=3):
    return Tracked(s, NOW - first_days_ago * DAY, NOW - DAY, NOW - notified_days_ago * DAY,
                   severity or s.severity, s.count if count is None else count)


A, B = sig(), sig("ledger 8", "critical", 3)
# (name, previous tracked, tonight, [(notice kind, subject)], subjects kept firing)
CASES = [
    ("healthy-night", [], [], [], []),
    ("first-seen", [], [A], [("new", "ledger 7")], ["ledger 7"]),
    ("persisting-is-quiet", [was(A)], [A], [], ["ledger 7"]),
    ("count-grew-but-not-past-the-factor", [was(A, count=10)], [sig(count=20)], [], ["ledger 7"]),
    ("count-grew-past-the-factor", [was(A, count=10)], [sig(count=21)], [("worse", "ledger 7")], ["ledger 7"]),
    ("severity-rose", [was(A)], [sig(severity="critical")], [("worse", "ledger 7")], ["ledger 7"]),
    ("severity-fell-is-quiet", [was(A)], [sig(severity="minor")], [], ["ledger 7"]),
    ("reminder-after-the-repeat-interval", [was(A, notified_days_ago=7)], [A], [("reminder", "ledger 7")],
     ["ledger 7"]),
    ("no-reminder-before-it", [was(A, notified_days_ago=6)], [A], [], ["ledger 7"]),
    ("resolved-once", [was(A), was(B)], [B], [("resolved", "ledger 7")], ["ledger 8"]),
    # the cluster could not be fully looked at tonight: a finding not seen is not a finding gone
    ("blind-cluster-keeps-it-firing", [was(A)], [gap()], [("new", "bookie-4:3181")],
     ["bookie-4:3181", "ledger 7"]),
    ("failed-job-keeps-the-systems-findings", [was(A)], [gap(cluster="*", source="audit job")],
     [("new", "audit job")], ["audit job", "ledger 7"]),
    ("another-clusters-gap-resolves-it", [was(A)], [gap(cluster="bk-b")], [("new", "bookie-4:3181"),
                                                                           ("resolved", "ledger 7")],
     ["bookie-4:3181"]),
    ("incomplete-follows-the-lifecycle", [was(gap())], [gap()], [], ["bookie-4:3181"]),
    ("incomplete-resolved", [was(gap())], [], [("resolved", "bookie-4:3181")], []),
]


@pytest.mark.parametrize("name, previous, tonight, notices, firing", CASES, ids=[c[0] for c in CASES])
def test_transition(name, previous, tonight, notices, firing):
    got, state = transition({t.signal.fingerprint: t for t in previous}, tonight, NOW, POLICY)
    assert sorted((n.kind, n.tracked.signal.subject) for n in got) == sorted(notices)
    assert sorted(t.signal.subject for t in state.values()) == sorted(firing)
    for n in got:      # every notice but a resolved one is recorded as told tonight
        if n.kind != "resolved":
            kept = state[n.tracked.signal.fingerprint]
            assert (kept.notified_ms, kept.notified_severity, kept.notified_count, kept.last_seen_ms) == (
                NOW, n.tracked.signal.severity, n.tracked.signal.count if n.kind != "reminder" else
                kept.notified_count, NOW)


def test_first_seen_and_last_seen_carry_over():
    (n,), state = transition({}, [A], NOW, POLICY)
    assert (n.tracked.first_seen_ms, n.tracked.last_seen_ms) == (NOW, NOW)
    _, later = transition(state, [A], NOW + DAY, POLICY)
    assert (later[A.fingerprint].first_seen_ms, later[A.fingerprint].last_seen_ms) == (NOW, NOW + DAY)


def test_fingerprint_is_stable_and_names_the_four_fields():
    assert fingerprint("kafka", "east", "kafka.divergent_logs", "orders-0 broker 2") == \
        fingerprint("kafka", "east", "kafka.divergent_logs", "orders-0 broker 2")
    assert len({fingerprint(*f) for f in (("a", "b", "c", "d"), ("a", "b", "c", "e"), ("a", "bc", "", "d"),
                                           ("ab", "", "c", "d"))}) == 4
    assert A.fingerprint == sig(count=99, severity="minor").fingerprint     # count and severity are not part of it


def test_signals_from_violations_and_gaps():
    (v,) = from_violations([{"system": "pulsar", "cluster": "east", "check": "pulsar.message_missing_on_target",
                             "severity": "critical", "subject": "t sub", "entry_count": 4, "message": "m"}])
    assert (v.fingerprint, v.count, v.severity) == (fingerprint("pulsar", "east", "pulsar.message_missing_on_target",
                                                                "t sub"), 4, "critical")
    gaps = from_gaps([{"system": "bookkeeper", "cluster": "bk", "source": "b4:3181", "what": f"entries of ledger {i}",
                       "error": "unreachable"} for i in range(3)] + [{"system": "kafka", "cluster": "*",
                                                                      "source": "audit job", "what": "audit of kafka"}])
    assert [(g.system, g.cluster, g.subject, g.count, g.message) for g in gaps] == [
        ("bookkeeper", "bk", "b4:3181", 3, "not covered: entries of ledger 0: unreachable (and 2 more)"),
        ("kafka", "*", "audit job", 1, "not covered: audit of kafka")]
    assert all(g.check == INCOMPLETE for g in gaps)
