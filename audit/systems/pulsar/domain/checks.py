"""Pure rules: facts about one topic -> rows of the shared findings schema (docs/pulsar/contracts.md).

Subjects: `"<topic> sub=<subscription> <source>-><target>"` for findings about one subscription between two
clusters, `"<topic>"` for everything else (the evidence names the cursor or the remote cluster).
Failover findings are raised for replicated subscriptions only: a subscription that is not replicated is
not promised to follow the source, so its differences are metrics, not violations."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from audit.contracts import Check
from audit.systems.pulsar.domain.pip33 import SnapshotHealth
from audit.systems.pulsar.domain.positions import Position

SYSTEM = "pulsar"
# Every finding the Pulsar audit raises: check id -> (severity, meaning). The findings, the GX suites, the report
# and the alerts all read this table (docs/pulsar/contracts.md lists the same ids).
CHECKS: Mapping[str, Check] = {
    "pulsar.failover_loss": Check(
        "critical", "messages acked on the target that the source never dispatched: a failover loses them"),
    "pulsar.message_missing_on_target": Check(
        "critical", "messages the replicator has acked to the remote cluster have no copy there"),
    "pulsar.failover_skip": Check(
        "major", "messages acked on the target but not on the source: a failover skips them"),
    "pulsar.target_cursor_ahead": Check(
        "major", "the target subscription acked beyond any snapshot of the source (acks made on the target)"),
    "pulsar.replicated_subscription_one_way": Check(
        "major", "a replicated subscription on a topic the remote cluster does not replicate back: "
                 "PIP-33 snapshots can never complete"),
    "pulsar.replicator_disconnected": Check(
        "major", "the replicator to a remote cluster is not connected"),
    "pulsar.failover_redelivery": Check(
        "minor", "messages acked on the source that PIP-33 told the target to acknowledge, still unacked there "
                 "beyond the namespace's redelivery tolerance: a failover redelivers them"),
    "pulsar.acks_below_mark_delete": Check(
        "minor", "a cursor keeps individually-deleted ranges at or below its markDeletePosition"),
    "pulsar.snapshot_stale": Check(
        "minor", "data published longer ago than snapshot_max_age is still not covered by a complete "
                 "PIP-33 snapshot"),
    "pulsar.replicator_backlog": Check(
        "minor", "a replicator's backlog is above replicator_backlog_max"),
    "pulsar.snapshot_timeout": Check(
        "warning", "PIP-33 snapshot requests got no complete snapshot within 30 s"),
}

# What the GX suites check of the audit's own output (metrics/pulsar_failover and the Pulsar findings). Never a
# finding: a failure means the audit wrote something wrong, not that a cluster is broken.
VALIDATION_CHECKS: Mapping[str, Check] = {
    "pulsar.metrics_schema": Check(
        "major", "metrics/pulsar_failover has every column the expectations read; no row lacks its keys or "
                 "cursor positions"),
    "pulsar.metrics_consistency": Check(
        "major", "failover counts are non-negative and add up, positions are 'ledgerId:entryId', "
                 "to_acknowledge is a bounded JSON list"),
    "pulsar.findings_schema": Check(
        "major", "every Pulsar finding uses a check id of CHECKS with its severity, names its topic (and "
                 "subscription and target cluster for a pair) and counts at least one message on failover"),
}


@dataclass(frozen=True)
class Tolerance:
    """How far a target may lag behind what replicated subscriptions would have reached before a redelivery is a
    finding."""

    messages: int = 0
    age_s: int = 0


DEFAULT = "*"   # the namespace key of the estate's default


def namespace_of(topic: str) -> str:
    """"tenant/ns" of persistent://tenant/ns/topic."""
    return "/".join(topic.split("://", 1)[-1].split("/")[:2])


@dataclass(frozen=True)
class Thresholds:
    replicator_backlog_max: int | None = None     # None: not checked
    snapshot_max_age_s: int | None = None
    # (namespace, value) pairs, DEFAULT for every other namespace (tuples: the settings travel to Spark workers)
    redelivery_tolerance: tuple[tuple[str, Tolerance], ...] = ()
    message_ttl_s: tuple[tuple[str, int], ...] = ()   # messageTTLInSeconds; 0 = none (the broker's default)

    def tolerance(self, topic: str) -> Tolerance:
        return _lookup(self.redelivery_tolerance, topic, Tolerance())

    def ttl_s(self, topic: str) -> int:
        return _lookup(self.message_ttl_s, topic, 0)


