"""Kafka audit on Spark: the kafka_* tables -> Kafka's folder of findings/violations and
metrics/kafka_partitions, metrics/kafka_replicas, metrics/kafka_mm2_failover, metrics/kafka_coverage.

Partitions (state.py, replicas.py, batch_state.py): Spark computes every replica's state from its batch headers, epoch
checkpoint and checkpointed offsets; the driver builds one PartitionState per partition and the domain
(audit/systems/kafka/domain/partition.py) gives its findings, "not judged" items and metrics. MirrorMaker 2
(mm2_state.py): Spark assembles each group's offsets and the sync and checkpoint records; translation and failover
bounds are computed per upstream partition and the domain judges the group-partitions that need it.

An incident check (`request.scope` with subject patterns, docs/incident.md): only the wanted topic-partitions are
judged (state.compute), and of MirrorMaker 2 only the group-partitions whose upstream or remote topic-partition is
wanted (mm2_state.audit); every metric, finding and "not judged" item is theirs.

The outputs are built on the driver (a few hundred thousand rows at most) and written as one Parquet file per
folder; each folder is replaced as a whole, like common.write does."""
from __future__ import annotations

import gc
import os
import shutil
from contextlib import contextmanager
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from audit.contracts import AuditRequest
from audit.systems.kafka.domain.checks import COVERAGE
from audit.systems.kafka.domain.partition import Settings, evaluate
from audit.systems.kafka.domain.truncation import truncation_policy_for
from audit.transforms.common import VIOLATIONS, violations_path
from audit.systems.kafka.transforms import assignments
from audit.systems.kafka.transforms import audit_rows as rows
from audit.systems.kafka.transforms import mm2_state, state
from audit.systems.kafka.transforms.batch_state import FOLLOWER, NONE, REFERENCE
from audit.systems.kafka.transforms.replicas import Assembled, states
from audit.systems.kafka.transforms.tables import SYSTEM

DEFAULT_LAG_MAX = 10_000      # audit/systems/kafka/config.py KafkaThresholds' defaults, for requests without them
DEFAULT_REDELIVERY_TOLERANCE = 0
DEFAULT_REPLICA_MISSING_SETTLE_MS = 60_000
OUTPUTS = {"kafka_partitions": rows.PARTITION_METRICS, "kafka_replicas": rows.REPLICA_METRICS,
           "kafka_mm2_failover": rows.MM2_FAILOVER, "kafka_coverage": rows.COVERAGE_TABLE}


def settings_by_cluster(request: AuditRequest) -> tuple[dict[str, Settings], Settings]:
    """Per cluster: its declared broker version's truncation policy and the lag limit; the default for clusters the
    request does not declare."""
    lag = getattr(request.thresholds, "kafka_follower_lag_max", DEFAULT_LAG_MAX)
    out = {}
    for c in request.clusters:
        version = getattr(c, "version", None)
        out[c.name] = Settings(truncation_policy_for(version) if version else "leader-epoch", lag)
    return out, Settings("leader-epoch", lag)


def _nullable(a: np.ndarray) -> pa.Array:
    return pa.array(a, type=pa.int64(), mask=a == NONE)


def replica_metrics(run_id: str, assembled: Assembled, k: dict[str, np.ndarray]) -> pa.Table:
    """metrics/kafka_replicas, column by column."""
    c, kept = assembled.cols, assembled.kept
    role = np.where(c["role"] == REFERENCE, "reference", np.where(c["role"] == FOLLOWER, "follower", "unjudged"))
    data = {"run_id": pa.array([run_id] * kept.num_rows, pa.string()), "cluster": kept.column("cluster"),
            "topic": kept.column("topic"), "partition": kept.column("partition"), "broker": kept.column("broker"),
            "role": pa.array(role.tolist(), pa.string()), "log_start_offset": pa.array(c["log_start"]),
            "log_end_offset": pa.array(c["log_end_offset"]), "high_watermark": _nullable(c["high_watermark"]),
            "latest_epoch": _nullable(c["latest_epoch"]), "epoch_entries": pa.array(np.diff(c["w_off"])),
            **{name: pa.array(k[name]) for name in ("batches", "v2_batches", "legacy_batches", "crc_invalid",
                                                     "mismatch_offsets", "batch_epoch_violations",
                                                     "sequence_gaps")},
            "first_mismatch_offset": _nullable(k["first_mismatch_offset"])}
    schema = rows.arrow_schema(rows.REPLICA_METRICS)
    return pa.Table.from_arrays([data[f.name].cast(f.type) for f in schema], schema=schema)


