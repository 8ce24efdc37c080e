"""Producers, Shared subscriptions and their consumers in the Pulsar lab.

A subscription's dispatcher reads from the cursor's readPosition while a consumer is connected (the first
consumer to connect rewinds the cursor to markDeletePosition + 1; the last one leaving does not). Markers are
never dispatched: the dispatcher individually acks each one it reads, and a replicated subscription caches
the SNAPSHOT markers on the way. Messages with a deliver-at time in the future wait in the delayed tracker.
Consumers ack individually, out of order, some late and some never; acks of a consumer that has stopped are
lost."""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

from audit.systems.pulsar.formats.markers import SNAPSHOT
from audit.systems.pulsar.formats.stats_internal import REPLICATED_PROPERTY
from lab.pulsar.model import Cursor, Entry, Poller
from lab.pulsar.snapshots import SnapshotCache
from lab.pulsar.topic import Topic

DISPATCH_TICK_MS = 50
READ_BATCH = 100


@dataclass(frozen=True)
class ConsumerPlan:
    start_ms: int  # offsets from the start of the world
    stop_ms: int | None = None
    ack_delay_ms: tuple[int, int] = (5, 300)
    late_fraction: float = 0.0  # share of messages acked only after late_delay_ms
    late_delay_ms: tuple[int, int] = (10_000, 25_000)
    never_ack: frozenset[tuple[str, int]] = frozenset()  # (producer, sequence id) left unacked: ack holes


@dataclass
class Consumer:
    sub: "Subscription"
    name: str
    plan: ConsumerPlan
    rng: random.Random
    address: str
    connected: bool = False
    connected_since: int = 0
    received: int = 0  # its msgOutCounter
    bytes_out: int = 0
    last_consumed_ms: int = 0
    last_acked_ms: int = 0
    unacked: set[int] = field(default_factory=set)

    def receive(self, idx: int, entry: Entry) -> None:
        self.received += 1
        self.bytes_out += len(entry.payload)
        self.last_consumed_ms = self.sub.topic.clock.now
        self.unacked.add(idx)
        if (entry.producer_name, entry.sequence_id) in self.plan.never_ack:
            return
        late = self.rng.random() < self.plan.late_fraction
        delay = self.rng.randint(*(self.plan.late_delay_ms if late else self.plan.ack_delay_ms))
        self.sub.topic.clock.after(delay, self._ack, idx)

    def _ack(self, idx: int) -> None:
        if not self.connected:
            return  # the ack never reached the broker
        self.unacked.discard(idx)
        self.last_acked_ms = self.sub.topic.clock.now
        self.sub.ack(idx)


