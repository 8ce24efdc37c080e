"""Where a follower's log is cut when it starts following a leader, as the simulated brokers do it (used by the
fetchers, and by the ground truth to say what a scanned replica's own rule would do with it).

- `high-watermark` (pre-KIP-101, ReplicaManager.makeFollowers at 0.10.2): cut at the follower's high watermark;
- `leader-epoch` (AbstractFetcherThread.getOffsetTruncationState @1eb7644349c): ask the leader for the end of the
  follower's latest epoch; an answer in an epoch the follower does not know cuts it at the end of its own largest
  epoch below that one, and it asks again; an answer in a known epoch cuts it at the smaller of both ends; an
  undefined answer (-1) or a follower without epochs cuts it at its high watermark.
Either way, a follower left above the leader's log end is then cut there (OFFSET_OUT_OF_RANGE,
fetchOffsetAndTruncate)."""
from __future__ import annotations

from audit.systems.kafka.domain.epochs import UNDEFINED_EPOCH_OFFSET, LeaderEpochCache

ROUNDS_MAX = 64


def epoch_truncation(leader: LeaderEpochCache, leader_leo: int, follower_entries, follower_leo: int,
                     follower_hw: int, answer: tuple[int, int] | None = None) -> int:
    """The offset the OffsetsForLeaderEpoch rounds cut the follower at (its log end when nothing is cut).
    `answer`: the leader's first answer when the follower already has it (a Fetch DivergingEpoch)."""
    cache = LeaderEpochCache(follower_entries)
    leo = follower_leo
    for _ in range(ROUNDS_MAX):
        if answer is None:
            latest = cache.latest_epoch
            if latest is None:
                return min(leo, follower_hw)
            answer = leader.end_offset_for(latest, leader_leo)
        leader_epoch, leader_end = answer
        if leader_end == UNDEFINED_EPOCH_OFFSET:
            return min(leo, follower_hw)
        f_epoch, f_end = cache.end_offset_for(leader_epoch, leo)
        if f_end == UNDEFINED_EPOCH_OFFSET:
            return min(leader_end, leo)
        if f_epoch != leader_epoch:
            leo = min(f_end, leo)
            cache.truncate_from_end(leo)
            answer = None
            continue
        return min(f_end, leader_end, leo)
    return leo


def truncation_offset(policy_truncates_to_hw: bool, leader: LeaderEpochCache, leader_leo: int, follower_entries,
                      follower_leo: int, follower_hw: int) -> int:
    """Where a follower ends after its truncation and the out-of-range check, following `leader`."""
    if policy_truncates_to_hw:
        cut = min(follower_hw, follower_leo)
    else:
        cut = epoch_truncation(leader, leader_leo, follower_entries, follower_leo, follower_hw)
    return min(cut, leader_leo) if cut > leader_leo else cut
