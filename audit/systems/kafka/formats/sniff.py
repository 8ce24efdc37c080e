"""Kafka entries for audit.formats.inspect.

A broker's own files are recognised by name: their content is ambiguous (a checkpoint file is a few lines of
numbers, a segment is raw batches, meta.properties is any properties file). The name may be a path; the file
name must be the broker's (`leader-epoch-checkpoint`, `00000000000000000042.log`, ...) or, for the text files,
contain it as a part (`kafka-leader-epoch-checkpoint-01.txt`, `leader-epoch-checkpoint.tmp`) while the bytes
start the way that file does. Segment files under `__cluster_metadata-0/` are KRaft metadata logs. Tool output
(kafka-dump-log, kafka-log-dirs, the MirrorMaker 2 formatters, a DescribeLogDirs toString in a log) and the
collector's MirrorMaker 2 topic dumps are told apart by their content. Outputs: docs/formats/kafka.md."""
from __future__ import annotations

import io
import json
import re

from audit.systems.kafka.formats import (checkpoint, dump_log, kraft, log_dirs, mm2, producer_snapshot, properties,
                                         segment)
from audit.formats.sniffing import json_object

_SNIFF_TEXT = 64 * 1024
_JSON_MAX = 256 * 1024 * 1024
_CHECKPOINT_START = re.compile(rb"\s*-?\d+\s*\r?\n\s*-?\d+\s*(\r?\n|$)")
_OFFSET_MEANING = {"replication-offset-checkpoint": "high watermark",
                   "recovery-point-offset-checkpoint": "recovery point",
                   "log-start-offset-checkpoint": "log start offset",
                   "cleaner-offset-checkpoint": "cleaner offset (first dirty offset)"}


def _base(name: str) -> str:
    return name.replace("\\", "/").rsplit("/", 1)[-1]


def _names(name: str, wanted: str, looks_right: bool) -> bool:
    """The file name is `wanted` (any content: the decoder says what is wrong), or holds it between separators
    (a copy or a .tmp of it) and the bytes start as that file does."""
    base = _base(name)
    return base == wanted or (looks_right and re.search(rf"(^|[-_.]){re.escape(wanted)}([-_.]|$)", base) is not None)


def _text(data: bytes) -> str:
    # no "is it binary" test: dumped payloads may hold any byte, and the patterns looked for are anchored text
    return data[:_SNIFF_TEXT].decode("utf-8", errors="replace")


def _json(data: bytes) -> dict | None:
    return json_object(data, _JSON_MAX)


# -- by name ------------------------------------------------------------------------------------------------------
def _offset_checkpoint_name(name: str, data: bytes) -> str | None:
    plausible = _CHECKPOINT_START.match(data) is not None
    return next((f for f in checkpoint.OFFSET_CHECKPOINT_FILES if _names(name, f, plausible)), None)


def _sniff_leader_epoch(data: bytes, name: str) -> bool:
    return _names(name, checkpoint.LEADER_EPOCH_CHECKPOINT_FILE, _CHECKPOINT_START.match(data) is not None)


def _decode_leader_epoch(data: bytes, name: str) -> dict:
    return {"entries": [e._asdict() for e in checkpoint.parse_leader_epoch_checkpoint(data, name)]}


def _sniff_offset_checkpoint(data: bytes, name: str) -> bool:
    return _offset_checkpoint_name(name, data) is not None


def _decode_offset_checkpoint(data: bytes, name: str) -> dict:
    which = _offset_checkpoint_name(name, data)
    return {"checkpoint": which, "offset_meaning": _OFFSET_MEANING[which],
            "entries": [e._asdict() for e in checkpoint.parse_offsets_checkpoint(data, name)]}


def _sniff_partition_metadata(data: bytes, name: str) -> bool:
    return _names(name, "partition.metadata", data.startswith(b"version"))


def _sniff_meta_properties(data: bytes, name: str) -> bool:
    return _names(name, "meta.properties", b"version=" in data or b"broker.id=" in data or b"node.id=" in data)


def _sniff_quorum_state(data: bytes, name: str) -> bool:
    return _names(name, kraft.QUORUM_STATE_FILE, data.lstrip()[:1] == b"{")


def _sniff_metadata_snapshot(data: bytes, name: str) -> bool:
    return kraft.SNAPSHOT_NAME.fullmatch(_base(name)) is not None


def _decode_metadata_snapshot(data: bytes, name: str) -> dict:
    return kraft.decode_snapshot(data, _base(name), name)


def _is_segment_name(name: str) -> bool:
    base = _base(name)
    return base.endswith(segment.LOG_SUFFIX) and segment.segment_base_offset(base) is not None and \
        re.fullmatch(r"\d+\.log", base) is not None


def _sniff_metadata_log(data: bytes, name: str) -> bool:
    return _is_segment_name(name) and f"/{kraft.METADATA_PARTITION_DIR}/" in "/" + name.replace("\\", "/")


def _sniff_segment(data: bytes, name: str) -> bool:
    return _is_segment_name(name)


