"""The KRaft metadata partition `__cluster_metadata-0`: its batches' records, snapshot `.checkpoint` files and the
`quorum-state` file (docs/formats/kafka.md §6); replay/partition_states/brokers (kraft_replay.py) are part of this
module's API.

A snapshot's file name is `<end offset, 20 digits>-<epoch, 10 digits>.checkpoint`, the end offset exclusive
(docs/formats/kafka.md §6.1); a snapshot is v2 batches like a segment, offsets from 0: the first batch a control
batch led by a SnapshotHeader, the last one holds the SnapshotFooter (§6.3); `quorum-state` is one JSON line with
`data_version`, written by the JSON converter generated for QuorumStateData (§6.5).

A metadata batch is a normal v2 batch (batch.py): data batches carry metadata records with a null key and a
framed value (kraft_records.py), control batches raft control records. The batch headers of this partition are
indexed and audited like any partition's; this module only reads the values."""
from __future__ import annotations

import json
import re
from typing import Iterable, Sequence

from audit.errors import PayloadError
from audit.systems.kafka.formats.batch import HEADER_SIZE, batch_crc, decode_batch, decode_header, encode_batch
from audit.systems.kafka.formats.kraft_records import (UnknownRecordType, decode_control_value, decode_metadata_value,
                                               encode_control, encode_metadata_value)
from audit.systems.kafka.formats.kraft_replay import brokers, partition_states, replay  # noqa: F401 (this module's API)
from audit.systems.kafka.formats.kraft_wire import ZERO_UUID, uuid_bytes
from audit.systems.kafka.formats.records import SimpleRecord

METADATA_PARTITION_DIR = "__cluster_metadata-0"  # KafkaRaftServer.MetadataPartition
QUORUM_STATE_FILE = "quorum-state"
SNAPSHOT_NAME = re.compile(r"(\d{20})-(\d{10})\.checkpoint")
CONTROL_ATTRIBUTE = 0x20
_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)


# --- batches -----------------------------------------------------------------------------------------------------

def _entry(header, record, **decoded) -> dict:
    entry = {"offset": record.offset, "partition_leader_epoch": header.partition_leader_epoch,
             "timestamp": record.timestamp, "control": False, "api_key": None, "control_type": None,
             "type": None, "version": None, "fields": {}, "error": None}
    entry.update(decoded)
    return entry


def decode_metadata_batch(batch_bytes: bytes | memoryview, source: str, position: int = 0) -> list[dict]:
    """The records of the complete v2 batch at batch_bytes[0] (`position`: where it sits in `source`), one dict
    each: offset, partition_leader_epoch, timestamp, control, api_key (metadata records), control_type (control
    records), type (schema name), version, fields, error. A record whose api key has no schema comes back with
    type None and the error text (reported and skipped); any other bad byte is a PayloadError."""
    header = decode_header(batch_bytes, source, position)
    if header.magic != 2:
        raise PayloadError(source, f"batch@{position}.magic", "magic 2 (metadata batches are v2)", header.magic)
    # checked before the records are read, so a damaged batch is named as such, not as a strange record
    if len(batch_bytes) >= header.size and batch_crc(batch_bytes[:header.size]) != header.crc:
        raise PayloadError(source, f"batch@{position}.crc", "the CRC-32C of the batch", header.crc)
    _, records = decode_batch(batch_bytes, source, position)
    out = []
    for record in records:
        where = f"record@{record.offset}"
        if record.value is None:
            raise PayloadError(source, f"{where}.value", "a value (metadata and control records have one)", None)
        if header.control:
            out.append(_control_entry(header, record, source, where))
            continue
        try:
            schema, version, fields = decode_metadata_value(record.value, source, where)
        except UnknownRecordType as exc:
            out.append(_entry(header, record, api_key=exc.got, error=str(exc)))
            continue
        out.append(_entry(header, record, api_key=schema.key, type=schema.name, version=version, fields=fields))
    return out


def _control_entry(header, record, source: str, where: str) -> dict:
    key = record.key
    # ControlRecordType.parseTypeId: at least 4 bytes, a non-negative key version, the type in bytes 2..3
    if key is None or len(key) < 4:
        raise PayloadError(source, f"{where}.key", "a 4-byte control record key", key)
    key_version, code = int.from_bytes(key[:2], "big", signed=True), int.from_bytes(key[2:4], "big", signed=True)
    if key_version < 0:
        raise PayloadError(source, f"{where}.key.version", "a non-negative control key version", key_version)
    _, message, fields = decode_control_value(code, record.value, source, where)
    return _entry(header, record, control=True, control_type=code, type=message, version=0, fields=fields)


