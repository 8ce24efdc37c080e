"""Record batch headers: v2 (magic 2) and the legacy magic 0/1 message sets (docs/formats/kafka.md §3).

What this follows: the v2 batch's field offsets, attribute bits, sentinels, LOG_OVERHEAD = 12 and its CRC-32C over
attributes..end (docs/formats/kafka.md §3.1); the magic 0/1 messages, CRC-32 over magic..end, with no leader epoch
and no producer fields (§3.3); how the broker walks a segment (§4).

Every batch starts with `baseOffset int64 | length int32 | ...` and has its magic byte at offset 16, whatever
the version, so the first 17 bytes say how to read the rest. v2, big-endian:
`baseOffset int64 @0 | batchLength int32 @8 | partitionLeaderEpoch int32 @12 | magic int8 @16 | crc uint32 @17 |
attributes int16 @21 | lastOffsetDelta int32 @23 | baseTimestamp int64 @27 | maxTimestamp int64 @35 |
producerId int64 @43 | producerEpoch int16 @51 | baseSequence int32 @53 | recordsCount int32 @57 | records @61`.
Legacy: `offset int64 @0 | size int32 @8 | crc uint32 @12 | magic int8 @16 | attributes int8 @17 |
timestamp int64 @18 (magic 1 only) | keyLength int32 | key | valueLength int32 | value`."""
from __future__ import annotations

import gzip
import struct
import zlib
from typing import NamedTuple, Sequence

import crc32c

from audit.errors import PayloadError
from audit.systems.kafka.formats.records import CODECS, Record, SimpleRecord, decode_records, encode_record

HEADER_SIZE = 61            # DefaultRecordBatch.RECORD_BATCH_OVERHEAD
LOG_OVERHEAD = 12           # baseOffset + length: the part not counted by the length field
MAGIC_OFFSET = 16           # same place in every version
PREFIX_SIZE = 17            # Records.HEADER_SIZE_UP_TO_MAGIC
CRC_START_V2 = 21           # the CRC covers attributes..end, so the leader may rewrite partitionLeaderEpoch
LEGACY_OVERHEAD = {0: 14, 1: 22}  # LegacyRecord.RECORD_OVERHEAD_V0 / _V1 (the minimum size field)
MIN_BATCH_LENGTH_V2 = HEADER_SIZE - LOG_OVERHEAD

