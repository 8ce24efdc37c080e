"""Per-partition verdicts: one table of states -> the exact findings and "not judged" items, then the two KIP-101
scenarios played out in pure Python under both truncation policies."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from audit.systems.kafka.domain.checks import CHECKS, COVERAGE
from audit.systems.kafka.domain.epochs import EpochEntry as E, LeaderEpochCache
from audit.systems.kafka.domain.partition import (NEWER_EPOCH, PartitionMetadata, PartitionState, ReplicaState,
                                                  Settings, evaluate, reference_broker, verdicts)
from audit.systems.kafka.domain.truncation import ReplicaLog, truncation_offset


def rep(broker, epochs, start, end, hw, at=10, hw_at=None, **kw):
    """epochs None: the leader-epoch-checkpoint is unknown (absent or undecodable)."""
    return ReplicaState(broker, None if epochs is None else tuple(E(*e) for e in epochs), start, end, hw, at, hw_at,
                        **kw)


def md(leader, isr=(1, 2), replicas=(1, 2), at=0, epoch=None):
    return PartitionMetadata(leader, epoch, tuple(replicas), tuple(isr), at)


def part(*replicas, metadata=None, **kw):
    return PartitionState("east", "orders", 3, tuple(replicas), metadata, **kw)


HW = Settings("high-watermark")
EP = Settings("leader-epoch")

# (name, state, settings, [(check, broker, offset_from, offset_to, entry_count)])
CASES = [
    ("in-sync", part(rep(1, [(0, 0), (1, 50)], 0, 100, 100), rep(2, [(0, 0), (1, 50)], 0, 100, 100),
                     metadata=md(1)), EP, []),
    ("follower-read-later-is-ahead",
     part(rep(1, [(0, 0)], 0, 100, 95, at=10), rep(2, [(0, 0)], 0, 130, 120, at=20), metadata=md(1)), EP, []),
    # read before the leader: its log end below the leader's high watermark is the traffic in between
    ("follower-read-earlier-is-behind",
     part(rep(1, [(0, 0)], 0, 130, 120, at=20), rep(2, [(0, 0)], 0, 100, 95, at=10), metadata=md(1)), EP, []),
    ("follower-read-earlier-lag-within-timing",
     part(rep(1, [(0, 0)], 0, 500, 400, at=30), rep(2, [(0, 0)], 0, 300, 300, at=20), metadata=md(1, isr=(1,))),
     Settings(follower_lag_max=100), []),
    # acks=1 tail of the old leader above its high watermark: in flight, normal
    ("in-flight-tail-above-hw",
     part(rep(1, [(0, 0), (1, 10)], 0, 11, 11), rep(2, [(0, 0)], 0, 12, 10, mismatch_ranges=((10, 11),)),
          metadata=md(1, isr=(1,))), EP, []),
    # unclean election at 6: the old leader had exposed up to 8 -> 6 (different batch) and 7 (missing) lost
    ("unclean-election",
     part(rep(1, [(0, 0), (1, 6)], 0, 7, 7, at=10), rep(2, [(0, 0)], 0, 10, 8, at=20, mismatch_ranges=((6, 7),)),
          metadata=md(1, isr=(1,))), EP, [("kafka.committed_data_lost", 1, 6, 7, 2)]),
    # the same read in the other order: the epoch proves offset 7 can never reach the leader
    ("unclean-election-leader-read-first",
     part(rep(1, [(0, 0), (1, 6)], 0, 7, 7, at=30), rep(2, [(0, 0)], 0, 10, 8, at=20, mismatch_ranges=((6, 7),)),
          metadata=md(1, isr=(1,))), EP, [("kafka.committed_data_lost", 1, 6, 7, 2)]),
    # the leader has no epochs and was read first: offsets past its end cannot be judged
    ("missing-on-leader-not-judged",
     part(rep(1, [], 0, 7, 7, at=10), rep(2, [], 0, 10, 9, at=20), metadata=md(1, isr=(1,))), EP,
     [(COVERAGE, 2, 7, 8, 2)]),
    # the follower holds them in an epoch above the leader's latest (the metadata gives no epoch): a leader was
    # elected after the metadata was read; judged against the newest epoch's log, broker 1 only lags
    ("newer-epoch-than-leader-judged-against-it",
     part(rep(1, [(0, 0), (1, 5)], 0, 7, 7, at=10), rep(2, [(0, 0), (1, 5), (2, 7)], 0, 10, 9, at=20),
          metadata=md(1)), EP, []),
    # the same logs under a metadata that knows epoch 2 (broker 1 led it from 7 and lacks 7..8 broker 2 exposed)
    ("newer-epoch-known-to-the-metadata",
     part(rep(1, [(0, 0), (1, 5)], 0, 7, 7, at=10), rep(2, [(0, 0), (1, 5), (2, 7)], 0, 10, 9, at=20),
          metadata=md(1, epoch=2)), EP, [(COVERAGE, 2, 7, 8, 2)]),
    # read minutes after the leader, the follower took a log start of 9 (its cache truncated from the start at once,
    # its log-start checkpoint not yet flushed): offsets 7-8 past the leader's end lie below its first entry, so no
    # epoch proves them lost; 9-10 are in the leader's own epoch (appended after its read)
    ("follower-cache-starts-past-the-leaders-end",
     part(rep(1, [(0, 0), (1, 5)], 0, 7, 7, at=10), rep(2, [(1, 9)], 0, 12, 11, at=20), metadata=md(1)), EP, []),
    # same epoch as the leader's latest: the leader appended them after it was read
    ("leader-epoch-appends-after-read",
     part(rep(1, [(0, 0), (1, 5)], 0, 7, 7, at=10), rep(2, [(0, 0), (1, 5)], 0, 10, 9, at=20), metadata=md(1)),
     EP, []),
    ("hw-above-leo-follower",
     part(rep(1, [(0, 0)], 0, 20, 20), rep(2, [(0, 0)], 0, 15, 18, at=10, hw_at=5), metadata=md(1, isr=(1,))), EP,
     [("kafka.high_watermark_above_log_end", 2, 15, 17, 3)]),
    # the high watermark read after the log: appends in between explain it
    ("hw-above-leo-read-after-the-log",
     part(rep(1, [(0, 0)], 0, 20, 20), rep(2, [(0, 0)], 0, 15, 18, at=10, hw_at=12), metadata=md(1, isr=(1,))), EP,
     []),
    # the leader lost an unflushed tail it had exposed: its own loss
    ("leader-lost-its-tail",
     part(rep(1, [(0, 0)], 0, 15, 18), rep(2, [(0, 0)], 0, 15, 15), metadata=md(1)), EP,
     [("kafka.high_watermark_above_log_end", 1, 15, 17, 3), ("kafka.committed_data_lost", 1, 15, 17, 3)]),
    ("checkpoint-invalid",
     part(rep(1, [(0, 0), (2, 10), (1, 12)], 0, 20, 20), rep(2, [(0, 0), (1, 12)], 0, 20, 20), metadata=md(1)),
     EP, [("kafka.epoch_checkpoint_invalid", 1, 12, 12, 1)]),
    ("batch-epoch-outside-cache",
     part(rep(1, [(0, 0)], 0, 20, 20, batch_epoch_violations=2, batch_epoch_violation_first_offset=4,
              batch_epoch_violation_last_offset=9, batch_epoch_violation_offsets=4),
          rep(2, [(0, 0)], 0, 20, 20), metadata=md(1)), EP,
     [("kafka.batch_epoch_outside_cache", 1, 4, 9, 4)]),
    # caches disagree where the logs are identical and committed: offsets 10, 11 get epoch 1 vs 0
    ("epoch-lineage-mismatch",
     part(rep(1, [(0, 0), (1, 10)], 0, 20, 20), rep(2, [(0, 0), (1, 12)], 0, 20, 20), metadata=md(1)), EP,
     [("kafka.epoch_lineage_mismatch", 2, 0, 19, 2)]),
    # an epoch the leader got without a record, at its log end, and another the follower lost: not compared
    ("epoch-without-record",
     part(rep(1, [(0, 0), (1, 10), (3, 20)], 0, 20, 20), rep(2, [(0, 0), (1, 10)], 0, 20, 20), metadata=md(1)),
     EP, []),
    # retention moved one replica's log start (and its first entry)
    ("retention", part(rep(1, [(0, 50), (1, 60)], 50, 90, 90), rep(2, [(0, 0), (1, 60)], 0, 90, 90),
                       metadata=md(1)), EP, []),
    # the follower took the leader's log start 60: its cache was truncated from the start at once, its segments
    # below and its log-start checkpoint (written every 60 s) still say 0: below 60 its cache says nothing
    ("cache-truncated-from-start-ahead-of-the-log-start",
     part(rep(1, [(0, 0), (1, 50)], 0, 100, 100), rep(2, [(1, 60)], 0, 100, 100), metadata=md(1)), EP, []),
    ("leader-cache-truncated-from-start",
     part(rep(1, [(1, 60), (2, 80)], 0, 100, 100), rep(2, [(0, 0), (1, 50), (2, 80)], 0, 100, 100),
          metadata=md(1)), EP, []),
    # above both first entries the caches are still compared
    ("cache-truncated-from-start-then-lineage-differs",
     part(rep(1, [(0, 0), (1, 50), (2, 80)], 0, 100, 100), rep(2, [(1, 60), (2, 85)], 0, 100, 100),
          metadata=md(1)), EP, [("kafka.epoch_lineage_mismatch", 2, 60, 99, 5)]),
    # a leader-epoch-checkpoint the evidence lacks: not an empty cache, no epoch rule, one "not judged" item
    ("epoch-cache-unknown",
     part(rep(1, [(0, 0), (1, 10)], 0, 20, 20), rep(2, None, 0, 20, 20, checkpoint_problems=("absent",)),
          metadata=md(1)), EP, [(COVERAGE, 2, 0, 19, 20)]),
    ("leader-epoch-cache-unknown",
     part(rep(1, None, 0, 20, 20), rep(2, [(0, 0), (1, 12)], 0, 20, 20), metadata=md(1)), EP,
     [(COVERAGE, 1, 0, 19, 20)]),
    ("epoch-cache-unknown-empty-log", part(rep(1, [(0, 0)], 0, 20, 20), rep(2, None, 20, 20, 20), metadata=md(1)),
     EP, []),
    # where the cut needs the unknown cache, whether Δ stays or goes is not judged (committed part only)
    ("epoch-cache-unknown-divergent",
     part(rep(1, [(0, 0), (1, 6)], 0, 7, 7, at=10), rep(2, None, 0, 10, 8, at=20, mismatch_ranges=((6, 7),)),
          metadata=md(1, isr=(1,))), EP, [(COVERAGE, 2, 0, 9, 10), (COVERAGE, 2, 6, 7, 2)]),
    # the pre-KIP-101 rule cuts at the high watermark (8, then the leader's end 7) whatever the cache: judged; past
    # the leader's end only an epoch could prove the loss
    ("epoch-cache-unknown-high-watermark-policy",
     part(rep(1, [(0, 0), (1, 6)], 0, 7, 7, at=10), rep(2, None, 0, 10, 8, at=20, mismatch_ranges=((6, 7),)),
          metadata=md(1, isr=(1,))), HW,
     [(COVERAGE, 2, 0, 9, 10), ("kafka.divergent_logs", 2, 6, 6, 1), (COVERAGE, 2, 7, 7, 1)]),
    # an aborted transaction, replicated identically: records 10..14 in epoch 0, then the ABORT marker at 15 (a
    # control batch without a sequence) from the new leader of epoch 1 (the coordinator aborted it across the
    # leader change), and the producer's next batches go on from the aborted sequences: what Spark computes of
    # that (no mismatch, no sequence gap; tests/kafka/transforms/test_aborted_transactions.py) is no finding
    ("aborted-transaction",
     part(rep(1, [(0, 0), (1, 15)], 0, 20, 20), rep(2, [(0, 0), (1, 15)], 0, 20, 20), metadata=md(1)), EP, []),
    # the follower fetched the ABORT marker but has not yet learned the high watermark past it
    ("aborted-transaction-marker-in-flight",
     part(rep(1, [(0, 0), (1, 15)], 0, 16, 16), rep(2, [(0, 0), (1, 15)], 0, 16, 15), metadata=md(1)), EP, []),
    ("sequence-gap", part(rep(1, [(0, 0)], 0, 90, 90, sequence_gaps=1, sequence_gap_first_offset=30,
                              sequence_gap_last_offset=31), rep(2, [(0, 0)], 0, 90, 90), metadata=md(1)), EP,
     [("kafka.producer_sequence_gap", 1, 30, 31, 1)]),
    ("sequence-gap-compacted", part(rep(1, [(0, 0)], 0, 90, 90, sequence_gaps=1, sequence_gap_first_offset=30,
                                        sequence_gap_last_offset=31), rep(2, [(0, 0)], 0, 90, 90), metadata=md(1),
                                    compacted=True), EP, []),
    ("isr-member-below-hw",
     part(rep(1, [(0, 0)], 0, 100, 90, at=10, hw_at=5), rep(2, [(0, 0)], 0, 80, 80, at=20),
          metadata=md(1, at=8)), EP, [("kafka.isr_missing_committed", 2, 80, 89, 10)]),
    # read after the high watermark, but the ISR was read before it: it may have left the ISR meanwhile
    ("isr-member-below-hw-not-judged",
     part(rep(1, [(0, 0)], 0, 100, 90, at=10, hw_at=5), rep(2, [(0, 0)], 0, 80, 80, at=20),
          metadata=md(1, at=3)), EP, [(COVERAGE, 2, 80, 89, 10)]),
    ("isr-member-read-before-the-high-watermark",
     part(rep(1, [(0, 0)], 0, 100, 90, at=10, hw_at=5), rep(2, [(0, 0)], 0, 80, 80, at=3),
          metadata=md(1, at=1)), EP, []),
    ("follower-lagging", part(rep(1, [(0, 0)], 0, 500, 400, at=10), rep(2, [(0, 0)], 0, 300, 300, at=20),
                              metadata=md(1, isr=(1,))), Settings(follower_lag_max=100),
     [("kafka.follower_lagging", 2, 300, 499, 200)]),
    ("leader-not-collected", part(rep(2, [(0, 0)], 0, 10, 10), metadata=md(1)), EP, [(COVERAGE, 1, None, None, 0)]),
    # log dirs only: the replica with the highest latest epoch is the reference (broker 2 here)
    ("no-metadata", part(rep(1, [(0, 0)], 0, 12, 10, mismatch_ranges=((6, 7),)), rep(2, [(0, 0), (1, 6)], 0, 7, 7)),
     EP, [("kafka.committed_data_lost", 2, 6, 9, 4)]),
    ("offline-partition", part(rep(1, [(0, 0)], 0, 12, 10, mismatch_ranges=((6, 7),)),
                               rep(2, [(0, 0), (1, 6)], 0, 7, 7), metadata=md(None, isr=())),
     EP, [("kafka.committed_data_lost", 2, 6, 9, 4)]),
]


def _short(rows):
    return sorted(((r["check"], r["broker"], r["offset_from"], r["offset_to"], r["entry_count"]) for r in rows),
                  key=str)


@pytest.mark.parametrize("name, state, settings, expected", CASES, ids=[c[0] for c in CASES])
def test_verdicts(name, state, settings, expected):
    rows = verdicts(state, settings)
    assert _short(rows) == sorted(expected, key=str)
    for r in rows:
        assert (r["check"] == COVERAGE and r["severity"] is None and r["what"]) or \
            r["severity"] == CHECKS[r["check"]].severity
        assert (r["cluster"], r["topic"], r["partition"]) == ("east", "orders", 3)


@pytest.mark.parametrize("leader, epoch, replicas, expected", [
    (1, 4, [(1, 3, 10), (2, 4, 10)], (1, "leader")),
    (1, 3, [(1, 3, 10), (2, 3, 12)], (1, "leader")),
    (1, None, [(1, None, 10), (2, 4, 10)], (1, "leader")),           # neither the metadata nor the leader says
    (1, 3, [(2, 3, 10)], (None, "leader-not-collected")),
    # a leader elected after the metadata was read: the newest epoch's log is the one the others follow
    (1, 3, [(1, 3, 10), (2, 4, 12), (3, 4, 11)], (2, NEWER_EPOCH)),
    (1, None, [(1, 3, 10), (2, 4, 10)], (2, NEWER_EPOCH)),          # newer than the leader's own latest epoch
    (1, 3, [(2, 4, 10)], (2, NEWER_EPOCH)),
    (None, None, [(1, 3, 10), (2, 4, 5)], (2, "highest-epoch")),
    (None, None, [(1, 4, 10), (2, 4, 12), (3, 4, 12)], (2, "highest-epoch")),
    (None, None, [(1, None, 10), (2, 0, 1)], (2, "highest-epoch")),
    (None, None, [], (None, "no-replica")),
])
def test_reference_broker(leader, epoch, replicas, expected):
    assert reference_broker(md(leader, epoch=epoch), replicas) == expected


def test_metrics():
    state = part(rep(1, [(0, 0), (1, 6)], 0, 7, 7, at=10), rep(2, [(0, 0)], 0, 10, 8, at=20,
                                                                mismatch_ranges=((6, 7),)),
                 metadata=md(1, isr=(1,), epoch=1))
    m = evaluate(state, EP)[1]
    assert {k: m[k] for k in ("reference_broker", "reference_rule", "leader", "leader_epoch", "isr_size",
                              "under_replicated", "offline", "log_end_offset", "high_watermark", "latest_epoch",
                              "min_divergence_offset", "max_lag")} == {
        "reference_broker": 1, "reference_rule": "leader", "leader": 1, "leader_epoch": 1, "isr_size": 1,
        "under_replicated": True, "offline": False, "log_end_offset": 7, "high_watermark": 7, "latest_epoch": 1,
        "min_divergence_offset": 6, "max_lag": 0}
    assert m["followers"] == [{"broker": 2, "divergence_offset": 6, "truncation_rule": "epoch-end-offset",
                               "truncation_rounds": 1, "divergence_start": 6, "lag_lower_bound": 0,
                               "lag_upper_bound": None, "in_isr": False, "truncates": True}]
    assert m["truncating_followers"] == 1


@pytest.mark.parametrize("follower, truncates", [
    (rep(2, [(0, 0)], 0, 80, 80, at=20), False),                    # behind, nothing to cut
    (rep(2, [(0, 0), (2, 90)], 0, 100, 100, at=20), False),          # in step
    (rep(2, [(0, 0), (2, 90)], 0, 120, 100, at=20), False),          # read after the leader: its later appends
    (rep(2, [(0, 0), (2, 90)], 0, 120, 100, at=5), True),            # read before: the leader never had them
    (rep(2, [(0, 0), (1, 90)], 0, 100, 95, at=20, mismatch_ranges=((90, 100),)), True),   # a divergent tail
])
def test_only_followers_cut_below_their_log_end_count_as_truncating(follower, truncates):
    """Every follower has a divergence offset (where its rule cuts it, most at their log end): the partition's
    min_divergence_offset and truncating_followers count only those that lose something."""
    leader = rep(1, [(0, 0), (2, 90)], 0, 100, 100, at=10)
    m = evaluate(part(leader, follower, metadata=md(1)), EP)[1]
    assert m["followers"][0]["truncates"] is truncates
    assert m["truncating_followers"] == int(truncates)
    assert (m["min_divergence_offset"] is not None) is truncates


def test_replica_log_and_cache_are_built_once():
    r = rep(1, [(0, 0), (1, 10)], 0, 20, 20)
    assert r.cache() is r.cache() and r.log() is r.log()
    assert r.cache().entries == (E(0, 0), E(1, 10))
    assert rep(2, None, 0, 20, 20).cache().entries == () and not rep(2, None, 0, 20, 20).epochs_known


# -- KIP-101 end to end: two replicas, records as (epoch, message), HW per replica, both policies --------------
class Broker:
    def __init__(self, broker):
        self.broker, self.records, self.cache, self.hw = broker, [], LeaderEpochCache(), 0

    def append(self, epoch, message):
        self.cache.assign(epoch, len(self.records))
        self.records.append((epoch, message))

    def cut(self, offset):
        self.cache.truncate_from_end(min(offset, len(self.records)))
        del self.records[offset:]
        self.hw = min(self.hw, len(self.records))

    def as_log(self):
        return ReplicaLog(self.cache.entries, 0, len(self.records), self.hw)

    def rejoin(self, leader, policy):
        """Become follower: cut by the policy's rule."""
        self.cut(truncation_offset(leader.as_log(), self.as_log(), policy).offset)

    def follow(self, leader, policy):
        """Become follower and fetch everything."""
        self.rejoin(leader, policy)
        for offset in range(len(self.records), len(leader.records)):
            self.append(*leader.records[offset])

    def become_leader(self, epoch):
        self.cache.assign(epoch, len(self.records))


