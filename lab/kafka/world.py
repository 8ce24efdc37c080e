"""Builds and runs the simulated world of one lab mapping: the clusters linked to the collected one by mirror
flows, their scenarios, traffic and MirrorMaker 2 flows, from `as_of - duration_s` to `as_of`, capturing every
read of the collection at its own instant (collection.py): the admin documents first, then broker after broker
`collection_gap_s` apart, while traffic goes on."""
from __future__ import annotations

from dataclasses import dataclass, field

from lab.kafka.clock import Clock, stream
from lab.kafka.cluster import Cluster
from lab.kafka.collection import Collection, schedule_collection
from lab.kafka.config import SCENARIO_SPAN_S, SETTLE_S, KafkaLabConfig
from lab.kafka.consumers import GroupConsumer
from lab.kafka.mm2 import MirrorFlow, setup_mirror
from lab.kafka.producers import Producer
from lab.kafka.replication import Replication
from lab.kafka.scenarios import SCENARIO_SETUP, Context, ScenarioMeta


@dataclass
class World:
    config: KafkaLabConfig
    as_of_ms: int
    start_ms: int
    clock: Clock
    clusters: dict[str, Cluster]
    scenarios: list[ScenarioMeta] = field(default_factory=list)
    producers: list[Producer] = field(default_factory=list)
    consumers: list[GroupConsumer] = field(default_factory=list)
    mirrors: list[MirrorFlow] = field(default_factory=list)
    collections: dict[str, Collection] = field(default_factory=dict)


def build_world(config: KafkaLabConfig, as_of_ms: int, cluster_name: str) -> World:
    """Simulate the component of `cluster_name` (the clusters mirror flows link it to) up to as_of."""
    names = config.component(cluster_name)
    start = as_of_ms - config.duration_s * 1000
    clock = Clock(start)
    world = World(config, as_of_ms, start, clock, {})
    for name in names:
        cluster = Cluster(config.cluster(name), config, clock, start)
        cluster.replication = Replication(cluster)
        world.clusters[name] = cluster
    for name in names:
        _setup_cluster(world, world.clusters[name])
    for spec in config.mirrors:
        if spec.source in world.clusters and spec.target in world.clusters:
            flow = setup_mirror(spec, world.clusters[spec.source], world.clusters[spec.target], world.start_ms,
                                as_of_ms)
            world.mirrors.append(flow)
            world.producers.extend(flow.producers)
            world.consumers.extend(flow.consumers)
    for name in names:
        c = world.clusters[name]
        c.replication.start_fetchers(as_of_ms, stream(config.seed, name, "fetchers"))
        c.start_background(as_of_ms)
        world.collections[name] = schedule_collection(c, as_of_ms, world.mirrors)
    clock.run_until(as_of_ms)
    return world


def fault_window_start(world: World, scenarios) -> int:
    """Faults happen late, right before the settling time and the collection, so that retention has not yet
    deleted the evidence they leave when the brokers are scanned (and traffic ran long before them)."""
    span = sum(SCENARIO_SPAN_S[s] for s in scenarios)
    return world.as_of_ms - (world.config.scan_span_s() + SETTLE_S + span) * 1000


def _setup_cluster(world: World, cluster: Cluster) -> None:
    c = world.config
    slot = fault_window_start(world, cluster.spec.scenarios)
    for name in cluster.spec.scenarios:
        setup, topics, description = SCENARIO_SETUP[name]
        meta = ScenarioMeta(name, cluster.name, topics, description, slot)
        ctx = Context(cluster, c.seed, world.start_ms, slot, world.as_of_ms, world.producers, c.batches_per_s,
                      c.records_per_batch, c.record_bytes)
        setup(ctx, meta)
        world.scenarios.append(meta)
        slot += SCENARIO_SPAN_S[name] * 1000