_V2 = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qiiB")  # offset, length, epoch (v2) or crc (legacy), magic
_LEGACY = struct.Struct(">qiIbb")
_TS = struct.Struct(">q")


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int  # legacy: 1 uncompressed, -1 for a compressed wrapper (count unknown without inflating)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def size(self) -> int:
        """Bytes the batch takes in the segment."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def codec_id(self) -> int:
        return self.attributes & 0x07

    @property
    def codec(self) -> str:
        return CODECS[self.codec_id] if self.codec_id < len(CODECS) else f"unknown({self.codec_id})"

    @property
    def timestamp_type(self) -> str:
        if self.magic == 0:
            return "NoTimestampType"
        return "LogAppendTime" if self.attributes & 0x08 else "CreateTime"

    @property
    def transactional(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & 0x10)

    @property
    def control(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & 0x20)

    @property
    def has_delete_horizon(self) -> bool:
        # Set by the cleaner (docs/formats/kafka.md §3.1): baseTimestamp then holds the delete horizon, not a
        # record timestamp.
        return self.magic >= 2 and bool(self.attributes & 0x40)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        if self.base_sequence > 0x7FFFFFFF - self.last_offset_delta:
            return self.last_offset_delta - (0x7FFFFFFF - self.base_sequence) - 1
        return self.base_sequence + self.last_offset_delta


def minimum_length(magic: int) -> int:
    """Smallest valid value of the length field for a batch of this magic."""
    return MIN_BATCH_LENGTH_V2 if magic == 2 else LEGACY_OVERHEAD[magic]


def check_prefix(buf: bytes | memoryview, source: str, position: int = 0) -> tuple[int, int]:
    """(magic, length) from the first 17 bytes, refusing what no broker writes: an unknown magic or a length
    below the minimum for that magic (FileLogInputStream.nextBatch, DefaultRecordBatch.ensureValid)."""
    where = f"batch@{position}"
    if len(buf) < PREFIX_SIZE:
        raise PayloadError(source, where, f"at least {PREFIX_SIZE} bytes (offset, length, epoch, magic)",
                           f"{len(buf)} bytes")
    _, length, _, magic = _PREFIX.unpack_from(buf, 0)
    magic = magic - 256 if magic > 127 else magic
    if magic not in (0, 1, 2):
        raise PayloadError(source, f"{where}.magic", "magic 0, 1 or 2", magic)
    if length < minimum_length(magic):
        raise PayloadError(source, f"{where}.batchLength",
                           f"at least {minimum_length(magic)} for magic {magic}", length)
    return magic, length


def decode_header(buf: bytes | memoryview, source: str, position: int = 0) -> BatchHeader:
    """The header of the batch that starts at `buf[0]`; `position` is where that batch sits in `source`
    (errors name it). Slice a whole segment with `memoryview(data)[pos:]`. Needs 61 bytes for v2 and 18 (v0)
    or 26 (v1) bytes for a legacy message; the payload is not needed."""
    where = f"batch@{position}"
    magic, _ = check_prefix(buf, source, position)
    if magic == 2:
        if len(buf) < HEADER_SIZE:
            raise PayloadError(source, where, f"a {HEADER_SIZE}-byte v2 header", f"{len(buf)} bytes")
        return BatchHeader(*_V2.unpack_from(buf, 0))
    need = PREFIX_SIZE + 1 + (8 if magic == 1 else 0)
    if len(buf) < need:
        raise PayloadError(source, where, f"a {need}-byte magic {magic} header", f"{len(buf)} bytes")
    offset, size, crc, _, attributes = _LEGACY.unpack_from(buf, 0)
    timestamp = _TS.unpack_from(buf, 18)[0] if magic == 1 else -1
    count = 1 if attributes & 0x07 == 0 else -1
    return BatchHeader(offset, size, -1, magic, crc, attributes & 0xFF, 0, timestamp, timestamp, -1, -1, -1, count)


def batch_crc(batch: bytes | memoryview) -> int:
    """The checksum a complete batch's crc field must hold: CRC-32C of attributes..end for v2, CRC-32 of
    magic..end for magic 0/1."""
    if batch[MAGIC_OFFSET] == 2:
        return crc32c.crc32c(batch[CRC_START_V2:])
    return zlib.crc32(batch[MAGIC_OFFSET:])


def _records_timestamps(records: Sequence[SimpleRecord]) -> tuple[int, int]:
    # MemoryRecordsBuilder: base = the first record's timestamp, max = the largest, starting from NO_TIMESTAMP.
    stamps = [r.timestamp for r in records]
    return (stamps[0] if stamps else -1), max([-1, *stamps])


def encode_batch(base_offset: int, partition_leader_epoch: int, records: Sequence[SimpleRecord | bytes], *,
                 producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1, attributes: int = 0,
                 base_timestamp: int | None = None, max_timestamp: int | None = None,
                 offset_deltas: Sequence[int] | None = None, last_offset_delta: int | None = None) -> bytes:
    """A complete v2 batch with real varint records and a correct CRC-32C. Records get consecutive offsets
    unless `offset_deltas` says otherwise (a compacted batch); plain bytes are a value with no key. Codec
    (attributes bits 0-2) none or gzip. LogAppendTime batches: pass `max_timestamp` = the append time."""
    recs = [SimpleRecord(None, r) if isinstance(r, (bytes, bytearray)) else r for r in records]
    deltas = list(range(len(recs))) if offset_deltas is None else list(offset_deltas)
    if len(deltas) != len(recs):
        raise ValueError("offset_deltas must have one entry per record")
    first_ts, max_ts = _records_timestamps(recs)
    base_ts = first_ts if base_timestamp is None else base_timestamp
    max_ts = max_ts if max_timestamp is None else max_timestamp
    body = b"".join(encode_record(d, r.timestamp - base_ts, r.key, r.value, r.headers)
                    for d, r in zip(deltas, recs))
    codec = attributes & 0x07
    if codec == 1:
        body = gzip.compress(body, mtime=0)
    elif codec != 0:
        raise ValueError(f"encode_batch writes codec none or gzip, not {CODECS[codec] if codec < 5 else codec}")
    if last_offset_delta is None:
        last_offset_delta = deltas[-1] if deltas else 0
    tail = struct.pack(">hiqqqhii", attributes, last_offset_delta, base_ts, max_ts, producer_id, producer_epoch,
                       base_sequence, len(recs)) + body
    length = HEADER_SIZE - LOG_OVERHEAD + len(body)
    return struct.pack(">qiibI", base_offset, length, partition_leader_epoch, 2, crc32c.crc32c(tail)) + tail


def encode_legacy(offset: int, value: bytes | None, *, key: bytes | None = None, magic: int = 1,
                  timestamp: int = -1, attributes: int = 0) -> bytes:
    """One uncompressed magic 0/1 message with its log overhead (LegacyRecord.write), as old brokers wrote."""
    if magic not in (0, 1):
        raise ValueError("legacy messages have magic 0 or 1")
    body = struct.pack(">bb", magic, attributes) + (struct.pack(">q", timestamp) if magic == 1 else b"")
    for part in (key, value):
        body += struct.pack(">i", -1) if part is None else struct.pack(">i", len(part)) + part
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def decode_batch(buf: bytes | memoryview, source: str, position: int = 0) -> tuple[BatchHeader, list[Record]]:
    """Header and records of the complete batch at `buf[0]` (payloads read: for inspect and tests only)."""
    header = decode_header(buf, source, position)
    where = f"batch@{position}"
    if len(buf) < header.size:
        raise PayloadError(source, where, f"{header.size} bytes (the batch length)", f"{len(buf)} bytes")
    data = bytes(buf[:header.size])
    if header.magic == 2:
        log_append = header.max_timestamp if header.attributes & 0x08 else None
        return header, decode_records(data[HEADER_SIZE:], count=header.records_count, codec_id=header.codec_id,
                                      base_offset=header.base_offset, base_timestamp=header.base_timestamp,
                                      base_sequence=header.base_sequence, log_append_time=log_append,
                                      source=source, where=where)
    if header.codec_id:
        raise PayloadError(source, f"{where}.attributes.codec", "an uncompressed magic 0/1 message "
                           "(compressed legacy wrappers are not inflated)", header.codec)
    pos, parts = PREFIX_SIZE + 1 + (8 if header.magic == 1 else 0), []
    for name in ("key", "value"):
        if pos + 4 > len(data):
            raise PayloadError(source, f"{where}.{name}Length", "a 4-byte length", "end of the message")
        size = struct.unpack_from(">i", data, pos)[0]
        pos += 4
        if size >= 0 and pos + size > len(data):
            raise PayloadError(source, f"{where}.{name}", f"{size} bytes", f"{len(data) - pos} bytes")
        parts.append(None if size < 0 else data[pos:pos + size])
        pos += max(size, 0)
    if pos != len(data):
        raise PayloadError(source, where, "a message ending at its size", f"{len(data) - pos} bytes left over")
    return header, [Record(header.base_offset, header.max_timestamp, -1, parts[0], parts[1])]
