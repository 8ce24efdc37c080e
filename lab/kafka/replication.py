"""The replication data path of a simulated cluster: leader appends, follower fetches, high watermark, ISR
changes, and the follower truncation of the cluster's policy.

Upstream (apache/kafka @1eb7644349c): core/.../cluster/Partition.scala (makeLeader assigns the new leader epoch
at the log end even without records; fetchRecords reads before updating the follower's state, so the high
watermark a follower gets is the one before its own fetch moved it: followers learn it one fetch later;
maybeIncrementLeaderHW = the smallest log end offset of the ISR; maybeExpandIsr: follower LEO >= HW and >= the
leader epoch start; getOutOfSyncReplicas: not caught up for replica.lag.time.max.ms), core/.../cluster/
Replica.scala (lastCaughtUpTimeMs), core/.../server/AbstractFetcherThread.scala (getOffsetTruncationState, the
OffsetsForLeaderEpoch loop of KIP-279; fetchOffsetAndTruncate: a follower ahead of the leader truncates to the
leader's log end, one behind its log start starts over there), and for the `high-watermark` policy the
pre-KIP-101 ReplicaManager.makeFollowers (0.10.2): a new follower truncates its log to its high watermark."""
from __future__ import annotations

import random
from typing import Callable

from lab.kafka.cluster import Cluster, PartitionMeta
from lab.kafka.encode import reoffset
from lab.kafka.log import Batch, ReplicaLog
from lab.kafka.truncation import epoch_truncation

OK, DUPLICATE, NOT_LEADER, NOT_ENOUGH_REPLICAS, OUT_OF_ORDER, FENCED = (
    "ok", "duplicate", "not_leader", "not_enough_replicas", "out_of_order_sequence", "invalid_producer_epoch")
MAX_BATCHES_PER_FETCH = 400