def _state(leader, *others, isr):
    """What Spark computes: per replica its log and where its records differ from the leader's."""
    def replica(b):
        common = min(len(b.records), len(leader.records))
        differing = [o for o in range(common) if b.records[o] != leader.records[o]]
        ranges = tuple((o, o + 1) for o in differing)
        return ReplicaState(b.broker, b.cache.entries, 0, len(b.records), b.hw, 10, mismatch_ranges=ranges)
    return part(*(replica(b) for b in (leader, *others)), metadata=md(leader.broker, isr=isr))


def scenario_1(policy):
    """B leads epoch 0; A fetched m2 but has not learned HW 2 when it restarts; then B dies and A leads."""
    a, b = Broker(1), Broker(2)
    for m in ("m1", "m2"):
        b.append(0, m)
    a.follow(b, policy)
    b.hw, a.hw = 2, 1
    a.rejoin(b, policy)          # A restarts and rejoins B; B dies before A fetches again
    a.become_leader(1)
    a.hw = len(a.records)
    return _state(a, b, isr=(1,))


def scenario_2(policy, a_back=True):
    """A leads epoch 0 with m1, m2 committed; power fails; B lost unflushed m2, comes back first, leads epoch 1 and
    takes m3; then A returns as a follower."""
    a, b = Broker(1), Broker(2)
    for m in ("m1", "m2"):
        a.append(0, m)
    b.follow(a, policy)
    a.hw = b.hw = 2
    b.cut(1)                     # unflushed m2 lost on B
    b.become_leader(1)
    b.append(1, "m3")
    b.hw = 2
    if a_back:
        a.follow(b, policy)
    return _state(b, a, isr=(1, 2) if a_back else (2,))