def _decode_segment(data: bytes, name: str) -> dict:
    """Like a segment entry of batches.json, with one row per batch instead of columns."""
    scan = segment.scan_segment(io.BytesIO(data), name, limit=len(data), verify_crc=True)
    rows = [{"position": pos, **h._asdict(), "last_offset": h.last_offset, "size": h.size, "codec": h.codec,
             "timestamp_type": h.timestamp_type, "transactional": h.transactional, "control": h.control,
             "crc_valid": valid} for pos, h, valid in scan.batches]
    return {"base_offset": segment.segment_base_offset(_base(name)), "size": len(data), "read_bytes": scan.read_bytes,
            "tail": None if scan.tail is None else {"offset": scan.tail[0], "why": scan.tail[1]},
            "error": None if scan.error is None else {"offset": scan.read_bytes, "error": str(scan.error)},
            "batches": rows}


def _sniff_producer_snapshot(data: bytes, name: str) -> bool:
    return producer_snapshot.snapshot_offset(_base(name)) is not None


def _decode_producer_snapshot(data: bytes, name: str) -> dict:
    out = producer_snapshot.parse_producer_snapshot(data, name)
    return {**out, "offset": producer_snapshot.snapshot_offset(_base(name)),
            "producers": [p._asdict() for p in out["producers"]]}


# -- by content ---------------------------------------------------------------------------------------------------
def _sniff_dump_log(data: bytes, name: str) -> bool:
    return dump_log.looks_like_dump_log(_text(data))


def _decode_dump_log(data: bytes, name: str) -> dict:
    return dump_log.parse_dump_log(data, name, strict=True)


def _sniff_log_dirs(data: bytes, name: str) -> bool:
    return log_dirs.looks_like_log_dirs(_text(data))


def _sniff_log_dir_info(data: bytes, name: str) -> bool:
    text = _text(data)
    return not log_dirs.looks_like_log_dirs(text) and log_dirs.looks_like_log_dir_info(text)


def _sniff_formatter_text(data: bytes, name: str) -> bool:
    return mm2.looks_like_formatter_text(_text(data))


def _decode_formatter_text(data: bytes, name: str) -> dict:
    # console-consumer output is usually pasted with the command around it: those lines are listed, not fatal
    out = mm2.parse_formatter_text(data, name)
    return {"offset_syncs": [s._asdict() for s in out["offset_syncs"]],
            "checkpoints": [c._asdict() for c in out["checkpoints"]], "unparsed": out["unparsed"]}


def _mm2_dump_kind(data: bytes) -> str | None:
    doc = _json(data) if b'"records"' in data else None
    if doc is None or not isinstance(doc.get("topic"), str) or not isinstance(doc.get("records"), list):
        return None
    topic = doc["topic"]
    return "offset-syncs" if topic.startswith("mm2-offset-syncs") else "checkpoints" if "checkpoints" in topic \
        else None


def _sniff_mm2_offset_syncs(data: bytes, name: str) -> bool:
    return _mm2_dump_kind(data) == "offset-syncs"


def _sniff_mm2_checkpoints(data: bytes, name: str) -> bool:
    return _mm2_dump_kind(data) == "checkpoints"


def _decode_mm2_dump(data: bytes, name: str) -> dict:
    return mm2.decode_records_dump(json.loads(data), name)


# The metadata log before other segments: both are `<digits>.log`, told apart by the partition dir.
BY_NAME = [
    ("kafka.leader_epoch_checkpoint", _sniff_leader_epoch, _decode_leader_epoch),
    ("kafka.offset_checkpoint", _sniff_offset_checkpoint, _decode_offset_checkpoint),
    ("kafka.partition_metadata", _sniff_partition_metadata, properties.parse_partition_metadata),
    ("kafka.meta_properties", _sniff_meta_properties, properties.parse_meta_properties),
    ("kafka.quorum_state", _sniff_quorum_state, kraft.decode_quorum_state),
    ("kafka.metadata_snapshot", _sniff_metadata_snapshot, _decode_metadata_snapshot),
    ("kafka.metadata_log", _sniff_metadata_log, kraft.decode_metadata_log),
    ("kafka.segment", _sniff_segment, _decode_segment),
    ("kafka.producer_snapshot", _sniff_producer_snapshot, _decode_producer_snapshot),
]
SNIFFERS = [
    ("kafka.dump_log", _sniff_dump_log, _decode_dump_log),
    ("kafka.log_dirs", _sniff_log_dirs, log_dirs.parse_log_dirs),
    ("kafka.log_dir_info_text", _sniff_log_dir_info, log_dirs.parse_log_dir_info_text),
    ("kafka.mm2_formatter_text", _sniff_formatter_text, _decode_formatter_text),
    ("kafka.mm2_offset_syncs", _sniff_mm2_offset_syncs, _decode_mm2_dump),
    ("kafka.mm2_checkpoints", _sniff_mm2_checkpoints, _decode_mm2_dump),
]