class Replication:
    def __init__(self, cluster: Cluster):
        self.c = cluster
        self.truncations: list[dict] = []     # every truncation, for the ground truth and the docs
        self.blocked: set[tuple[int, int]] = set()   # (follower, leader) pairs cut off from each other
        self.slow_ms: dict[tuple[int, int], int] = {}  # (follower, leader) -> extra delay between its fetches

    # --- leadership ----------------------------------------------------------------------------------------
    def become_leader(self, pm: PartitionMeta, broker: int) -> None:
        b = self.c.brokers[broker]
        log = b.logs[pm.key]
        new_epoch = pm.leader_epoch > b.known_epoch.get(pm.key, -1)
        b.known_epoch[pm.key] = pm.leader_epoch
        b.fetching.pop(pm.key, None)
        if pm.acting_leader not in (None, broker):
            self._fail_waiting(pm)
        now = self.c.clock.now
        if new_epoch:
            log.cache.assign(pm.leader_epoch, log.leo)
            new_leader = pm.acting_leader != broker
            pm.epoch_start = log.leo
            for r in pm.replicas:
                if r == broker:
                    continue
                pm.last_caught_up[r] = now if r in pm.isr else 0
                if new_leader:
                    pm.follower_leo[r] = -1
                    pm.last_fetch_leader_leo[r] = -1
                    pm.last_fetch_ms[r] = 0
                else:
                    pm.last_fetch_leader_leo[r] = log.leo
                    pm.last_fetch_ms[r] = now
        pm.acting_leader = broker
        self.maybe_increment_hw(pm)

    def become_follower(self, pm: PartitionMeta, broker: int) -> None:
        b = self.c.brokers[broker]
        log = b.logs[pm.key]
        new_epoch = pm.leader_epoch > b.known_epoch.get(pm.key, -1)
        b.known_epoch[pm.key] = pm.leader_epoch
        if pm.acting_leader == broker:
            self.leader_gone(pm)
        if not new_epoch and b.fetching.get(pm.key) in ("fetching", "truncating"):
            return
        if self.c.policy_truncates_to_hw():
            self._truncate(log, log.hw, "high-watermark", pm)
            b.fetching[pm.key] = "fetching"
        else:
            b.fetching[pm.key] = "truncating"

    def leader_gone(self, pm: PartitionMeta) -> None:
        self._fail_waiting(pm)
        pm.acting_leader = None

    def broker_stopped(self, broker: int) -> None:
        b = self.c.brokers[broker]
        for pm in self.c.partitions.values():
            if pm.acting_leader == broker:
                self.leader_gone(pm)
        b.fetching = {}
        b.known_epoch = {}

    def _fail_waiting(self, pm: PartitionMeta) -> None:
        waiting, pm.waiting = pm.waiting, []
        for _, done, batch in waiting:
            done(False, batch)

    # --- high watermark and ISR ----------------------------------------------------------------------------
    def maybe_increment_hw(self, pm: PartitionMeta) -> None:
        log = self.c.leader_log(pm)
        if log is None:
            return
        new = log.leo
        for r in pm.isr:
            if r != pm.acting_leader:
                new = min(new, pm.follower_leo.get(r, -1))
        if new > log.hw:
            log.hw = new
            if pm.waiting:
                done = [w for w in pm.waiting if w[0] < new]
                pm.waiting = [w for w in pm.waiting if w[0] >= new]
                for _, cb, batch in done:
                    cb(True, batch)

    def maybe_shrink_isr(self, pm: PartitionMeta) -> None:
        log = self.c.leader_log(pm)
        if log is None:
            return
        now, lag = self.c.clock.now, self.c.config.replica_lag_time_max_ms
        out = {r for r in pm.isr if r != pm.acting_leader and not (
            pm.follower_leo.get(r, -1) == log.leo or now - pm.last_caught_up.get(r, 0) <= lag)}
        if out:
            self.c.alter_isr(pm, pm.isr - out)
            for r in sorted(out):
                self.c.note("isr_shrink", topic=pm.topic, partition=pm.partition, broker=r, by="leader")
            self.maybe_increment_hw(pm)

    def _maybe_expand_isr(self, pm: PartitionMeta, follower: int, log: ReplicaLog) -> None:
        leo = pm.follower_leo.get(follower, -1)
        if follower not in pm.isr and self.c.live(follower) and leo >= log.hw and \
                pm.epoch_start is not None and leo >= pm.epoch_start:
            self.c.alter_isr(pm, pm.isr | {follower})
            self.c.note("isr_expand", topic=pm.topic, partition=pm.partition, broker=follower)

    # --- produce -------------------------------------------------------------------------------------------
    def append_as_leader(self, pm: PartitionMeta, proto: Batch, acks_all: bool,
                         done: Callable[[bool, Batch], None] | None) -> tuple[str, Batch | int | None]:
        """(status, batch appended | offset of the duplicate | None). `done(ok, batch)` is called when an
        acks=all append is committed (ok) or its leader is gone (not ok)."""
        log = self.c.leader_log(pm)
        if log is None or pm.leader != pm.acting_leader:
            return NOT_LEADER, None
        if acks_all and len(pm.isr) < pm.min_isr:
            return NOT_ENOUGH_REPLICAS, None
        if proto.producer_id >= 0 and not proto.control:
            status, offset = self._check_sequence(log, proto)
            if status != OK:
                return status, offset
        batch = reoffset(proto, log.leo, pm.leader_epoch)
        log.append(batch, self.c.clock.now)
        if acks_all and done is not None:
            pm.waiting.append((batch.last, done, batch))
        self.maybe_increment_hw(pm)
        return OK, batch

    @staticmethod
    def _check_sequence(log: ReplicaLog, proto: Batch) -> tuple[str, int | None]:
        """ProducerAppendInfo.checkProducerEpoch / checkSequence, and the duplicate check of the last five."""
        entry = log.producers.get(proto.producer_id)
        last = proto.base_sequence + proto.records - 1
        if entry is not None and proto.producer_epoch < entry.epoch:
            return FENCED, None
        if entry is not None and proto.producer_epoch == entry.epoch:
            for first_seq, last_seq, base in entry.recent:
                if first_seq == proto.base_sequence and last_seq == last:
                    return DUPLICATE, base
            if proto.base_sequence != entry.last_seq + 1:
                return OUT_OF_ORDER, None
        elif proto.base_sequence != 0:
            return OUT_OF_ORDER, None
        return OK, None

    # --- fetch ---------------------------------------------------------------------------------------------
    def fetch_round(self, follower: int, leader: int) -> None:
        """One Fetch request of `follower`'s fetcher thread for the partitions `leader` leads."""
        fb, lb = self.c.brokers[follower], self.c.brokers[leader]
        if not fb.alive or not lb.alive or (follower, leader) in self.blocked:
            return
        for key, state in list(fb.fetching.items()):
            pm = self.c.partitions[key]
            if pm.acting_leader != leader or fb.known_epoch.get(key) != pm.leader_epoch:
                continue
            flog, llog = fb.logs[key], lb.logs[key]
            if state == "failed":
                continue
            if state == "truncating":
                self._epoch_truncation(pm, flog, llog)
                fb.fetching[key] = "fetching"
                continue
            self._fetch_partition(pm, follower, flog, llog)

    def _fetch_partition(self, pm: PartitionMeta, follower: int, flog: ReplicaLog, llog: ReplicaLog) -> None:
        offset = flog.leo
        if not self.c.policy_truncates_to_hw():
            last_epoch = flog.cache.latest_epoch
            if last_epoch is not None:   # Fetch v12+ lastFetchedEpoch: the leader answers DivergingEpoch
                e, end = llog.cache.end_offset_for(last_epoch, llog.leo)
                if e < last_epoch or end < offset:
                    self._truncate_by_answer(pm, flog, llog, (e, end))
                    return
        if offset > llog.leo:            # OFFSET_OUT_OF_RANGE: the follower is ahead of the leader
            self._truncate(flog, llog.leo, "out-of-range", pm)
            return
        if offset < llog.log_start:
            flog.truncate_fully_and_start_at(llog.log_start)
            self._note_truncation(pm, flog, llog.log_start, "below-log-start")
            return
        batches = llog.batches_from(offset, MAX_BATCHES_PER_FETCH)
        hw_read, leo_read = llog.hw, llog.leo
        now = self.c.clock.now
        # the leader's side of the fetch (Partition.updateFollowerFetchState)
        pm.follower_leo[follower] = offset
        if offset >= leo_read:
            pm.last_caught_up[follower] = max(pm.last_caught_up.get(follower, 0), now)
        elif offset >= pm.last_fetch_leader_leo.get(follower, -1):
            pm.last_caught_up[follower] = max(pm.last_caught_up.get(follower, 0), pm.last_fetch_ms.get(follower, 0))
        pm.last_fetch_leader_leo[follower] = leo_read
        pm.last_fetch_ms[follower] = now
        self._maybe_expand_isr(pm, follower, llog)
        self.maybe_increment_hw(pm)
        # the follower's side of the response
        if batches and batches[0].base < offset:
            # its log ends inside a leader batch (it diverged): UnexpectedAppendOffsetException, and the fetcher
            # marks the partition failed (AbstractFetcherThread.markPartitionFailed) until a new leader epoch
            self.c.brokers[follower].fetching[pm.key] = "failed"
            self.c.note("fetch_failed", topic=pm.topic, partition=pm.partition, broker=follower, offset=offset,
                        leader_batch=[batches[0].base, batches[0].last])
            return
        for batch in batches:
            if batch.base == flog.leo:
                flog.append(batch, now)
        flog.hw = max(flog.log_start, min(hw_read, flog.leo))
        # UnifiedLog.maybeIncrementLogStartOffset(leader's log start): the epoch cache is truncated from the start
        # at once, the segments below stay until this broker's next retention check
        if flog.log_start < llog.log_start <= flog.hw:
            flog.log_start = llog.log_start
            flog.cache.truncate_from_start(flog.log_start)

    def _epoch_truncation(self, pm: PartitionMeta, flog: ReplicaLog, llog: ReplicaLog) -> None:
        """The follower's first round under the leader-epoch policy: OffsetsForLeaderEpoch for its latest epoch
        (a follower without epochs truncates to its high watermark)."""
        self._truncate(flog, epoch_truncation(llog.cache, llog.leo, flog.cache.entries, flog.leo, flog.hw),
                       "leader-epoch", pm)

    def _truncate_by_answer(self, pm: PartitionMeta, flog: ReplicaLog, llog: ReplicaLog,
                            answer: tuple[int, int]) -> None:
        self._truncate(flog, epoch_truncation(llog.cache, llog.leo, flog.cache.entries, flog.leo, flog.hw, answer),
                       "leader-epoch", pm)

    def _truncate(self, log: ReplicaLog, offset: int, rule: str, pm: PartitionMeta) -> None:
        before = log.leo
        if log.truncate_to(offset):
            self._note_truncation(pm, log, before, rule)

    def _note_truncation(self, pm: PartitionMeta, log: ReplicaLog, before: int, rule: str) -> None:
        self.truncations.append({"at_ms": self.c.clock.now, "topic": pm.topic, "partition": pm.partition,
                                 "broker": log.broker, "from": before, "to": log.leo, "rule": rule})

    # --- fetcher threads -----------------------------------------------------------------------------------
    def start_fetchers(self, until_ms: int, rng: random.Random) -> None:
        ids = list(self.c.brokers)
        for f in ids:
            for leader in ids:
                if f != leader:
                    self._schedule_fetch(f, leader, until_ms, random.Random(rng.random()))

    def _schedule_fetch(self, follower: int, leader: int, until_ms: int, rng: random.Random) -> None:
        cfg = self.c.config

        def tick() -> None:
            self.fetch_round(follower, leader)
            nxt = self.c.clock.now + rng.randint(cfg.fetch_min_ms, cfg.fetch_max_ms) + \
                self.slow_ms.get((follower, leader), 0)
            if nxt < until_ms:
                self.c.clock.at(nxt, tick)
        self.c.clock.at(self.c.clock.now + rng.randint(cfg.fetch_min_ms, cfg.fetch_max_ms), tick)
