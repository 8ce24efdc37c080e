"""KRaft evidence -> kafka_partitions rows of origin "kraft" (docs/kafka/contracts.md "Tables").

Each broker log dir holding `__cluster_metadata-0` had its metadata log segments, snapshot `.checkpoint` files and
`quorum-state` copied byte for byte. decode.py turns each file into one partial row (its decoded records as JSON,
file by file, in the executors); `partitions` then replays, per broker copy, what the broker itself loads: the
newest snapshot, then the log's records from the snapshot's end offset (audit/systems/kafka/formats/kraft.py
`since_snapshot` / `replay`, after MetadataBatchLoader). A copy whose log starts above offset 0 with no snapshot
reaching that offset has lost history: it is quarantined, never replayed into a wrong state."""
from __future__ import annotations

import base64
import json
from typing import Callable, Iterator

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from audit.errors import PayloadError
from audit.systems.kafka.formats.kraft import (METADATA_PARTITION_DIR, QUORUM_STATE_FILE, decode_metadata_log,
                                       decode_quorum_state, decode_snapshot, replay, since_snapshot)
from audit.systems.kafka.formats.segment import segment_base_offset
from audit.transforms.common import I, L, QUARANTINE, S, struct
from audit.systems.kafka.transforms.tables import PARTITIONS_SCHEMA, QUARANTINE_TABLE, SYSTEM

METADATA_DIR = METADATA_PARTITION_DIR
METADATA_TOPIC, METADATA_PARTITION = METADATA_PARTITION_DIR.rsplit("-", 1)[0], 0
KRAFT_FILE = "_kraft_file"
LOG, SNAPSHOT, QUORUM = "log", "snapshot", "quorum-state"
PARTIAL = {KRAFT_FILE: struct(("cluster", S), ("broker", I), ("dir", S), ("file", S), ("kraft_kind", S),
                              ("kraft_offset", L), ("kraft_records", S), ("source_key", S))}
_KEYS = ["cluster", "broker", "dir"]
_OUT = struct(("out", S), *[(f.name, f.dataType) for f in PARTITIONS_SCHEMA.fields
                            if f.name not in ("cluster", "broker")],
              *[(f.name, f.dataType) for f in QUARANTINE.fields if f.name not in ("cluster", "source_key")],
              ("cluster", S), ("broker", I), ("dir", S))


def route(below: list[str]) -> tuple[str, Callable] | None:
    """(payload kind, decoder) for a file below __cluster_metadata-0/, or None (batches.json, the epoch checkpoint
    and partition.metadata of this partition are read like any partition's)."""
    if len(below) != 1:
        return None
    name = below[0]
    if name == QUORUM_STATE_FILE:
        return "quorum-state", _quorum_state
    if name.endswith(".checkpoint"):
        return "metadata-snapshot", _snapshot
    if name.endswith(".log"):
        return "metadata-log", _log
    return None


