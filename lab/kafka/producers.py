"""Simulated producers: batches of records sent to partition leaders with acks=1 or acks=all, with or without
idempotence (producer id, epoch, sequence numbers), optionally transactional (a COMMIT marker after every few
batches), retried on a lost leader, a timeout or a missing ISR, and what each send ended with.

Client behaviour followed (clients/.../producer/internals/Sender.java, TransactionManager.java @1eb7644349c):
max.in.flight 5 per partition, retry.backoff 100 ms, request.timeout 30 s, delivery.timeout 120 s; an
idempotent producer told OUT_OF_ORDER_SEQUENCE_NUMBER bumps its epoch and numbers its unacknowledged batches
from 0 again (KIP-360); a duplicate of one of the last five batches is acknowledged with the original offset."""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable

from lab.kafka.cluster import Cluster
from lab.kafka.encode import data_batch, marker_batch
from lab.kafka.log import Batch
from lab.kafka.replication import DUPLICATE, OK, OUT_OF_ORDER

RETRY_BACKOFF_MS = 100
REQUEST_TIMEOUT_MS = 30_000
DELIVERY_TIMEOUT_MS = 120_000
MAX_IN_FLIGHT = 5


@dataclass
class Ack:
    """A send the producer saw acknowledged: which messages, where the broker said it put them."""

    producer: str
    topic: str
    partition: int
    first_no: int
    count: int
    offset: int
    acked_ms: int
    acks_all: bool


@dataclass(eq=False)
class Pending:
    proto: Batch
    created_ms: int
    sent_ms: int = -1
    attempt: int = 0
    done: bool = False


