"""Producer-state snapshot files: layout, CRC-32C, the broker's refusals."""
from __future__ import annotations

import struct

import crc32c
import pytest

from audit.errors import PayloadError
from audit.systems.kafka.formats.producer_snapshot import (ProducerSnapshotEntry, encode_producer_snapshot,
                                                   parse_producer_snapshot, snapshot_file_name, snapshot_offset)

SRC = "brokers/1/dir0/t-0/00000000000000000120.snapshot"
ENTRIES = [ProducerSnapshotEntry(1000, 0, 41, 119, 4, 1_700_000_000_000, -1, -1),
           ProducerSnapshotEntry(1001, 3, 9, 100, 0, 1_700_000_000_500, 7, 95)]


def test_layout_and_round_trip():
    data = encode_producer_snapshot(ENTRIES)
    assert len(data) == 10 + 46 * 2
    assert struct.unpack_from(">hIi", data) == (1, crc32c.crc32c(data[6:]), 2)
    assert struct.unpack_from(">qhiqiqiq", data, 10) == tuple(ENTRIES[0])
    assert parse_producer_snapshot(data, SRC) == {"version": 1, "crc": crc32c.crc32c(data[6:]),
                                                  "producers": ENTRIES, "trailing_bytes": 0}
    assert parse_producer_snapshot(encode_producer_snapshot([]), SRC)["producers"] == []


def test_crc_mismatch():
    data = bytearray(encode_producer_snapshot(ENTRIES))
    data[20] ^= 1
    with pytest.raises(PayloadError) as err:
        parse_producer_snapshot(bytes(data), SRC)
    assert err.value.source == SRC and err.value.field == "crc@2"


@pytest.mark.parametrize("data, field", [
    (b"\x00\x01\x00", "header@0"),
    (struct.pack(">hIi", 2, 0, 0), "version@0"),
    (struct.pack(">hIi", 1, 0, -1), "producerEntries@6"),
    (struct.pack(">hIi", 1, 0, 3) + bytes(46), "producerEntries@6"),
])
def test_refused(data, field):
    with pytest.raises(PayloadError) as err:
        parse_producer_snapshot(data, SRC)
    assert err.value.field == field


def test_trailing_bytes_are_reported_not_refused():
    body = struct.pack(">i", 0) + b"xx"
    data = struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    assert parse_producer_snapshot(data, SRC)["trailing_bytes"] == 2


def test_file_names():
    assert snapshot_file_name(120) == "00000000000000000120.snapshot"
    assert snapshot_offset(SRC) == 120
    assert snapshot_offset("00000000000000000120.log") is None
