"""Replicated subscriptions (docs/formats/pulsar.md §2.6) read back from the source's marker entries.

Expected target markDeletePosition for subscription S, source X, target Y (the "audit mapping rule"):
  1. The newest UPDATE for S naming Y that X wrote (marker 13 in X's window, not a replicated copy, or its
     copy from X in Y's window): it carries exactly the position Y was told to cumulatively ack. An UPDATE is
     only written when S's markDeletePosition passed a cached snapshot, so it is always justified by a
     snapshot <= the source MDP.
  2. With no such UPDATE in the dump: s* = what S's snapshot cache hands out when its MDP moves. The cache
     is replayed (snapshot_cache.py) with the SNAPSHOTs written by X naming Y that S's dispatcher read
     (marker position < S's readPosition on X; unknown readPosition = read), in read order, under the cache
     rule of X's broker version (`cache`): no UPDATE in the window means no pop handed one out, so every
     read snapshot was added before the MDP moved. s* = the cached one with the highest local_message_id
     <= the source MDP; the expectation is s*.clusters[Y]. Under the older cache rule (§2.6 step 4) only the
     newest N survive (an older s* is gone: no expectation); later brokers keep head and tail, so an older snapshot
     than the newest below the MDP can be the answer.
  3. Otherwise none (null): no snapshot applies.
Target cursor ahead (docs/pulsar/contracts.md "Which pairs raise findings"): the source makes a replicated-subscription
claim about Y only through markers in its dump window: its own UPDATEs for S and its own SNAPSHOTs at or below the
source MDP, naming Y. Without one there is no claim (this keeps one-sided and reverse pairs quiet). With one,
Y's markDeletePosition may justifiably reach the highest Y position among those and among the UPDATE copies
for S naming Y that Y received (from any cluster: a third cluster's consumers move Y too). Past that, over at
least one target message, the target's own consumers acked (target_cursor_ahead).
What replicated subscriptions reached on Y (`reach`, the redelivery rule's bound): Y's broker applies an UPDATE copy
from X only when Y's replicator back to X reads it (PersistentReplicator / GeoPersistentReplicator.replicateEntries ->
checkReplicatedSubscriptionMarker -> PersistentTopic.receivedReplicatedSubscriptionMarker); no such replicator, no
UPDATE applied. It acks the copy right after (asyncDelete of a replicated entry), so the copies it processed are the
ones its cursor `pulsar.repl.X` acked (`processed`). A copy outside Y's window cannot be placed: below the window it
told a position at or below Y's markDeletePosition anyway; after it, its processing cannot be shown."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from audit.systems.pulsar.domain.positions import Position
from audit.systems.pulsar.domain.snapshot_cache import DEFAULT_SIZE, SPREAD, CacheModel, surviving
from audit.systems.pulsar.domain.window import NONE, Marker, Window

REQUEST, RESPONSE, SNAPSHOT, UPDATE = 10, 11, 12, 13
SNAPSHOT_TIMEOUT_MS = 30_000        # replicatedSubscriptionsSnapshotTimeoutSeconds default
DEFAULT_CACHE = CacheModel(SPREAD, DEFAULT_SIZE)   # brokers that say nothing of their version: the current rule


@dataclass(frozen=True)
class Expectation:
    expected: Position | None      # expected_target_mdp
    basis: str | None              # "update", "snapshot" or None
    justified: Position | None     # the highest target MDP anything justifies; None = nothing visible
    reach: Position | None = None  # the newest position an UPDATE Y's broker had applied told Y; None = none


def _own(markers: Iterable[Marker], marker_type: int) -> list[Marker]:
    return [m for m in markers if m.marker_type == marker_type and m.replicated_from is None]


def _updates(markers: Iterable[Marker], subscription: str, target: str, sender: str | None) -> list[Position]:
    """Target positions of UPDATEs for `subscription` naming `target`: written here (sender None) or copies
    received from `sender` ("*": from any other cluster)."""
    return [m.clusters[target] for m in markers if m.marker_type == UPDATE and m.subscription == subscription
            and target in m.clusters and (m.replicated_from == sender or (sender == "*" and m.replicated_from))]


def _own_updates(markers: Iterable[Marker], subscription: str, target: str) -> list[tuple[Marker, Position]]:
    return [(m, m.clusters[target]) for m in markers if m.marker_type == UPDATE and m.subscription == subscription
            and target in m.clusters and m.replicated_from is None]


def expect_target(source_markers: Sequence[Marker], subscription: str, source: str, target: str,
                  source_mdp: Position, source_read: Position | None, *, cache: CacheModel = DEFAULT_CACHE,
                  target_markers: Sequence[Marker] = (),
                  distance: Callable[[Position, Position], int] | None = None,
                  delivered: Callable[[Position], bool] | None = None,
                  processed: Callable[[Position], bool] | None = None) -> Expectation:
    """`distance(a, b)`: X's entries strictly between a and b (the SPREAD cache's eviction measure).
    `delivered(p)`: X's own marker at p had reached Y when Y's cursor was read (X's replicator to Y had acked it;
    docs/pulsar/audit.md "Snapshots minutes apart"): only those UPDATEs told Y anything. None: every one did
    (one snapshot per cluster, taken as simultaneous).
    `processed(q)`: Y's replicator to X had read Y's entry at q when Y's cursor was read: only the UPDATE copies
    in Y's window it had read are `reach`. None: `reach` is the expectation of an UPDATE (every one applied)."""
    snapshots = sorted((m for m in _own(source_markers, SNAPSHOT) if m.local is not None and target in m.clusters),
                       key=lambda m: m.position)
    own = _updates(source_markers, subscription, target, None)
    claims = own + [s.clusters[target] for s in snapshots if s.local <= source_mdp]
    justified = max(claims + _updates(target_markers, subscription, target, "*")) if claims else None
    if delivered is not None:
        own = [p for m, p in _own_updates(source_markers, subscription, target) if delivered(m.position)]
    told = own + _updates(target_markers, subscription, target, source)
    applied = told if processed is None else [
        m.clusters[target] for m in target_markers if m.marker_type == UPDATE and m.subscription == subscription
        and target in m.clusters and m.replicated_from == source and processed(m.position)]
    reach = max(applied) if applied else None
    if told:
        return Expectation(max(told), "update", justified, reach)   # successive UPDATEs only move forward
    read = [s for s in snapshots if source_read is None or s.position < source_read]
    cached = [s for s in surviving(cache, [(s.local, s) for s in read], distance) if s.local <= source_mdp]
    if cached:
        return Expectation(cached[-1].clusters[target], "snapshot", justified)   # the cache is in position order
    return Expectation(None, None, justified)


