"""Segment `.log` files read header by header, payloads skipped (docs/formats/kafka.md §4).

How the broker walks a segment (docs/formats/kafka.md §4): offset and length at the start of every batch, magic
at byte 16 whatever the version, minimum size = the v0 record overhead, a batch running past the end is not
returned; its recovery stops at the first invalid batch and truncates there.

A segment is a run of batches back to back. The scanner reads the first 61 bytes of each (a whole v2 header; a
legacy message needs 18 or 26), seeks over the rest, and reads a batch whole only to verify its CRC. It stops at
`limit`, the size seen when the scan started: a segment still being appended to is read up to that size. How it
stops says what it saw:
- at `limit` exactly: every byte belongs to a complete batch;
- `tail` (offset, why): the bytes from `offset` do not make a complete batch before `limit` (a batch being
  written, or zero bytes of preallocated / never-written space); the broker's recovery would cut there too;
- `error` (a PayloadError naming the file, the batch's byte offset and the field): the header is garbage (an
  unknown magic, a length below the minimum). Nothing after it can be located, so the scan of this segment ends;
  the caller records it and goes on with the next file.
A CRC mismatch is not a stop: the header was readable, so the batch is kept with crc_valid False."""
from __future__ import annotations

import io
import os
from typing import BinaryIO, Callable, NamedTuple

from audit.errors import PayloadError
from audit.systems.kafka.formats.batch import (HEADER_SIZE, LOG_OVERHEAD, PREFIX_SIZE, BatchHeader, batch_crc,
                                       check_prefix, decode_header)
from audit.systems.kafka.formats.checkpoint import java_int

LOG_SUFFIX = ".log"
COLUMNS = ("base_offset", "last_offset", "partition_leader_epoch", "magic", "crc", "crc_valid", "attributes",
           "max_timestamp", "base_timestamp", "producer_id", "producer_epoch", "base_sequence", "records_count",
           "position", "size")
_ZERO_PREFIX = bytes(PREFIX_SIZE)


class SegmentScan(NamedTuple):
    batches: list[tuple[int, BatchHeader, bool | None]]  # (position, header, crc_valid or None if not verified)
    read_bytes: int             # bytes covered by complete batches: where the scan stopped
    tail: tuple[int, str] | None
    error: PayloadError | None  # the failing batch starts at read_bytes


def segment_base_offset(file_name: str) -> int | None:
    """LogFileUtils.offsetFromFileName: the digits before the first dot (None if they are not a long)."""
    stem = os.path.basename(file_name).split(".", 1)[0]
    return java_int(stem, (0, (1 << 63) - 1)) if stem.isdigit() else None


def _reader(fileobj: BinaryIO) -> Callable[[int, int], bytes]:
    # pread: no shared file position and no read-ahead buffer refilled on every seek (the bench reads at GB/s).
    try:
        fd = fileobj.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        fd = None
    if fd is not None and hasattr(os, "pread"):
        return lambda pos, n: os.pread(fd, n, pos)

    def read_at(pos: int, n: int) -> bytes:
        fileobj.seek(pos)
        return fileobj.read(n)
    return read_at


def scan_segment(fileobj: BinaryIO, source: str, *, limit: int, verify_crc: bool) -> SegmentScan:
    """Batch headers of one segment from byte 0 up to `limit` (the file size seen at start)."""
    read_at = _reader(fileobj)
    batches: list[tuple[int, BatchHeader, bool | None]] = []
    pos = 0
    while pos < limit:
        remaining = limit - pos
        head = read_at(pos, min(HEADER_SIZE, remaining))
        if len(head) < min(HEADER_SIZE, remaining):
            return SegmentScan(batches, pos, (pos, f"the file ended at byte {pos + len(head)}, before the "
                                          f"{limit} bytes seen at start (truncated while scanning)"), None)
        if len(head) < PREFIX_SIZE:
            return SegmentScan(batches, pos, (pos, f"partial batch: {len(head)} bytes, fewer than the "
                                          f"{PREFIX_SIZE} that locate a batch"), None)
        if head[:PREFIX_SIZE] == _ZERO_PREFIX:
            return SegmentScan(batches, pos, (pos, "zero bytes where a batch should start (preallocated or "
                                          "never-written space)"), None)
        try:
            _, length = check_prefix(head, source, pos)
        except PayloadError as exc:
            return SegmentScan(batches, pos, None, exc)
        if length + LOG_OVERHEAD > remaining:
            return SegmentScan(batches, pos, (pos, f"partial batch: {length + LOG_OVERHEAD} bytes declared, "
                                          f"{remaining} before the size seen at start"), None)
        header = decode_header(head, source, pos)  # complete batch: its header bytes are all in `head`
        valid = None
        if verify_crc:
            whole = read_at(pos, header.size)
            if len(whole) < header.size:
                return SegmentScan(batches, pos, (pos, "the file ended inside this batch (truncated while "
                                              "scanning)"), None)
            valid = batch_crc(whole) == header.crc
        batches.append((pos, header, valid))
        pos += header.size
    return SegmentScan(batches, pos, None, None)


def batch_columns(batches: list[tuple[int, BatchHeader, bool | None]]) -> dict[str, list]:
    """The column arrays of batches.json (`COLUMNS`), one entry per batch."""
    columns: dict[str, list] = {name: [] for name in COLUMNS}
    for position, h, valid in batches:
        row = (h.base_offset, h.last_offset, h.partition_leader_epoch, h.magic, h.crc, valid, h.attributes,
               h.max_timestamp, h.base_timestamp, h.producer_id, h.producer_epoch, h.base_sequence,
               h.records_count, position, h.size)
        for name, value in zip(COLUMNS, row):
            columns[name].append(value)
    return columns
