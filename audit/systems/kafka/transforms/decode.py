"""Raw Kafka files -> rows of the kafka_* tables (tables.py, docs/kafka/contracts.md), as plain Python values.

`decode_file(source_key, data)` classifies `raw/kafka/<cluster>/...` and returns rows tagged with their table.
Tables whose name starts with "_" are partial rows normalize.py joins in Spark: a replica row is put together from
its batches.json, its log dir's checkpoint files, its partition.metadata and the log dir's scan.json (for the read
instants). Whatever does not decode becomes a `quarantine` row naming the key, the field and what was expected; the
rest of the file (another MirrorMaker 2 record, another partition) and every other file still decode.

Pure: bytes in, rows out; the native formats are read by audit/systems/kafka/formats/, the collector's JSON documents by
raw_docs.py."""
from __future__ import annotations

import base64
import binascii
import re
from typing import Callable, Iterator

from audit.errors import PayloadError
from audit.systems.kafka.formats.checkpoint import (CLEANER_REREAD, LEADER_EPOCH_CHECKPOINT_FILE,
                                                    OFFSET_CHECKPOINT_FILES, parse_leader_epoch_checkpoint,
                                                    parse_offsets_checkpoint)
from audit.systems.kafka.formats.mm2 import decode_checkpoint, decode_offset_sync
from audit.systems.kafka.formats.properties import parse_meta_properties, parse_partition_metadata
from audit.systems.kafka.transforms import kraft_rows, raw_docs, text_rows
from audit.systems.kafka.transforms.raw_docs import parse_partition_dir
from audit.systems.kafka.transforms.tables import (BATCHES, EPOCH_ANSWERS, EPOCHS, MM2_CHECKPOINTS, MM2_GROUPS,
                                                   MM2_OFFSETS, MM2_SYNCS, PARTITIONS, QUARANTINE_TABLE, REPLICA_LAGS,
                                                   SEGMENTS, SYSTEM)

Row = tuple[str, dict]
# partial rows (joined in normalize.py)
SCAN, META, OFFSETS, TOPIC_ID, EPOCH_FILE, REPLICA, LIST_OFFSETS = (
    "_scan", "_meta", "_offsets", "_topic_id", "_epoch_file", "_replica", "_list_offsets")
LISTED = "_listed"   # a partition dir scan.json says it indexed
CHECKPOINT_FILE = "_checkpoint_file"   # a per-log-dir checkpoint file, decoded or not
# the column of _offsets rows each per-log-dir checkpoint file fills
OFFSET_COLUMNS = dict(zip(OFFSET_CHECKPOINT_FILES,
                          ("high_watermark", "recovery_point", "log_start_offset", "cleaner_offset")),
                     **{CLEANER_REREAD: "cleaner_offset"})     # normalize keeps the larger read (it only grows)
DIR_RE = re.compile(r"^dir\d+$")
TRANSACTIONAL, CONTROL = 0x10, 0x20   # batch attributes bits 4 and 5 (DefaultRecordBatch)
# payload_kind values in quarantine
KIND_BY_FILE = {"scan.json": "scan", "meta.properties": "meta-properties", "batches.json": "batch-index",
                "partition.metadata": "partition-metadata", LEADER_EPOCH_CHECKPOINT_FILE: "leader-epoch-checkpoint",
                **{name: name for name in OFFSET_COLUMNS}}
IGNORED = {"collection.json", "reread.json"}   # the collector's own reports (coverage is read from them elsewhere)


def quarantine(cluster: str | None, key: str, kind: str, reason: str) -> Row:
    return QUARANTINE_TABLE, {"system": SYSTEM, "cluster": cluster, "source_key": key, "payload_kind": kind,
                              "reason": reason}


def decode_file(source_key: str, data: bytes) -> list[Row]:
    parts = [p for p in source_key.split("/") if p]
    if parts[:1] == ["raw"]:
        parts = parts[1:]
    if len(parts) < 3 or parts[0] != SYSTEM:
        return []  # another system's raw files, or the lab's ground truth
    cluster, rest = parts[1], parts[2:]
    if rest == [rest[0]] and rest[0] in IGNORED:
        return []
    found = _route(rest)
    if found is None:
        return [quarantine(cluster, source_key, "unknown", f"{source_key}: unrecognised raw key")]
    kind, decoder, where = found
    try:
        return list(decoder(cluster, where, source_key, data))
    except PayloadError as e:
        return [quarantine(cluster, source_key, kind, str(e))]
    except (ValueError, TypeError, KeyError, OverflowError) as e:  # a shape no decoder anticipated: never fatal
        return [quarantine(cluster, source_key, kind, f"{source_key}: {type(e).__name__}: {e}")]