def messages_ahead(target: Window, target_mdp: Position, justified: Position | None) -> int:
    """Target messages in (justified, target MDP]: acked by the target beyond what the snapshots explain.
    0 when nothing is visible to judge by."""
    if justified is None or target_mdp <= justified:
        return 0
    lo = target.index.count_at_or_below(justified)
    hi = target.index.count_at_or_below(target_mdp)
    return int(np.count_nonzero(~target.marker[lo:hi]))


@dataclass(frozen=True)
class SnapshotHealth:
    requests: int                  # snapshot requests this cluster wrote
    responses: int                 # responses it received (copies: replicate_to is the requester only)
    snapshots: int                 # complete snapshots it wrote
    updates: int                   # UPDATEs it wrote (its subscriptions advanced past a snapshot)
    unanswered_requests: int       # requested snapshot ids without their SNAPSHOT in the window
    timed_out: int                 # of those, requested > 30 s before "now"
    newest_snapshot_age_s: int | None
    unsnapshotted_since_ms: int | None   # oldest data published after the newest snapshot (None: none)
    now_ms: int | None


def snapshot_health(window: Window, as_of_ms: int | None = None,
                    timeout_ms: int = SNAPSHOT_TIMEOUT_MS) -> SnapshotHealth:
    """Counts from one cluster's window. A second-round request reuses the snapshot id, so unanswered and
    timed-out requests are counted per snapshot id (dated by its first request). "Now" is the newest publish
    time in the window, or as_of_ms when later: a request pending 30 s before the audit's reference time has
    expired even if nothing was published after it."""
    requests, snapshots = _own(window.markers, REQUEST), _own(window.markers, SNAPSHOT)
    responses = [m for m in window.markers if m.marker_type == RESPONSE and m.replicated_from is not None]
    times = window.publish_time[window.publish_time != NONE]
    newest = int(times.max()) if times.size else None
    done = {s.snapshot_id for s in snapshots}
    first_asked: dict[str, int | None] = {}
    for r in requests:
        if r.snapshot_id not in done and r.snapshot_id not in first_asked:
            first_asked[r.snapshot_id] = r.publish_time_ms
    now = newest if as_of_ms is None else max(as_of_ms, newest or as_of_ms)
    timed_out = sum(1 for t in first_asked.values() if t is not None and now is not None and now - t > timeout_ms)
    snap_times = [s.publish_time_ms for s in snapshots if s.publish_time_ms is not None]
    last_snap = max(snap_times) if snap_times else None
    age = (now - last_snap) // 1000 if last_snap is not None and now is not None else None
    data = window.publish_time[~window.marker & (window.publish_time != NONE)]
    if last_snap is not None:
        data = data[data > last_snap]
    since = int(data.min()) if data.size else None
    return SnapshotHealth(len(requests), len(responses), len(snapshots), len(_own(window.markers, UPDATE)),
                          len(first_asked), timed_out, age, since, now)