@dataclass
class Producer:
    name: str
    cluster: Cluster
    topic: str
    acks_all: bool
    rng: random.Random
    rate_per_s: float            # batches per second over the topic
    records_max: int
    record_bytes: int
    idempotent: bool = False
    transactional: bool = False
    partitions: tuple[int, ...] = ()
    producer_id: int = -1
    producer_epoch: int = -1
    next_no: int = 0
    sequences: dict[int, int] = field(default_factory=dict)
    queues: dict[int, list[Pending]] = field(default_factory=dict)
    in_flight: dict[int, list[Pending]] = field(default_factory=dict)
    acks: list[Ack] = field(default_factory=list)
    gave_up: list[Pending] = field(default_factory=list)
    stopped: bool = False
    txn_left: dict[int, int] = field(default_factory=dict)
    txn_open: dict[int, bool] = field(default_factory=dict)
    max_in_flight: int = MAX_IN_FLIGHT
    pause: tuple[int, int] | None = None     # [from, until): no new records (a transactional one commits first)
    on_ack: Callable[[int, Batch, int], None] | None = None    # (partition, batch sent, offset) when acknowledged
    draining: set[int] = field(default_factory=set)          # partitions whose queue a _drain is sending from

    def start(self, start_ms: int, stop_ms: int) -> None:
        """Produce at `rate_per_s` from start_ms to stop_ms (a rate of 0: only what send_proto hands over)."""
        if not self.partitions:
            self.partitions = tuple(range(self.cluster.topics[self.topic].partitions))
        if self.idempotent or self.transactional:
            self.producer_id = 1000 + self.rng.randrange(1 << 20)
            self.producer_epoch = 0
        self.stop_ms = stop_ms
        if self.rate_per_s > 0:
            self.cluster.clock.at(start_ms + self._gap(), self._tick)

    def send_proto(self, p: int, proto: Batch) -> None:
        """Send a batch built elsewhere (MirrorMaker 2's copies and internal records), not idempotent."""
        self.queues.setdefault(p, []).append(Pending(proto, self.cluster.clock.now))
        self._drain(p)

    def _gap(self) -> int:
        return max(1, int(self.rng.expovariate(self.rate_per_s) * 1000))

    def _tick(self) -> None:
        now = self.cluster.clock.now
        if self.stopped or now >= self.stop_ms:
            return
        if self.pause is not None and self.pause[0] <= now < self.pause[1]:
            if self.transactional:
                self._commit_open()
            self.cluster.clock.at(self.pause[1], self._tick)
            return
        p = self.partitions[self.rng.randrange(len(self.partitions))]
        self.send_new(p, self.rng.randint(1, self.records_max))
        self.cluster.clock.after(self._gap(), self._tick)

    def send_new(self, p: int, count: int) -> None:
        now = self.cluster.clock.now
        stamps = [now - (count - 1 - i) for i in range(count)]
        first = self.next_no
        self.next_no += count
        seq = -1
        if self.producer_id >= 0:
            seq = self.sequences.get(p, 0)
            self.sequences[p] = seq + count
        proto = data_batch(0, -1, self.name, first, count, stamps, self.record_bytes, producer_id=self.producer_id,
                           producer_epoch=self.producer_epoch, base_sequence=seq,
                           transactional=self.transactional, created_ms=now)
        self.queues.setdefault(p, []).append(Pending(proto, now))
        if self.transactional:
            left = self.txn_left.get(p, self.rng.randint(1, 3)) - 1
            self.txn_open[p] = True
            if left <= 0:
                marker = marker_batch(0, -1, self.name, -1, now, producer_id=self.producer_id,
                                      producer_epoch=self.producer_epoch, created_ms=now)
                self.queues[p].append(Pending(marker, now))
                self.txn_open[p] = False
                left = self.rng.randint(1, 3)
            self.txn_left[p] = left
        self._drain(p)

    def _commit_open(self) -> None:
        """Commit every open transaction: a COMMIT marker on each partition with records since the last one."""
        now = self.cluster.clock.now
        for p in self.partitions:
            if self.txn_left.get(p) is not None and self.txn_open.get(p):
                marker = marker_batch(0, -1, self.name, -1, now, producer_id=self.producer_id,
                                      producer_epoch=self.producer_epoch, created_ms=now)
                self.queues.setdefault(p, []).append(Pending(marker, now))
                self.txn_open[p] = False
                self._drain(p)

    def _drain(self, p: int) -> None:
        # A batch can be acknowledged inside its own send (a lone in-sync replica commits at once), and the ack
        # drains again: the outer loop sends what the nested call would have, so a long backlog (after an
        # outage) does not recurse once per batch.
        if p in self.draining:
            return
        self.draining.add(p)
        try:
            queue, flight = self.queues.setdefault(p, []), self.in_flight.setdefault(p, [])
            while queue and len(flight) < self.max_in_flight:
                item = queue.pop(0)
                flight.append(item)
                self._send(p, item)
        finally:
            self.draining.discard(p)

    def _send(self, p: int, item: Pending) -> None:
        c = self.cluster
        now = c.clock.now
        if item.done or self.stopped:
            return
        if now - item.created_ms > DELIVERY_TIMEOUT_MS:
            self._finish(p, item, None)
            self.gave_up.append(item)
            return
        item.attempt += 1
        item.sent_ms = now
        attempt = item.attempt
        pm = c.partitions[(self.topic, p)]
        acks_all = self.acks_all or item.proto.control

        def committed(ok: bool, batch: Batch) -> None:
            if item.done or item.attempt != attempt:
                return
            if ok:
                self._finish(p, item, batch)
            else:
                c.clock.after(RETRY_BACKOFF_MS, self._send, p, item)

        status, got = c.replication.append_as_leader(pm, item.proto, acks_all, committed)
        if status == OK:
            if not acks_all:
                self._finish(p, item, got)
            elif not item.done:
                c.clock.after(REQUEST_TIMEOUT_MS, self._timed_out, p, item, attempt)
        elif status == DUPLICATE:
            self._finish(p, item, None, offset=got)
        elif status == OUT_OF_ORDER:
            # an earlier batch of this partition is still being retried: this one waits its turn (the client
            # retries in sequence order); only a gap nothing in flight explains means lost data (KIP-360)
            earlier = [i for i in self.in_flight.get(p, []) if not i.done and i is not item
                       and i.proto.producer_epoch == item.proto.producer_epoch
                       and 0 <= i.proto.base_sequence < item.proto.base_sequence]
            if earlier:
                c.clock.after(RETRY_BACKOFF_MS, self._send, p, item)
            else:
                self._bump_epoch(p)
        else:
            c.clock.after(RETRY_BACKOFF_MS, self._send, p, item)

    def _timed_out(self, p: int, item: Pending, attempt: int) -> None:
        if not item.done and item.attempt == attempt:
            self._send(p, item)

    def _finish(self, p: int, item: Pending, batch: Batch | None, offset: int | None = None) -> None:
        item.done = True
        flight = self.in_flight.get(p, [])
        if item in flight:
            flight.remove(item)
        if self.stopped:
            return
        if (batch is not None or offset is not None) and not item.proto.control:
            where = batch.base if batch is not None else offset
            self.acks.append(Ack(self.name, self.topic, p, item.proto.first_seq_no, item.proto.records, where,
                                 self.cluster.clock.now, self.acks_all))
            if self.on_ack is not None:
                self.on_ack(p, item.proto, where)
        self._drain(p)

    def _bump_epoch(self, p: int) -> None:
        """KIP-360: a new producer epoch, and every unacknowledged batch numbered again from sequence 0."""
        self.producer_epoch += 1
        self.sequences = {}
        self.cluster.note("producer_epoch_bump", producer=self.name, epoch=self.producer_epoch)
        for q in sorted(set(self.in_flight) | set(self.queues)):
            pending = [i for i in self.in_flight.get(q, []) + self.queues.get(q, []) if not i.done]
            self.in_flight[q], self.queues[q] = [], []
            for item in pending:
                item.done = True
                fresh = self._renumber(q, item.proto)
                self.queues[q].append(Pending(fresh, item.created_ms))
            self.cluster.clock.after(RETRY_BACKOFF_MS, self._drain, q)

    def _renumber(self, p: int, proto: Batch) -> Batch:
        now = self.cluster.clock.now
        if proto.control:
            return marker_batch(0, -1, self.name, -1, proto.max_ts, producer_id=self.producer_id,
                                producer_epoch=self.producer_epoch, created_ms=now)
        seq = self.sequences.get(p, 0)
        self.sequences[p] = seq + proto.records
        stamps = [proto.max_ts - (proto.records - 1 - i) for i in range(proto.records)]
        return data_batch(0, -1, self.name, proto.first_seq_no, proto.records, stamps, self.record_bytes,
                          producer_id=self.producer_id, producer_epoch=self.producer_epoch, base_sequence=seq,
                          transactional=self.transactional, created_ms=proto.created_ms)
