"""MirrorMaker 2 records: the binary Struct codecs, the formatter text (real console output), topic names."""
from __future__ import annotations

import base64
import struct
from pathlib import Path

import pytest
from hypothesis import given, strategies as st
from kafka.protocol.old.types import Int16, Int32, Int64, Schema, String

from audit.errors import PayloadError
from audit.systems.kafka.formats import mm2
from audit.systems.kafka.formats.mm2 import Checkpoint, OffsetSync

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"

INT32 = st.integers(-(2 ** 31), 2 ** 31 - 1)
INT64 = st.integers(-(2 ** 63), 2 ** 63 - 1)
NAME = st.text(max_size=40)


def test_real_checkpoint_formatter_output():
    out = mm2.parse_formatter_text((REAL / "kafka-mm2-checkpoints-01.txt").read_bytes(), "cp.txt")
    assert out["offset_syncs"] == []
    assert out["checkpoints"] == [
        Checkpoint("mygroup1", "source.mytopic", 0, up, down, "")
        for up, down in [(500, 1), (6250, 5820), (7250, 7228), (8750, 8658), (9500, 9362), (9750, 9714)]]
    # the pasted command, its output header and the cut last line
    assert [u["line"] for u in out["unparsed"]] == [1, 2, 3, 4, 6, 13]
    assert out["unparsed"][-1]["text"].startswith("Checkpoint{consumerGroupId=mygroup1")
    assert "cp.txt:13: field line: expected Checkpoint{" in out["unparsed"][-1]["error"]
    with pytest.raises(PayloadError) as e:
        mm2.parse_formatter_text((REAL / "kafka-mm2-checkpoints-01.txt").read_bytes(), "cp.txt", strict=True)
    assert e.value.source == "cp.txt:1"


def test_formatter_lines_both_spellings_and_odd_metadata():
    text = ("OffsetSync{topicPartition=orders-eu-3, upstreamOffset=1200, downstreamOffset=1187}\n"
            "Checkpoint{consumerGroupId=g, topicPartition=west.orders-eu-3, upstreamOffset=1250, "
            "downstreamOffset=1188, metatadata=}\n"
            "Checkpoint{consumerGroupId=g, h, topicPartition=west.t-0, upstreamOffset=-1, downstreamOffset=0, "
            "metadata=a}b\nc}\n")
    out = mm2.parse_formatter_text(text, "f.txt", strict=True)
    assert out["offset_syncs"] == [OffsetSync("orders-eu", 3, 1200, 1187)]
    assert out["checkpoints"] == [Checkpoint("g", "west.orders-eu", 3, 1250, 1188, ""),
                                  Checkpoint("g, h", "west.t", 0, -1, 0, "a}b\nc")]


def test_offset_sync_bytes_as_the_struct_writes_them():
    key, value = mm2.encode_offset_sync(OffsetSync("t", 1, 5, 4))
    assert key == b"\x00\x01t" + b"\x00\x00\x00\x01"
    assert value == struct.pack(">qq", 5, 4)
    assert mm2.decode_offset_sync(key, value + b"extra", "k") == OffsetSync("t", 1, 5, 4)  # Schema.read ignores


def test_checkpoint_bytes_as_the_struct_writes_them():
    key, value = mm2.encode_checkpoint(Checkpoint("g", "a.t", 2, 10, 9, "m"))
    assert key == b"\x00\x01g" + b"\x00\x03a.t" + b"\x00\x00\x00\x02"
    assert value == b"\x00\x00" + struct.pack(">qq", 10, 9) + b"\x00\x01m"


@given(NAME, INT32, INT64, INT64)
def test_offset_sync_round_trip(topic, partition, up, down):
    sync = OffsetSync(topic, partition, up, down)
    assert mm2.decode_offset_sync(*mm2.encode_offset_sync(sync), "k") == sync


@given(NAME, NAME, INT32, INT64, INT64, NAME)
def test_checkpoint_round_trip(group, topic, partition, up, down, metadata):
    cp = Checkpoint(group, topic, partition, up, down, metadata)
    assert mm2.decode_checkpoint(*mm2.encode_checkpoint(cp), "k") == cp


# kafka-python's own protocol Struct types: an independent writer of the same encoding
_SYNC_KEY = Schema(("topic", String("utf-8")), ("partition", Int32))
_SYNC_VALUE = Schema(("upstreamOffset", Int64), ("offset", Int64))
_CP_KEY = Schema(("group", String("utf-8")), ("topic", String("utf-8")), ("partition", Int32))
_CP_VALUE = Schema(("version", Int16), ("upstreamOffset", Int64), ("offset", Int64), ("metadata", String("utf-8")))


@given(NAME, NAME, INT32, INT64, INT64, NAME)
def test_bytes_match_an_independent_struct_writer(group, topic, partition, up, down, metadata):
    assert mm2.encode_offset_sync(OffsetSync(topic, partition, up, down)) == (
        _SYNC_KEY.encode((topic, partition)), _SYNC_VALUE.encode((up, down)))
    assert mm2.encode_checkpoint(Checkpoint(group, topic, partition, up, down, metadata)) == (
        _CP_KEY.encode((group, topic, partition)), _CP_VALUE.encode((0, up, down, metadata)))


