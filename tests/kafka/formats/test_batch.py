"""Record batch v2 headers and records, legacy magic 0/1 messages, varints; round trips and bad input."""
from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.errors import PayloadError
from audit.systems.kafka.formats.batch import (HEADER_SIZE, BatchHeader, batch_crc, decode_batch, decode_header,
                                       encode_batch, encode_legacy)
from audit.systems.kafka.formats.records import (SimpleRecord, control_record, control_type, encode_record, read_varint,
                                         read_varlong, write_varint, write_varlong)

SEGMENT = Path(__file__).parents[2] / "fixtures/real/kafka-broker-logdir-01/one-0/00000000000000000000.log"
SRC = "brokers/1/dir0/t-0/00000000000000000000.log"


def test_real_first_batch():
    data = SEGMENT.read_bytes()
    header = decode_header(data, SRC, 0)
    assert header == BatchHeader(base_offset=0, batch_length=71, partition_leader_epoch=0, magic=2, crc=4038045978,
                                 attributes=0, last_offset_delta=0, base_timestamp=1721562821769,
                                 max_timestamp=1721562821769, producer_id=0, producer_epoch=0, base_sequence=0,
                                 records_count=1)
    assert header.size == 83 and header.last_offset == 0 and header.codec == "none"
    assert header.timestamp_type == "CreateTime" and not header.transactional and not header.control
    assert batch_crc(data[:83]) == header.crc == crc32c.crc32c(data[21:83])
    _, records = decode_batch(data[:83], SRC)
    assert [(r.offset, r.timestamp, r.sequence, r.key, r.value) for r in records] == \
        [(0, 1721562821769, 0, None, b'{"topic":"one"}')]


def test_encoder_reproduces_real_batches_byte_for_byte():
    data, pos = SEGMENT.read_bytes(), 0
    while pos < len(data):
        header, records = decode_batch(memoryview(data)[pos:], SRC, pos)
        again = encode_batch(header.base_offset, header.partition_leader_epoch,
                             [SimpleRecord(r.key, r.value, r.timestamp, r.headers) for r in records],
                             producer_id=header.producer_id, producer_epoch=header.producer_epoch,
                             base_sequence=header.base_sequence, attributes=header.attributes)
        assert again == data[pos:pos + header.size]
        pos += header.size
    assert pos == len(data)


def test_partition_leader_epoch_is_outside_the_crc():
    batch = bytearray(encode_batch(5, 3, [b"a", b"b"]))
    batch[12:16] = struct.pack(">i", 9)   # what a new leader does when it appends a follower's batch
    assert decode_header(batch, SRC).partition_leader_epoch == 9
    assert batch_crc(batch) == decode_header(batch, SRC).crc
    batch[30] ^= 1                        # a timestamp bit: inside the CRC
    assert batch_crc(batch) != decode_header(batch, SRC).crc


def test_attribute_bits():
    marker = encode_batch(10, 2, [control_record("COMMIT", coordinator_epoch=4, timestamp=77)],
                          producer_id=1000, producer_epoch=2, attributes=0x30 | 0x08, max_timestamp=99)
    header, records = decode_batch(marker, SRC)
    assert header.control and header.transactional and header.timestamp_type == "LogAppendTime"
    assert records[0].timestamp == 99      # LogAppendTime: every record takes the batch's max timestamp
    assert control_type(records[0].key) == "COMMIT"
    assert records[0].value == struct.pack(">hi", 0, 4)
    assert control_type(b"\x00\x00\x00\x02") == "LEADER_CHANGE" and control_type(None) == "UNKNOWN"


def test_gzip_round_trip_and_other_codecs_refused_by_name():
    records = [SimpleRecord(b"k%d" % i, b"v" * i, 1000 + i, (("h", b"x"), ("n", None))) for i in range(5)]
    batch = encode_batch(100, 1, records, attributes=1)
    header, decoded = decode_batch(batch, SRC)
    assert header.codec == "gzip" and header.records_count == 5 and header.last_offset == 104
    assert [(r.key, r.value, r.timestamp, r.headers) for r in decoded] == [tuple(r) for r in records]
    snappy = bytearray(batch)
    snappy[22] = 2
    with pytest.raises(PayloadError) as err:
        decode_batch(snappy, SRC, 4096)
    assert err.value.field == "batch@4096.attributes.codec" and err.value.got == "snappy"
    assert decode_header(snappy, SRC).codec == "snappy"     # headers read the same whatever the codec


def test_compacted_batch_offsets_and_empty_batch():
    header, records = decode_batch(encode_batch(0, 0, [b"a", b"b"], offset_deltas=[1, 4]), SRC)
    assert [r.offset for r in records] == [1, 4] and header.last_offset == 4
    empty = decode_header(encode_batch(50, 0, [], last_offset_delta=9), SRC)
    assert (empty.records_count, empty.last_offset, empty.size) == (0, 59, HEADER_SIZE)


def test_sequence_wraps_like_the_broker():
    batch = encode_batch(0, 0, [b"a", b"b", b"c"], producer_id=7, producer_epoch=0, base_sequence=2**31 - 2)
    header, records = decode_batch(batch, SRC)
    assert [r.sequence for r in records] == [2**31 - 2, 2**31 - 1, 0] and header.last_sequence == 0