def _lookup(pairs, topic: str, fallback):
    found = dict(pairs)
    return found.get(namespace_of(topic), found.get(DEFAULT, fallback))


@dataclass(frozen=True)
class PairFacts:
    """One (topic, subscription, source, target) failover result."""

    topic: str
    subscription: str
    source: str
    target: str
    replicated: bool
    redelivered: int = 0
    skipped: int = 0
    lost: int = 0
    ahead: int = 0                 # target messages acked beyond anything the snapshots justify
    evidence: Mapping[str, Any] = field(default_factory=dict)
    lag: int = 0                   # of `redelivered`, those at or below what an UPDATE told the target (not by design)
    lag_age_ms: int | None = None  # how long the oldest of those has been published (None: unknown)


@dataclass(frozen=True)
class ReplicatorFacts:
    """The replicator of `topic` from `cluster` to `remote`."""

    topic: str
    cluster: str
    remote: str
    connected: bool | None = None
    backlog: int | None = None
    replicated_subscriptions: tuple[str, ...] = ()   # on `cluster`
    remote_replicates_back: bool | None = None       # None: the remote's side was not collected
    missing_on_target: int = 0
    evidence: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CursorFacts:
    topic: str
    cluster: str
    cursor: str
    ranges_below: tuple[tuple[Position, Position], ...] = ()
    mark_delete: Position | None = None


@dataclass(frozen=True)
class SnapshotFacts:
    topic: str
    cluster: str
    health: SnapshotHealth
    replicated_subscriptions: int = 0
    replicates: bool = False        # the cluster replicates the topic somewhere (snapshots are taken)


def _row(run_id: str, check: str, cluster: str, subject: str, count: int | None, message: str,
         evidence: Mapping[str, Any]) -> dict:
    return {"run_id": run_id, "system": SYSTEM, "cluster": cluster, "check": check,
            "severity": CHECKS[check].severity, "subject": subject, "entry_count": count, "message": message,
            "evidence": json.dumps(dict(evidence), sort_keys=True, default=str)}


def pair_subject(topic: str, subscription: str, source: str, target: str) -> str:
    return f"{topic} sub={subscription} {source}->{target}"


def redelivery_beyond_tolerance(f: PairFacts, tolerance: Tolerance) -> bool:
    """Replicated subscriptions redeliver by design (docs/formats/pulsar.md §2.6): the target follows the source one
    snapshot behind, so a redelivery after the position an UPDATE told the target is a metric. The lag before it is a
    finding once it exceeds the namespace's tolerance on both counts: more than `messages`, and the oldest older than
    `age_s` (an unknown age exceeds it). Either alone can be the allowance; the default 0/0 allows no lag."""
    if f.lag <= tolerance.messages:
        return False
    return f.lag_age_ms is None or f.lag_age_ms > tolerance.age_s * 1000


