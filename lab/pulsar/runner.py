"""The Pulsar lab as a collector: builds the simulated world from the cluster's `lab:` mapping and writes what that
cluster's collection read (at its own instant, reads.py), returning the CollectionReport and the cluster's ground
truth; `reread` writes what the reread stage read of every lab cluster.

Lab clusters carrying the same mapping are views of one world, so each call builds the same world (in another
process too: same mapping, thresholds and as_of, same bytes); the last world built is kept per process so that
collecting its clusters in a row simulates once, and every world's rereads (small) are kept for the reread stage."""
from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any, Mapping

from audit.collectors.base import CollectionReport
from audit.contracts import RereadRequest
from audit.systems.pulsar.formats.read_instant import REREAD_BODY, REREADS
from lab.pulsar.config import estate_inputs
from lab.pulsar.emit import emit_collected, emit_rereads
from lab.pulsar.truth import cluster_truth, world_truth
from lab.pulsar.world import World, build_world

STATS_INTERNAL = "/stats-internal.json"


class UnknownLabCluster(ValueError):
    def __init__(self, name: str, known: tuple[str, ...]):
        self.name, self.known = name, known
        super().__init__(f"pulsar lab: cluster {name!r} is not part of the lab world (known: {', '.join(known)}); "
                         f"name the estate's lab clusters after them or set lab.clusters")


_lock = threading.Lock()
_cache: dict[str, tuple[World, dict[str, Any]]] = {}
_rereads: "OrderedDict[str, dict[str, dict[str, bytes]]]" = OrderedDict()   # world key -> cluster -> key -> bytes
_REREADS_KEPT = 64


class _Keys(dict):
    def put(self, relative_key: str, data: bytes) -> None:
        self[relative_key] = data


TRUTH_ONLY = ("replicator_backlog_max", "snapshot_max_age_s", "redelivery_tolerance")   # the simulation ignores them


def _key(lab: Mapping[str, Any] | None, as_of_ms: int, simulation: bool = False) -> str:
    """The world's key (`simulation`: only what the simulated brokers depend on: the rereads' key)."""
    lab = {k: v for k, v in (lab or {}).items() if not (simulation and k in TRUTH_ONLY) and v != {}}
    return json.dumps([lab, as_of_ms], sort_keys=True, default=str)


def lab_world(lab: Mapping[str, Any] | None, as_of_ms: int) -> tuple[World, dict[str, Any]]:
    """(world, truth of every cluster) for a lab mapping at `as_of_ms`; memoised (one entry)."""
    key = _key(lab, as_of_ms)
    with _lock:
        if key not in _cache:
            world = build_world(dict(lab or {}), as_of_ms)
            _cache.clear()
            _cache[key] = (world, world_truth(world))
            _rereads[_key(lab, as_of_ms, simulation=True)] = {c: _reread_bytes(world, c) for c in world.cluster_names}
            while len(_rereads) > _REREADS_KEPT:
                _rereads.popitem(last=False)
        return _cache[key]


def _reread_bytes(world: World, cluster: str) -> dict[str, bytes]:
    keys = _Keys()
    emit_rereads(world, cluster, keys)
    return dict(keys)


def lab_inputs(lab: Mapping[str, Any] | None, thresholds: Any) -> dict[str, Any]:
    """The cluster's mapping with the estate's thresholds (a PulsarThresholds, or lab keys) where it sets none: the
    ground truth judges by what the audit applies, and the simulated brokers run the estate's message TTL."""
    merged = dict(lab or {})
    for key, value in estate_inputs(thresholds).items():
        merged.setdefault(key, value)
    return merged


def collect(cluster, sink, secrets, as_of_ms: int, thresholds: Any = None) -> tuple[CollectionReport, dict[str, Any]]:
    """`cluster` is a PulsarCluster with source "lab"; `secrets` is unused (the lab has no credentials).
    `thresholds`: the estate's (a PulsarThresholds, or lab keys such as replicator_backlog_max), which the audit
    applies: the ground truth judges by the same ones unless the lab mapping sets its own."""
    world, everything = lab_world(lab_inputs(cluster.lab, thresholds), as_of_ms)
    if cluster.name not in world.clusters:
        raise UnknownLabCluster(cluster.name, world.cluster_names)
    report = emit_collected(world, cluster.name, sink, cluster.dump)
    return report, cluster_truth(world, cluster.name, everything)


def _collected_topics(keys: list[str]) -> set[str]:
    """Full names of the topics whose internal stats a cluster's collection stored."""
    out = set()
    for k in keys:
        if k.startswith("topics/") and k.endswith(STATS_INTERNAL) and f"/{REREADS}/" not in k:
            tenant, ns, local = k[len("topics/"):-len(STATS_INTERNAL)].split("/", 2)
            out.add(f"persistent://{tenant}/{ns}/{local}")
    return out


def reread(req: RereadRequest) -> dict[str, CollectionReport]:
    """The reread stage for lab clusters: the reads of every collected topic's internal stats the simulation made
    after its last collection (two passes), written under `rereads/<pass>/`. Topics a cluster's collection did not
    store are not reread; a cluster outside its world is a gap."""
    out: dict[str, CollectionReport] = {}
    for cluster in req.clusters:
        report = CollectionReport("pulsar", cluster.name)
        out[cluster.name] = report
        key = _key(lab_inputs(cluster.lab, req.thresholds), req.as_of_ms, simulation=True)
        with _lock:
            stored = _rereads.get(key)
        if stored is None:
            lab_world(lab_inputs(cluster.lab, req.thresholds), req.as_of_ms)
            with _lock:
                stored = _rereads[key]
        if cluster.name not in stored:
            report.gap(f"pulsar/{cluster.name}", "reread", f"cluster {cluster.name!r} is not part of its lab world")
            continue
        topics = _collected_topics(req.collected(cluster.name))
        sink = req.sink_for(cluster.name)
        for k, data in sorted(stored[cluster.name].items()):
            topic = "persistent://" + k[len("topics/"):].split(f"/{REREADS}/", 1)[0]
            if topic in topics:
                sink.put(k, data)
                if k.endswith(REREAD_BODY):
                    report.count("rereads")
    return out