def _plain(value):
    """JSON-able record fields: bytes as base64 text."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    raise TypeError(f"not JSON-able: {type(value).__name__}")


def _file_row(cluster: str, w: dict, key: str, kind: str, offset: int | None, records) -> tuple[str, dict]:
    return KRAFT_FILE, {"cluster": cluster, "broker": w["broker"], "dir": w["dir"], "file": key.rsplit("/", 1)[-1],
                        "kraft_kind": kind, "kraft_offset": offset,
                        "kraft_records": json.dumps(records, default=_plain, separators=(",", ":")),
                        "source_key": key}


def _quarantine(cluster: str, key: str, kind: str, reason: str) -> tuple[str, dict]:
    return QUARANTINE_TABLE, {"system": SYSTEM, "cluster": cluster, "source_key": key, "payload_kind": kind,
                              "reason": reason}


def _log(cluster: str, w: dict, key: str, data: bytes) -> Iterator[tuple[str, dict]]:
    name = key.rsplit("/", 1)[-1]
    base = segment_base_offset(name)
    if base is None:
        raise PayloadError(key, "name", "<base offset, 20 digits>.log", name)
    log = decode_metadata_log(data, key)
    for e in log["errors"]:   # a batch that does not decode: the others still replay
        yield _quarantine(cluster, key, "metadata-log", e["error"])
    yield _file_row(cluster, w, key, LOG, base, log["records"])


def _snapshot(cluster: str, w: dict, key: str, data: bytes) -> Iterator[tuple[str, dict]]:
    snap = decode_snapshot(data, key.rsplit("/", 1)[-1], key)
    yield _file_row(cluster, w, key, SNAPSHOT, snap["end_offset"], snap["records"])


def _quorum_state(cluster: str, w: dict, key: str, data: bytes) -> Iterator[tuple[str, dict]]:
    yield _file_row(cluster, w, key, QUORUM, None, decode_quorum_state(data, key))


# -- replay per broker copy (Spark, one group per cluster x broker x log dir) -------------------------------------
def fold(files: list[dict]) -> Iterator[dict]:
    """Output rows (`out` = "partition" | "quarantine") of one broker's copy of the metadata partition."""
    first = files[0]
    where = {"cluster": first["cluster"], "broker": first["broker"], "dir": first["dir"]}
    prefix = first["source_key"].rsplit("/", 1)[0] + "/"
    logs = sorted((f for f in files if f["kraft_kind"] == LOG), key=lambda f: f["kraft_offset"])
    snaps = sorted((f for f in files if f["kraft_kind"] == SNAPSHOT), key=lambda f: f["kraft_offset"])
    quorum = next((json.loads(f["kraft_records"]) for f in files if f["kraft_kind"] == QUORUM), None)
    snapshot = None
    if snaps:
        # a snapshot's records are numbered inside the file: the state they give stands at its last offset, so
        # that metadata_offset compares with other copies' log offsets (replicas._metadata picks the furthest)
        end = snaps[-1]["kraft_offset"]
        snapshot = {"end_offset": end, "records": [{**r, "offset": end - 1}
                                                   for r in json.loads(snaps[-1]["kraft_records"])]}
    log_start = logs[0]["kraft_offset"] if logs else None
    if logs and log_start > (snapshot["end_offset"] if snapshot else 0):
        yield {**where, "out": "quarantine", "system": SYSTEM, "source_key": prefix, "payload_kind": "metadata-log",
               "reason": f"{prefix}: the metadata log starts at offset {log_start} and no snapshot reaches it "
                         f"(newest ends at {snapshot['end_offset'] if snapshot else 'none'}): partition state "
                         "not replayed"}
        logs, snapshot = [], None
    if logs or snapshot:
        records = since_snapshot(snapshot, (r for f in logs for r in json.loads(f["kraft_records"])))
        image = replay(records)
        for problem in image["problems"]:
            yield {**where, "out": "quarantine", "system": SYSTEM, "source_key": prefix,
                   "payload_kind": "metadata-replay", "reason": f"{prefix}: {problem}"}
        for p in image["partitions"]:
            if p["removed"] or p["topic"] is None:
                continue
            yield {**where, "out": "partition", "topic": p["topic"], "partition": p["partition"],
                   "topic_id": p["topic_id"], "origin": "kraft", "leader": p["leader"],
                   "leader_epoch": p["leader_epoch"], "partition_epoch": p["partition_epoch"],
                   "replicas": p["replicas"], "isr": p["isr"], "elr": p["elr"], "metadata_offset": p["offset"],
                   "replicas_since_ms": p.get("replicas_at_ms"),
                   "source_key": prefix}
        leader = image["quorum_leader"]
    else:
        leader = None
    if quorum is not None or leader is not None:
        # the metadata partition itself: the broker's own quorum-state, else the last LeaderChangeMessage
        q = quorum or {}
        voters = q.get("current_voters")     # data_version 0 only
        yield {**where, "out": "partition", "topic": METADATA_TOPIC, "partition": METADATA_PARTITION,
               "origin": "kraft",
               "leader": q.get("leader_id", leader and leader["leader_id"]),
               "leader_epoch": q.get("leader_epoch", leader and leader["epoch"]),
               "replicas": voters if voters is not None else (leader and leader["voters"]),
               "metadata_offset": leader and leader["offset"], "source_key": prefix}


def partitions(part: Callable[[str], DataFrame], scans: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(kafka_partitions rows of origin kraft, quarantine rows) from the decoded `_kraft_file` rows."""
    names = _OUT.fieldNames()
    arrow_schema = to_arrow_schema(_OUT)

    def per_copy(table: pa.Table) -> pa.Table:
        rows = [{k: r.get(k) for k in names} for r in fold(table.to_pylist())]
        return pa.Table.from_pylist(rows, schema=arrow_schema)

    out = part(KRAFT_FILE).groupBy(*_KEYS).applyInArrow(per_copy, _OUT)
    instants = scans.select("cluster", "broker", "dir", "read_started_at_ms", "read_finished_at_ms")
    # the read instants of the copy: its log dir's scan (the files were copied during it); null when unknown
    found = (out.where(F.col("out") == "partition").drop("read_started_at_ms", "read_finished_at_ms")
             .join(F.broadcast(instants), _KEYS, "left"))
    rows = found.select(*[F.col(c) if c in found.columns else F.lit(None).cast(PARTITIONS_SCHEMA[c].dataType)
                          .alias(c) for c in PARTITIONS_SCHEMA.fieldNames()])
    quarantine = out.where(F.col("out") == "quarantine").select(*QUARANTINE.fieldNames())
    return rows, quarantine


