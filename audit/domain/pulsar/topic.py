"""One topic across every audited cluster -> metrics rows (pulsar_failover, pulsar_snapshots) and findings.

A failover row exists for every subscription present (as a cursor) on both clusters of an ordered pair
(X, Y) where X replicates the topic to Y (a `replication` entry for Y or a `pulsar.repl.Y` cursor).
Identity matching is done once per ordered pair, acked masks once per cursor."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from audit.domain.pulsar import checks, pip33, snapshot_cache
from audit.domain.pulsar.acked import CursorAcks, acked_mask, ranges_below_mark_delete
from audit.domain.pulsar.failover import MAX_ACKNOWLEDGE, compare, failover
from audit.domain.pulsar.identity import Match, match
from audit.domain.pulsar.positions import Position
from audit.domain.pulsar.window import Window, never_sent

SUBSCRIPTION, REPLICATOR = "subscription", "replicator"


@dataclass(frozen=True)
class Cursor:
    name: str
    kind: str                       # subscription | replicator | dedup | compaction
    acks: CursorAcks
    remote_cluster: str | None = None
    replicated: bool = False


@dataclass
class ClusterSide:
    """What one cluster holds of the topic."""

    cluster: str
    window: Window
    dump_from: Position | None = None        # exclusive
    dump_to: Position | None = None          # inclusive
    complete: bool = False                   # dump complete and no unread entry
    cursors: Mapping[str, Cursor] = field(default_factory=dict)
    # remote -> (connected, backlog) from the stats' replication section
    replication: Mapping[str, tuple[bool | None, int | None]] = field(default_factory=dict)
    replicated_subscriptions: frozenset[str] = frozenset()

    def replicates_to(self, remote: str) -> bool:
        return remote in self.replication or self.replicator(remote) is not None

    def replicator(self, remote: str) -> Cursor | None:
        for c in self.cursors.values():
            if c.kind == REPLICATOR and c.remote_cluster == remote:
                return c
        return None

    def subscriptions(self) -> dict[str, Cursor]:
        return {n: c for n, c in self.cursors.items() if c.kind == SUBSCRIPTION}

    def is_replicated(self, subscription: str) -> bool:
        c = self.cursors.get(subscription)
        return subscription in self.replicated_subscriptions or bool(c and c.replicated)


@dataclass(frozen=True)
class Settings:
    run_id: str = ""
    as_of_ms: int | None = None
    thresholds: checks.Thresholds = checks.Thresholds()
    max_acknowledge: int = MAX_ACKNOWLEDGE
    # cluster -> its brokers' version (estate-declared, else admin-reported): picks the snapshot cache rule
    broker_versions: Mapping[str, str] = field(default_factory=dict)
    snapshot_cache_size: int = snapshot_cache.DEFAULT_SIZE

    def cache_model(self, cluster: str) -> tuple[snapshot_cache.CacheModel, str | None]:
        """The cache rule of `cluster`'s brokers, and a coverage note when it had to be assumed."""
        version = self.broker_versions.get(cluster)
        model = snapshot_cache.broker_cache_model(version, self.snapshot_cache_size)
        if model is not None:
            return model, None
        why = "broker version unknown" if version is None else f"broker version {version!r} does not say"
        return snapshot_cache.CacheModel(snapshot_cache.SPREAD, self.snapshot_cache_size), \
            f"{why}: PIP-33 expectation assumes the apache/pulsar#25044 snapshot cache"


@dataclass
class TopicAudit:
    failover: list[dict]
    snapshots: list[dict]
    findings: list[dict]
    coverage: list[dict] = field(default_factory=list)   # what could not be judged (metrics/pulsar_coverage)


AMBIGUOUS = "pairing_ambiguous"


def _ambiguity(settings: Settings, topic: str, x: ClusterSide, y: ClusterSide, m: Match) -> list[dict]:
    """A coverage row when some messages could only be paired by a repeating (origin, producer, sequence id)."""
    if not m.ambiguous:
        return []
    return [{"run_id": settings.run_id, "cluster": x.cluster, "topic": topic, "subscription": None,
             "target_cluster": y.cluster, "what": AMBIGUOUS, "entry_count": m.ambiguous,
             "detail": f"{m.ambiguous} messages of {x.cluster} and {y.cluster} carry no source position and their "
                       "(origin, producer, sequence id) repeats in the window (a producer without deduplication "
                       "restarted): not compared, and no repair is planned from this pair"}]


def _pos(p: Position | None) -> str | None:
    return None if p is None else str(p)


def _covers(side: ClusterSide, cursor: Cursor) -> bool:
    return side.dump_from is not None and cursor.acks.mark_delete >= side.dump_from


def _missing_on_target(x: ClusterSide, y: ClusterSide, m: Match, sent: np.ndarray) -> int:
    """Messages published on X that X's replicator to Y sent (acked and not dropped unsent: `sent`) with no copy
    on Y. Y speaks only from its window start: what is older may be trimmed there (ManagedLedgerImpl deletes
    ledgers below its slowest cursor once retention allows, and every closed ledger of a topic without durable
    cursors), and its ledger list cannot show whether anything was. So only messages after the first one whose
    copy is in Y's window are judged (the replicator sends in X's order)."""
    if x.replicator(y.cluster) is None or not y.complete:
        return 0
    w = x.window
    own = (w.origin == w.cluster_code) & ~w.marker & ~m.source_ambiguous
    seen = np.flatnonzero(own & m.source_on_target)
    if not seen.size:
        return 0
    missing = own & sent & ~m.source_on_target
    missing[:seen[0]] = False
    return int(np.count_nonzero(missing))