KIP101 = [
    ("scenario-1-high-watermark", scenario_1("high-watermark"), HW, [("kafka.committed_data_lost", 1, 1, 1, 1)]),
    ("scenario-1-leader-epoch", scenario_1("leader-epoch"), EP, []),
    ("scenario-1-leader-epoch-request", scenario_1("leader-epoch-request"), Settings("leader-epoch-request"), []),
    ("scenario-2-high-watermark", scenario_2("high-watermark"), HW, [("kafka.divergent_logs", 1, 1, 1, 1)]),
    ("scenario-2-leader-epoch", scenario_2("leader-epoch"), EP, []),
    # before A returns the committed m2 is visibly gone from the leader, whatever the policy
    ("scenario-2-a-down-high-watermark", scenario_2("high-watermark", a_back=False), HW,
     [("kafka.divergent_logs", 1, 1, 1, 1)]),
    ("scenario-2-a-down-leader-epoch", scenario_2("leader-epoch", a_back=False), EP,
     [("kafka.committed_data_lost", 2, 1, 1, 1)]),
]


@pytest.mark.parametrize("name, state, policy, expected", KIP101, ids=[k[0] for k in KIP101])
def test_kip101_scenarios(name, state, policy, expected):
    assert _short(verdicts(state, policy)) == sorted(expected, key=str)