def _route(rest: list[str]) -> tuple[str, Callable, dict] | None:
    """(payload kind, decoder, where) for a key below raw/kafka/<cluster>/, else None."""
    imported = text_rows.route(rest)
    if imported is not None:
        return imported
    if rest[0] == "brokers" and len(rest) >= 4 and rest[1].isdigit() and DIR_RE.match(rest[2]):
        where = {"broker": int(rest[1]), "dir": rest[2]}
        below = rest[3:]
        if len(below) == 1:
            name = below[0]
            if name == "scan.json":
                return KIND_BY_FILE[name], _scan, where
            if name == "meta.properties":
                return KIND_BY_FILE[name], _meta, where
            if name in OFFSET_COLUMNS:
                return name, _offsets, {**where, "column": OFFSET_COLUMNS[name]}
            return None
        if below[0] == kraft_rows.METADATA_DIR and (found := kraft_rows.route(below[1:])) is not None:
            return (*found, where)
        tp = parse_partition_dir(below[0])
        if tp is None or len(below) != 2:
            return None
        where.update(topic=tp[0], partition=tp[1])
        decoders = {"batches.json": _batches, "partition.metadata": _partition_metadata,
                    LEADER_EPOCH_CHECKPOINT_FILE: _epochs}
        return (KIND_BY_FILE[below[1]], decoders[below[1]], where) if below[1] in decoders else None
    if rest[0] == "admin" and len(rest) == 2:
        admin = {"metadata.json": ("metadata", _metadata), "list-offsets.json": ("list-offsets", _list_offsets),
                 "log-dirs.json": ("describe-log-dirs", _log_dirs),
                 "offsets-for-leader-epoch.json": ("offsets-for-leader-epoch", _epoch_answers)}
        return (*admin[rest[1]], {}) if rest[1] in admin else None
    if rest[0] == "mm2" and len(rest) == 3:
        mm2 = {"offset-syncs.json": ("mm2-offset-syncs", _mm2_syncs),
               "checkpoints.json": ("mm2-checkpoints", _mm2_checkpoints), "groups.json": ("mm2-groups", _mm2_groups)}
        return (*mm2[rest[2]], {"source_alias": rest[1]}) if rest[2] in mm2 else None
    return None


# -- broker log dirs --------------------------------------------------------------------------
def _scan(cluster: str, w: dict, key: str, data: bytes) -> Iterator[Row]:
    s = raw_docs.scan(data, key)
    if s["broker"] != w["broker"]:
        raise PayloadError(key, "broker", f"broker {w['broker']} (the key's brokers/<broker>/ folder)", s["broker"])
    yield SCAN, {"cluster": cluster, "broker": w["broker"], "dir": w["dir"], "log_dir": s["log_dir"],
                 "read_started_at_ms": s["started_at_ms"], "read_finished_at_ms": s["finished_at_ms"],
                 "checkpoints_read_at_ms": s["checkpoints_read_at_ms"], "listed_at_ms": s["listed_at_ms"],
                 "verify_crc": s["verify_crc"], "partitions": len(s["partitions"]), "skipped_dirs": s["skipped"],
                 "vanished_files": s["vanished"], "scan_errors": s["errors"], "source_key": key}
    for name in s["partitions"]:
        tp = parse_partition_dir(name)
        if tp is not None:
            yield LISTED, {"cluster": cluster, "broker": w["broker"], "dir": w["dir"], "topic": tp[0],
                           "partition": tp[1]}


def _meta(cluster: str, w: dict, key: str, data: bytes) -> Iterator[Row]:
    m = parse_meta_properties(data, key)
    yield META, {"cluster": cluster, "broker": w["broker"], "dir": w["dir"],
                 "meta_broker_id": m.get("broker_id", m.get("node_id")), "meta_cluster_id": m.get("cluster_id"),
                 "meta_directory_id": m.get("directory_id"), "meta_mode": m.get("mode")}


def _offsets(cluster: str, w: dict, key: str, data: bytes) -> Iterator[Row]:
    """Entries of a per-log-dir checkpoint; an unreadable file is noted on its log dir (every offset it holds is
    then unknown, not absent) and quarantined."""
    where = {"cluster": cluster, "broker": w["broker"], "dir": w["dir"]}
    name = key.rsplit("/", 1)[-1]
    try:
        entries = parse_offsets_checkpoint(data, key)
    except PayloadError as e:
        yield CHECKPOINT_FILE, {**where, "file": name, "error": str(e)}
        yield quarantine(cluster, key, name, str(e))
        return
    yield CHECKPOINT_FILE, {**where, "file": name, "error": None}
    for e in entries:
        yield OFFSETS, {**where, "topic": e.topic, "partition": e.partition, "column": w["column"],
                        "offset": e.offset}