def audit_topic(topic: str, sides: Mapping[str, ClusterSide], settings: Settings = Settings()) -> TopicAudit:
    masks: dict[tuple[str, str], np.ndarray] = {}

    def acked(side: ClusterSide, cursor: Cursor) -> np.ndarray:
        key = (side.cluster, cursor.name)
        if key not in masks:
            masks[key] = acked_mask(side.window.index, cursor.acks)
        return masks[key]

    ttl_ms = settings.thresholds.ttl_s(topic) * 1000

    def sent(side: ClusterSide, remote: str) -> np.ndarray | None:
        """What side's replicator to `remote` has sent: acked by it and not dropped unsent. None: no replicator."""
        rep = side.replicator(remote)
        if rep is None:
            return None
        return acked(side, rep) & ~never_sent(side.window, remote, ttl_ms, settings.as_of_ms)

    facts: list[object] = []
    snapshot_rows, failover_rows, coverage = [], [], []
    for name in sorted(sides):
        side = sides[name]
        health = pip33.snapshot_health(side.window, settings.as_of_ms)
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
                failover_rows += _pairs(topic, side, target, m, acked, sent, settings, facts)
                coverage += _ambiguity(settings, topic, side, target, m)
            repl = tuple(sorted(s for s in side.subscriptions() if side.is_replicated(s)))
            facts.append(checks.ReplicatorFacts(topic, name, remote, connected, backlog, repl, back, missing))
    found = checks.findings(settings.run_id, facts, settings.thresholds)
    return TopicAudit(failover_rows, snapshot_rows, found, coverage)


def _pairs(topic: str, x: ClusterSide, y: ClusterSide, m: Match, acked, sent, settings: Settings,
           facts: list) -> list[dict]:
    rows = []
    y_subs = y.subscriptions()
    # a side whose dump was not read at all (every entry unread or not judged) vouches for nothing
    comparison = compare(x.window, y.window, m, source_sent=sent(x, y.cluster), target_sent=sent(y, x.cluster),
                         source_vouches=x.complete or len(x.window) > 0,
                         target_vouches=y.complete or len(y.window) > 0)
    for sub, cx in sorted(x.subscriptions().items()):
        cy = y_subs.get(sub)
        if cy is None:
            continue
        replicated = x.is_replicated(sub)
        exp = pip33.Expectation(None, None, None)
        cache, cache_note = settings.cache_model(x.cluster)
        if replicated:
            index = x.window.index
            exp = pip33.expect_target(x.window.markers, sub, x.cluster, y.cluster, cx.acks.mark_delete,
                                      cx.acks.read_position, cache=cache, target_markers=y.window.markers,
                                      distance=lambda a, b: max(0, index.count_below(b)
                                                                - index.count_at_or_below(a)))
        fo = failover(comparison, cx.acks, cy.acks, target_end=y.dump_to, target_from=y.dump_from,
                      source_acked=acked(x, cx), target_acked=acked(y, cy), fallback=exp.expected,
                      max_acknowledge=settings.max_acknowledge,
                      reach=exp.expected if exp.basis == "update" else None)   # a cached snapshot told Y nothing
        ahead = pip33.messages_ahead(y.window, cy.acks.mark_delete, exp.justified) if replicated else 0
        complete = (x.complete and y.complete and _covers(x, cx) and _covers(y, cy) and fo.exact_known
                    and not m.ambiguous)
        row = {
            "run_id": settings.run_id, "topic": topic, "subscription": sub, "source_cluster": x.cluster,
            "target_cluster": y.cluster, "replicated": replicated, "source_mdp": str(cx.acks.mark_delete),
            "target_mdp": str(cy.acks.mark_delete), "expected_target_mdp": _pos(exp.expected),
            "exact_target_mdp": str(fo.exact_target_mdp), "window_from": _pos(x.dump_from),
            "window_to": _pos(x.dump_to), "compared": fo.compared, "only_on_source": fo.only_on_source,
            "only_on_target": fo.only_on_target, "redelivered": fo.redelivered, "skipped": fo.skipped,
            "lost": fo.lost, "redelivered_ranges": y.window.ranges_json(fo.redelivered_runs),
            "skipped_ranges": y.window.ranges_json(fo.skipped_runs),
            "to_acknowledge": y.window.positions_json(fo.to_acknowledge_rows),
            "to_acknowledge_count": fo.to_acknowledge_count, "complete": complete,
            AMBIGUOUS: bool(m.ambiguous), "ambiguous": m.ambiguous, "redelivery_lag": fo.lag}
        rows.append(row)
        evidence = {k: row[k] for k in ("source_mdp", "target_mdp", "expected_target_mdp", "exact_target_mdp",
                                        "complete")}
        evidence.update(snapshot_cache=f"{cache.kind}/{cache.size}", snapshot_cache_note=cache_note)
        evidence.update(expected_basis=exp.basis, justified_target_mdp=_pos(exp.justified),
                        target_moves_backward=fo.target_moves_backward, exact_known=fo.exact_known)
        now = settings.as_of_ms if settings.as_of_ms is not None else y.window.newest_publish_ms
        age = None if fo.lag_oldest_ms is None or now is None else now - fo.lag_oldest_ms
        pair = checks.PairFacts(topic, sub, x.cluster, y.cluster, replicated, fo.redelivered, fo.skipped,
                                fo.lost, ahead, evidence, fo.lag, age)
        # the redeliveries pulsar.failover_redelivery reports (GX checks this column, not `redelivered`)
        row["redelivery_beyond_tolerance"] = fo.lag if replicated and checks.redelivery_beyond_tolerance(
            pair, settings.thresholds.tolerance(topic)) else 0
        facts.append(pair)
    return rows
