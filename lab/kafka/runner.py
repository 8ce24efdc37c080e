"""The Kafka lab as a collector: simulates the world of the cluster's `lab:` mapping up to as_of and collects the
cluster with the real collectors, returning the CollectionReport and the cluster's ground truth.

- Each broker's log dirs, as the simulation captured them at the broker's scan instant, are written in their real
  formats into a temporary directory and read by the real scanner (audit/systems/kafka/collect/logdir.py scan_log_dir),
  which stores them under brokers/<id>/dir<d>/ (scan.json names the simulated broker's log dir, not the temporary
  one). The temporary directory is removed afterwards.
- The admin documents: the cluster as captured at the collection's start is served on loopback
  (admin_server.AdminServer) and read by the real admin collector (audit/systems/kafka/collect/admin.py). The brokers
  listen on ephemeral ports; metadata.json records the address each broker advertises in the simulated cluster
  (`b<id>.<cluster>.lab:9092`) so that the same mapping gives the same bytes.
- MirrorMaker 2 flows into the cluster are written straight into the sink in the reader's layout (mm2_read.py).

An incident check (`scope`: audit.contracts.Scope with subject patterns): the admin collector and the scanner
get the scope as in production (only the wanted topic-partitions are asked about or read; Metadata, each dir's
own files and the MirrorMaker 2 documents stay whole); the system's `collect` also wraps the sink and scopes the
ground truth (audit/systems/kafka/system.py).

Every read instant is virtual: the scanner's and the admin collector's clocks read the instant of their read, so
the same mapping, thresholds and as_of give the same raw bytes and the same truth, in any process. Clusters of
one mapping share one simulated world (memoised per process: collecting its clusters in a row simulates once)."""
from __future__ import annotations

import json
import os
import tempfile
import threading
from collections import OrderedDict
from types import SimpleNamespace
from typing import Any, Mapping

from audit.collectors.base import CollectionReport
from audit.systems.kafka.collect.admin import collect_admin
from audit.systems.kafka.collect.logdir import SCAN_FILE, scan_log_dir
from audit.config.secrets import SecretResolver
from lab.kafka.admin_server import AdminServer
from lab.kafka.config import KafkaLabConfig, parse_kafka_lab
from lab.kafka.disk import log_dir_path
from lab.kafka.ground_truth import lab_truth
from lab.kafka.truth import ReadAt
from lab.kafka.world import World, build_world

SYSTEM = "kafka"
ADMIN_TIMEOUT_S = 5
ADVERTISED_PORT = 9092
TRUTH_ONLY = ("follower_lag_max", "mm2_redelivery_tolerance")   # what only the ground truth reads
_WORLDS_KEPT = 4


class UnknownLabCluster(ValueError):
    def __init__(self, name: str, known: tuple[str, ...]):
        self.name, self.known = name, known
        super().__init__(f"kafka lab: cluster {name!r} is not part of the lab world (known: {', '.join(known)}); "
                         f"name the estate's lab clusters after them or set lab.clusters")


_lock = threading.Lock()
_worlds: "OrderedDict[str, World]" = OrderedDict()


def split_inputs(lab: Mapping[str, Any] | None, thresholds: Any) -> tuple[dict, dict]:
    """(simulation mapping, truth settings): the estate's thresholds (a KafkaThresholds, or a mapping) are what the
    ground truth judges by; `follower_lag_max` / `mm2_redelivery_tolerance` in the lab mapping win over them."""
    lab = dict(lab or {})
    truth = {"follower_lag_max": 10_000, "mm2_redelivery_tolerance": 0}
    if thresholds is not None:
        get = thresholds.get if isinstance(thresholds, Mapping) else lambda k, d=None: getattr(thresholds, k, d)
        truth["follower_lag_max"] = get("kafka_follower_lag_max", truth["follower_lag_max"])
        truth["mm2_redelivery_tolerance"] = get("kafka_mm2_redelivery_tolerance", truth["mm2_redelivery_tolerance"])
    for key in TRUTH_ONLY:
        if key in lab:
            truth[key] = lab.pop(key)
    return lab, truth


def lab_world(config: KafkaLabConfig, as_of_ms: int, cluster: str) -> World:
    """The simulated component of `cluster` (memoised: a few worlds per process)."""
    if cluster not in config.cluster_names:
        raise UnknownLabCluster(cluster, config.cluster_names)
    component = config.component(cluster)
    key = json.dumps([repr(config), as_of_ms, component])
    with _lock:
        world = _worlds.get(key)
        if world is None:
            world = build_world(config, as_of_ms, cluster)
            _worlds[key] = world
            while len(_worlds) > _WORLDS_KEPT:
                _worlds.popitem(last=False)
        return world


class _ScanSink:
    """Passes the scanner's keys on, naming the simulated log dir in scan.json instead of the temporary one."""

    def __init__(self, sink, tmp_path: str, real_path: str):
        self.sink, self.tmp_path, self.real_path = sink, tmp_path, real_path

    def __call__(self, key: str, data: bytes) -> None:
        if key.endswith("/" + SCAN_FILE):
            doc = json.loads(data)
            doc["log_dir"] = self.real_path
            data = json.dumps(doc, indent=1).encode()
        self.sink.put(key, data)


