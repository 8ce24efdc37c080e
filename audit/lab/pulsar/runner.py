"""The Pulsar lab as a collector: builds the simulated world from the cluster's `lab:` mapping and writes that
cluster's raw evidence, returning the CollectionReport and the cluster's ground truth.

Every lab cluster of an estate carries the same mapping, so each call builds the same world; the last world
built is kept per process so that collecting several clusters in a row simulates once."""
from __future__ import annotations

import json
import threading
from typing import Any

from audit.collectors.base import CollectionReport
from audit.lab.pulsar.emit import emit_cluster
from audit.lab.pulsar.truth import cluster_truth, world_truth
from audit.lab.pulsar.world import World, build_world


class UnknownLabCluster(ValueError):
    def __init__(self, name: str, known: tuple[str, ...]):
        self.name, self.known = name, known
        super().__init__(f"pulsar lab: cluster {name!r} is not part of the lab world (known: {', '.join(known)}); "
                         f"name the estate's lab clusters after them or set lab.clusters")


_lock = threading.Lock()
_cache: dict[str, tuple[World, dict[str, Any]]] = {}


def lab_world(lab: dict[str, Any] | None, as_of_ms: int) -> tuple[World, dict[str, Any]]:
    """(world, truth of every cluster) for a lab mapping at `as_of_ms`; memoised (one entry)."""
    key = json.dumps([lab or {}, as_of_ms], sort_keys=True, default=str)
    with _lock:
        if key not in _cache:
            world = build_world(lab, as_of_ms)
            _cache.clear()
            _cache[key] = (world, world_truth(world))
        return _cache[key]


def collect(cluster, sink, secrets, as_of_ms: int,
            thresholds: dict[str, int] | None = None) -> tuple[CollectionReport, dict[str, Any]]:
    """`cluster` is a PulsarCluster with source "lab"; `secrets` is unused (the lab has no credentials).
    `thresholds` (replicator_backlog_max, snapshot_max_age_s) are the estate's, which the audit applies: the
    ground truth judges by the same ones unless the lab mapping sets its own."""
    lab = dict(cluster.lab or {})
    for key, value in (thresholds or {}).items():
        lab.setdefault(key, value)
    world, everything = lab_world(lab, as_of_ms)
    if cluster.name not in world.clusters:
        raise UnknownLabCluster(cluster.name, world.cluster_names)
    report = emit_cluster(world, cluster.name, sink, cluster.dump)
    return report, cluster_truth(world, cluster.name, everything)
