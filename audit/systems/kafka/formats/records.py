"""Records inside a v2 record batch, and the zigzag varints they are built from (docs/formats/kafka.md §3).

Followed as the broker writes and reads them (docs/formats/kafka.md §3.2): the record layout, the zigzag varints
(at most 5 / 10 bytes, 32/64-bit wrap-around), and the control record's key and value.

One record: `length varint | attributes int8 | timestampDelta varlong | offsetDelta varint | keyLength varint
| key | valueLength varint | value | headerCount varint | headers (keyLength varint, key utf-8, valueLength
varint, value)`; a length of -1 means null. Segment scanning never comes here: payloads are read only when a
caller asks to decode one batch (`replaudit inspect`, tests, the lab)."""
from __future__ import annotations

import gzip
import struct
import zlib
from typing import NamedTuple, Sequence

from audit.errors import PayloadError

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")  # CompressionType ids 0..4
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
                 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}  # ControlRecordType


class Record(NamedTuple):
    """One decoded record, with absolute offset and timestamp as DefaultRecord.readFrom computes them."""
    offset: int
    timestamp: int
    sequence: int  # -1 when the batch has no base sequence
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    attributes: int = 0


class SimpleRecord(NamedTuple):
    """What a writer hands to encode_batch (like the client's SimpleRecord): offsets are assigned by the batch."""
    key: bytes | None
    value: bytes | None
    timestamp: int = -1
    headers: tuple[tuple[str, bytes | None], ...] = ()


class _Short(Exception):
    """The buffer ended inside a field (turned into a PayloadError naming the field by the caller)."""


# --- varints (ByteUtils) -------------------------------------------------------------------------------------

def write_unsigned_varint(value: int) -> bytes:
    out = bytearray()
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def write_varint(value: int) -> bytes:
    """Zigzag int32 as writeVarint: `(v << 1) ^ (v >> 31)` taken as an unsigned 32-bit number."""
    if not -(1 << 31) <= value < (1 << 31):
        raise ValueError(f"varint out of int32 range: {value}")
    return write_unsigned_varint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_varlong(value: int) -> bytes:
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError(f"varlong out of int64 range: {value}")
    return write_unsigned_varint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def _read_raw(buf: bytes, pos: int, max_bytes: int, bits: int) -> tuple[int, int]:
    value = shift = 0
    for i in range(max_bytes):
        if pos + i >= len(buf):
            raise _Short()
        b = buf[pos + i]
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value & ((1 << bits) - 1), pos + i + 1
        shift += 7
    raise ValueError(f"varint longer than {max_bytes} bytes")  # ByteUtils: "Varint is too long ..."


def read_unsigned_varint(buf: bytes, pos: int) -> tuple[int, int]:
    return _read_raw(buf, pos, 5, 32)


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """(value, next position); the 5th byte's high bits fall off as in Java's 32-bit arithmetic."""
    raw, pos = _read_raw(buf, pos, 5, 32)
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf: bytes, pos: int) -> tuple[int, int]:
    raw, pos = _read_raw(buf, pos, 10, 64)
    return (raw >> 1) ^ -(raw & 1), pos


# --- one record ----------------------------------------------------------------------------------------------

def _sized(data: bytes | None) -> bytes:
    return write_varint(-1) if data is None else write_varint(len(data)) + data


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
                  headers: Sequence[tuple[str, bytes | None]] = ()) -> bytes:
    """DefaultRecord.writeTo: the body, prefixed with its length varint (record attributes are always 0)."""
    body = bytearray(b"\x00")
    body += write_varlong(timestamp_delta) + write_varint(offset_delta) + _sized(key) + _sized(value)
    body += write_varint(len(headers))
    for name, header_value in headers:
        raw_name = name.encode("utf-8")
        body += write_varint(len(raw_name)) + raw_name + _sized(header_value)
    return write_varint(len(body)) + bytes(body)


def _take(buf: bytes, pos: int, size: int) -> tuple[bytes | None, int]:
    if size < 0:
        return None, pos
    if pos + size > len(buf):
        raise _Short()
    return bytes(buf[pos:pos + size]), pos + size