def _walk(data: bytes, source: str) -> tuple[list[dict], int, dict | None, list[dict]]:
    """(records, batch count, tail, errors) of a file of back-to-back batches."""
    records, errors, tail, count, pos = [], [], None, 0, 0
    view = memoryview(data)
    while pos < len(data):
        rest = view[pos:]
        if not any(rest[:HEADER_SIZE]) and not any(rest):
            tail = {"position": pos, "why": f"{len(rest)} zero bytes to the end (preallocated)"}
            break
        if len(rest) < HEADER_SIZE:
            tail = {"position": pos, "why": f"{len(rest)} bytes, less than a batch header"}
            break
        try:
            header = decode_header(rest, source, pos)
        except PayloadError as exc:  # no length to trust: nothing after this can be found
            errors.append({"position": pos, "error": str(exc)})
            break
        if header.size > len(rest):
            tail = {"position": pos, "why": f"partial batch: {len(rest)} of {header.size} bytes"}
            break
        try:
            records += decode_metadata_batch(rest[:header.size], source, pos)
        except PayloadError as exc:
            errors.append({"position": pos, "error": str(exc)})
        count += 1
        pos += header.size
    return records, count, tail, errors


def decode_metadata_log(data: bytes, source: str) -> dict:
    """A metadata log segment: {"records", "batches", "tail": None | {"position", "why"}, "errors":
    [{"position", "error"}]}. A partial last batch is a tail (the active segment is written while it is read);
    a batch that does not decode is an error and the walk goes on with the next one."""
    records, count, tail, errors = _walk(data, source)
    return {"records": records, "batches": count, "tail": tail, "errors": errors}


def parse_snapshot_name(name: str, source: str) -> tuple[int, int]:
    """(end offset, epoch) from `<20 digits>-<10 digits>.checkpoint` (Snapshots.parse); a path is allowed."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    match = SNAPSHOT_NAME.fullmatch(base)
    if match is None:
        raise PayloadError(source, "name", "<end offset, 20 digits>-<epoch, 10 digits>.checkpoint", base)
    return int(match.group(1)), int(match.group(2))


def snapshot_name(end_offset: int, epoch: int) -> str:
    return f"{end_offset:020d}-{epoch:010d}.checkpoint"


def decode_snapshot(data: bytes, name: str, source: str) -> dict:
    """A snapshot file: {"end_offset", "epoch", "last_contained_log_timestamp", "records", "batches"}.
    Snapshots are written whole and renamed into place, so a tail, a bad batch, a missing header or footer is
    a PayloadError."""
    end_offset, epoch = parse_snapshot_name(name, source)
    records, count, tail, errors = _walk(data, source)
    if errors:
        raise PayloadError(source, f"batch@{errors[0]['position']}", "a decodable snapshot batch",
                           errors[0]["error"])
    if tail is not None:
        raise PayloadError(source, f"batch@{tail['position']}", "a complete snapshot (written whole)", tail["why"])
    first, last = (records[0], records[-1]) if records else ({}, {})
    if not first.get("control") or first.get("type") != "SnapshotHeaderRecord":
        raise PayloadError(source, "record@0", "a SnapshotHeader control record first", first.get("type"))
    if not last.get("control") or last.get("type") != "SnapshotFooterRecord":
        raise PayloadError(source, f"record@{last['offset']}", "a SnapshotFooter control record last",
                           last.get("type"))
    return {"end_offset": end_offset, "epoch": epoch,
            "last_contained_log_timestamp": first["fields"]["last_contained_log_timestamp"],
            "records": records, "batches": count}


def since_snapshot(snapshot: dict | None, log_records: Iterable[dict]) -> list[dict]:
    """What a broker replays: the snapshot's records, then the log's from the snapshot's (exclusive) end offset."""
    if snapshot is None:
        return list(log_records)
    return [*snapshot["records"], *(r for r in log_records if r["offset"] >= snapshot["end_offset"])]


# --- quorum-state ------------------------------------------------------------------------------------------------

# QuorumStateData.json field -> (JSON name, kind, versions): every field is mandatory in its versions (the
# generated JSON converter refuses a missing one, and one that is not in the file's version).
_QUORUM_FIELDS = (("cluster_id", "clusterId", "string", (0, 0)), ("leader_id", "leaderId", "int32", (0, 1)),
                  ("leader_epoch", "leaderEpoch", "int32", (0, 1)), ("voted_id", "votedId", "int32", (0, 1)),
                  ("voted_directory_id", "votedDirectoryId", "uuid", (1, 1)),
                  ("applied_offset", "appliedOffset", "int64", (0, 0)),
                  ("current_voters", "currentVoters", "voters", (0, 0)))
QUORUM_STATE_VERSIONS = (0, 1)  # FileQuorumStateStore.LOWEST/HIGHEST_SUPPORTED_VERSION


def _integer(value: object, bounds: tuple[int, int], source: str, field: str) -> int:
    # MessageUtil.jsonNodeToInt/Long: a JSON integer in range; text, fractions and booleans are refused
    if isinstance(value, bool) or not isinstance(value, int) or not bounds[0] <= value <= bounds[1]:
        raise PayloadError(source, field, f"an integer in {bounds[0]}..{bounds[1]}", value)
    return value