def declared_brokers(request: AuditRequest) -> dict[str, tuple[int, ...]]:
    """cluster -> the brokers its estate entry declares (`brokers:`; empty: not declared)."""
    return {c.name: tuple(getattr(c, "brokers", None) or ()) for c in request.clusters}


def extra_coverage(assembled: Assembled, brokers: dict[str, tuple[int, ...]]) -> list[dict]:
    """Not judged beyond what the domain says: partitions with one replica's evidence only. With metadata naming
    more replicas, one item per partition. Without metadata, a partition found on one broker has one replica when
    the estate declares the cluster's brokers and every one of them had its log dirs read; otherwise one item per
    cluster says how many partitions the cross-replica rules could not run for, and what would settle it."""
    out, unsettled = [], {}
    broker = assembled.cols["broker"]
    present: dict[str, set[int]] = {}
    for p in assembled.partitions:
        present.setdefault(p.cluster, set()).update(broker[p.first:p.stop].tolist())
    for p in assembled.partitions:
        if p.stop - p.first != 1:
            continue
        expected = len(p.metadata.replicas) if p.metadata is not None and p.metadata.replicas else None
        if expected is not None:
            if expected != 1:
                out.append({"cluster": p.cluster, "topic": p.topic, "partition": p.partition,
                            "broker": int(broker[p.first]), "what": "one replica's evidence only: nothing to "
                            "compare it with", "entry_count": 0, "detail": {
                                "assigned_replicas": list(p.metadata.replicas)}})
            continue
        declared = set(brokers.get(p.cluster) or ())
        if declared and declared <= assembled.scanned.get(p.cluster, set()) | present.get(p.cluster, set()):
            continue   # every broker of the cluster was read: found on one broker only, it has one replica
        unsettled.setdefault(p.cluster, []).append(p)
    for cluster, parts in sorted(unsettled.items()):
        declared = sorted(brokers.get(cluster) or ())
        read = sorted(assembled.scanned.get(cluster, set()) | present.get(cluster, set()))
        missing = sorted(set(declared) - set(read))
        settle = f"add the log dirs of broker(s) {', '.join(map(str, missing))} (declared in brokers:)" if declared \
            else "add the other brokers' log dirs, or declare the cluster's brokers: in the estate"
        out.append({"cluster": cluster, "topic": None, "partition": None, "broker": None,
                    "what": f"{len(parts)} partition(s) found on one broker only and no metadata: cross-replica "
                            f"rules not run; {settle}", "entry_count": 0,
                    "detail": {"partitions": len(parts), "brokers_read": read, "brokers_declared": declared,
                               "examples": [f"{p.topic}-{p.partition}" for p in parts[:5]]}})
    return out


@contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Around the per-partition loop: it builds millions of small acyclic objects (replica states, caches, rows)
    that the cyclic collector would scan again and again as their number grows; reference counting frees them."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def declared_log_dirs(request: AuditRequest) -> dict[str, dict[int, int]]:
    """cluster -> broker -> how many log dirs the estate declares for it (`log_dirs:`; none for lab and imports)."""
    out: dict[str, dict[int, int]] = {}
    for c in request.clusters:
        for d in getattr(c, "log_dirs", None) or ():
            out.setdefault(c.name, {})[d.broker] = out.get(c.name, {}).get(d.broker, 0) + 1
    return out


def judge_partitions(run_id: str, assembled: Assembled, kernel: pa.Table, by_cluster: dict[str, Settings],
                     default: Settings, brokers: dict[str, tuple[int, ...]] | None = None,
                     log_dirs: dict[str, dict[int, int]] | None = None,
                     settle_ms: int = DEFAULT_REPLICA_MISSING_SETTLE_MS) -> dict:
    """{output: rows or Arrow table} of the partition audit: violations, coverage, kafka_partitions,
    kafka_replicas (`brokers`: declared_brokers; `log_dirs`: declared_log_dirs), and the assigned replicas no log
    dir holds (transforms/assignments.py)."""
    with _no_cyclic_gc():
        partition_states, k = states(assembled, kernel)
        out = {"violations": [], "kafka_coverage": [rows.coverage(run_id, c) for c in
                                                    assembled.coverage + extra_coverage(assembled, brokers or {})],
               "kafka_partitions": []}
        for st in partition_states:
            found, m = evaluate(st, by_cluster.get(st.cluster, default))
            violations, covered = rows.split(run_id, found)
            out["violations"] += violations
            out["kafka_coverage"] += covered
            out["kafka_partitions"].append({**m, "run_id": run_id, "compacted": st.compacted,
                                            "findings": len(violations), "not_judged": len(covered)})
        strays, _ = rows.split(run_id, assembled.findings)
        out["violations"] += strays
        _assignment_rows(run_id, assembled, out, log_dirs or {}, settle_ms)
    out["kafka_replicas"] = replica_metrics(run_id, assembled, k)
    return out


