"""The Pulsar lab's world and the API scenarios lay their topics out with.

    World: the clusters of one deterministic simulation, its clock and random streams, and the scenarios laid
    out in it; WorldBuilder: what a scenario (scenarios.py) calls, with roles "a", "b", "c" standing for the
    first, second and third configured cluster.

world.py's `build_world` puts the two together: this module knows no scenario."""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Mapping

from lab.pulsar.config import QUIET, PulsarLabConfig
from lab.pulsar.consumers import ConsumerPlan, Producer, Subscription
from lab.pulsar.model import Clock, ClusterLedgerIds
from lab.pulsar.pip33 import Controller
from lab.pulsar.reads import ReadPlan
from lab.pulsar.replication import TICK_MS, Replicator
from lab.pulsar.topic import ClusterState, Topic, TopicSettings

ROLES = ("a", "b", "c")
QUIET_END_MS = 41_000   # traffic: quiet -- producers stop here (offset from the world's start)


@dataclass
class ScenarioMeta:
    name: str
    topic: str  # full name (the partitioned topic's name when partitioned)
    description: str
    clusters: tuple[str, ...]
    partitions: int = 0
    topics: list[str] = field(default_factory=list)  # every topic (partition) of the scenario
    faults: list[dict[str, Any]] = field(default_factory=list)


class World:
    def __init__(self, config: PulsarLabConfig, as_of_ms: int):
        self.config, self.as_of_ms = config, as_of_ms
        self.t0 = as_of_ms - config.duration_ms
        self.rng = random.Random(f"pulsar-lab:{config.seed}")
        self.clock = Clock(self.t0)
        self.clusters: dict[str, ClusterState] = {}
        for i, name in enumerate(config.clusters):
            self.clusters[name] = ClusterState(name, ClusterLedgerIds(self.sub_rng("ledger-ids", name)),
                                               f"10.{20 + i}.{self.rng.randrange(1, 250)}.{self.rng.randrange(2, 250)}")
        self.scenarios: list[ScenarioMeta] = []
        self.partitioned: dict[str, int] = {}  # partitioned topic name -> partitions
        self.reads: ReadPlan | None = None
        self._ports = 40_000

    @property
    def cluster_names(self) -> tuple[str, ...]:
        return tuple(self.clusters)

    def sub_rng(self, *parts: object) -> random.Random:
        """An independent, reproducible stream per component: adding one never shifts another's draws."""
        return random.Random(":".join(["pulsar-lab", str(self.config.seed), *map(str, parts)]))

    def next_port(self) -> int:
        self._ports += self.rng.randint(1, 97)
        return self._ports

    def topics_of(self, cluster: str) -> list[Topic]:
        return [self.clusters[cluster].topics[n] for n in sorted(self.clusters[cluster].topics)]

    def topic(self, cluster: str, name: str) -> Topic | None:
        return self.clusters[cluster].topics.get(name)

    @property
    def production_end_ms(self) -> int:
        """Where producers stop by default (an offset from t0): as_of, or 41 s into a quiet world."""
        return QUIET_END_MS if self.config.traffic == QUIET else self.config.duration_ms

    def run(self) -> None:
        """Schedule every read of the collection and the reread (reads.py), then simulate until as_of."""
        self.reads = ReadPlan(self)
        self.clock.run_until(self.as_of_ms)


class WorldBuilder:
    """What a scenario uses to lay out its topic. Every call applies to each partition of the topic."""

    def __init__(self, world: World, meta: ScenarioMeta, roles: Mapping[str, str], settings: TopicSettings,
                 partitions: int):
        self.world, self.meta, self.roles, self.settings = world, meta, dict(roles), settings
        names = [meta.topic] if partitions == 0 else [f"{meta.topic}-partition-{i}" for i in range(partitions)]
        meta.topics.extend(names)
        if partitions:
            world.partitioned[meta.topic] = partitions
        cfg = world.config
        self.parts: list[dict[str, Topic]] = [
            {role: Topic(world.clock, world.clusters[cluster], name, settings,
                         world.sub_rng("topic", cluster, name), cfg.ledger_max_entries, Controller)
             for role, cluster in self.roles.items()} for name in names]
        self.until = world.as_of_ms
        for part in self.parts:
            for topic in part.values():
                topic.until_ms = self.until

    @property
    def t0(self) -> int:
        return self.world.t0

    def cluster(self, role: str) -> str:
        return self.roles[role]

    def link(self, src: str, dst: str, latency_ms: int = 40, rate_per_s: int | None = None,
             disconnect_at_ms: int | None = None, reconnect_at_ms: int | None = None) -> None:
        for i, part in enumerate(self.parts):
            rep = Replicator(part[src], part[dst], latency_ms, rate_per_s, self.world.next_port())
            phase = self.world.sub_rng("repl-phase", part[src].name, src, dst).randrange(TICK_MS)
            rep.start(self.t0 + phase, self.until)
            if disconnect_at_ms is not None:
                self.world.clock.at(self.t0 + disconnect_at_ms, rep.disconnect)
            if reconnect_at_ms is not None:
                self.world.clock.at(self.t0 + reconnect_at_ms, rep.reconnect)

    def reset_cursor(self, role: str, subscription: str, at_ms: int, back_ms: int) -> None:
        """At `at_ms` an operator resets the subscription by time to `back_ms` before then (topics reset-cursor)."""
        for part in self.parts:
            sub = part[role].subscriptions[subscription]
            self.world.clock.at(self.t0 + at_ms, sub.reset_to_time, self.t0 + at_ms - back_ms)

    def subscription(self, role: str, name: str, replicated: bool = True) -> None:
        for part in self.parts:
            Subscription(part[role], name, replicated)

    def producer(self, role: str, per_40s: int, start_ms: int = 1_000, end_ms: int | None = None,
                 delayed: dict[int, int] | None = None, restarts_ms: tuple[int, ...] = (),
                 local_only: float = 0.0) -> str:
        """`per_40s` messages per 40 s from start_ms to end_ms (default: the world's production end). Returns the
        producer name (the same on every partition, as a partitioned producer's is)."""
        cluster = self.cluster(role)
        name = f"{cluster}-{self.world.rng.randrange(10, 99)}-{len(self.world.scenarios)}"
        end = self.world.production_end_ms if end_ms is None else end_ms
        count = per_40s * (end - start_ms) // 40_000
        for part in self.parts:
            prod = Producer(part[role], name, self.world.sub_rng("producer", part[role].name, name))
            prod.schedule(self.t0, start_ms, end, count, delayed, restarts_ms, local_only)
        return name

    def consumer(self, role: str, subscription: str, plan: ConsumerPlan) -> None:
        for part in self.parts:
            topic = part[role]
            rng = self.world.sub_rng("consumer", topic.cluster_name, topic.name, subscription)
            address = f"/10.{rng.randrange(100, 200)}.{rng.randrange(0, 250)}.{rng.randrange(2, 250)}:" \
                      f"{self.world.next_port()}"
            topic.subscriptions[subscription].attach(plan, rng, self.until, self.t0, address)

    def start_controllers(self) -> None:
        """Topics with replicated subscriptions and replicators run a PIP-33 controller."""
        freq = self.world.config.snapshot_frequency_ms
        for part in self.parts:
            for topic in part.values():
                if topic.replicators and topic.has_replicated_subscription():
                    phase = self.world.sub_rng("ctl-phase", topic.cluster_name, topic.name).randrange(freq)
                    topic.ensure_controller().start(self.t0 + freq + phase, self.until)

    def fault(self, kind: str, **details: Any) -> None:
        self.meta.faults.append({"kind": kind, "topic": self.meta.topic, **details})
