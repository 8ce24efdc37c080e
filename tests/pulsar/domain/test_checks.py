"""Every Pulsar rule in one table: a fact (and thresholds) -> the exact findings rows it produces."""
from __future__ import annotations

import json

import pytest

from audit.systems.pulsar.domain.checks import CHECKS as CHECK_TABLE
from audit.systems.pulsar.domain.checks import (CursorFacts, PairFacts, ReplicatorFacts, SnapshotFacts, Thresholds,
                                                Tolerance, findings)
from audit.systems.pulsar.domain.pip33 import SnapshotHealth
from audit.systems.pulsar.domain.records import P

T = "persistent://acme/orders/created"
PAIR = f"{T} sub=orders east->west"
TH = Thresholds(replicator_backlog_max=1000, snapshot_max_age_s=300)
NOW = 1_700_000_000_000
CHECKS = {c: k.severity for c, k in CHECK_TABLE.items()}   # check id -> severity


def health(timed_out=0, since_s_ago=None, age=None, requests=5, snapshots=3):
    since = None if since_s_ago is None else NOW - since_s_ago * 1000
    return SnapshotHealth(requests, 2, snapshots, 1, timed_out, timed_out, age, since, NOW)


def pair(**kw):
    return PairFacts(T, "orders", "east", "west", kw.pop("replicated", True), **kw)


def tol(messages=0, age_s=0, namespace="acme/orders"):
    return Thresholds(1000, 300, redelivery_tolerance=((namespace, Tolerance(messages, age_s)),))


def repl(**kw):
    return ReplicatorFacts(T, "east", "west", **kw)


