"""The Pulsar lab's scenarios: one topic each, all in one world, so one lab estate exercises every case.

Roles: "a" is the first configured cluster (default east: producers and the active consumers), "b" the second
(default west: the failover standby), "c" the third (default south, three-cluster scenario only). Producers
publish from 1 s until as_of (traffic: continuous, the default) or until 41 s (traffic: quiet: the world then runs
on to `duration_s` so PIP-33 settles where nothing is broken); `cfg.messages` is their rate per 40 s. Times are
offsets from the world's start; the clusters are collected from about `duration_s` - 125 s on (reads.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from lab.pulsar.builder import WorldBuilder
from lab.pulsar.config import PulsarLabConfig
from lab.pulsar.consumers import ConsumerPlan

SUB = "orders-processor"
HOUR_MS = 3_600_000


@dataclass(frozen=True)
class Scenario:
    name: str
    topic: str
    namespace: str
    description: str
    build: Callable[[WorldBuilder, PulsarLabConfig], None]
    roles: tuple[str, ...] = ("a", "b")
    recent_pulsar: bool = True
    guava_ranges: bool = False
    partitions: int = 0


def _both_ways(b: WorldBuilder, sub: str = SUB, **b_to_a) -> None:
    b.link("a", "b")
    b.link("b", "a", **b_to_a)
    b.subscription("a", sub)
    b.subscription("b", sub)


def healthy(b: WorldBuilder, cfg: PulsarLabConfig) -> None:
    # consumers ack out of order (a few acks seconds late); the primary's producer restarts once without
    # deduplication (sequence ids from 0 again): harmless where copies carry their source position
    _both_ways(b)
    b.subscription("a", "local-metrics", replicated=False)
    b.producer("a", cfg.messages, restarts_ms=(70_000,))
    b.producer("b", cfg.messages // 2)
    b.consumer("a", SUB, ConsumerPlan(start_ms=0, late_fraction=0.03, late_delay_ms=(2_000, 6_000)))
    b.consumer("a", "local-metrics", ConsumerPlan(start_ms=0, ack_delay_ms=(1, 50)))


def _hole_seqs(count: int, fractions: tuple[float, ...]) -> list[int]:
    return sorted({min(count - 1, int(count * f)) for f in fractions})


def ack_holes(b: WorldBuilder, cfg: PulsarLabConfig) -> None:
    _both_ways(b)
    producer = b.producer("a", cfg.messages)
    holes = _hole_seqs(cfg.messages, (0.6, 0.7, 0.8))
    b.consumer("a", SUB, ConsumerPlan(start_ms=0, late_fraction=0.08,
                                      never_ack=frozenset((producer, s) for s in holes)))
    b.fault("ack_holes", cluster=b.cluster("a"), subscription=SUB, producer=producer, never_acked=holes,
            late_ack_fraction=0.08)


def delayed_message(b: WorldBuilder, cfg: PulsarLabConfig) -> None:
    _both_ways(b)
    seq = int(cfg.messages * 0.15)
    producer = b.producer("a", cfg.messages, delayed={seq: HOUR_MS})
    b.consumer("a", SUB, ConsumerPlan(start_ms=0))
    b.fault("delayed_message", cluster=b.cluster("a"), subscription=SUB, producer=producer, sequence_id=seq,
            deliver_after_ms=HOUR_MS)


def backlog(b: WorldBuilder, cfg: PulsarLabConfig) -> None:
    # The standby's replicator back to the primary sends 2 entries/s: requests reach it late and its responses
    # queue behind its own traffic, so every snapshot round trip exceeds the timeout.
    _both_ways(b, rate_per_s=2)
    b.producer("a", cfg.messages)
    b.producer("b", cfg.messages * 2)
    b.consumer("a", SUB, ConsumerPlan(start_ms=0, stop_ms=30_000))
    b.fault("replicator_throttled", cluster=b.cluster("b"), remote=b.cluster("a"), rate_per_s=2)
    b.fault("consumer_stopped", cluster=b.cluster("a"), subscription=SUB, at_ms=b.t0 + 30_000)


def one_way(b: WorldBuilder, cfg: PulsarLabConfig) -> None:
    b.link("a", "b")
    b.subscription("a", SUB)
    b.subscription("b", SUB)  # the standby subscribed once with replicateSubscriptionState=true
    b.producer("a", cfg.messages)
    b.consumer("a", SUB, ConsumerPlan(start_ms=0))
    b.fault("one_way_replication", cluster=b.cluster("a"), remote=b.cluster("b"), subscription=SUB)


def target_cursor_ahead(b: WorldBuilder, cfg: PulsarLabConfig) -> None:
    # The standby's consumer runs while the primary's is gone and leaves one message unacked when it stops:
    # everything it acked after that hole exists on the standby only.
    _both_ways(b)
    producer = b.producer("a", cfg.messages)
    hole = _hole_seqs(cfg.messages, (0.7,))
    b.consumer("a", SUB, ConsumerPlan(start_ms=0, stop_ms=16_000))
    b.consumer("b", SUB, ConsumerPlan(start_ms=20_000, stop_ms=35_000,
                                      never_ack=frozenset((producer, s) for s in hole)))
    b.fault("consumers_on_both_clusters", cluster=b.cluster("b"), subscription=SUB,
            from_ms=b.t0 + 20_000, to_ms=b.t0 + 35_000)


def replicator_disconnected(b: WorldBuilder, cfg: PulsarLabConfig) -> None:
    # A slow consumer: its markDeletePosition trails by seconds, and the UPDATE markers written after the
    # disconnect never reach the standby.
    b.link("a", "b", disconnect_at_ms=25_000)
    b.link("b", "a")
    b.subscription("a", SUB)
    b.subscription("b", SUB)
    b.producer("a", cfg.messages)
    b.consumer("a", SUB, ConsumerPlan(start_ms=0, ack_delay_ms=(2_000, 8_000)))
    b.fault("replicator_disconnected", cluster=b.cluster("a"), remote=b.cluster("b"), at_ms=b.t0 + 25_000)


def three_clusters(b: WorldBuilder, cfg: PulsarLabConfig) -> None:
    sub = "payments:eu"  # a subscription name that needs percent-encoding in raw keys
    for src in ("a", "b", "c"):
        for dst in ("a", "b", "c"):
            if src != dst:
                b.link(src, dst, latency_ms=60 if "c" in (src, dst) else 40)
        b.subscription(src, sub)
    b.producer("a", cfg.messages)
    b.producer("b", cfg.messages // 3)
    b.consumer("a", sub, ConsumerPlan(start_ms=0))


def old_pulsar(b: WorldBuilder, cfg: PulsarLabConfig) -> None:
    _both_ways(b)
    per_partition = max(10, cfg.messages // 2)
    producer = b.producer("a", per_partition)
    holes = _hole_seqs(per_partition, (0.5, 0.9))
    b.consumer("a", SUB, ConsumerPlan(start_ms=0, late_fraction=0.05,
                                      never_ack=frozenset((producer, s) for s in holes)))
    b.fault("no_source_position_property", cluster=b.cluster("a"), remote=b.cluster("b"))
    b.fault("ack_holes", cluster=b.cluster("a"), subscription=SUB, producer=producer, never_acked=holes,
            late_ack_fraction=0.05)


def replicate_to(b: WorldBuilder, cfg: PulsarLabConfig) -> None:
    # some messages name their own cluster as their only replication cluster: never sent, neither skipped nor
    # missing on the other side
    _both_ways(b)
    b.producer("a", cfg.messages, local_only=0.2)
    b.producer("b", cfg.messages // 2, local_only=0.1)
    b.consumer("a", SUB, ConsumerPlan(start_ms=0))


def message_ttl(b: WorldBuilder, cfg: PulsarLabConfig) -> None:
    # The primary's replicator is down from 50 s to 90 s; with the estate's message TTL for the namespace shorter
    # than that, what waited longer than the TTL is dropped unsent when it reconnects (never missing on the
    # standby). An early unacked message holds both dump windows open over the outage.
    b.link("a", "b", disconnect_at_ms=50_000, reconnect_at_ms=90_000)
    b.link("b", "a")
    b.subscription("a", SUB)
    b.subscription("b", SUB)
    producer = b.producer("a", cfg.messages)
    hole = _hole_seqs(cfg.messages, (0.1,))
    b.consumer("a", SUB, ConsumerPlan(start_ms=0, never_ack=frozenset((producer, s) for s in hole)))
    b.fault("replicator_outage", cluster=b.cluster("a"), remote=b.cluster("b"), from_ms=b.t0 + 50_000,
            to_ms=b.t0 + 90_000, message_ttl_ms=b.settings.message_ttl_ms)


def producer_restart(b: WorldBuilder, cfg: PulsarLabConfig) -> None:
    # Brokers before apache/pulsar#23697 (no source position on copies) and a producer without deduplication that
    # restarts at 20 s: (origin, producer, sequence id) repeats inside the dump windows (an early unacked
    # message holds them open), so those messages cannot be paired: not compared, reported as not judged.
    _both_ways(b)
    producer = b.producer("a", cfg.messages, restarts_ms=(20_000,))
    hole = _hole_seqs(cfg.messages, (0.2,))
    b.consumer("a", SUB, ConsumerPlan(start_ms=0, never_ack=frozenset((producer, s) for s in hole)))
    b.fault("producer_restarts_without_dedup", cluster=b.cluster("a"), producer=producer, restarted_at_ms=b.t0 + 20_000)


def missing_subscription(b: WorldBuilder, cfg: PulsarLabConfig) -> None:
    # the standby never subscribed: the first UPDATE creates the subscription there as its broker version does
    # (apache/pulsar#20767: at Earliest and acked; before it at Latest, the UPDATE dropped)
    b.link("a", "b")
    b.link("b", "a")
    b.subscription("a", SUB)
    b.producer("a", cfg.messages)
    b.consumer("a", SUB, ConsumerPlan(start_ms=0, ack_delay_ms=(5, 1_000)))


def standby_replicator_down(b: WorldBuilder, cfg: PulsarLabConfig) -> None:
    # The standby's replicator back to the primary goes down at 40 s: the primary's UPDATE copies that reach the
    # standby afterwards wait unread (a replicator hands markers to PIP-33 when it reads them): PIP-33 stops
    # there, and no snapshot completes any more. At 45 s an operator resets the standby's subscription 20 s
    # back: behind what the UPDATEs it had applied told it, and no UPDATE moves it forward again.
    b.link("a", "b")
    b.link("b", "a", disconnect_at_ms=40_000)
    b.subscription("a", SUB)
    b.subscription("b", SUB)
    b.producer("a", cfg.messages)
    b.consumer("a", SUB, ConsumerPlan(start_ms=0, ack_delay_ms=(100, 2_500)))
    b.reset_cursor("b", SUB, at_ms=45_000, back_ms=20_000)
    b.fault("replicator_disconnected", cluster=b.cluster("b"), remote=b.cluster("a"), at_ms=b.t0 + 40_000)
    b.fault("subscription_reset", cluster=b.cluster("b"), subscription=SUB, at_ms=b.t0 + 45_000,
            to_ms=b.t0 + 25_000)


_ALL = [
    Scenario("healthy", "orders-healthy", "geo", "bidirectional replication, consumers on the primary finish and "
             "PIP-33 catches up: a failover either way redelivers and skips nothing", healthy),
    Scenario("ack-holes", "orders-ack-holes", "geo", "individual acks out of order, three messages never acked: "
             "the markDeletePosition (the only thing PIP-33 syncs) stays behind the holes; Guava range spelling",
             ack_holes, guava_ranges=True),
    Scenario("delayed-message", "orders-delayed", "geo", "one message delivered an hour later holds the "
             "markDeletePosition back, so the standby's cursor stays there", delayed_message),
    Scenario("backlog-starves-snapshots", "orders-backlog", "geo", "the standby's replicator back to the primary "
             "is throttled: snapshot requests are answered after the 30 s timeout and the consumer stops",
             backlog),
    Scenario("one-way", "orders-one-way", "geo", "replicated subscription on a topic the standby does not "
             "replicate back: no snapshot ever completes", one_way),
    Scenario("target-cursor-ahead", "orders-both-sides", "geo", "a consumer on the standby acks while the "
             "primary's consumer has stopped: the standby's cursor is ahead of anything a snapshot justifies",
             target_cursor_ahead),
    Scenario("replicator-disconnected", "orders-disconnected", "geo", "the primary's replicator to the standby "
             "disconnects: no copies, no new snapshots", replicator_disconnected),
    Scenario("three-clusters", "payments", "geo3", "full-mesh replication between three clusters (two-round "
             "snapshots), consumers on the primary finish", three_clusters, roles=("a", "b", "c")),
    Scenario("old-pulsar", "orders-legacy", "geo", "a partitioned topic on brokers older than apache/pulsar#23697: "
             "copies carry no __MSG_PROP_REPL_SOURCE_POSITION; ack holes", old_pulsar, recent_pulsar=False,
             partitions=2),
    Scenario("replicate-to", "orders-regional", "geo", "some messages name only their own cluster as replication "
             "cluster: never sent, so neither skipped nor missing", replicate_to),
    Scenario("message-ttl", "orders-expiring", "geo-ttl", "the primary's replicator is down for 40 s; the "
             "namespace's message TTL drops what waited longer unsent", message_ttl),
    Scenario("producer-restart", "orders-restarted", "geo", "brokers before apache/pulsar#23697 and a producer "
             "without deduplication restarting at 20 s: repeated keys cannot be paired", producer_restart,
             recent_pulsar=False),
    Scenario("missing-subscription", "orders-late-standby", "geo", "the standby has no subscription until the first "
             "UPDATE creates it, as its broker version does (apache/pulsar#20767)", missing_subscription),
    Scenario("standby-replicator-down", "orders-unapplied", "geo", "the standby's replicator back to the primary "
             "goes down: UPDATE markers reach the standby but are never applied; then the standby's subscription is "
             "reset behind what the applied ones told it", standby_replicator_down),
]
SCENARIOS: dict[str, Scenario] = {s.name: s for s in _ALL}