def _quorum_value(kind: str, value: object, source: str, field: str) -> object:
    if kind == "string":
        if not isinstance(value, str):
            raise PayloadError(source, field, "a string", value)
        return value
    if kind == "uuid":
        try:
            uuid_bytes(value if isinstance(value, str) else "")
        except ValueError:
            raise PayloadError(source, field, "a base64 uuid (22 characters)", value) from None
        return value
    if kind == "voters":
        if value is None:  # nullableVersions "0"
            return None
        if not isinstance(value, list) or not all(isinstance(v, dict) and "voterId" in v for v in value):
            raise PayloadError(source, field, "null or a list of {\"voterId\": int}", value)
        return [_integer(v["voterId"], _INT32, source, f"{field}[{i}].voterId") for i, v in enumerate(value)]
    return _integer(value, _INT64 if kind == "int64" else _INT32, source, field)


def decode_quorum_state(data: bytes, source: str) -> dict:
    """The `quorum-state` file (FileQuorumStateStore: the first line, one JSON object with data_version):
    {"data_version", "cluster_id", "leader_id", "leader_epoch", "voted_id", "voted_directory_id",
    "applied_offset", "current_voters"}; fields not in the file's version are None."""
    try:
        line = data.decode("utf-8").splitlines()[0] if data.strip() else ""
    except UnicodeDecodeError as exc:
        raise PayloadError(source, "file", "UTF-8 text", str(exc)) from None
    if not line:
        raise PayloadError(source, "file", "a JSON line (the file ended prematurely)", data[:40])
    try:
        doc = json.loads(line)
    except ValueError as exc:
        raise PayloadError(source, "file", "one JSON object on the first line", str(exc)) from None
    if not isinstance(doc, dict):
        raise PayloadError(source, "file", "a JSON object", doc)
    if "data_version" not in doc:
        raise PayloadError(source, "data_version", "a data_version field")
    version = _integer(doc["data_version"], (-(1 << 15), (1 << 15) - 1), source, "data_version")
    if not QUORUM_STATE_VERSIONS[0] <= version <= QUORUM_STATE_VERSIONS[1]:
        raise PayloadError(source, "data_version", "data_version 0 or 1", version)
    out: dict = {"data_version": version}
    for name, json_name, kind, (low, high) in _QUORUM_FIELDS:
        present = json_name in doc
        if low <= version <= high:
            if not present:
                raise PayloadError(source, json_name, f"present (mandatory in version {version})")
            out[name] = _quorum_value(kind, doc[json_name], source, json_name)
        elif present:
            raise PayloadError(source, json_name, f"no {json_name} (not in version {version})", doc[json_name])
        else:
            out[name] = None
    return out


def encode_quorum_state(state: dict) -> bytes:
    """The file as FileQuorumStateStore writes it: the version's fields in schema order, then data_version,
    compact JSON, no newline. `state` as decode_quorum_state returns it (absent fields take the defaults)."""
    version = state["data_version"]
    defaults = {"cluster_id": "", "leader_id": -1, "leader_epoch": -1, "voted_id": -1,
                "voted_directory_id": ZERO_UUID, "applied_offset": 0, "current_voters": []}
    doc: dict = {}
    for name, json_name, kind, (low, high) in _QUORUM_FIELDS:
        if low <= version <= high:
            value = state.get(name, defaults[name])
            doc[json_name] = [{"voterId": v} for v in value] if kind == "voters" and value is not None else value
    doc["data_version"] = version
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


# --- writing (the lab) -------------------------------------------------------------------------------------------

def encode_metadata_batch(base_offset: int, epoch: int, records: Sequence[tuple[str, int, dict]],
                          timestamp: int) -> bytes:
    """A data batch of metadata records, each (record type, version, fields), as the raft client appends it."""
    return encode_batch(base_offset, epoch, [SimpleRecord(None, encode_metadata_value(t, v, f), timestamp)
                                             for t, v, f in records])


def encode_control_batch(base_offset: int, epoch: int, controls: Sequence[tuple[str, dict]],
                         timestamp: int) -> bytes:
    """A control batch of raft control records, each (ControlRecordType name, fields)."""
    return encode_batch(base_offset, epoch, [SimpleRecord(*encode_control(kind, fields), timestamp)
                                             for kind, fields in controls], attributes=CONTROL_ATTRIBUTE)


def encode_snapshot(end_offset: int, epoch: int, records: Sequence[tuple[str, int, dict]], *,
                    last_contained_log_timestamp: int, timestamp: int) -> tuple[str, bytes]:
    """(file name, bytes) of a snapshot: header batch, one data batch, footer batch; offsets from 0."""
    header = encode_control_batch(0, epoch, [("SNAPSHOT_HEADER", {
        "version": 0, "last_contained_log_timestamp": last_contained_log_timestamp})], timestamp)
    body = encode_metadata_batch(1, epoch, records, timestamp) if records else b""
    footer = encode_control_batch(1 + len(records), epoch, [("SNAPSHOT_FOOTER", {"version": 0})], timestamp)
    return snapshot_name(end_offset, epoch), header + body + footer