# (id, fact, thresholds, [(check, cluster, subject, entry_count, evidence subset)])
CASES = [
    ("pair-clean", pair(), TH, []),
    # PIP-33 redelivers by design: only the lag before what it told the target is a finding, past the tolerance
    # (was: every redelivery a finding, count = redelivered).
    ("pair-redelivery-by-design-is-a-metric", pair(redelivered=4), TH, []),
    ("pair-redelivery-lag", pair(redelivered=4, lag=3, lag_age_ms=10_000), TH,
     [("pulsar.failover_redelivery", "east", PAIR, 3, {"subscription": "orders", "target_cluster": "west",
                                                        "redelivered": 4, "redelivered_beyond_pip33": 3,
                                                        "lag_age_s": 10})]),
    ("lag-within-the-count", pair(redelivered=9, lag=5, lag_age_ms=10**9), tol(messages=5), []),
    ("lag-past-the-count", pair(redelivered=9, lag=6, lag_age_ms=10**9), tol(messages=5),
     [("pulsar.failover_redelivery", "east", PAIR, 6, {"tolerance": {"messages": 5, "age_s": 0}})]),
    ("lag-within-the-age", pair(redelivered=9, lag=900, lag_age_ms=300_000), tol(age_s=300), []),
    ("lag-past-the-age", pair(redelivered=9, lag=900, lag_age_ms=300_001), tol(age_s=300),
     [("pulsar.failover_redelivery", "east", PAIR, 900, {})]),
    ("lag-of-unknown-age", pair(redelivered=9, lag=900), tol(age_s=300),
     [("pulsar.failover_redelivery", "east", PAIR, 900, {"lag_age_s": None})]),
    ("either-allowance-suffices", pair(redelivered=9, lag=900, lag_age_ms=60_000), tol(messages=10, age_s=300), []),
    ("another-namespace-has-the-default", pair(redelivered=9, lag=6, lag_age_ms=1),
     tol(messages=5, namespace="acme/other"), [("pulsar.failover_redelivery", "east", PAIR, 6, {})]),
    ("pair-skip-and-loss", pair(skipped=5, lost=3), TH,
     [("pulsar.failover_loss", "east", PAIR, 3, {}), ("pulsar.failover_skip", "east", PAIR, 5, {})]),
    ("pair-everything", pair(redelivered=1, skipped=2, lost=2, ahead=7, evidence={"exact_target_mdp": "9:3"},
                             lag=1, lag_age_ms=1), TH,
     [("pulsar.failover_loss", "east", PAIR, 2, {"exact_target_mdp": "9:3"}),
      ("pulsar.failover_skip", "east", PAIR, 2, {}), ("pulsar.failover_redelivery", "east", PAIR, 1, {}),
      ("pulsar.target_cursor_ahead", "east", PAIR, 7, {"subscription": "orders"})]),
    ("pair-not-replicated-is-only-a-metric", pair(replicated=False, redelivered=9, skipped=9, lost=9, ahead=9), TH,
     []),
    ("replicator-healthy", repl(connected=True, backlog=1000), TH, []),
    ("replicator-disconnected", repl(connected=False, backlog=0), TH,
     [("pulsar.replicator_disconnected", "east", T, None, {"target_cluster": "west"})]),
    ("replicator-connection-unknown", repl(connected=None, backlog=None), TH, []),
    ("replicator-backlog", repl(connected=True, backlog=1001), TH,
     [("pulsar.replicator_backlog", "east", T, 1001, {"backlog": 1001, "threshold": 1000})]),
    ("replicator-backlog-unchecked", repl(connected=True, backlog=10**9), Thresholds(), []),
    ("message-missing-on-target", repl(missing_on_target=12), TH,
     [("pulsar.message_missing_on_target", "east", T, 12, {"target_cluster": "west"})]),
    ("one-way-per-replicated-subscription", repl(replicated_subscriptions=("a", "b"), remote_replicates_back=False),
     TH, [("pulsar.replicated_subscription_one_way", "east", f"{T} sub=a east->west", None, {"subscription": "a"}),
          ("pulsar.replicated_subscription_one_way", "east", f"{T} sub=b east->west", None, {"subscription": "b"})]),
    ("one-way-without-replicated-subscription", repl(remote_replicates_back=False), TH, []),
    ("remote-not-audited", repl(replicated_subscriptions=("a",), remote_replicates_back=None), TH, []),
    ("bidirectional", repl(replicated_subscriptions=("a",), remote_replicates_back=True), TH, []),
    ("acks-below-mark-delete", CursorFacts(T, "west", "orders", ((P("3:2"), P("3:5")),), P("3:4")), TH,
     [("pulsar.acks_below_mark_delete", "west", T, None,
       {"subscription": "orders", "ranges": ["(3:2..3:5]"], "mark_delete_position": "3:4"})]),
    ("acks-above-mark-delete", CursorFacts(T, "west", "orders", (), P("3:4")), TH, []),
    ("snapshot-timeout", SnapshotFacts(T, "east", health(timed_out=2), 1, True), TH,
     [("pulsar.snapshot_timeout", "east", T, 2, {"timed_out": 2})]),
    ("snapshot-stale", SnapshotFacts(T, "east", health(since_s_ago=301, age=900), 1, True), TH,
     [("pulsar.snapshot_stale", "east", T, None, {"uncovered_for_s": 301, "newest_snapshot_age_s": 900})]),
    ("snapshot-old-but-nothing-published-since", SnapshotFacts(T, "east", health(age=9000), 1, True), TH, []),
    ("snapshot-recent-data-not-yet-covered", SnapshotFacts(T, "east", health(since_s_ago=300, age=9000), 1, True),
     TH, []),
    ("no-snapshot-ever", SnapshotFacts(T, "east", health(since_s_ago=4000, snapshots=0), 1, True), TH,
     [("pulsar.snapshot_stale", "east", T, None, {"uncovered_for_s": 4000, "snapshots": 0})]),
    ("stale-without-replicated-subscription", SnapshotFacts(T, "east", health(since_s_ago=4000), 0, True), TH, []),
    ("stale-on-unreplicated-topic", SnapshotFacts(T, "east", health(since_s_ago=4000), 2, False), TH, []),
    ("stale-unchecked", SnapshotFacts(T, "east", health(since_s_ago=4000), 2, True), Thresholds(), []),
]


@pytest.mark.parametrize("fact,th,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule(fact, th, expected):
    rows = findings("run-1", [fact], th)
    assert [(r["check"], r["cluster"], r["subject"], r["entry_count"]) for r in rows] == [e[:4] for e in expected]
    for row, (check, *_, evidence) in zip(rows, expected):
        assert row["run_id"] == "run-1" and row["system"] == "pulsar"
        assert row["severity"] == CHECKS[check]
        ev = json.loads(row["evidence"])
        assert ev["topic"] == T
        assert {k: ev.get(k) for k in evidence} == evidence


def test_severities_are_the_contract_ones():
    assert CHECKS == {
        "pulsar.failover_loss": "critical", "pulsar.failover_skip": "major", "pulsar.failover_redelivery": "minor",
        "pulsar.target_cursor_ahead": "major", "pulsar.acks_below_mark_delete": "minor",
        "pulsar.replicated_subscription_one_way": "major", "pulsar.snapshot_timeout": "warning",
        "pulsar.snapshot_stale": "minor", "pulsar.replicator_disconnected": "major",
        "pulsar.replicator_backlog": "minor", "pulsar.message_missing_on_target": "critical"}


def test_unknown_fact_is_refused():
    with pytest.raises(TypeError):
        findings("r", [object()])