def _assignment_rows(run_id: str, assembled: Assembled, out: dict, log_dirs: dict[str, dict[int, int]],
                     settle_ms: int) -> None:
    """Adds to `out` the assignment check's findings and items, a kafka_partitions row for each partition only the
    metadata knows, and their counts to every partition's row."""
    judged = assembled.cols["pkey"][[p.first for p in assembled.partitions]] if assembled.partitions else \
        np.zeros(0, np.int64)
    items, unread = assignments.judge(assembled.metadata, assembled.found,
                                      assignments.broker_reads(assembled.log_dirs, log_dirs), judged, settle_ms)
    counts: dict[tuple, list[int]] = {}
    for item in items:
        n = counts.setdefault((item["cluster"], item["topic"], item["partition"]), [0, 0])
        n[item["check"] == COVERAGE] += 1
    violations, covered = rows.split(run_id, items)
    out["violations"] += violations
    out["kafka_coverage"] += covered
    out["kafka_partitions"] += [{**m, "run_id": run_id, "compacted": None, "findings": 0, "not_judged": 0}
                                for m in unread]
    for m in out["kafka_partitions"]:
        found, not_judged = counts.get((m["cluster"], m["topic"], m["partition"]), (0, 0))
        m["findings"] += found
        m["not_judged"] += not_judged


def write_arrow(table: pa.Table, path: str) -> None:
    """Replace the folder `path` with `table` as one Parquet file (written aside, then swapped in)."""
    staging = path.rstrip("/") + ".writing"
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging)
    pq.write_table(table, os.path.join(staging, "part-00000.parquet"))
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(os.path.dirname(path.rstrip("/")), exist_ok=True)
    os.replace(staging, path)


def run(spark: SparkSession, tables_dir: str, root: str, request: AuditRequest) -> dict:
    """Writes Kafka's folder of findings/violations and metrics/kafka_{partitions,replicas,mm2_failover,coverage};
    returns {kafka_partitions, kafka_replicas, kafka_mm2_failover, kafka_coverage, kafka_violations: rows,
    kafka_violations_by_check}."""
    by_cluster, default = settings_by_cluster(request)
    assembled, kernel = state.compute(spark, tables_dir, request.scope)
    settle = getattr(request.thresholds, "kafka_replica_missing_settle_ms", DEFAULT_REPLICA_MISSING_SETTLE_MS)
    out = judge_partitions(request.run_id, assembled, kernel, by_cluster, default, declared_brokers(request),
                           declared_log_dirs(request), settle)
    tolerance = getattr(request.thresholds, "kafka_mm2_redelivery_tolerance", DEFAULT_REDELIVERY_TOLERANCE)
    mm2 = mm2_state.audit(spark, tables_dir, request.run_id, request.clusters, tolerance, request.scope)
    out["violations"] += mm2["violations"]
    out["kafka_coverage"] += mm2["coverage"]
    out["kafka_mm2_failover"] = mm2["failover"]
    tables = {name: out[name] if isinstance(out[name], pa.Table) else rows.table(out[name], schema)
              for name, schema in OUTPUTS.items()}
    for name, table in tables.items():
        write_arrow(table, os.path.join(root, "metrics", name))
    write_arrow(rows.table(out["violations"], VIOLATIONS), violations_path(root, SYSTEM))
    by_check: dict[str, int] = {}
    for v in out["violations"]:
        by_check[v["check"]] = by_check.get(v["check"], 0) + 1
    return {**{name: t.num_rows for name, t in tables.items()}, "kafka_violations": len(out["violations"]),
            "kafka_violations_by_check": by_check}
