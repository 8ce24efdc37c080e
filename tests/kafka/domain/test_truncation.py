"""Follower truncation: AbstractFetcherThreadTest.scala facts, the KIP-101 / KIP-279 scenarios under every policy,
and a replication simulation in which the epoch policies always cut exactly where the logs start to differ."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from audit.systems.kafka.domain.epochs import EpochEntry as E, LeaderEpochCache
from audit.systems.kafka.domain.truncation import (POLICIES, ReplicaLog, Truncation, truncation_offset,
                                                   truncation_policy_for)

ALL = POLICIES


def log(epochs, start, end, hw=None):
    return ReplicaLog(tuple(E(*e) for e in epochs), start, end, hw)


# (name, leader, follower, {policy: Truncation}); a policy left out expects the "*" entry
CASES = [
    # AbstractFetcherThreadTest.testTruncation: three rounds down to offset 0 (every epoch differs)
    ("testTruncation", log([(1, 0), (3, 1), (5, 2)], 0, 3, 2), log([(0, 0), (2, 1), (4, 2)], 0, 3, 0),
     {"leader-epoch": Truncation(0, 3, "epoch-end-offset"),
      "leader-epoch-request": Truncation(0, 3, "epoch-end-offset"),
      "leader-epoch-v0": Truncation(2, 1, "leader-answer-without-epoch"),
      "high-watermark": Truncation(0, 0, "follower-high-watermark")}),
    # testDivergingEpochs: the leader answers (2, 2), the follower keeps offsets 0 and 1
    ("testDivergingEpochs", log([(0, 0), (2, 1), (5, 2)], 0, 3, 2), log([(0, 0), (2, 1), (4, 2)], 0, 3, 0),
     {"*": Truncation(2, 1, "epoch-end-offset"), "leader-epoch-v0": Truncation(2, 1, "leader-answer-without-epoch"),
      "high-watermark": Truncation(0, 0, "follower-high-watermark")}),
    # testTruncateToHighWatermarkIfLeaderEpochInfoNotAvailable: no epoch on the follower -> its high watermark
    ("testTruncateToHighWatermarkIfLeaderEpochInfoNotAvailable", log([(0, 0)], 0, 3, 2), log([], 0, 3, 2),
     {"*": Truncation(2, 0, "follower-without-epochs"), "high-watermark": Truncation(2, 0, "follower-high-watermark")}),
    # testFollowerFetchOutOfRangeLow: the leader's log starts past the follower's end: nothing kept
    ("testFollowerFetchOutOfRangeLow", log([(4, 2)], 2, 3, 2), log([(0, 0)], 0, 1, 0),
     {"leader-epoch": Truncation(0, 1, "out-of-range+below-leader-log-start"),
      "leader-epoch-request": Truncation(0, 1, "epoch-end-offset+below-leader-log-start"),
      "leader-epoch-v0": Truncation(0, 1, "leader-answer-without-epoch+below-leader-log-start"),
      "high-watermark": Truncation(0, 0, "follower-high-watermark+below-leader-log-start")}),
    # testFollowerFetchOutOfRangeHigh: the leader's log was emptied: cut to its end
    ("testFollowerFetchOutOfRangeHigh", log([], 0, 0, 0), log([(0, 0), (2, 1), (4, 2)], 0, 3, 0),
     {"leader-epoch": Truncation(0, 1, "out-of-range+leader-log-end"),
      "leader-epoch-request": Truncation(0, 1, "leader-unknown-epoch"),
      "leader-epoch-v0": Truncation(0, 1, "leader-unknown-epoch"),
      "high-watermark": Truncation(0, 0, "follower-high-watermark")}),
    # KIP-101 scenario 1: follower A (m1, m2; HW 1) restarts while B leads epoch 0 with m1, m2
    ("kip101-scenario-1", log([(0, 0)], 0, 2, 2), log([(0, 0)], 0, 2, 1),
     {"leader-epoch": Truncation(2, 1, "no-divergence"), "leader-epoch-request": Truncation(2, 1, "epoch-end-offset"),
      "leader-epoch-v0": Truncation(2, 1, "leader-answer-without-epoch"),
      "high-watermark": Truncation(1, 0, "follower-high-watermark")}),
    # KIP-101 scenario 2: B leads epoch 1 from offset 1 (m3); A holds m2 at offset 1 in epoch 0, HW 2
    ("kip101-scenario-2", log([(0, 0), (1, 1)], 0, 2, 2), log([(0, 0)], 0, 2, 2),
     {"*": Truncation(1, 1, "epoch-end-offset"), "leader-epoch-v0": Truncation(1, 1, "leader-answer-without-epoch"),
      "high-watermark": Truncation(2, 0, "follower-high-watermark")}),
    # KIP-279: the leader answers epoch 2, unknown to the follower: cut to the follower's end of epoch 1 (2), ask
    # again, cut to 1. v0 (an answer without epoch) cuts once at 3 and keeps the divergent offsets 1 and 2.
    ("kip279-two-rounds", log([(0, 0), (2, 1), (4, 3)], 0, 5, 5), log([(0, 0), (1, 1), (3, 2)], 0, 4, 1),
     {"*": Truncation(1, 2, "epoch-end-offset"), "leader-epoch-v0": Truncation(3, 1, "leader-answer-without-epoch"),
      "high-watermark": Truncation(1, 0, "follower-high-watermark")}),
    # same epoch on both sides, the leader's log ends first
    ("same-epoch-leader-shorter", log([(0, 0), (2, 1)], 0, 4, 4), log([(0, 0), (2, 1)], 0, 7, 4),
     {"*": Truncation(4, 1, "epoch-end-offset"), "leader-epoch-v0": Truncation(4, 1, "leader-answer-without-epoch"),
      "high-watermark": Truncation(4, 0, "follower-high-watermark")}),
    # unclean election: the old leader (epoch 1, LEO 10, HW 8) follows a replica elected at offset 6 in epoch 2
    ("unclean-election", log([(0, 0), (1, 4), (2, 6)], 0, 7, 6), log([(0, 0), (1, 4)], 0, 10, 8),
     {"*": Truncation(6, 1, "epoch-end-offset"), "leader-epoch-v0": Truncation(6, 1, "leader-answer-without-epoch"),
      "high-watermark": Truncation(7, 0, "follower-high-watermark+leader-log-end")}),
    # an epoch assigned at the follower's end without a record (it led briefly) is dropped, nothing cut
    ("epoch-without-record", log([(0, 0), (3, 5)], 0, 8, 8), log([(0, 0), (2, 5)], 0, 5, 5),
     {"*": Truncation(5, 1, "epoch-end-offset"), "leader-epoch-v0": Truncation(5, 1, "leader-answer-without-epoch"),
      "high-watermark": Truncation(5, 0, "follower-high-watermark")}),
    # follower caught up: nothing to cut
    ("in-sync", log([(0, 0), (1, 50)], 0, 100, 90), log([(0, 0), (1, 50)], 0, 95, 90),
     {"leader-epoch": Truncation(95, 1, "no-divergence"), "leader-epoch-request": Truncation(95, 1, "epoch-end-offset"),
      "leader-epoch-v0": Truncation(95, 1, "leader-answer-without-epoch"),
      "high-watermark": Truncation(90, 0, "follower-high-watermark")}),
    # the leader has no epochs (old message format): request path falls back to the high watermark, the fetch
    # path gets OffsetOutOfRange and keeps its log
    ("leader-without-epochs", log([], 0, 10, 9), log([(0, 0)], 0, 8, 6),
     {"leader-epoch": Truncation(8, 1, "out-of-range"),
      "leader-epoch-request": Truncation(6, 1, "leader-unknown-epoch"),
      "leader-epoch-v0": Truncation(6, 1, "leader-unknown-epoch"),
      "high-watermark": Truncation(6, 0, "follower-high-watermark")}),
    # no checkpointed high watermark: the broker starts from 0, clamped to the log start
    ("no-high-watermark", log([(0, 0)], 0, 10, 10), log([], 4, 8, None),
     {"*": Truncation(4, 0, "follower-without-epochs"), "high-watermark": Truncation(4, 0, "follower-high-watermark")}),
    # the follower's epochs start above the leader's answer: it answers (requested, its first start)
    ("follower-epochs-start-later", log([(0, 0), (5, 3)], 0, 9, 9), log([(4, 3)], 3, 7, 7),
     {"*": Truncation(3, 1, "epoch-end-offset"), "leader-epoch-v0": Truncation(3, 1, "leader-answer-without-epoch"),
      "high-watermark": Truncation(7, 0, "follower-high-watermark")}),
]


@pytest.mark.parametrize("name, leader, follower, expected", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("policy", ALL)
def test_truncation(name, leader, follower, expected, policy):
    assert truncation_offset(leader, follower, policy) == expected.get(policy, expected.get("*"))


@pytest.mark.parametrize("version, policy", [
    ("0.10.2", "high-watermark"), ("0.10.2-IV0", "high-watermark"), ("0.11.0", "leader-epoch-v0"),
    ("1.1", "leader-epoch-v0"), ("2.0-IV1", "leader-epoch-request"), ("2.6", "leader-epoch-request"),
    ("2.7-IV0", "leader-epoch"), ("3.6", "leader-epoch"), ("4.0", "leader-epoch")])
def test_policy_for_version(version, policy):
    assert truncation_policy_for(version) == policy


@pytest.mark.parametrize("bad", ["three", "3", ""])
def test_policy_for_a_bad_version(bad):
    with pytest.raises(ValueError, match="version"):
        truncation_policy_for(bad)


def test_unknown_policy():
    with pytest.raises(ValueError, match="truncation policy 'x'"):
        truncation_offset(log([], 0, 0), log([], 0, 0), "x")


# -- simulation: leaders elected in increasing epochs, appends, fetches, unflushed tails lost ------------------
class Replica:
    def __init__(self):
        self.records = []          # (epoch, record id) per offset
        self.cache = LeaderEpochCache()

    def as_log(self):
        return ReplicaLog(self.cache.entries, 0, len(self.records), len(self.records))

    def cut(self, offset):
        self.cache.truncate_from_end(min(offset, len(self.records)))
        del self.records[offset:]


@st.composite
def histories(draw):
    return draw(st.lists(st.tuples(st.sampled_from(["elect", "append", "fetch", "crash"]), st.integers(0, 2),
                                   st.integers(1, 4)), min_size=1, max_size=25))


def _first_difference(a, b):
    common = min(len(a.records), len(b.records))
    return next((o for o in range(common) if a.records[o] != b.records[o]), common)


@settings(max_examples=300, deadline=None)
@given(histories(), st.sampled_from(["leader-epoch", "leader-epoch-request"]))
def test_epoch_policies_cut_where_the_logs_differ(history, policy):
    replicas, leader, epoch, ids = [Replica() for _ in range(3)], 0, 0, iter(range(10**6))
    replicas[0].cache.assign(0, 0)
    for op, who, n in history:
        if op == "elect":   # makeLeader assigns the new epoch at the log end, records or not
            leader, epoch = who, epoch + 1
            replicas[leader].cache.assign(epoch, len(replicas[leader].records))
        elif op == "append":
            r = replicas[leader]
            for _ in range(n):
                r.cache.assign(epoch, len(r.records))
                r.records.append((epoch, next(ids)))
        elif op == "crash" and who != leader:   # an unflushed tail is lost; recovery cuts the cache too
            replicas[who].cut(max(0, len(replicas[who].records) - n))
        elif op == "fetch" and who != leader:
            f, lead = replicas[who], replicas[leader]
            cut = truncation_offset(lead.as_log(), f.as_log(), policy)
            assert cut.offset == _first_difference(lead, f), (cut, lead.records, f.records)
            f.cut(cut.offset)
            for offset in range(cut.offset, len(lead.records)):
                f.cache.assign(lead.records[offset][0], offset)
                f.records.append(lead.records[offset])


def test_the_loaded_cache_drops_entries_past_the_log_end():
    """An entry starting past the log end was written after the log was listed (LogLoader drops it on load); one
    starting at the log end is a new epoch that has no record yet, and stays."""
    log = ReplicaLog((E(0, 0), E(1, 8), E(2, 12)), 0, 8)
    assert log.cache().entries == (E(0, 0), E(1, 8))
    assert log.epochs[-1] == E(2, 12)      # the file as written is kept for the checkpoint checks
