"""One topic across every audited cluster -> metrics rows (pulsar_failover, pulsar_snapshots) and findings.

A failover row exists for every subscription present (as a cursor) on both clusters of an ordered pair
(X, Y) where X replicates the topic to Y (a `replication` entry for Y or a `pulsar.repl.Y` cursor).
Identity matching is done once per ordered pair, acked masks once per cursor."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from audit.systems.pulsar.domain import checks, pip33
from audit.systems.pulsar.domain.acked import acked_mask, ranges_below_mark_delete
from audit.systems.pulsar.domain.identity import Match, match
from audit.systems.pulsar.domain.pairs import AMBIGUOUS, ambiguity, pair_rows
from audit.systems.pulsar.domain.reads import PRIMARY
from audit.systems.pulsar.domain.sides import REPLICATOR, SUBSCRIPTION, ClusterSide, Cursor, Settings, read_after
from audit.systems.pulsar.domain.ttl import applied_ttl_s
from audit.systems.pulsar.domain.window import never_sent

__all__ = ["AMBIGUOUS", "REPLICATOR", "SUBSCRIPTION", "ClusterSide", "Cursor", "Settings", "TopicAudit",
           "audit_topic"]


@dataclass
class TopicAudit:
    failover: list[dict]
    snapshots: list[dict]
    findings: list[dict]
    coverage: list[dict] = field(default_factory=list)   # what could not be judged (metrics/pulsar_coverage)


def _missing_on_target(x: ClusterSide, y: ClusterSide, m: Match, sent: np.ndarray) -> int:
    """Messages published on X that X's replicator to Y sent (acked and not dropped unsent: `sent`) with no copy
    on Y. Y speaks only from its window start: what is older may be trimmed there (ManagedLedgerImpl deletes
    ledgers below its slowest cursor once retention allows, and every closed ledger of a topic without durable
    cursors), and its ledger list cannot show whether anything was. So only messages after the first one whose
    copy is in Y's window are judged (the replicator sends in X's order). When Y's window was read before X's
    (or the instants are unknown), what X's replicator sent after Y was read is not missing: only messages before
    the last one whose copy Y holds are judged (a message is missing only when Y already holds a later one)."""
    if x.replicator(y.cluster) is None or not y.complete:
        return 0
    w = x.window
    own = (w.origin == w.cluster_code) & ~w.marker & ~m.source_ambiguous
    seen = np.flatnonzero(own & m.source_on_target)
    if not seen.size:
        return 0
    missing = own & sent & ~m.source_on_target
    missing[:seen[0]] = False
    if not read_after(y, x):
        missing[seen[-1] + 1:] = False
    return int(np.count_nonzero(missing))


def audit_topic(topic: str, sides: Mapping[str, ClusterSide], settings: Settings = Settings()) -> TopicAudit:
    masks: dict[tuple[str, int, str], np.ndarray] = {}

    def acked(side: ClusterSide, cursor: Cursor, read: int = PRIMARY) -> np.ndarray:
        key = (side.cluster, read, cursor.name)
        if key not in masks:
            masks[key] = acked_mask(side.window.index, cursor.acks)
        return masks[key]

    estate_ttl_s = settings.thresholds.ttl_s(topic)

    def ttl(side: ClusterSide) -> tuple[int, str]:
        return applied_ttl_s(side.message_ttl_s, side.namespace_message_ttl_s, estate_ttl_s)

    def sent(side: ClusterSide, remote: str) -> np.ndarray | None:
        """What side's replicator to `remote` has sent: acked by it and not dropped unsent. None: no replicator.
        Its own broker's TTL decides what it dropped."""
        rep = side.replicator(remote)
        if rep is None:
            return None
        ttl_ms = ttl(side)[0] * 1000
        return acked(side, rep) & ~never_sent(side.window, remote, ttl_ms, side.now_ms(settings.as_of_ms))

    facts: list[object] = []
    snapshot_rows, failover_rows, coverage = [], [], []
    for name in sorted(sides):
        side = sides[name]
        health = pip33.snapshot_health(side.window, side.now_ms(settings.as_of_ms))
        n_repl = len(side.replicated_subscriptions | {s for s in side.subscriptions() if side.is_replicated(s)})
        snapshot_rows.append({
            "cluster": name, "topic": topic, "requests": health.requests, "responses": health.responses,
            "snapshots": health.snapshots, "updates": health.updates,
            "unanswered_requests": health.unanswered_requests, "timed_out": health.timed_out,
            "newest_snapshot_age_s": health.newest_snapshot_age_s, "replicated_subscriptions": n_repl})
        facts.append(checks.SnapshotFacts(topic, name, health, n_repl, bool(side.replication)
                                          or any(c.kind == REPLICATOR for c in side.cursors.values())))
        for cname in sorted(side.cursors):
            below = ranges_below_mark_delete(side.cursors[cname].acks)
            if below:
                facts.append(checks.CursorFacts(topic, name, cname, tuple(below),
                                                side.cursors[cname].acks.mark_delete))
        remotes = set(side.replication) | {c.remote_cluster for c in side.cursors.values()
                                           if c.kind == REPLICATOR and c.remote_cluster}
        for remote in sorted(remotes):
            connected, backlog = side.replication.get(remote, (None, None))
            target = sides.get(remote)
            missing, back = 0, None
            if target is not None:
                back = target.replicates_to(name)
                m = match(side.window, target.window)
                missing = _missing_on_target(side, target, m, sent(side, remote))
                failover_rows += pair_rows(topic, side, target, m, acked, sent, settings, facts, coverage)
                coverage += ambiguity(settings, topic, side, target, m)
            repl = tuple(sorted(s for s in side.subscriptions() if side.is_replicated(s)))
            ev = dict(zip(("message_ttl_s", "message_ttl_from"), ttl(side))) if missing else {}
            facts.append(checks.ReplicatorFacts(topic, name, remote, connected, backlog, repl, back, missing, ev))
    found = checks.findings(settings.run_id, facts, settings.thresholds)
    return TopicAudit(failover_rows, snapshot_rows, found, coverage)
