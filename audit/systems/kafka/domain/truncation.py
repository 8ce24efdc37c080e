"""Where a follower's log is cut when it starts following a leader: its divergence offset.

What the broker does, as followed here (docs/formats/kafka.md §11, "Follower truncation", names the sources and
the releases read):
- the fetcher's truncation state (a round "not complete" asks again), truncation to the high watermark, and
  OffsetOutOfRange (cut to the leader's log end, or start over at the leader's log start);
- the leader's Fetch answer DivergingEpoch (`epoch < lastFetchedEpoch || endOffset < fetchOffset`) and its
  OffsetsForLeaderEpoch answer; endOffsetForEpoch (an UNDEFINED end offset is "no answer"), truncateTo (the epoch
  cache is cut even when the log is not); the initial fetch offset (log end offset with epochs and fetch
  truncation, else high watermark);
- before leader epochs (0.10.2) a new follower cuts its log at its own high watermark.

Policies (`truncation_policy_for` maps a declared inter.broker.protocol.version to one; §11):
  "leader-epoch"          Fetch carries lastFetchedEpoch, the leader answers DivergingEpoch (IBP >= 2.7-IV1, KIP-595)
  "leader-epoch-request"  OffsetsForLeaderEpoch v1+ before fetching (2.0 <= IBP < 2.7)
  "leader-epoch-v0"       OffsetsForLeaderEpoch v0: the answer has no epoch (0.11 <= IBP < 2.0)
  "high-watermark"        cut at the follower's own high watermark (IBP < 0.11)
A follower with no epoch at all (empty cache: old message format) is cut at its high watermark under every policy."""
from __future__ import annotations

from typing import NamedTuple

from audit.systems.kafka.domain.epochs import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, EpochEntry, LeaderEpochCache

POLICIES = ("leader-epoch", "leader-epoch-request", "leader-epoch-v0", "high-watermark")
MAX_ROUNDS = 10_000   # every round removes at least one epoch entry; a guard against a malformed cache


class ReplicaLog(NamedTuple):
    """What truncation needs of one replica: its epoch cache entries and offsets. `high_watermark` None = no
    checkpointed value (the broker starts from 0, clamped into [log start, log end])."""

    epochs: tuple[EpochEntry, ...]
    log_start_offset: int
    log_end_offset: int
    high_watermark: int | None = None

    def cache(self) -> LeaderEpochCache:
        """The loaded cache, less entries starting past the log end: a running broker never holds one (it assigns an
        epoch at its log end, and truncation cuts the cache with the log), so such an entry was written after the
        log was listed (an epoch bumped between the two reads), and Kafka itself drops it on load (LogLoader:
        truncateFromEndAsyncFlush(nextOffset); docs/formats/kafka.md §11.4)."""
        cache = LeaderEpochCache(self.epochs)
        cache.truncate_from_end(self.log_end_offset + 1)
        return cache

    def effective_high_watermark(self) -> int:
        """UnifiedLog.updateHighWatermark clamps the checkpointed value into [log start, log end]."""
        hw = 0 if self.high_watermark is None else self.high_watermark
        return min(max(hw, self.log_start_offset), self.log_end_offset)


class Truncation(NamedTuple):
    """The follower keeps [its log start, offset) and fetches the rest again; `rounds` = leader answers consulted
    (0 when it cut without asking); `rule` names the branch taken, with a "+" suffix for an OffsetOutOfRange
    correction afterwards."""

    offset: int
    rounds: int
    rule: str


def truncation_policy_for(version: str) -> str:
    """The policy of a cluster whose inter.broker.protocol.version (or broker version) is `version`, e.g.
    "0.10.2", "2.4-IV1", "3.6"."""
    head = version.strip().split("-")[0].split(".")
    try:
        parts = tuple(int(p) for p in head[:2])
    except ValueError:
        raise ValueError(f"version {version!r}: expected a Kafka version such as '3.6' or '0.10.2-IV0'") from None
    if len(parts) < 2:
        raise ValueError(f"version {version!r}: expected major.minor")
    if parts < (0, 11):
        return "high-watermark"
    if parts < (2, 0):
        return "leader-epoch-v0"
    if parts < (2, 7):
        return "leader-epoch-request"
    return "leader-epoch"


class _Follower:
    """The follower's log end offset and epoch cache as truncation changes them (UnifiedLog.truncateTo)."""

    def __init__(self, log: ReplicaLog, cache: LeaderEpochCache | None = None):
        self.cache = log.cache() if cache is None else cache.copy()   # truncation changes it
        self.log_end_offset = log.log_end_offset
        self.log_start_offset = log.log_start_offset

    def truncate_to(self, offset: int) -> None:
        if offset >= self.log_end_offset:
            self.cache.truncate_from_end(self.log_end_offset)   # an epoch assigned at the end with no record
        else:
            self.cache.truncate_from_end(offset)
            self.log_end_offset = offset
            self.log_start_offset = min(offset, self.log_start_offset)

    def end_offset_for(self, epoch: int) -> tuple[int, int] | None:
        """UnifiedLog.endOffsetForEpoch: None when the cache has no answer."""
        found_epoch, found_offset = self.cache.end_offset_for(epoch, self.log_end_offset)
        return None if found_offset == UNDEFINED_EPOCH_OFFSET else (found_epoch, found_offset)


def _leader_answer(leader: ReplicaLog, leader_cache: LeaderEpochCache, epoch: int) -> tuple[int, int]:
    """Partition.lastOffsetForLeaderEpoch: UnifiedLog.endOffsetForEpoch, (-1, -1) for no answer."""
    found_epoch, found_offset = leader_cache.end_offset_for(epoch, leader.log_end_offset)
    if found_offset == UNDEFINED_EPOCH_OFFSET:
        return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
    return found_epoch, found_offset