class Subscription:
    def __init__(self, topic: Topic, name: str, replicated: bool, at_earliest: bool = False):
        self.topic, self.name, self.replicated = topic, name, replicated
        props = {REPLICATED_PROPERTY: 1} if replicated else {}
        open_at = Cursor.at_earliest if at_earliest else Cursor.at_latest
        self.cursor = open_at(topic.ml, name, topic.clock.now, topic.cluster.ids.new(), properties=props)
        self.cache = SnapshotCache.for_topic(topic) if replicated else None
        self.consumers: list[Consumer] = []
        self.delayed: dict[int, int] = {}
        self.msg_out = 0  # msgOutCounter: every consumer's, removed ones included (brokers since 2.8)
        self.bytes_out = 0
        self.last_flow_ms = 0  # lastConsumedFlowTimestamp: a consumer connected or asked for more
        self.local_acks_moved_mdp = False  # the cursor advanced through acks made on this cluster
        self._rr = 0
        self.poller: Poller | None = None
        topic.subscriptions[name] = self

    # -- consumers ------------------------------------------------------------------------------
    def attach(self, plan: ConsumerPlan, rng: random.Random, until_ms: int, t0: int, address: str) -> Consumer:
        consumer = Consumer(self, f"{self.topic.cluster_name}-{self.name}-{len(self.consumers)}", plan, rng, address)
        self.consumers.append(consumer)
        clock = self.topic.clock
        clock.at(t0 + plan.start_ms, self._connect, consumer)
        if plan.stop_ms is not None:
            clock.at(t0 + plan.stop_ms, self._disconnect, consumer)
        if self.poller is None:
            self.poller = Poller(clock, DISPATCH_TICK_MS, self.dispatch, until_ms)
            self.topic.readers.append(self.poller)
        return consumer

    def _connect(self, consumer: Consumer) -> None:
        if not any(c.connected for c in self.consumers):
            self.cursor.read_idx = self.cursor.mdp_idx + 1  # first consumer: rewind
        consumer.connected = True
        consumer.connected_since = self.last_flow_ms = self.topic.clock.now
        self.poller.wake()

    def _disconnect(self, consumer: Consumer) -> None:
        consumer.connected = False

    def connected(self) -> list[Consumer]:
        return [c for c in self.consumers if c.connected]

    def consumed(self) -> bool:
        """Consumers were served on this cluster: one is connected, or messages were dispatched. A standby whose
        cursor only moves by UPDATE markers (cumulative acks from PIP-33) never is."""
        return self.msg_out > 0 or bool(self.connected())

    # -- dispatcher -----------------------------------------------------------------------------
    def dispatch(self) -> bool:
        """One read for the connected consumers; True while there is more to read."""
        live = self.connected()
        if not live:
            return False
        ml, now = self.topic.ml, self.topic.clock.now
        idx, end = self.cursor.read_idx, min(len(ml.entries), self.cursor.read_idx + READ_BATCH)
        while idx < end:
            entry = ml.entries[idx]
            if self.cursor.is_acked(idx):
                pass
            elif entry.is_marker:
                if entry.marker_type == SNAPSHOT and self.cache is not None:
                    self.cache.add(entry.marker)
                self.ack(idx, local=False)
            elif entry.deliver_at_ms is not None and entry.deliver_at_ms > now:
                self.delayed[idx] = entry.deliver_at_ms
                self.topic.clock.at(entry.deliver_at_ms, self._deliver_delayed, idx)
            else:
                self._send(live, idx, entry)
            idx += 1
        self.cursor.read_idx = max(self.cursor.read_idx, idx)
        return self.cursor.read_idx < len(ml.entries)

    def _send(self, live: list[Consumer], idx: int, entry: Entry) -> None:
        consumer = live[self._rr % len(live)]
        self._rr += 1
        self.msg_out += 1
        self.bytes_out += len(entry.payload)
        self.last_flow_ms = self.topic.clock.now
        consumer.receive(idx, entry)

    def _deliver_delayed(self, idx: int) -> None:
        live = self.connected()
        if live and self.delayed.pop(idx, None) is not None and not self.cursor.is_acked(idx):
            self._send(live, idx, self.topic.ml.entries[idx])

    def reset_to_time(self, publish_ms: int) -> None:
        """An operator's reset by time (PersistentSubscription.resetCursor(timestamp)): the read position goes to
        the entry after the newest one published at or before `publish_ms` (the first entry still held when it
        was trimmed), the markDeletePosition just before it, the individually-deleted ranges cleared."""
        ml, c = self.topic.ml, self.cursor
        idx = next((i for i in range(len(ml.entries) - 1, -1, -1) if ml.entries[i].publish_ms <= publish_ms), -1) + 1
        c.read_idx = max(idx, ml.first_live_index())
        c.mdp_idx = c.read_idx - 1
        c.acked.clear()

    # -- acks -----------------------------------------------------------------------------------
    def ack(self, idx: int, local: bool = True) -> None:
        now = self.topic.clock.now
        if self.cursor.ack(idx, now):
            if local:
                self.local_acks_moved_mdp = True
            self.mark_delete_advanced()

    def mark_delete_advanced(self) -> None:
        """PersistentSubscription: a moved markDeletePosition may publish a snapshot as an UPDATE marker."""
        if self.cache is None or not len(self.cache):
            return
        snapshot = self.cache.advanced_mark_delete(self.cursor.mark_delete_position())
        if snapshot is not None:
            self.topic.ensure_controller().local_subscription_updated(self.name, snapshot)


class Producer:
    """Publishes `count` messages on one cluster at random times in [start, end) (offsets from t0). A producer
    without deduplication that restarts (`restarts_ms`) starts its sequence ids from 0 again under the same name;
    `local_only` of the messages carry replication clusters naming this cluster only (never replicated)."""

    def __init__(self, topic: Topic, name: str, rng: random.Random):
        self.topic, self.name, self.rng = topic, name, rng

    def schedule(self, t0: int, start_ms: int, end_ms: int, count: int, delayed: dict[int, int] | None = None,
                 restarts_ms: tuple[int, ...] = (), local_only: float = 0.0) -> None:
        """`delayed` maps a sequence id to its deliver-after delay (ms after publishing)."""
        times = sorted(self.rng.randrange(start_ms, end_ms) for _ in range(count))
        seq, restarts = 0, sorted(restarts_ms)
        for at in times:
            while restarts and at >= restarts[0]:
                restarts.pop(0)
                seq = 0
            only_here = local_only > 0 and self.rng.random() < local_only
            self.topic.clock.at(t0 + at, self._publish, seq, (delayed or {}).get(seq), only_here)
            seq += 1

    def _publish(self, seq: int, deliver_after_ms: int | None, only_here: bool) -> None:
        body = {"producer": self.name, "seq": seq, "amount": self.rng.randint(1, 99_999)}
        payload = json.dumps(body, separators=(",", ":")).encode()
        props: tuple[tuple[str, str], ...] = (("trace-id", f"{self.rng.getrandbits(64):016x}"),)
        if seq % 7 == 0:
            props += (("region", self.topic.cluster_name),)
        now = self.topic.clock.now
        self.topic.publish(self.name, seq, payload, props,
                           None if deliver_after_ms is None else now + deliver_after_ms,
                           (self.topic.cluster_name,) if only_here else None)