@pytest.mark.parametrize("patch, field", [
    ({16: 3}, "batch@640.magic"),
    ({16: 0xFF}, "batch@640.magic"),
    ({8: 0, 9: 0, 10: 0, 11: 48}, "batch@640.batchLength"),   # below 49: no room for the v2 header
])
def test_garbage_headers(patch, field):
    batch = bytearray(encode_batch(0, 0, [b"x"]))
    for index, value in patch.items():
        batch[index] = value
    with pytest.raises(PayloadError) as err:
        decode_header(batch, SRC, 640)
    assert err.value.source == SRC and err.value.field == field


def test_short_buffers():
    batch = encode_batch(0, 0, [b"x"])
    with pytest.raises(PayloadError, match="at least 17 bytes"):
        decode_header(batch[:16], SRC)
    with pytest.raises(PayloadError, match="61-byte v2 header"):
        decode_header(batch[:40], SRC)
    with pytest.raises(PayloadError, match=r"\(the batch length\)"):
        decode_batch(batch[:-1], SRC)


def test_record_errors_name_the_record():
    good = encode_record(0, 0, b"k", b"v")
    bad_size = write_varint(len(good) - 1 + 3) + good[1:] + b"xyz"   # a body length that is 3 too long
    batch = bytearray(encode_batch(0, 0, [b"v"]))
    body = batch[:HEADER_SIZE] + bad_size
    body[8:12] = struct.pack(">i", len(body) - 12)
    with pytest.raises(PayloadError) as err:
        decode_batch(bytes(body), SRC)
    assert err.value.field.startswith("batch@0.record[0]")
    leftover = bytearray(batch + b"\x00")
    leftover[8:12] = struct.pack(">i", len(leftover) - 12)
    with pytest.raises(PayloadError, match="declared batch size"):
        decode_batch(bytes(leftover), SRC)


def test_varints():
    vectors = {0: b"\x00", -1: b"\x01", 1: b"\x02", 63: b"\x7e", -64: b"\x7f", 64: b"\x80\x01",
               2**31 - 1: b"\xfe\xff\xff\xff\x0f", -(2**31): b"\xff\xff\xff\xff\x0f"}
    for value, raw in vectors.items():
        assert write_varint(value) == raw and read_varint(raw, 0) == (value, len(raw))
    assert read_varlong(write_varlong(-(2**63)), 0)[0] == -(2**63)
    with pytest.raises(ValueError):
        read_varint(b"\x80\x80\x80\x80\x80\x01", 0)   # the 5th byte has its continuation bit set


def test_legacy_messages():
    v1 = encode_legacy(42, b"value", key=b"k", magic=1, timestamp=1_600_000_000_000)
    header, records = decode_batch(v1, SRC)
    assert (header.magic, header.base_offset, header.last_offset, header.partition_leader_epoch) == (1, 42, 42, -1)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (-1, -1, -1)
    assert header.max_timestamp == 1_600_000_000_000 and header.timestamp_type == "CreateTime"
    assert batch_crc(v1) == header.crc and header.size == len(v1)
    assert (records[0].key, records[0].value) == (b"k", b"value")
    v0 = decode_header(encode_legacy(7, None, magic=0), SRC)
    assert (v0.magic, v0.max_timestamp, v0.timestamp_type, v0.batch_length) == (0, -1, "NoTimestampType", 14)
    wrapper = decode_header(encode_legacy(9, b"...", magic=1, attributes=1), SRC)
    assert wrapper.codec == "gzip" and wrapper.records_count == -1


int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
blobs = st.one_of(st.none(), st.binary(max_size=40))
simple = st.builds(SimpleRecord, blobs, blobs, st.integers(0, 2**41),
                   st.lists(st.tuples(st.text(max_size=5), blobs), max_size=2).map(tuple))


@settings(max_examples=150, deadline=None)
@given(base=st.integers(0, 2**62), epoch=int32, records=st.lists(simple, min_size=1, max_size=6),
       pid=int64, pepoch=st.integers(-(2**15), 2**15 - 1), seq=st.integers(-1, 2**31 - 1),
       attributes=st.sampled_from([0, 1, 0x10, 0x11]))
def test_encode_decode_property(base, epoch, records, pid, pepoch, seq, attributes):
    batch = encode_batch(base, epoch, records, producer_id=pid, producer_epoch=pepoch, base_sequence=seq,
                         attributes=attributes)
    header = decode_header(batch, SRC)
    assert (header.base_offset, header.partition_leader_epoch, header.magic, header.producer_id,
            header.producer_epoch, header.base_sequence, header.attributes) == (base, epoch, 2, pid, pepoch, seq,
                                                                                 attributes)
    assert header.size == len(batch) and header.records_count == len(records)
    assert header.last_offset == base + len(records) - 1
    assert header.base_timestamp == records[0].timestamp and header.max_timestamp == max(r.timestamp for r in records)
    assert batch_crc(batch) == header.crc
    _, decoded = decode_batch(batch, SRC)
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in decoded] == \
        [(base + i, r.key, r.value, r.timestamp, r.headers) for i, r in enumerate(records)]
