"""Hand-taken tool output imported with `replaudit import --system kafka` (audit/systems/kafka/collect/imports.py) ->
rows of the kafka_* tables. Read by the parsers in audit/systems/kafka/formats/; a line a parser does not know is one
quarantine row naming the file and the line, and every other line still counts.

- brokers/<N>/dump-log/<name>: kafka-dump-log.sh output. Each dumped `<topic>-<p>/<base>.log` file gives a
  kafka_segments row and its kafka_batches rows under dir "dump-log" (log_dir = the folder the tool was given).
  These rows have no kafka_replicas row: without the log dir's checkpoints they are evidence to read, never
  judged as a replica's log. Other dumped files (indexes, snapshots) add nothing to the tables.
- admin/log-dirs-describe/<name>: kafka-log-dirs.sh --describe output -> kafka_replica_lags.
- mm2/<alias>/offset-syncs-text/<name>, mm2/<alias>/checkpoints-text/<name>: console-consumer output with
  MirrorMaker 2's formatters -> kafka_mm2_syncs / kafka_mm2_checkpoints (no record position, no read instants).
Pure: bytes in, rows out."""
from __future__ import annotations

import posixpath
from typing import Callable, Iterator

from audit.systems.kafka.formats.dump_log import parse_dump_log
from audit.systems.kafka.formats.log_dirs import parse_log_dirs
from audit.systems.kafka.formats.mm2 import parse_formatter_text
from audit.systems.kafka.transforms.raw_docs import parse_partition_dir
from audit.systems.kafka.transforms.tables import (BATCHES, MM2_CHECKPOINTS, MM2_SYNCS, QUARANTINE_TABLE, REPLICA_LAGS,
                                           SEGMENTS, SYSTEM)

DUMP_DIR = "dump-log"
Row = tuple[str, dict]
_CODEC = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
_NO_READ = {"read_started_at_ms": None, "read_finished_at_ms": None}


def _quarantine(cluster: str, key: str, kind: str, reason: str) -> Row:
    return QUARANTINE_TABLE, {"system": SYSTEM, "cluster": cluster, "source_key": key, "payload_kind": kind,
                              "reason": reason}


def route(rest: list[str]) -> tuple[str, Callable, dict] | None:
    """(payload kind, decoder, where) for an imported text key below raw/kafka/<cluster>/, else None."""
    if len(rest) >= 4 and rest[0] == "brokers" and rest[1].isdigit() and rest[2] == DUMP_DIR:
        return "dump-log", dump_log, {"broker": int(rest[1])}
    if len(rest) >= 3 and rest[:2] == ["admin", "log-dirs-describe"]:
        return "log-dirs-describe", log_dirs_describe, {}
    if len(rest) >= 4 and rest[0] == "mm2" and rest[2] in ("offset-syncs-text", "checkpoints-text"):
        kind = "mm2-" + rest[2]
        return kind, mm2_text, {"source_alias": rest[1], "kind": kind}
    return None


def dump_log(cluster: str, w: dict, key: str, data: bytes) -> Iterator[Row]:
    doc = parse_dump_log(data, key)   # a pasted command before the first "Dumping" line is not an error
    for f in doc["files"]:
        for u in f["unparsed"]:
            yield _quarantine(cluster, key, "dump-log", f"{key}: line {u.get('line')}: not read "
                                                        f"({u.get('error') or u.get('text')})")
        folder, name = posixpath.split(f["file"].replace("\\", "/"))
        tp = parse_partition_dir(posixpath.basename(folder))
        if f["kind"] != "log" or tp is None:
            continue
        keys = {"cluster": cluster, "broker": w["broker"], "dir": DUMP_DIR, "log_dir": posixpath.dirname(folder),
                "topic": tp[0], "partition": tp[1]}
        base = f["segment_base_offset"]
        if base is None and name[:-4].isdigit():
            base = int(name[:-4])
        yield SEGMENTS, {**keys, "file": name, "base_offset": base, "size_at_start": None,
                         "read_bytes": sum(b["size"] or 0 for b in f["batches"]), "active": None, "vanished": False,
                         "tail_offset": None, "tail_why": None,
                         "error_offset": None if f.get("invalid_trailing_bytes") is None else -1,
                         "error": None if f.get("invalid_trailing_bytes") is None else
                         f"{f['invalid_trailing_bytes']} invalid bytes at the end",
                         "batches": len(f["batches"]), "source_key": key}
        for b in f["batches"]:
            attributes = (_CODEC.get(b.get("codec") or "none", 0)
                          | (0x08 if b.get("timestamp_type") == "LogAppendTime" else 0)
                          | (0x10 if b.get("is_transactional") else 0) | (0x20 if b.get("is_control") else 0))
            yield BATCHES, {**keys, "segment": base, "base_offset": b["base_offset"], "last_offset": b["last_offset"],
                            "partition_leader_epoch": b["partition_leader_epoch"], "magic": b["magic"],
                            "crc": b["crc"], "crc_valid": b.get("is_valid"), "attributes": attributes,
                            "transactional": bool(b.get("is_transactional")), "control": bool(b.get("is_control")),
                            "base_timestamp": None, "max_timestamp": b.get("timestamp"),
                            "producer_id": b["producer_id"], "producer_epoch": b["producer_epoch"],
                            "base_sequence": b["base_sequence"], "records_count": b.get("count"),
                            "position": b["position"], "size": b["size"], "source_key": key}


def log_dirs_describe(cluster: str, w: dict, key: str, data: bytes) -> Iterator[Row]:
    doc = parse_log_dirs(data, key)
    for line in doc["other_lines"]:
        yield _quarantine(cluster, key, "log-dirs-describe", f"{key}: line {line['line']}: not read ({line['text']})")
    for b in doc["brokers"]:
        for d in b["log_dirs"]:
            for p in d["partitions"]:
                yield REPLICA_LAGS, {"cluster": cluster, "broker": b["broker"], "log_dir": d["log_dir"],
                                     "topic": p["topic"], "partition": p["partition"], "size": p["size"],
                                     "offset_lag": p["offset_lag"], "is_future": p["is_future"], "error_code": None,
                                     "broker_error": d["error"], **_NO_READ, "source_key": key}


def mm2_text(cluster: str, w: dict, key: str, data: bytes) -> Iterator[Row]:
    doc = parse_formatter_text(data, key)
    flow = {"cluster": cluster, "source_alias": w["source_alias"], "internal_topic": None, "record_partition": None,
            "record_offset": None, "record_timestamp": None, **_NO_READ, "source_key": key}
    for u in doc["unparsed"]:
        yield _quarantine(cluster, key, w["kind"], u["error"])
    for s in doc["offset_syncs"]:
        yield MM2_SYNCS, {**flow, "topic": s.topic, "partition": s.partition, "upstream_offset": s.upstream_offset,
                          "downstream_offset": s.downstream_offset}
    for c in doc["checkpoints"]:
        yield MM2_CHECKPOINTS, {**flow, "group": c.group, "topic": c.topic, "partition": c.partition,
                                "upstream_offset": c.upstream_offset, "downstream_offset": c.downstream_offset,
                                "metadata": c.metadata}
