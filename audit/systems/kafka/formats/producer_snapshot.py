"""Producer-state snapshot files `<offset>.snapshot` in a partition dir (docs/formats/kafka.md §5).

The broker's reader and writer (version at byte 0, CRC at byte 2, entries from byte 6; schema version 1, not
flexible) are described in docs/formats/kafka.md §5; 3.6.2 wrote the same bytes from a hand-built Schema.

Layout, big-endian: `version int16 (=1) | crc uint32 | entryCount int32 | entries`, each entry
`producerId int64 | epoch int16 | lastSequence int32 | lastOffset int64 | offsetDelta int32 | timestamp int64 |
coordinatorEpoch int32 | currentTxnFirstOffset int64` (46 bytes). The CRC is CRC-32C of every byte from offset 6
to the end of the file. The file name is the log offset the snapshot was taken at, zero-padded to 20 digits."""
from __future__ import annotations

import os
import struct
from typing import Iterable, NamedTuple

import crc32c

from audit.errors import PayloadError
from audit.systems.kafka.formats.checkpoint import java_int

VERSION = 1
SUFFIX = ".snapshot"
ENTRIES_OFFSET = 6
_HEAD = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqiqiq")


class ProducerSnapshotEntry(NamedTuple):
    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int              # -1: no batch metadata kept for this producer
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int  # -1: no ongoing transaction


def snapshot_offset(file_name: str) -> int | None:
    """The offset in a `<offset>.snapshot` name (LogFileUtils.offsetFromFileName), None for other names."""
    name = os.path.basename(file_name)
    if not name.endswith(SUFFIX):
        return None
    stem = name.split(".", 1)[0]
    return java_int(stem, (0, (1 << 63) - 1)) if stem.isdigit() else None


def parse_producer_snapshot(data: bytes, source: str) -> dict:
    """{"version", "crc", "producers": [ProducerSnapshotEntry]}; a bad version, a short file or a CRC that does
    not match raise, as readSnapshot throws CorruptSnapshotException for each."""
    if len(data) < _HEAD.size:
        raise PayloadError(source, "header@0", f"{_HEAD.size} bytes (version, crc, entry count)",
                           f"{len(data)} bytes")
    version, crc, count = _HEAD.unpack_from(data, 0)
    if version != VERSION:
        raise PayloadError(source, "version@0", f"snapshot version {VERSION} (unknown file version)", version)
    if count < 0:
        raise PayloadError(source, "producerEntries@6", "an entry count >= 0 (the array is not nullable)", count)
    if count * _ENTRY.size > len(data) - _HEAD.size:
        raise PayloadError(source, "producerEntries@6", f"{count} entries of {_ENTRY.size} bytes",
                           f"{len(data) - _HEAD.size} bytes after the header")
    computed = crc32c.crc32c(data[ENTRIES_OFFSET:])
    if computed != crc:
        raise PayloadError(source, "crc@2", f"the CRC-32C of bytes 6..{len(data)} ({computed})", crc)
    producers = [ProducerSnapshotEntry(*_ENTRY.unpack_from(data, _HEAD.size + i * _ENTRY.size))
                 for i in range(count)]
    # The broker ignores bytes after the last entry (the CRC covers them); they are reported, not refused.
    trailing = len(data) - _HEAD.size - count * _ENTRY.size
    return {"version": version, "crc": crc, "producers": producers, "trailing_bytes": trailing}


def encode_producer_snapshot(entries: Iterable[ProducerSnapshotEntry | tuple]) -> bytes:
    """writeSnapshot's bytes: version 1, the CRC-32C filled in over everything after it."""
    rows = [ProducerSnapshotEntry(*entry) for entry in entries]
    body = struct.pack(">i", len(rows)) + b"".join(_ENTRY.pack(*row) for row in rows)
    return struct.pack(">hI", VERSION, crc32c.crc32c(body)) + body


def snapshot_file_name(offset: int) -> str:
    """LogFileUtils.producerSnapshotFile: the offset zero-padded to 20 digits."""
    return f"{offset:020d}{SUFFIX}"
