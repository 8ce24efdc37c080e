"""Segment scanning: headers only, a limit for growing segments, tails, garbage headers, CRC checks, legacy."""
from __future__ import annotations

import io
import struct

import pytest

from audit.errors import PayloadError
from audit.systems.kafka.formats.batch import encode_batch, encode_legacy
from audit.systems.kafka.formats.segment import COLUMNS, batch_columns, scan_segment, segment_base_offset

NAME = "brokers/2/dir0/t-0/00000000000000000100.log"


def segment(count: int = 4, size: int = 200) -> tuple[bytes, list[int]]:
    batches = [encode_batch(100 + 3 * i, 1 + i // 2, [b"x" * size] * 3, producer_id=9, producer_epoch=0,
                            base_sequence=3 * i) for i in range(count)]
    positions, pos = [], 0
    for batch in batches:
        positions.append(pos)
        pos += len(batch)
    return b"".join(batches), positions


def write(tmp_path, data: bytes):
    path = tmp_path / "00000000000000000100.log"
    path.write_bytes(data)
    return path


def scan(tmp_path, data: bytes, limit: int | None = None, verify: bool = True):
    with open(write(tmp_path, data), "rb", buffering=0) as f:
        return scan_segment(f, NAME, limit=len(data) if limit is None else limit, verify_crc=verify)


def test_whole_segment(tmp_path):
    data, positions = segment()
    result = scan(tmp_path, data)
    assert [p for p, _, _ in result.batches] == positions
    assert [h.base_offset for _, h, _ in result.batches] == [100, 103, 106, 109]
    assert [h.partition_leader_epoch for _, h, _ in result.batches] == [1, 1, 2, 2]
    assert all(valid for _, _, valid in result.batches)
    assert (result.read_bytes, result.tail, result.error) == (len(data), None, None)


def test_crc_not_verified_gives_none(tmp_path):
    data, _ = segment()
    assert {valid for _, _, valid in scan(tmp_path, data, verify=False).batches} == {None}


def test_payload_not_read_without_crc_check():
    data, _ = segment(size=5000)

    class Counting(io.BytesIO):
        read_sizes: list[int] = []

        def read(self, n=-1):
            self.read_sizes.append(n)
            return super().read(n)
    fileobj = Counting(data)
    result = scan_segment(fileobj, NAME, limit=len(data), verify_crc=False)
    assert len(result.batches) == 4 and max(fileobj.read_sizes) == 61


def test_limit_inside_a_batch_is_a_tail(tmp_path):
    data, positions = segment()
    result = scan(tmp_path, data + encode_batch(112, 3, [b"late"]), limit=positions[3] + 30)
    assert len(result.batches) == 3 and result.read_bytes == positions[3]
    assert result.tail[0] == positions[3] and "partial batch" in result.tail[1] and result.error is None


def test_growing_segment_is_read_up_to_the_size_seen_at_start(tmp_path):
    data, _ = segment()
    path = write(tmp_path, data)
    with open(path, "rb", buffering=0) as f:
        limit = path.stat().st_size
        with open(path, "ab") as appender:    # the broker appends while we scan
            appender.write(encode_batch(112, 3, [b"new"]))
        result = scan_segment(f, NAME, limit=limit, verify_crc=True)
    assert len(result.batches) == 4 and result.read_bytes == limit and result.tail is None


def test_file_truncated_while_scanning(tmp_path):
    data, positions = segment()
    result = scan(tmp_path, data[:positions[2] + 10], limit=len(data))
    assert len(result.batches) == 2 and result.tail[0] == positions[2] and "truncated" in result.tail[1]


def test_few_bytes_after_the_last_batch(tmp_path):
    data, _ = segment(2)
    result = scan(tmp_path, data + b"\x00\x00\x00\x00\x00\x00\x00\x07\x00")
    assert result.read_bytes == len(data) and "fewer than the 17" in result.tail[1]


def test_zero_filled_space_is_a_tail(tmp_path):
    data, _ = segment(2)
    result = scan(tmp_path, data + bytes(4096))
    assert len(result.batches) == 2 and result.tail == (len(data), result.tail[1]) and "zero" in result.tail[1]


def test_crc_mismatch_is_flagged_and_the_scan_goes_on(tmp_path):
    data, positions = segment()
    corrupt = bytearray(data)
    corrupt[positions[1] + 100] ^= 0x40       # one payload bit of the second batch
    result = scan(tmp_path, bytes(corrupt))
    assert [valid for _, _, valid in result.batches] == [True, False, True, True] and result.error is None


@pytest.mark.parametrize("offset, value, field", [(16, 7, "magic"), (11, 20, "batchLength")])
def test_garbage_header_stops_this_segment_with_file_and_offset(tmp_path, offset, value, field):
    data, positions = segment()
    corrupt = bytearray(data)
    if field == "magic":
        corrupt[positions[2] + offset] = value
    else:
        corrupt[positions[2] + 8:positions[2] + 12] = struct.pack(">i", value)
    result = scan(tmp_path, bytes(corrupt))
    assert len(result.batches) == 2 and result.read_bytes == positions[2] and result.tail is None
    assert isinstance(result.error, PayloadError)
    assert result.error.source == NAME and result.error.field == f"batch@{positions[2]}.{field}"
    assert f"{NAME}: field batch@{positions[2]}" in str(result.error)


def test_legacy_messages_then_v2_after_an_upgrade(tmp_path):
    old = encode_legacy(0, b"a", magic=0) + encode_legacy(1, b"b", magic=1, timestamp=5) \
        + encode_legacy(3, b"zipped", magic=1, timestamp=6, attributes=1)
    data = old + encode_batch(4, 0, [b"c"])
    result = scan(tmp_path, data)
    assert [(h.magic, h.base_offset, h.last_offset, h.partition_leader_epoch) for _, h, _ in result.batches] == \
        [(0, 0, 0, -1), (1, 1, 1, -1), (1, 3, 3, -1), (2, 4, 4, 0)]
    assert all(valid for _, _, valid in result.batches) and result.read_bytes == len(data)


def test_empty_segment(tmp_path):
    assert scan(tmp_path, b"") == ([], 0, None, None)


def test_columns_and_file_names(tmp_path):
    data, positions = segment(2)
    columns = batch_columns(scan(tmp_path, data).batches)
    assert list(columns) == list(COLUMNS)
    assert columns["position"] == positions and columns["last_offset"] == [102, 105]
    assert columns["size"] == [positions[1], len(data) - positions[1]] and columns["crc_valid"] == [True, True]
    assert segment_base_offset("x/00000000000000000100.log") == 100
    assert segment_base_offset("00000000000000000100.log.deleted") == 100
    assert segment_base_offset("leader-epoch-checkpoint") is None