def _pair(run_id: str, f: PairFacts, th: Thresholds = Thresholds()) -> list[dict]:
    if not f.replicated:
        return []
    tolerance = th.tolerance(f.topic)
    redelivered = f.lag if redelivery_beyond_tolerance(f, tolerance) else 0
    subject = pair_subject(f.topic, f.subscription, f.source, f.target)
    ev = {**f.evidence, "topic": f.topic, "subscription": f.subscription, "target_cluster": f.target,
          "redelivered": f.redelivered, "redelivered_beyond_pip33": f.lag, "lag_age_s": None if f.lag_age_ms is None
          else f.lag_age_ms // 1000, "tolerance": {"messages": tolerance.messages, "age_s": tolerance.age_s}}
    out = []
    for check, count, what in (("pulsar.failover_loss", f.lost, "never dispatched on the source and acked on "
                                                                "the target: lost on failover"),
                               ("pulsar.failover_skip", f.skipped, "acked on the target, not on the source: "
                                                                   "skipped on failover"),
                               ("pulsar.failover_redelivery", redelivered, "acked on the source, not on the "
                                                                           "target, though PIP-33 told the target "
                                                                           "to: redelivered on failover"),
                               ("pulsar.target_cursor_ahead", f.ahead, "acked on the target beyond any snapshot "
                                                                       "of the source (acks made on the target)")):
        if count > 0:
            out.append(_row(run_id, check, f.source, subject, count, f"{count} messages {what}", ev))
    return out


def _replicator(run_id: str, f: ReplicatorFacts, th: Thresholds) -> list[dict]:
    ev = {**f.evidence, "topic": f.topic, "target_cluster": f.remote}
    out = []
    if f.connected is False:
        out.append(_row(run_id, "pulsar.replicator_disconnected", f.cluster, f.topic, None,
                        f"replicator {f.cluster}->{f.remote} is not connected", ev))
    if th.replicator_backlog_max is not None and f.backlog is not None and f.backlog > th.replicator_backlog_max:
        out.append(_row(run_id, "pulsar.replicator_backlog", f.cluster, f.topic, f.backlog,
                        f"replicator {f.cluster}->{f.remote} backlog {f.backlog} > {th.replicator_backlog_max}",
                        {**ev, "backlog": f.backlog, "threshold": th.replicator_backlog_max}))
    if f.missing_on_target > 0:
        out.append(_row(run_id, "pulsar.message_missing_on_target", f.cluster, f.topic, f.missing_on_target,
                        f"{f.missing_on_target} messages acked by the replicator to {f.remote} have no copy "
                        f"on {f.remote}", ev))
    if f.remote_replicates_back is False:
        for sub in f.replicated_subscriptions:
            out.append(_row(run_id, "pulsar.replicated_subscription_one_way", f.cluster,
                            pair_subject(f.topic, sub, f.cluster, f.remote), None,
                            f"replicated subscription, but {f.remote} does not replicate the topic back to "
                            f"{f.cluster}: snapshots can never complete", {**ev, "subscription": sub}))
    return out


def _cursor(run_id: str, f: CursorFacts) -> list[dict]:
    if not f.ranges_below:
        return []
    ranges = [f"({lo}..{hi}]" for lo, hi in f.ranges_below]
    return [_row(run_id, "pulsar.acks_below_mark_delete", f.cluster, f.topic, None,
                 f"cursor {f.cursor}: {len(ranges)} individually-deleted ranges at or below the "
                 f"markDeletePosition {f.mark_delete}",
                 {"topic": f.topic, "subscription": f.cursor, "mark_delete_position": str(f.mark_delete),
                  "ranges": ranges[:100], "range_count": len(ranges)})]


def _snapshots(run_id: str, f: SnapshotFacts, th: Thresholds) -> list[dict]:
    h, out = f.health, []
    ev = {"topic": f.topic, "requests": h.requests, "snapshots": h.snapshots,
          "newest_snapshot_age_s": h.newest_snapshot_age_s}
    if h.timed_out > 0:
        out.append(_row(run_id, "pulsar.snapshot_timeout", f.cluster, f.topic, h.timed_out,
                        f"{h.timed_out} snapshot requests got no complete snapshot within 30 s",
                        {**ev, "timed_out": h.timed_out}))
    if (th.snapshot_max_age_s is not None and f.replicated_subscriptions > 0 and f.replicates
            and h.unsnapshotted_since_ms is not None and h.now_ms is not None
            and (h.now_ms - h.unsnapshotted_since_ms) // 1000 > th.snapshot_max_age_s):
        waited = (h.now_ms - h.unsnapshotted_since_ms) // 1000
        out.append(_row(run_id, "pulsar.snapshot_stale", f.cluster, f.topic, None,
                        f"data published {waited} s ago is still not covered by a complete snapshot "
                        f"(threshold {th.snapshot_max_age_s} s)", {**ev, "uncovered_for_s": waited}))
    return out


def findings(run_id: str, facts: Iterable[object], th: Thresholds = Thresholds()) -> list[dict]:
    out: list[dict] = []
    for f in facts:
        if isinstance(f, PairFacts):
            out += _pair(run_id, f, th)
        elif isinstance(f, ReplicatorFacts):
            out += _replicator(run_id, f, th)
        elif isinstance(f, CursorFacts):
            out += _cursor(run_id, f)
        elif isinstance(f, SnapshotFacts):
            out += _snapshots(run_id, f, th)
        else:
            raise TypeError(f"not a Pulsar fact: {type(f).__name__}")
    return out