class _AdminSink:
    """metadata.json with the brokers' advertised addresses instead of the loopback ports."""

    def __init__(self, sink, cluster: str):
        self.sink, self.cluster = sink, cluster

    def put(self, key: str, data: bytes) -> None:
        if key == "admin/metadata.json":
            doc = json.loads(data)
            for b in doc.get("brokers", []):
                b["host"], b["port"] = f"b{b['id']}.{self.cluster}.lab", ADVERTISED_PORT
            data = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
        self.sink.put(key, data)


def _write_dir(root: str, files: dict[str, bytes]) -> None:
    os.makedirs(root)
    for rel, data in sorted(files.items()):
        path = os.path.join(root, *rel.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)


def scan_brokers(world: World, name: str, sink, report: CollectionReport,
                 scope: Any = None) -> dict[int, dict[int, ReadAt]]:
    """Every broker's captured log dirs through the real scanner; returns the read instants per broker and dir."""
    col = world.collections[name]
    reads: dict[int, dict[int, ReadAt]] = {}
    with tempfile.TemporaryDirectory(prefix="kafka-lab-") as tmp:
        for broker, image in sorted(col.images.items()):
            for d, files in enumerate(image.dirs):
                path = os.path.join(tmp, f"broker-{broker}", f"dir{d}")
                _write_dir(path, files)
                result = scan_log_dir(path, broker, _ScanSink(sink, path, log_dir_path(d)), dir_index=d,
                                      now_ms=lambda at=image.at_ms: at, scope=scope)
                for k, n in result.counts.items():
                    report.count(k, n)
                for gap in result.gaps:
                    report.gap(gap.source.replace(path, log_dir_path(d)), gap.what, gap.error)
                reads.setdefault(broker, {})[d] = ReadAt(result.scan["checkpoints_read_at_ms"],
                                                         result.scan["listed_at_ms"])
    return reads


def read_admin(world: World, name: str, sink, report: CollectionReport, scope: Any = None) -> None:
    """The real admin collector against the captured cluster on loopback, at the admin read instant."""
    col = world.collections[name]
    state = col.served
    if state is None or not state.brokers:
        report.gap(f"{name} admin", "admin endpoint (nothing read)", "no broker alive when the collection started")
        return
    with AdminServer(state, f"kafka-lab-{name}") as server:
        cluster = SimpleNamespace(name=name, bootstrap_servers=server.bootstrap_servers(), security_protocol=None,
                                  sasl=None, timeouts=SimpleNamespace(request_s=ADMIN_TIMEOUT_S))
        try:
            collect_admin(cluster, _AdminSink(sink, name), report, SecretResolver(environ={}),
                          now_ms=lambda: col.admin_at_ms, scope=scope)
        except Exception as exc:     # a collector failure is a coverage gap here as it would be in production
            report.gap(f"{name} admin", "admin documents (read stopped)", f"{type(exc).__name__}: {exc}")


def write_mm2(world: World, name: str, cluster, sink, report: CollectionReport) -> None:
    """The flows into this cluster, under the estate's source alias for them (default: the source's name)."""
    col = world.collections[name]
    declared = {m.source_cluster: m for m in (getattr(cluster, "mirrors", None) or ())}
    for source, read in sorted(col.mm2.items()):
        mirror = declared.get(source)
        alias = mirror.source_alias if mirror is not None and mirror.source_alias else source
        for file, data in sorted(read.docs.items()):
            sink.put(f"mm2/{alias}/{file}", data)
            report.count("keys_stored")
        report.count("mm2_flows")
    for source, mirror in sorted(declared.items()):
        if source not in col.mm2:
            report.gap(f"mirror {mirror.source_alias or source}", "MirrorMaker 2 flow (nothing read)",
                       f"the lab world has no flow {source} -> {name}")


def collect(cluster, sink, secrets, as_of_ms: int, thresholds: Any = None,
            scope: Any = None) -> tuple[CollectionReport, dict]:
    """`cluster` is a KafkaCluster with source "lab"; `secrets` is unused (the lab has no credentials);
    `thresholds`: the estate's KafkaThresholds (or a mapping of its keys), which the ground truth judges by;
    `scope`: an incident check's Scope (None: everything; the truth returned is the whole cluster's either way)."""
    del secrets
    lab, settings = split_inputs(cluster.lab, thresholds)
    config = parse_kafka_lab(lab)
    world = lab_world(config, as_of_ms, cluster.name)
    report = CollectionReport(SYSTEM, cluster.name)
    read_admin(world, cluster.name, sink, report, scope)
    reads = scan_brokers(world, cluster.name, sink, report, scope)
    write_mm2(world, cluster.name, cluster, sink, report)
    return report, lab_truth(world, cluster.name, reads, settings)