def _replica_keys(cluster: str, w: dict) -> dict:
    return {"cluster": cluster, "broker": w["broker"], "dir": w["dir"], "topic": w["topic"],
            "partition": w["partition"]}


def _partition_metadata(cluster: str, w: dict, key: str, data: bytes) -> Iterator[Row]:
    yield TOPIC_ID, {**_replica_keys(cluster, w), "topic_id": parse_partition_metadata(data, key)["topic_id"]}


def _epochs(cluster: str, w: dict, key: str, data: bytes) -> Iterator[Row]:
    """Every line of the checkpoint, in file order; an unreadable file still marks the replica (with why)."""
    keys = _replica_keys(cluster, w)
    try:
        entries = parse_leader_epoch_checkpoint(data, key)
    except PayloadError as e:
        yield EPOCH_FILE, {**keys, "epoch_checkpoint_error": str(e)}
        yield quarantine(cluster, key, KIND_BY_FILE[LEADER_EPOCH_CHECKPOINT_FILE], str(e))
        return
    yield EPOCH_FILE, {**keys, "epoch_checkpoint_error": None}
    for i, e in enumerate(entries):
        yield EPOCHS, {**keys, "entry_index": i, "epoch": e.epoch, "start_offset": e.start_offset, "source_key": key}


def _batches(cluster: str, w: dict, key: str, data: bytes) -> Iterator[Row]:
    doc = raw_docs.batches(data, key)
    keys = _replica_keys(cluster, w)
    if doc["partition_dir"] != f"{w['topic']}-{w['partition']}":
        raise PayloadError(key, "partition_dir", f"{w['topic']}-{w['partition']} (the key's folder)",
                           doc["partition_dir"])
    segments = sorted(doc["segments"], key=lambda s: s["base_offset"])
    log_end = first = last_epoch = None
    problem = None
    total = 0
    for seg in segments:
        c = seg.pop("columns")
        n = len(c["base_offset"])
        total += n
        yield SEGMENTS, {**keys, **seg, "batches": n, "source_key": key}
        if seg["vanished"] or seg["error"] is not None:
            problem = problem or (f"{seg['file']}: vanished while scanned" if seg["vanished"] else
                                  f"{seg['file']}: unreadable at byte {seg['error_offset']}: {seg['error']}")
        if n:
            first = c["base_offset"][0] if first is None else first
            log_end, last_epoch = c["last_offset"][-1] + 1, c["partition_leader_epoch"][-1]
        elif not seg["vanished"]:
            # an empty segment: its base offset is the next offset (LogSegment.readNextOffset)
            log_end = seg["base_offset"] if log_end is None else max(log_end, seg["base_offset"])
        for i in range(n):
            magic, attributes = c["magic"][i], c["attributes"][i]
            yield BATCHES, {**keys, "segment": seg["base_offset"],
                            **{name: c[name][i] for name in raw_docs.BATCH_COLUMNS},
                            "transactional": magic >= 2 and bool(attributes & TRANSACTIONAL),
                            "control": magic >= 2 and bool(attributes & CONTROL), "source_key": key}
    # a cleaning pass in progress rewrites batches below the active segment (LogCleaner never cleans it) before
    # it checkpoints its new first dirty offset (docs/formats/kafka.md §11.5)
    cleaning_below = segments[-1]["base_offset"] if doc["cleaning"] and segments else None
    yield REPLICA, {**keys, "log_end_offset": log_end, "first_batch_offset": first, "last_batch_epoch": last_epoch,
                    "segments": len(segments), "batches": total, "index_complete": problem is None,
                    "index_problem": problem, "cleaning_below": cleaning_below, "source_key": key}


# -- admin documents --------------------------------------------------------------------------
def _metadata(cluster: str, w: dict, key: str, data: bytes) -> Iterator[Row]:
    doc = raw_docs.metadata(data, key)
    started, finished = doc["read"]
    for p in doc["partitions"]:
        yield PARTITIONS, {"cluster": cluster, **p, "origin": "admin", "broker": None,
                           "read_started_at_ms": started, "read_finished_at_ms": finished, "source_key": key}


def _list_offsets(cluster: str, w: dict, key: str, data: bytes) -> Iterator[Row]:
    doc = raw_docs.list_offsets(data, key)
    for p in doc["partitions"]:
        yield LIST_OFFSETS, {"cluster": cluster, "topic": p["topic"], "partition": p["partition"],
                             "log_start_offset": p["earliest"], "high_watermark": p["latest"],
                             "latest_leader_epoch": p["latest_leader_epoch"], "offsets_error_code": p["error_code"],
                             "offsets_read_started_at_ms": p["read_started_at_ms"],
                             "offsets_read_finished_at_ms": p["read_finished_at_ms"]}


