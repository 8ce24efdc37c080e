"""The lab's scenarios: each creates its topics and producers on its cluster at the world's start and injects its
faults in its own time slot (docs/kafka/lab.md "Scenarios"). Brokers are named by their role: A, B, C are the
cluster's first three broker ids.

Two scenarios need a precise moment to happen at all (the seed's preconditions); they wait for it, checking every
100 ms, the way the failure only strikes when its preconditions hold:
- kip101-scenario-1: follower A's checkpointed high watermark trails leader B's and A holds more than it (A will
  truncate offsets B has committed);
- kip101-scenario-2: A's disk holds at least 5 offsets more than B's (page cache writeback) and A's checkpointed
  high watermark is above them."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from lab.kafka.clock import stream
from lab.kafka.cluster import Cluster
from lab.kafka.producers import Producer

WAIT_STEP_MS = 100
WAIT_MAX_MS = 20_000


@dataclass
class ScenarioMeta:
    name: str
    cluster: str
    topics: tuple[str, ...]
    description: str
    started_ms: int
    faults: list[dict] = field(default_factory=list)


@dataclass
class Context:
    cluster: Cluster
    seed: int
    start_ms: int           # the world's start (topics and traffic)
    slot_ms: int            # this scenario's fault slot
    until_ms: int           # traffic ends (as_of)
    producers: list[Producer]
    batches_per_s: int
    records_per_batch: int
    record_bytes: int

    @property
    def roles(self) -> tuple[int, int, int]:
        ids = sorted(self.cluster.brokers)
        return ids[0], ids[1], ids[2]

    def producer(self, name: str, topic: str, *, acks_all: bool, idempotent: bool = False, rate: float | None = None,
                 transactional: bool = False) -> Producer:
        partitions = self.cluster.topics[topic].partitions
        p = Producer(name, self.cluster, topic, acks_all, stream(self.seed, self.cluster.name, "producer", name),
                     rate if rate is not None else self.batches_per_s * partitions, self.records_per_batch,
                     self.record_bytes, idempotent=idempotent, transactional=transactional)
        p.start(self.start_ms, self.until_ms)
        self.producers.append(p)
        return p

    def at(self, offset_ms: int, fn: Callable, *args) -> None:
        self.cluster.clock.at(self.slot_ms + offset_ms, fn, *args)

    def wait_until(self, offset_ms: int, cond: Callable[[], bool], then: Callable[[], None]) -> None:
        deadline = self.slot_ms + offset_ms + WAIT_MAX_MS

        def check() -> None:
            if cond() or self.cluster.clock.now >= deadline:
                then()
            else:
                self.cluster.clock.after(WAIT_STEP_MS, check)
        self.at(offset_ms, check)


def _log(c: Cluster, broker: int, topic: str):
    return c.brokers[broker].logs[(topic, 0)]


def kip101_scenario_1(ctx: Context, meta: ScenarioMeta) -> None:
    c, (a, b, cc) = ctx.cluster, ctx.roles
    c.create_topic("kip101-s1", 1, assignments=((b, a, cc),), min_isr=2)
    ctx.producer("s1-writer", "kip101-s1", acks_all=True)

    def ready() -> bool:
        la, lb = _log(c, a, "kip101-s1"), _log(c, b, "kip101-s1")
        return la.hw_ckpt is not None and lb.hw_ckpt is not None and la.hw_ckpt < lb.hw_ckpt and la.leo > la.hw_ckpt

    def strike() -> None:
        meta.faults.append({"kind": "follower-restart-then-leader-crash", "at_ms": c.clock.now, "follower": a,
                            "leader": b, "follower_hw_checkpoint": _log(c, a, "kip101-s1").hw_ckpt,
                            "leader_high_watermark": _log(c, b, "kip101-s1").hw})
        c.crash(a, noticed=False)                 # a quick restart: the controller never notices
        c.clock.after(2_000, c.restart, a)
        c.clock.after(2_001, leader_dies)         # B dies before A fetched again; A is elected

    def leader_dies() -> None:
        lb = _log(c, b, "kip101-s1")
        meta.faults.append({"kind": "leader-crash", "at_ms": c.clock.now, "broker": b,
                            "high_watermark_checkpoint": lb.hw_ckpt, "log_end_offset": lb.leo,
                            "follower_log_end_offset": _log(c, a, "kip101-s1").leo})
        c.crash(b)
    ctx.wait_until(0, ready, strike)


def kip101_scenario_2(ctx: Context, meta: ScenarioMeta) -> None:
    c, (a, b, _) = ctx.cluster, ctx.roles
    # segment.bytes 1 GiB (the default): no roll flushes, what survives the power loss is what the page cache
    # wrote back, which differs between the two brokers
    c.create_topic("kip101-s2", 1, assignments=((a, b),), min_isr=1, segment_bytes=1 << 30)
    ctx.producer("s2-writer", "kip101-s2", acks_all=True)
    c.replication.slow_ms[(b, a)] = 1_500     # B fetches a little late (in the ISR all along): its tail is younger

    def durable(broker: int) -> int:
        return _log(c, broker, "kip101-s2").durable_offset(c.brokers[broker].written_back_ms)

    def ready() -> bool:
        la = _log(c, a, "kip101-s2")
        # a few offsets more on A's disk: the divergence outlives B's first batches (whose boundaries may cut
        # into A's extra records)
        return durable(a) >= durable(b) + 5 and la.hw_ckpt is not None and la.hw_ckpt > durable(b) + 5

    def strike() -> None:
        meta.faults.append({"kind": "power-loss", "at_ms": c.clock.now, "brokers": [a, b],
                            "durable": {str(a): durable(a), str(b): durable(b)},
                            "high_watermark_checkpoint": {str(x): _log(c, x, "kip101-s2").hw_ckpt for x in (a, b)}})
        c.crash_together([a, b], power_loss=True)   # noticed in this order: B ends up the last ISR member
        c.clock.after(20_000, c.restart, b)
        c.clock.after(40_000, c.restart, a)
    ctx.wait_until(0, ready, strike)


def unclean_election(ctx: Context, meta: ScenarioMeta) -> None:
    c, (a, b, cc) = ctx.cluster, ctx.roles
    c.create_topic("unclean", 1, assignments=((a, b, cc),), min_isr=2, unclean=True)
    ctx.producer("unclean-all", "unclean", acks_all=True)
    ctx.producer("unclean-one", "unclean", acks_all=False, rate=max(1, ctx.batches_per_s // 2))
    blocked = c.replication.blocked

    def partition() -> None:
        meta.faults.append({"kind": "follower-cut-off", "at_ms": c.clock.now, "follower": cc, "leader": a})
        blocked.add((cc, a))

    def last_leader_dies() -> None:
        meta.faults.append({"kind": "leader-crash", "at_ms": c.clock.now, "broker": a})
        blocked.discard((cc, a))
        c.crash(a)
    ctx.at(0, partition)
    ctx.at(40_000, lambda: (meta.faults.append({"kind": "crash", "at_ms": c.clock.now, "broker": b}), c.crash(b)))
    ctx.at(55_000, last_leader_dies)


def power_loss(ctx: Context, meta: ScenarioMeta) -> None:
    c, (a, b, cc) = ctx.cluster, ctx.roles
    c.create_topic("durable", 2, min_isr=2)
    ctx.producer("durable-idempotent", "durable", acks_all=True, idempotent=True)
    ctx.producer("durable-acks1", "durable", acks_all=False)

    def strike() -> None:
        meta.faults.append({"kind": "power-loss", "at_ms": c.clock.now, "brokers": [cc, b, a]})
        c.crash_together([cc, b, a], power_loss=True)
        c.clock.after(15_000, c.restart, b)
        c.clock.after(17_000, c.restart, cc)
        c.clock.after(25_000, c.restart, a)
    ctx.at(0, strike)


def broker_restart(ctx: Context, meta: ScenarioMeta) -> None:
    c, (a, b, cc) = ctx.cluster, ctx.roles
    c.create_topic("rolling", 3, min_isr=2)
    ctx.producer("rolling-idempotent", "rolling", acks_all=True, idempotent=True)
    ctx.producer("rolling-acks1", "rolling", acks_all=False)
    for i, broker in enumerate((a, b)):
        ctx.at(i * 30_000, lambda broker=broker: (meta.faults.append(
            {"kind": "controlled-shutdown", "at_ms": c.clock.now, "broker": broker}), c.controlled_shutdown(broker)))
        ctx.at(i * 30_000 + 10_000, c.restart, broker)
    ctx.at(60_000, lambda: (meta.faults.append({"kind": "crash", "at_ms": c.clock.now, "broker": cc}), c.crash(cc)))
    ctx.at(72_000, c.restart, cc)


def healthy_under_load(ctx: Context, meta: ScenarioMeta) -> None:
    c, n = ctx.cluster, ctx.cluster.spec.partitions
    c.create_topic("orders", n, min_isr=2)
    c.create_topic("clicks", n, min_isr=2, first_broker=1)
    c.create_topic("payments", n, min_isr=2, first_broker=2)
    ctx.producer("orders-idempotent", "orders", acks_all=True, idempotent=True)
    ctx.producer("clicks-acks1", "clicks", acks_all=False)
    ctx.producer("payments-acks-all", "payments", acks_all=True)


SCENARIO_SETUP = {
    "kip101-scenario-1": (kip101_scenario_1, ("kip101-s1",),
                          "follower A restarts and truncates to its high watermark, leader B crashes, A is elected"),
    "kip101-scenario-2": (kip101_scenario_2, ("kip101-s2",),
                          "A and B lose power; B, with less on disk, comes back first and leads; A follows"),
    "unclean-election": (unclean_election, ("unclean",),
                         "a follower cut off from the leader drops out of the ISR, the ISR dies, it is elected "
                         "uncleanly"),
    "power-loss": (power_loss, ("durable",), "every broker loses power; unflushed tails are lost"),
    "broker-restart": (broker_restart, ("rolling",), "rolling controlled restarts, then a crash and restart"),
    "healthy-under-load": (healthy_under_load, ("orders", "clicks", "payments"),
                           "continuous traffic, acks=1 and acks=all, idempotent producers, retention"),
}