@pytest.mark.parametrize("key, value, field, expected", [
    (b"\x00\x05ab", struct.pack(">qq", 1, 2), "key@2.topic", "STRING bytes (5 bytes)"),
    (b"\x00\x01t\x00\x00", struct.pack(">qq", 1, 2), "key@3.partition", "INT32 (4 bytes)"),
    (b"\x00", struct.pack(">qq", 1, 2), "key@0.topic", "INT16 (2 bytes)"),
    (b"\xff\xfft", struct.pack(">qq", 1, 2), "key@0.topic", "a STRING length >= 0"),
    (b"\x00\x01t\x00\x00\x00\x01", struct.pack(">q", 1), "value@8.offset", "INT64 (8 bytes)"),
])
def test_truncated_offset_sync(key, value, field, expected):
    with pytest.raises(PayloadError) as e:
        mm2.decode_offset_sync(key, value, "mm2-offset-syncs.b.internal/0@17")
    assert (e.value.source, e.value.field) == ("mm2-offset-syncs.b.internal/0@17", field)
    assert e.value.expected.startswith(expected)


def test_checkpoint_with_an_unknown_version_or_cut_value():
    key, value = mm2.encode_checkpoint(Checkpoint("g", "a.t", 0, 1, 1, ""))
    with pytest.raises(PayloadError) as e:
        mm2.decode_checkpoint(key, b"\x00\x01" + value[2:], "a.checkpoints.internal/0@3")
    assert (e.value.field, e.value.got) == ("value@0.version", 1)
    assert "version 0" in str(e.value)
    with pytest.raises(PayloadError) as e:
        mm2.decode_checkpoint(key, value[:-1], "c")
    assert e.value.field == "value@18.metadata"
    with pytest.raises(PayloadError) as e:
        mm2.decode_checkpoint(key[:-2], value, "c")
    assert e.value.field == "key@8.partition"


def test_encoders_refuse_what_the_struct_cannot_hold():
    with pytest.raises(ValueError, match="32767"):
        mm2.encode_offset_sync(OffsetSync("t" * 40000, 0, 0, 0))


def test_topic_names_of_the_default_replication_policy():
    assert mm2.remote_topic("west", "orders") == "west.orders"
    assert mm2.remote_topic("west", "orders", "_") == "west_orders"
    assert [mm2.topic_source(t) for t in ("west.orders", "east.west.orders", "orders", "a.", ".a", "")] == \
        ["west", "east", None, None, "", None]
    assert mm2.upstream_topic("east.west.orders") == "west.orders"
    assert mm2.upstream_topic("orders") is None
    assert mm2.original_topic("east.west.orders") == "orders"
    assert mm2.original_topic("east__west__orders", "__") == "orders"
    assert mm2.offset_syncs_topic("target") == "mm2-offset-syncs.target.internal"
    assert mm2.checkpoints_topic("source") == "source.checkpoints.internal"
    assert mm2.checkpoints_topic("source", "_") == "source_checkpoints_internal"
    assert mm2.offset_syncs_alias("mm2-offset-syncs.target.internal") == "target"
    assert mm2.offset_syncs_alias("mm2-offset-syncs..internal") is None
    assert mm2.checkpoints_alias("source.checkpoints.internal") == "source"
    assert mm2.checkpoints_alias("source.heartbeats") is None
    assert [mm2.internal_separator("_", v) for v in ((2, 4), (3, 0), (3, 1), (3, 5), (3, 6))] == \
        [".", ".", "_", "_", "_"]
    assert mm2.internal_separator("_", (3, 6), separator_enabled=False) == "."
    assert mm2.internal_separator("_", (3, 5), separator_enabled=False) == "_"  # the switch came with 3.6


def _rec(partition, offset, key, value):
    return {"partition": partition, "offset": offset, "timestamp": 1, "key_b64": base64.b64encode(key).decode(),
            "value_b64": base64.b64encode(value).decode()}


def test_a_topic_dump_decodes_every_record_and_names_the_broken_one():
    good = mm2.encode_checkpoint(Checkpoint("g", "src.t", 0, 7, 6, ""))
    doc = {"topic": "src.checkpoints.internal", "records": [
        _rec(0, 0, *good), _rec(0, 1, good[0], b"\x00\x02" + good[1][2:]), {"partition": 0, "offset": 2},
        _rec(0, 3, *good)]}
    out = mm2.decode_records_dump(doc, "mm2/src/checkpoints.json")
    assert out["record_type"] == "checkpoint" and [r["record_offset"] for r in out["records"]] == [0, 3]
    assert out["records"][0] == {"record_partition": 0, "record_offset": 0, "record_timestamp": 1, "group": "g",
                                 "topic": "src.t", "partition": 0, "upstream_offset": 7, "downstream_offset": 6,
                                 "metadata": ""}
    assert len(out["errors"]) == 2
    assert out["errors"][0].startswith("mm2/src/checkpoints.json:partition 0 offset 1: field value@0.version")
    assert "records[2]" in out["errors"][1]
    syncs = mm2.decode_records_dump({"topic": "mm2-offset-syncs.tgt.internal", "records": [
        _rec(0, 5, *mm2.encode_offset_sync(OffsetSync("t", 3, 100, 90)))]}, "s.json")
    assert syncs["record_type"] == "offset-sync"
    assert syncs["records"] == [{"record_partition": 0, "record_offset": 5, "record_timestamp": 1, "topic": "t",
                                 "partition": 3, "upstream_offset": 100, "downstream_offset": 90}]
    with pytest.raises(PayloadError):
        mm2.decode_records_dump({"topic": "orders", "records": []}, "x.json")
