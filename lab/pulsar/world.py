"""The Pulsar lab world: every lab cluster carrying the same mapping is a view of this one deterministic simulation.

    world = build_world(lab_mapping, as_of_ms)     # same mapping and as_of -> same world, byte for byte
    world.cluster_names, world.topics_of("east"), world.scenarios

`build_world` lays the configured scenarios (scenarios.py) out in a `World` through `WorldBuilder`
(builder.py, where both live; they are importable from here too): roles "a", "b", "c" stand for the first,
second and third configured cluster. Running it schedules every read of the collection and the rereads
(reads.py), so `world.reads` holds what each cluster's collection saw at its own instant."""
from __future__ import annotations

from typing import Any, Mapping

from lab.pulsar.builder import ROLES, ScenarioMeta, World, WorldBuilder
from lab.pulsar.config import PulsarLabConfig, parse_pulsar_lab
from lab.pulsar.pip33 import EARLIEST, LATEST, update_creates_at_earliest
from lab.pulsar.scenarios import SCENARIOS
from lab.pulsar.topic import TopicSettings

__all__ = ["ROLES", "ScenarioMeta", "World", "WorldBuilder", "build_world"]


def build_world(lab: Mapping[str, Any] | PulsarLabConfig | None, as_of_ms: int) -> World:
    config = lab if isinstance(lab, PulsarLabConfig) else parse_pulsar_lab(lab)
    world = World(config, as_of_ms)
    for name in config.scenarios:
        scenario = SCENARIOS[name]
        if len(scenario.roles) > len(config.clusters):
            continue  # a three-cluster scenario needs a third lab cluster
        roles = dict(zip(scenario.roles, config.clusters))
        tenant_ns = f"{config.tenant}/{scenario.namespace}"
        ttl_ms = config.ttl_ms(tenant_ns)
        meta = ScenarioMeta(name, f"persistent://{tenant_ns}/{scenario.topic}", scenario.description,
                            tuple(roles.values()), scenario.partitions)
        settings = TopicSettings(recent_pulsar=scenario.recent_pulsar, guava_ranges=scenario.guava_ranges,
                                 snapshot_frequency_ms=config.snapshot_frequency_ms,
                                 snapshot_timeout_ms=config.snapshot_timeout_s * 1000,
                                 snapshot_cache_size=config.snapshot_cache_size, message_ttl_ms=ttl_ms,
                                 snapshot_cache_models=tuple((c, config.cache_model(c).kind)
                                                             for c in config.clusters),
                                 missing_subscription_at=tuple(
                                     (c, EARLIEST if update_creates_at_earliest(config.broker_version_of(c))
                                      else LATEST) for c in config.clusters))
        builder = WorldBuilder(world, meta, roles, settings, scenario.partitions)
        world.scenarios.append(meta)
        scenario.build(builder, config)
        builder.start_controllers()
    world.run()
    return world