def _truncation_state(f: _Follower, leader_epoch: int, leader_end: int, fetch_offset: int) -> tuple[int, bool, str]:
    """AbstractFetcherThread.getOffsetTruncationState -> (offset, complete, rule)."""
    if leader_end == UNDEFINED_EPOCH_OFFSET:
        return fetch_offset, True, "leader-unknown-epoch"
    if leader_epoch == UNDEFINED_EPOCH:
        return min(leader_end, f.log_end_offset), True, "leader-answer-without-epoch"
    answer = f.end_offset_for(leader_epoch)
    if answer is None:
        return min(leader_end, f.log_end_offset), True, "follower-below-leader-epochs"
    follower_epoch, follower_end = answer
    if follower_epoch != leader_epoch:
        return min(follower_end, f.log_end_offset), False, "epoch-unknown-to-follower"
    return min(follower_end, leader_end, f.log_end_offset), True, "epoch-end-offset"


def _out_of_range(f: _Follower, leader: ReplicaLog, rounds: int, rule: str) -> Truncation | None:
    """fetchOffsetAndTruncate (the leader answered OffsetOutOfRange): cut to the leader's log end when the
    follower is past it, start over at the leader's log start when the follower ends below it, else keep."""
    if leader.log_end_offset < f.log_end_offset:
        f.truncate_to(leader.log_end_offset)
        return Truncation(f.log_end_offset, rounds, rule + "+leader-log-end")
    if leader.log_start_offset > f.log_end_offset:
        # truncateFullyAndStartAt: nothing the follower held is kept
        return Truncation(f.log_start_offset, rounds, rule + "+below-leader-log-start")
    return None


def _finish(f: _Follower, leader: ReplicaLog, offset: int, rounds: int, rule: str) -> Truncation:
    """Cut at `offset`, then fetch from there: a fetch offset outside the leader's log is OffsetOutOfRange."""
    f.truncate_to(offset)
    if not leader.log_start_offset <= f.log_end_offset <= leader.log_end_offset:
        corrected = _out_of_range(f, leader, rounds, rule)
        if corrected:
            return corrected
    return Truncation(f.log_end_offset, rounds, rule)


def truncation_offset(leader: ReplicaLog, follower: ReplicaLog, policy: str = "leader-epoch",
                      leader_cache: LeaderEpochCache | None = None,
                      follower_cache: LeaderEpochCache | None = None) -> Truncation:
    """The offset `follower` cuts its log at when it follows `leader` under `policy` (see the module doc). The two
    caches, when given, are the logs' caches already built (read only: the follower's is copied)."""
    if policy not in POLICIES:
        raise ValueError(f"truncation policy {policy!r}: expected one of {', '.join(POLICIES)}")
    f = _Follower(follower, follower_cache)
    high_watermark = follower.effective_high_watermark()
    if policy == "high-watermark" or f.cache.latest_epoch is None:
        rule = "follower-high-watermark" if policy == "high-watermark" else "follower-without-epochs"
        return _finish(f, leader, min(high_watermark, f.log_end_offset), 0, rule)
    leader_cache = leader.cache() if leader_cache is None else leader_cache
    if policy == "leader-epoch":
        return _by_fetch(f, leader, leader_cache)
    fetch_offset = high_watermark   # initialFetchOffset without fetch truncation
    for rounds in range(1, MAX_ROUNDS + 1):
        leader_epoch, leader_end = _leader_answer(leader, leader_cache, f.cache.latest_epoch)
        if policy == "leader-epoch-v0":
            leader_epoch = UNDEFINED_EPOCH   # a v0 answer carries the end offset only
        offset, complete, rule = _truncation_state(f, leader_epoch, leader_end, fetch_offset)
        if complete:
            return _finish(f, leader, offset, rounds, rule)
        f.truncate_to(offset)
        fetch_offset = offset   # the fetch state moves to the intermediate offset
        if f.cache.latest_epoch is None:   # still Truncating, now without epochs: by the fetch offset
            return _finish(f, leader, min(fetch_offset, f.log_end_offset), rounds, rule)
    raise ValueError("truncation did not converge: malformed epoch cache")


def _by_fetch(f: _Follower, leader: ReplicaLog, leader_cache: LeaderEpochCache) -> Truncation:
    """Fetch from the log end with lastFetchedEpoch (Partition.readRecords): the leader answers OffsetOutOfRange,
    DivergingEpoch, or data (no divergence)."""
    for rounds in range(1, MAX_ROUNDS + 1):
        fetch_offset, last_epoch = f.log_end_offset, f.cache.latest_epoch
        if last_epoch is None:   # every epoch cut away: the next fetch has no lastFetchedEpoch, only range checks
            return _finish(f, leader, f.log_end_offset, rounds - 1, "epoch-unknown-to-follower")
        leader_epoch, leader_end = _leader_answer(leader, leader_cache, last_epoch)
        if leader_end == UNDEFINED_EPOCH_OFFSET or fetch_offset < leader.log_start_offset:
            corrected = _out_of_range(f, leader, rounds, "out-of-range")
            return corrected or Truncation(f.log_end_offset, rounds, "out-of-range")
        if leader_epoch >= last_epoch and leader_end >= fetch_offset:
            return Truncation(fetch_offset, rounds, "no-divergence" if rounds == 1 else "epoch-end-offset")
        offset, complete, rule = _truncation_state(f, leader_epoch, leader_end, fetch_offset)
        if complete:
            return _finish(f, leader, offset, rounds, rule)
        f.truncate_to(offset)
    raise ValueError("truncation did not converge: malformed epoch cache")
