"""Where a consumer group failing over from a MirrorMaker 2 source to its target resumes, and what it would read
again or never read: bounds from one upstream partition's offset syncs, the target partition's log start, and the
task restarts the syncs show (audit/systems/kafka/domain/mm2.py judges them per group and partition).

What MirrorMaker 2 does that these bounds rest on (docs/formats/kafka.md §12.1): one pending sync per partition,
replaced while ten are in flight, and the first record of a task lifetime always asks for a sync; a restarted task
seeks to its last committed source offset + 1; source offsets are committed every offset.flush.interval.ms."""
from __future__ import annotations

from typing import NamedTuple, Sequence


class Bounds(NamedTuple):
    """Where the first record the group has not consumed upstream lands downstream: low <= X <= high (None: not
    known), X being the copy the task lifetime of the latest sync at or below it wrote (each lifetime copies a
    record once; an earlier lifetime's copies before a restart are `failover`'s business)."""

    low: int | None
    high: int | None

    @property
    def exact(self) -> bool:
        return self.low is not None and self.low == self.high


def generations(syncs: Sequence[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """Syncs split where upstream rewinds or downstream goes back (topic recreated or truncated, or a restarted
    task whose first sync reached the topic): offsets of two generations do not bound each other."""
    out: list[list[tuple[int, int]]] = []
    for u, d in syncs:
        if not out or u < out[-1][-1][0] or d < out[-1][-1][1]:
            out.append([])
        out[-1].append((u, d))
    return out


class Restart(NamedTuple):
    """Two consecutive syncs, a = (u_a, d_a) then b = (u_b, d_b), between which downstream grew by more than upstream
    (`excess` = (d_b - d_a) - (u_b - u_a) > 0). One task lifetime copies each upstream record once, in order, so
    d_b - d_a <= u_b - u_a within it; more means a restarted task copied again, from its last committed offset + 1
    (r), records the previous lifetime had copied up to u_last (WorkerSourceTask commits source offsets every
    offset.flush.interval.ms; MirrorSourceTask.initializeConsumer seeks to the committed offset + 1). When the sync
    of the new lifetime's first record reached the topic (u_b = r, usually below u_a) the pair also starts a
    generation; when it did not (OffsetSyncWriter keeps one pending sync per partition and replaces it while ten
    are in flight), u does not rewind and only the excess shows it. Without upstream gaps the previous lifetime's
    copies fill the downstream offsets (d_a, d_b) from u_a on, so u_last <= `last_copied` and r >=
    `lowest_resume`. Downstream transaction markers (exactly-once source tasks) look the same: the counts then only
    get wider."""

    before: tuple[int, int]
    after: tuple[int, int]

    @property
    def excess(self) -> int:
        return (self.after[1] - self.before[1]) - (self.after[0] - self.before[0])

    @property
    def last_copied(self) -> int:
        return self.before[0] + (self.after[1] - self.before[1]) - 1

    @property
    def lowest_resume(self) -> int:
        return self.before[0] - self.excess + 1


def restarts(syncs: Sequence[tuple[int, int]]) -> list[Restart]:
    """The restarts a partition's syncs show, in topic order (see Restart)."""
    pairs = (Restart(a, b) for a, b in zip(syncs, syncs[1:]))
    return [r for r in pairs if r.after[1] > r.before[1] and r.excess > 0]


def downstream_bounds(syncs: Sequence[tuple[int, int]], upstream_offset: int) -> Bounds:
    """Bounds of X for a group at `upstream_offset`, from the latest generation of this partition's syncs: the
    latest sync a at or below it gives X = d_a when u_a == U, else d_a + 1 <= X <= d_a + (U - u_a); the earliest
    sync b above it gives X <= d_b. X is the first copy of U that the latest sync's task lifetime wrote (an earlier
    lifetime may have copied U before a restart: `failover` counts those records)."""
    if not syncs:
        return Bounds(None, None)
    current = generations(syncs)[-1]
    below = [s for s in current if s[0] <= upstream_offset]
    above = [s for s in current if s[0] > upstream_offset]
    low = high = None
    if below:
        u, d = max(below)
        if u == upstream_offset:
            return Bounds(d, d)
        low, high = d + 1, d + (upstream_offset - u)
    if above:
        d_b = min(above)[1]
        high = d_b if high is None else min(high, d_b)
    return Bounds(low, high)


class Failover(NamedTuple):
    """What a consumer group failing over to the target at `target_committed` would see."""

    bounds: Bounds
    redelivered_min: int | None     # readable target records from committed on, consumed on the source already
    redelivered_max: int | None
    skipped_min: int | None         # readable records of upstream offsets >= U whose every copy lies below committed
    skipped_max: int | None

    @property
    def exact(self) -> bool:
        return self.bounds.exact and self.redelivered_min == self.redelivered_max and \
            self.skipped_min == self.skipped_max


def failover(upstream_committed: int | None, bounds: Bounds, target_committed: int | None,
             target_log_start: int | None = None, restarted: Sequence[Restart] = ()) -> Failover:
    """Counts per group and partition; None where the bounds leave it unknown. Only what the bounds prove:
    redelivered_min / skipped_min are certain, the max values are what the sparse syncs allow.

    A consumer reads what the target partition still holds: from `start` = max(target_committed, target_log_start)
    (an offset below the log start is out of range: retention deleted the records there). Redelivered = records
    at or after `start` copying offsets below U: [start, X) less the copies of offsets >= U an earlier lifetime
    wrote before a restart below X (at most last_copied - U + 1 per restart, below its d_b), plus the second copies
    of offsets below U a restart above U put after X (at most min(excess, U - lowest_resume)). Records inside a
    restart's window (d_a, d_b) are never certain skips (a later copy may lie at or above the committed offset)."""
    if target_committed is None:
        return Failover(bounds, None, None, None, None)
    low, high = bounds
    start = readable_from(target_committed, target_log_start)
    u = -1 if upstream_committed is None else upstream_committed
    redelivered_min = redelivered_max = skipped_min = skipped_max = None
    if low is not None:
        earlier = sum(max(0, min(r.last_copied - u + 1, r.after[1] - start)) for r in restarted
                      if r.after[1] <= low)
        redelivered_min = max(0, low - start - earlier)
    if high is not None:
        later = sum(min(max(0, min(r.excess, u - r.lowest_resume)), max(0, r.after[1] - start))
                    for r in restarted if u < r.after[0])
        redelivered_max = max(0, high - start) + later
    kept = 0 if target_log_start is None else target_log_start     # skips count records still readable
    if high is not None:
        first = max(high, kept)
        span = max(0, target_committed - first)
        # a restart that may have copied offsets >= U again: up to `excess` of them have a copy at or above the
        # committed offset, and its window's records may be second copies
        doubtful = sum(min(span, r.excess + max(0, min(r.after[1], target_committed) - max(r.before[1] + 1, first)))
                       for r in restarted if r.last_copied >= u)
        skipped_min = max(0, span - doubtful)
    if low is not None:
        # an earlier lifetime's copies of offsets >= U below the committed offset, not copied again yet
        older = sum(max(0, min(r.last_copied - u + 1, min(r.after[1], target_committed) - kept)) for r in restarted
                    if r.after[1] <= low)
        skipped_max = max(0, target_committed - max(low, kept)) + older
    return Failover(bounds, redelivered_min, redelivered_max, skipped_min, skipped_max)


def readable_from(target_committed: int, target_log_start: int | None) -> int:
    """Where a consumer at the target's committed offset starts reading: retention may have moved past it."""
    return target_committed if target_log_start is None else max(target_committed, target_log_start)