def decode_record(buf: bytes, pos: int, base_offset: int, base_timestamp: int, base_sequence: int,
                  log_append_time: int | None, source: str, where: str) -> tuple[Record, int]:
    """DefaultRecord.readFrom at `pos`; `where` names the record in errors (e.g. "batch@0.record[3]")."""
    step = "length"
    try:
        size, pos = read_varint(buf, pos)
        start = pos
        if size < 0 or len(buf) - pos < size:
            raise PayloadError(source, f"{where}.length", f"a record body of {size} bytes within the batch",
                               f"{len(buf) - pos} bytes left")
        step = "attributes"
        if pos >= len(buf):
            raise _Short()
        attributes = struct.unpack_from(">b", buf, pos)[0]
        step = "timestampDelta"
        ts_delta, pos = read_varlong(buf, pos + 1)
        step = "offsetDelta"
        offset_delta, pos = read_varint(buf, pos)
        step = "key"
        key_size, pos = read_varint(buf, pos)
        key, pos = _take(buf, pos, key_size)
        step = "value"
        value_size, pos = read_varint(buf, pos)
        value, pos = _take(buf, pos, value_size)
        step = "headers"
        count, pos = read_varint(buf, pos)
        if count < 0 or count > len(buf) - pos:
            raise PayloadError(source, f"{where}.headers", "a header count between 0 and the bytes left", count)
        headers = []
        for i in range(count):
            step = f"headers[{i}]"
            name_size, pos = read_varint(buf, pos)
            if name_size < 0:
                raise PayloadError(source, f"{where}.{step}.key", "a non-negative key size", name_size)
            name, pos = _take(buf, pos, name_size)
            hv_size, pos = read_varint(buf, pos)
            header_value, pos = _take(buf, pos, hv_size)
            headers.append((name.decode("utf-8", errors="replace"), header_value))
    except (_Short, ValueError) as exc:
        raise PayloadError(source, f"{where}.{step}", "a complete record field",
                           str(exc) or "end of the records") from None
    if pos - start != size:
        raise PayloadError(source, f"{where}.length", f"a record body of exactly {size} bytes",
                           f"{pos - start} bytes read")
    timestamp = log_append_time if log_append_time is not None else base_timestamp + ts_delta
    sequence = -1 if base_sequence < 0 else _increment_sequence(base_sequence, offset_delta)
    return Record(base_offset + offset_delta, timestamp, sequence, key, value, tuple(headers), attributes), pos


def _increment_sequence(sequence: int, increment: int) -> int:
    # DefaultRecordBatch.incrementSequence: sequences wrap to 0 after Integer.MAX_VALUE.
    if sequence > 0x7FFFFFFF - increment:
        return increment - (0x7FFFFFFF - sequence) - 1
    return sequence + increment


def uncompressed_records(section: bytes, codec_id: int, source: str, where: str) -> bytes:
    """The records section as written before compression; gzip is the only codec decoded here."""
    if codec_id == 0:
        return section
    if codec_id == 1:
        try:
            return gzip.decompress(section)
        except (OSError, EOFError, zlib.error) as exc:
            raise PayloadError(source, f"{where}.records", "a gzip stream", str(exc)) from None
    name = CODECS[codec_id] if codec_id < len(CODECS) else f"unknown codec id {codec_id}"
    raise PayloadError(source, f"{where}.attributes.codec", "records uncompressed or gzip-compressed "
                       "(other codecs are not decoded; headers are read the same)", name)


def decode_records(section: bytes, *, count: int, codec_id: int, base_offset: int, base_timestamp: int,
                   base_sequence: int, log_append_time: int | None, source: str, where: str) -> list[Record]:
    """All `count` records of a batch's records section; leftover bytes are an error, as in RecordIterator."""
    if count < 0:
        raise PayloadError(source, f"{where}.recordsCount", "a non-negative record count", count)
    if count == 0:
        return []   # DefaultRecordBatch.iterator: an empty batch is not looked into
    data = uncompressed_records(section, codec_id, source, where)
    records, pos = [], 0
    for i in range(count):
        record, pos = decode_record(data, pos, base_offset, base_timestamp, base_sequence, log_append_time,
                                    source, f"{where}.record[{i}]")
        records.append(record)
    if pos != len(data):
        raise PayloadError(source, f"{where}.records", f"exactly {count} records (declared batch size)",
                           f"{len(data) - pos} bytes left over")
    return records


def control_record(kind: str, coordinator_epoch: int = 0, timestamp: int = -1) -> SimpleRecord:
    """A transaction marker record (EndTransactionMarker v0): key {version int16 0, type int16},
    value {version int16 0, coordinatorEpoch int32}. Goes in a batch with the control and transactional bits."""
    types = {"ABORT": 0, "COMMIT": 1}
    if kind not in types:
        raise ValueError(f"control record kind must be ABORT or COMMIT, not {kind!r}")
    return SimpleRecord(struct.pack(">hh", 0, types[kind]), struct.pack(">hi", 0, coordinator_epoch), timestamp)


def control_type(key: bytes | None) -> str:
    """ControlRecordType.parse of a control record's key ("UNKNOWN" like the client for unknown types)."""
    if key is None or len(key) < 4:
        return "UNKNOWN"
    return CONTROL_TYPES.get(struct.unpack_from(">h", key, 2)[0], "UNKNOWN")