def _log_dirs(cluster: str, w: dict, key: str, data: bytes) -> Iterator[Row]:
    for r in raw_docs.log_dirs(data, key)["rows"]:
        yield REPLICA_LAGS, {"cluster": cluster, **r, "source_key": key}


def _epoch_answers(cluster: str, w: dict, key: str, data: bytes) -> Iterator[Row]:
    for a in raw_docs.epoch_answers(data, key)["answers"]:
        yield EPOCH_ANSWERS, {"cluster": cluster, **a, "source_key": key}


# -- MirrorMaker 2 ----------------------------------------------------------------------------
def _record_bytes(rec: dict, field: str, key: str) -> bytes | None:
    text = rec[field]
    if text is None:
        return None
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise PayloadError(key, f"{rec['where']}.{field}", "base64 bytes", text) from None


def _mm2_records(cluster: str, w: dict, key: str, data: bytes, kind: str, side: str,
                 decode: Callable[[bytes | None, bytes | None, str], dict]) -> Iterator[Row]:
    """Each record on its own: one that does not decode is quarantined (naming it), the others still count."""
    doc = raw_docs.mm2_topic(data, key)
    started, finished = doc["read"]
    flow = {"cluster": cluster, "source_alias": w["source_alias"]}
    read = {"read_started_at_ms": started, "read_finished_at_ms": finished, "source_key": key}
    for partition, end in sorted(doc["end_offsets"].items()):
        yield MM2_OFFSETS, {**flow, "side": side, "topic": doc["topic"], "partition": partition,
                            "log_start_offset": None, "end_offset": end, **read}
    for rec in doc["records"]:
        source = f"{key} {rec['where']} (partition {rec['partition']} offset {rec['offset']})"
        try:
            fields = decode(_record_bytes(rec, "key_b64", key), _record_bytes(rec, "value_b64", key), source)
        except PayloadError as e:
            yield quarantine(cluster, key, kind, str(e))
            continue
        yield fields["table"], {**flow, **fields["row"], "internal_topic": doc["topic"],
                                "record_partition": rec["partition"], "record_offset": rec["offset"],
                                "record_timestamp": rec["timestamp"], **read}


def _sync(k: bytes | None, v: bytes | None, source: str) -> dict:
    s = decode_offset_sync(_present(k, source, "key"), _present(v, source, "value"), source)
    return {"table": MM2_SYNCS, "row": {"topic": s.topic, "partition": s.partition,
                                        "upstream_offset": s.upstream_offset,
                                        "downstream_offset": s.downstream_offset}}


def _checkpoint(k: bytes | None, v: bytes | None, source: str) -> dict:
    c = decode_checkpoint(_present(k, source, "key"), _present(v, source, "value"), source)
    return {"table": MM2_CHECKPOINTS, "row": {"group": c.group, "topic": c.topic, "partition": c.partition,
                                              "upstream_offset": c.upstream_offset,
                                              "downstream_offset": c.downstream_offset, "metadata": c.metadata}}


def _present(b: bytes | None, source: str, field: str) -> bytes:
    if b is None:   # a tombstone: MirrorMaker 2 never writes one to its internal topics
        raise PayloadError(source, field, "record bytes", None)
    return b


def _mm2_syncs(cluster: str, w: dict, key: str, data: bytes) -> Iterator[Row]:
    yield from _mm2_records(cluster, w, key, data, "mm2-offset-syncs", "offset-syncs", _sync)


def _mm2_checkpoints(cluster: str, w: dict, key: str, data: bytes) -> Iterator[Row]:
    yield from _mm2_records(cluster, w, key, data, "mm2-checkpoints", "checkpoints", _checkpoint)


def _mm2_groups(cluster: str, w: dict, key: str, data: bytes) -> Iterator[Row]:
    """Each row carries its own read's instants and names the read in `side`: "target", "source", "target_after"
    (the target groups read again after the source; the audit proves a skip from the first target read and a
    redelivery from the second: audit/systems/kafka/transforms/mm2_state.py)."""
    doc = raw_docs.mm2_groups(data, key)
    flow = {"cluster": cluster, "source_alias": w["source_alias"]}
    read = {side: {"read_started_at_ms": started, "read_finished_at_ms": finished, "source_key": key}
            for side, (started, finished) in doc["sides"].items()}
    for g in doc["groups"]:
        yield MM2_GROUPS, {**flow, **g, **read[g["side"]]}
    for e in doc["end_offsets"]:
        yield MM2_OFFSETS, {**flow, **e, **read[e["side"]]}
