"""The domain's findings, "not judged" items and metrics -> rows of the audit's output tables (Arrow on the driver).

Findings go to the shared VIOLATIONS table: `subject` = "<topic>-<partition>" (+ " broker <id>" when one replica is
concerned; MirrorMaker 2: "<group> <topic>-<partition> <source>-><target>"), `evidence` = JSON with the subject
keys, `offset_from`/`offset_to` (inclusive) and the rule's detail, so a reader (report, scorecard, repair) needs
nothing else. Coverage items keep their own table (metrics/kafka_coverage)."""
from __future__ import annotations

import json
from typing import Iterable

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import ArrayType, StructType

from audit.systems.kafka.domain.checks import CHECKS, COVERAGE
from audit.transforms.common import B, I, L, S, struct
from audit.systems.kafka.transforms.tables import SYSTEM

FOLLOWER = struct(("broker", I), ("divergence_offset", L), ("truncation_rule", S), ("truncation_rounds", I),
                  ("divergence_start", L), ("lag_lower_bound", L), ("lag_upper_bound", L), ("in_isr", B),
                  ("truncates", B))
# metrics/kafka_partitions: partition.metrics() of every partition with a collected replica, plus counts.
PARTITION_METRICS = struct(
    ("run_id", S), ("cluster", S), ("topic", S), ("partition", I), ("reference_broker", I), ("reference_rule", S),
    ("leader", I), ("leader_epoch", I), ("replica_count", I), ("collected_replicas", I), ("isr_size", I),
    ("under_replicated", B), ("offline", B), ("log_start_offset", L), ("log_end_offset", L), ("high_watermark", L),
    ("latest_epoch", I), ("min_divergence_offset", L), ("truncating_followers", I), ("max_lag", L),
    ("followers", ArrayType(FOLLOWER)),
    ("compacted", B), ("findings", I), ("not_judged", I))
# metrics/kafka_replicas: one row per judged replica: its offsets and what its batch headers showed.
REPLICA_METRICS = struct(
    ("run_id", S), ("cluster", S), ("topic", S), ("partition", I), ("broker", I), ("role", S),
    ("log_start_offset", L), ("log_end_offset", L), ("high_watermark", L), ("latest_epoch", I),
    ("epoch_entries", I), ("batches", L), ("v2_batches", L), ("legacy_batches", L), ("crc_invalid", L),
    ("first_mismatch_offset", L), ("mismatch_offsets", L), ("batch_epoch_violations", L), ("sequence_gaps", L))
# metrics/kafka_coverage: what could not be judged, and why (never a finding).
COVERAGE_TABLE = struct(
    ("run_id", S), ("cluster", S), ("topic", S), ("partition", I), ("broker", I), ("source", S), ("group", S),
    ("what", S), ("offset_from", L), ("offset_to", L), ("entry_count", L), ("detail", S))
# metrics/kafka_mm2_failover: one row per MirrorMaker 2 flow, consumer group and upstream partition.
MM2_FAILOVER = struct(
    ("run_id", S), ("cluster", S), ("source", S), ("group", S), ("topic", S), ("partition", I), ("rule", S),
    ("syncs", I), ("upstream_committed", L), ("translated", L), ("checkpoint_upstream", L),
    ("checkpoint_downstream", L), ("checkpoint_justified", B), ("target_committed", L), ("bounds_low", L),
    ("bounds_high", L), ("exact", B), ("redelivered_min", L), ("redelivered_max", L), ("skipped_min", L),
    ("skipped_max", L), ("source_read_at_ms", L), ("target_read_at_ms", L))


def arrow_schema(schema: StructType) -> pa.Schema:
    return to_arrow_schema(schema)


def table(rows: list[dict], schema: StructType) -> pa.Table:
    names = schema.fieldNames()
    return pa.Table.from_pylist([{n: r.get(n) for n in names} for r in rows], schema=arrow_schema(schema))


def _json(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def subject(f: dict) -> str:
    if f.get("group") is not None:
        return f"{f['group']} {f['topic']}-{f['partition']} {f.get('source')}->{f['cluster']}"
    broker = f.get("broker")
    return f"{f['topic']}-{f['partition']}" + ("" if broker is None else f" broker {broker}")


def violation(run_id: str, f: dict) -> dict:
    check = f["check"]
    keys = {k: f.get(k) for k in ("topic", "partition", "broker", "group", "source", "offset_from", "offset_to")
            if f.get(k) is not None or k in ("offset_from", "offset_to")}
    return {"run_id": run_id, "system": SYSTEM, "cluster": f["cluster"], "check": check,
            "severity": CHECKS[check].severity, "subject": subject(f), "entry_count": f.get("entry_count"),
            "message": f.get("message"), "evidence": _json({**(f.get("detail") or {}), **keys})}


def coverage(run_id: str, item: dict) -> dict:
    """A coverage row from a domain "coverage" item or an item of the transforms' own (same keys)."""
    row = {k: item.get(k) for k in COVERAGE_TABLE.fieldNames()}
    row.update(run_id=run_id, what=item.get("what") or item.get("message"), detail=_json(item.get("detail") or {}))
    return row


def split(run_id: str, items: Iterable[dict]) -> tuple[list[dict], list[dict]]:
    """(violation rows, coverage rows) of domain items (check == "coverage" marks the latter)."""
    violations, covered = [], []
    for item in items:
        if item["check"] == COVERAGE:
            covered.append(coverage(run_id, item))
        else:
            violations.append(violation(run_id, item))
    return violations, covered