def test_partial_mismatch_ranges_count_exactly():
    """HW policy, scenario 2 with more traffic: A keeps m2 at 1 and fetched m4 at 2 identically."""
    state = scenario_2("high-watermark")
    b, a = state.replicas
    b2 = ReplicaState(b.broker, b.epochs + (), 0, 3, 3, 10)
    exact = ReplicaState(a.broker, a.epochs + (E(1, 2),), 0, 3, 3, 10, mismatch_ranges=((1, 2),))
    first_only = ReplicaState(a.broker, a.epochs + (E(1, 2),), 0, 3, 3, 10, first_mismatch_offset=1)
    assert _short(verdicts(part(b2, exact, metadata=md(2)), HW)) == [("kafka.divergent_logs", 1, 1, 1, 1)]
    # the first mismatch alone takes the rest of the common window as differing
    assert _short(verdicts(part(b2, first_only, metadata=md(2)), HW)) == [("kafka.divergent_logs", 1, 1, 2, 2)]


@st.composite
def traffic(draw):
    return draw(st.lists(st.tuples(st.sampled_from(["append", "fetch", "flush", "read"]), st.integers(1, 2),
                                   st.integers(1, 5)), min_size=5, max_size=40))


@settings(max_examples=200, deadline=None)
@given(traffic(), st.permutations([1, 2, 3]))
def test_a_healthy_cluster_under_traffic_read_broker_by_broker(steps, order):
    """Leader 1 appends, followers fetch some or all of it, high watermarks advance and are checkpointed now and
    then; each broker is read at its own instant, in any order: no finding, nothing left unjudged."""
    logs = {b: Broker(b) for b in (1, 2, 3)}
    leader = logs[1]
    leader.become_leader(0)
    checkpointed = {b: 0 for b in logs}
    taken, order = {}, list(order)
    for now, (op, who, n) in enumerate(steps + [("read", 0, 0)] * 3):
        f = logs[who + 1]
        if op == "append":
            for _ in range(n):
                leader.append(0, f"m{len(leader.records)}")
        elif op == "fetch":
            end = min(len(leader.records), len(f.records) + n)
            for offset in range(len(f.records), end):
                f.append(*leader.records[offset])
            leader.hw = min(len(b.records) for b in logs.values())
            f.hw = min(leader.hw, len(f.records))
        elif op == "flush":
            checkpointed = {b: logs[b].hw for b in logs}
        elif op == "read" and order:
            b = logs[order.pop(0)]
            taken[b.broker] = ReplicaState(b.broker, b.cache.entries, 0, len(b.records), checkpointed[b.broker], now)
    assert verdicts(part(*taken.values(), metadata=md(1, isr=(1, 2, 3), replicas=(1, 2, 3))), EP) == []
