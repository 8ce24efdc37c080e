"""kafka-dump-log output of every generation (lines written as each tag's DumpLogSegments.scala prints them),
the two real outputs, hard-wrapped lines, and lines the parser has never seen."""
from __future__ import annotations

from pathlib import Path

import pytest

from audit.errors import PayloadError
from audit.systems.kafka.formats.dump_log import looks_like_dump_log, parse_dump_log

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
LOG = "Dumping /data/t-0/00000000000000000000.log"

# the v2 batch fields every generation since 2.0 prints first (printBatchLevel / the shallow branch)
V2 = ("baseOffset: 0 lastOffset: 2 count: 3 baseSequence: 0 lastSequence: 2 producerId: 7 producerEpoch: 1 "
      "partitionLeaderEpoch: 4 isTransactional: true isControl: false")


def _dump(*lines: str, strict: bool = True) -> dict:
    return parse_dump_log("\n".join(lines) + "\n", "dump.txt", strict=strict)


def _only_file(*lines: str) -> dict:
    out = _dump(*lines)
    assert len(out["files"]) == 1 and out["files"][0]["unparsed"] == []
    return out["files"][0]


def test_real_snapshot_dump_3x():
    out = parse_dump_log((REAL / "kafka-dump-log-01.txt").read_bytes(), "kafka-dump-log-01.txt", strict=True)
    assert [p["line"] for p in out["preamble"]] == [1]
    (f,) = out["files"]
    assert f["kind"] == "snapshot" and f["file"].endswith("00000000000000000000-0000000000.checkpoint")
    assert (f["snapshot_end_offset"], f["snapshot_epoch"], f["segment_base_offset"]) == (0, 0, None)
    assert f["generations"] == ["batch 3.2+", "record 3.1+"]
    b0, b1 = f["batches"]
    assert b0 == {"base_offset": 0, "last_offset": 0, "count": 1, "partition_leader_epoch": 0, "producer_id": -1,
                  "producer_epoch": -1, "base_sequence": -1, "last_sequence": -1, "is_transactional": False,
                  "is_control": True, "delete_horizon_ms": None, "position": 0, "size": 83, "magic": 2,
                  "crc": 3406426388, "is_valid": True, "timestamp_type": "CreateTime", "timestamp": 1653548892941,
                  "codec": "none", "line": 5}
    assert (b1["base_offset"], b1["last_offset"], b1["count"], b1["is_control"]) == (1, 4, 4, False)
    assert (b1["position"], b1["size"], b1["crc"]) == (b0["position"] + b0["size"], 237, 2671055946)
    r0, r1 = f["records"]
    assert (r0["offset"], r0["key_size"], r0["value_size"], r0["control_type"], r0["batch"]) == \
        (0, 4, 11, "SNAPSHOT_HEADER", 0)
    assert (r1["offset"], r1["key_size"], r1["value_size"], r1["control_type"], r1["batch"], r1["line"]) == \
        (1, -1, 36, None, 1, 8)
    assert r1["header_keys"] == [] and r1["sequence"] == -1


def test_real_hard_wrapped_leader_change_dump():
    out = parse_dump_log((REAL / "kafka-dump-log-02.txt").read_bytes(), "kafka-dump-log-02.txt", strict=True)
    assert [p["line"] for p in out["preamble"]] == [1, 2]
    (f,) = out["files"]
    assert (f["kind"], f["segment_base_offset"], f["line"]) == ("log", 0, 3)
    (b,) = f["batches"]
    assert (b["base_offset"], b["last_offset"], b["count"], b["partition_leader_epoch"], b["is_control"]) == \
        (0, 2, 3, 1, True)
    assert (b["position"], b["size"], b["crc"], b["timestamp"], b["codec"], b["line"]) == \
        (0, 174, 3714449884, 1747299887693, "none", 5)
    assert [(r["offset"], r["value_size"], r["control_type"], r["line"]) for r in f["records"]] == [
        (0, 19, "LEADER_CHANGE", 10), (1, 5, "KRAFT_VERSION", 12), (2, 55, "KRAFT_VOTERS", 14)]


@pytest.mark.parametrize("line, generation, extra", [
    (V2 + " deleteHorizonMs: OptionalLong[1700000000000] position: 0 LogAppendTime: 17 size: 120 magic: 2 "
     "compresscodec: zstd crc: 42 isvalid: false", "batch 3.2+", {"delete_horizon_ms": 1700000000000}),
    (V2 + " position: 0 LogAppendTime: 17 size: 120 magic: 2 compresscodec: zstd crc: 42 isvalid: false",
     "batch 2.2-3.1", {}),
    # before 3.1 the codec is the enum's default toString (upper case)
    (V2 + " position: 0 LogAppendTime: 17 isvalid: false size: 120 magic: 2 compresscodec: ZSTD crc: 42",
     "batch 2.0-2.1", {}),
    ("baseOffset: 0 lastOffset: 2 baseSequence: 0 lastSequence: 2 producerId: 7 producerEpoch: 1 "
     "partitionLeaderEpoch: 4 isTransactional: true position: 0 LogAppendTime: 17 isvalid: false size: 120 "
     "magic: 2 compresscodec: ZSTD crc: 42", "batch 0.11-1.1", {"count": None, "is_control": None}),
])
def test_v2_batch_lines_of_each_generation(line, generation, extra):
    f = _only_file(LOG, "Starting offset: 0", line)
    (b,) = f["batches"]
    want = {"base_offset": 0, "last_offset": 2, "count": 3, "partition_leader_epoch": 4, "producer_id": 7,
            "producer_epoch": 1, "base_sequence": 0, "last_sequence": 2, "is_transactional": True,
            "is_control": False, "delete_horizon_ms": None, "position": 0, "size": 120, "magic": 2, "crc": 42,
            "is_valid": False, "timestamp_type": "LogAppendTime", "timestamp": 17, "codec": "zstd", "line": 3}
    assert b == {**want, **extra}
    assert f["generations"] == [generation] and f["segment_base_offset"] == 0


@pytest.mark.parametrize("line, generation", [
    ("offset: 9 position: 300 CreateTime: 5 size: 70 magic: 1 compresscodec: GZIP crc: 11 isvalid: true",
     "legacy batch 2.2+"),
    ("offset: 9 position: 300 CreateTime: 5 isvalid: true size: 70 magic: 1 compresscodec: GZIP crc: 11",
     "legacy batch 0.11-2.1"),
    ("offset: 9 position: 300 CreateTime: 5 isvalid: true payloadsize: 20 magic: 1 compresscodec: GZIP crc: 11 "
     "keysize: 3", "message 0.10.1-0.10.2"),
    ("offset: 9 position: 300 isvalid: true payloadsize: 20 magic: 1 compresscodec: GZIPCompressionCodec crc: 11 "
     "keysize: 3 key: abc payload: hello", "message 0.8-0.10.0"),
])
def test_magic_0_and_1_lines_become_one_offset_batches(line, generation):
    (b,) = _only_file(LOG, line)["batches"]
    assert (b["base_offset"], b["last_offset"], b["magic"], b["codec"], b["crc"], b["position"]) == \
        (9, 9, 1, "gzip", 11, 300)
    # what Kafka's AbstractLegacyRecordBatch answers for fields a magic 0/1 batch does not have
    assert (b["partition_leader_epoch"], b["producer_id"], b["count"], b["is_control"]) == (-1, -1, None, False)
    assert _only_file(LOG, line)["generations"] == [generation]


def test_deep_iteration_0_11_to_2_1_prints_records_only():
    f = _only_file(
        LOG, "Starting offset: 0",
        "offset: 0 position: 0 CreateTime: 5 isvalid: true keysize: 3 valuesize: 5 magic: 2 compresscodec: NONE "
        "producerId: 7 producerEpoch: 1 sequence: 0 isTransactional: true headerKeys: [a,b c] key: k payload: p",
        "offset: 1 position: 0 CreateTime: 5 isvalid: true keysize: 4 valuesize: 6 magic: 2 compresscodec: NONE "
        "producerId: 7 sequence: 1 isTransactional: true headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 3",
        "offset: 2 position: 90 LogAppendTime: 6 isvalid: false keysize: -1 valuesize: 4 magic: 1 "
        "compresscodec: SNAPPY crc: 77")
    assert f["batches"] == []
    r0, r1, r2 = f["records"]
    assert (r0["header_keys"], r0["producer_epoch"], r0["is_transactional"], r0["batch"]) == (["a", "b c"], 1, True,
                                                                                             None)
    assert (r1["control_type"], r1["coordinator_epoch"], r1["producer_epoch"]) == ("COMMIT", 3, None)
    assert (r2["crc"], r2["is_valid"], r2["codec"], r2["magic"]) == (77, False, "snappy", 1)
    assert f["generations"] == ["record 0.11-2.1", "legacy record 0.11-2.1"]


def test_record_lines_2_2_to_2_7_and_3_1_on():
    batch = V2 + " position: 0 CreateTime: 5 size: 120 magic: 2 compresscodec: NONE crc: 42 isvalid: true"
    f = _only_file(LOG, batch,
                   "| offset: 0 CreateTime: 5 keysize: 3 valuesize: 5 sequence: 0 headerKeys: [h] key: k payload: p",
                   "| offset: 1 CreateTime: 5 keysize: 3 valuesize: 5 sequence: 1 headerKeys: [] controlType: "
                   "UNKNOWN(9)",
                   "| offset: 2 CreateTime: 5 keysize: -1 valuesize: 4 crc: 12 isvalid: true",
                   "| offset: 3 CreateTime: 5 keySize: 3 valueSize: 5 sequence: 2 headerKeys: []",
                   "| offset: 4 CreateTime: 5 keySize: -1 valueSize: 4 isValid: true crc: 13}")
    assert [(r["offset"], r["sequence"], r["crc"], r["control_type"], r["batch"]) for r in f["records"]] == [
        (0, 0, None, None, 0), (1, 1, None, "UNKNOWN(9)", 0), (2, None, 12, None, 0), (3, 2, None, None, 0),
        (4, None, 13, None, 0)]
    assert f["generations"] == ["batch 2.2-3.1", "record 2.2-2.7", "legacy record 2.2-2.7", "record 3.1+",
                                "legacy record 3.1+"]


def test_2_8_regression_repeats_batch_fields_on_record_lines():
    rec = ("| offset: 0 isValid: true crc: null keySize: 3 valueSize: 5 CreateTime: 5 baseOffset: 0 lastOffset: 2 "
           "baseSequence: 0 lastSequence: 2 producerEpoch: 1 partitionLeaderEpoch: 4 batchSize: 120 magic: 2 "
           "compressType: NONE position: 0 sequence: 0 headerKeys: [] key: k payload: p")
    legacy = ("| offset: 9 isValid: true crc: 11 keySize: -1 valueSize: 4 NoTimestampType: -1 baseOffset: 9 "
              "lastOffset: 9 baseSequence: -1 lastSequence: -1 producerEpoch: -1 partitionLeaderEpoch: -1 "
              "batchSize: 40 magic: 0 compressType: NONE position: 120 crc: 11 isvalid: true")
    f = _only_file(LOG, V2 + " position: 0 CreateTime: 5 size: 120 magic: 2 compresscodec: NONE crc: 42 "
                   "isvalid: true", rec, legacy)
    r0, r1 = f["records"]
    assert (r0["offset"], r0["crc"], r0["is_valid"], r0["position"], r0["codec"], r0["magic"]) == \
        (0, None, True, 0, "none", 2)
    assert (r1["offset"], r1["crc"], r1["timestamp_type"], r1["timestamp"], r1["magic"]) == \
        (9, 11, "NoTimestampType", -1, 0)
    assert f["generations"][1:] == ["record 2.8-3.0", "legacy record 2.8-3.0"]


def test_a_line_wrapped_before_a_field_name_that_also_starts_lines_is_joined():
    f = _only_file(LOG, V2 + " position: 0 CreateTime: 5 size: 120 magic: 2 compresscodec: NONE crc: 42",
                   "isvalid: true",
                   "| offset: 0 isValid: true crc: null keySize: 3 valueSize: 5 CreateTime: 5",
                   "baseOffset: 0 lastOffset: 2 baseSequence: 0 lastSequence: 2 producerEpoch: 1",
                   "partitionLeaderEpoch: 4 batchSize: 120 magic: 2 compressType: NONE position: 0 sequence: 0",
                   "headerKeys: []",
                   "key: k payload: a payload",
                   "that goes on over lines",
                   "",
                   "| offset: 1 CreateTime: 5 keySize: 3 valueSize: 5 sequence: 1 headerKeys: []")
    assert len(f["batches"]) == 1 and [r["offset"] for r in f["records"]] == [0, 1]
    assert [r["line"] for r in f["records"]] == [4, 11]


def test_a_wrapped_transaction_marker_and_a_wrapped_decoded_control_record():
    f = _only_file(LOG, V2.replace("isControl: false", "isControl: true") + " position: 0 CreateTime: 5 size: 78 "
                   "magic: 2 compresscodec: none crc: 42 isvalid: true",
                   "| offset: 0 CreateTime: 5 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: ABORT",
                   "coordinatorEpoch: 12",
                   "| offset: 1 CreateTime: 5 keySize: 4 valueSize: 6 sequence: -1 headerKeys: []",
                   'SnapshotFooter {"version":0}')
    assert [(r["control_type"], r["coordinator_epoch"]) for r in f["records"]] == [("ABORT", 12),
                                                                                 ("SNAPSHOT_FOOTER", None)]


def test_other_files_headers_trailer_and_diagnostics():
    out = _dump(
        "Dumping /d/t-0/00000000000000000000.index", "offset: 10 position: 4096",
        "Dumping /d/t-0/00000000000000000000.timeindex", "timestamp: 17 offset: 10",
        "Dumping /d/t-0/00000000000000000000.txnindex",
        "version: 0 producerId: 5 firstOffset: 0 lastOffset: 9 lastStableOffset: 10",
        "Dumping /d/t-0/00000000000000000010.snapshot",
        "producerId: 5 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        "lastTimestamp: 17 firstSequence: 0 lastSequence: 9 lastOffset: 9 offsetDelta: 9 timestamp: 17",
        "producerId: 6 producerEpoch: 2 lastSequence: 4 lastOffset: 8 offsetDelta: 4 lastTimestamp: 17 "
        "coordinatorEpoch: 0 currentTxnFirstOffset: Some(3)",
        "Dumping /d/t-0/00000000000000000020.index", "/d/t-0/00000000000000000020.index is empty.",
        "Dumping /d/bootstrap.checkpoint", "KRaft bootstrap snapshot",
        LOG, "Log starting offset: 0", "Found 13 invalid bytes at the end of 00000000000000000000.log",
        "Non-consecutive offsets in /d/t-0/00000000000000000000.log", "  5 is followed by 7",
        "Ignoring unknown file /d/t-0/leader-epoch-checkpoint")
    index, tindex, txn, producers, empty, boot, log = out["files"]
    assert index["entries"] == [{"offset": 10, "position": 4096, "line": 2}]
    assert tindex["entries"] == [{"timestamp": 17, "offset": 10, "line": 4}]
    assert txn["entries"][0]["last_stable_offset"] == 10
    assert [(e["producer_id"], e["current_txn_first_offset"], e["last_sequence"]) for e in producers["entries"]] == \
        [(5, None, 9), (6, 3, 4)]
    assert producers["generations"] == ["producer state 1.0+", "producer state 0.11"]
    assert empty["notes"] == ["/d/t-0/00000000000000000020.index is empty."]
    assert (boot["kind"], boot["notes"]) == ("bootstrap-snapshot", ["KRaft bootstrap snapshot"])
    assert (log["invalid_trailing_bytes"], log["segment_base_offset"]) == (13, 0)
    assert out["diagnostics"] == [
        {"line": 18, "kind": "non_consecutive", "file": "/d/t-0/00000000000000000000.log", "values": [5, 7]},
        {"line": 19, "kind": "ignored_file", "file": "/d/t-0/leader-epoch-checkpoint", "values": []}]


def test_skip_record_metadata_lines_are_counted_not_kept():
    f = _only_file(LOG, V2 + " position: 0 CreateTime: 5 size: 120 magic: 2 compresscodec: none crc: 42 "
                   "isvalid: true", "| key: k payload: secret", " payload: secret2", "more secret")
    assert f["payload_lines"] == 2 and f["records"] == []
    assert "secret" not in repr(f)


@pytest.mark.parametrize("lines, line_no, expected", [
    # a field Kafka never printed, inserted before position
    ((LOG, V2 + " futureField: 1 position: 0 CreateTime: 5 size: 120 magic: 2 compresscodec: none crc: 42 "
      "isvalid: true"), 2, "known generation"),
    ((LOG, "Log starting offset: 0", "something else entirely"), 3, "known generation"),
    ((LOG, "baseOffset: 0 lastOffset: 2 count: 3"), 2, "the rest of a batch 3.2+ line"),
    ((LOG, V2 + " position: x CreateTime: 5 size: 120 magic: 2 compresscodec: none crc: 42 isvalid: true"), 2,
     "known generation"),
    (("Dumping /d/notes.txt", "offset: 1 position: 2"), 2, "unknown file"),
])
def test_a_line_never_seen_is_an_error_item_and_parsing_goes_on(lines, line_no, expected):
    after = "| offset: 0 CreateTime: 5 keySize: 3 valueSize: 5 sequence: 0 headerKeys: []"
    out = _dump(*lines, LOG, after, strict=False)
    (item,) = out["files"][0]["unparsed"]
    assert item["line"] == line_no and item["text"] == lines[line_no - 1].strip()[:60]
    assert f"dump.txt: field line {line_no}: expected" in item["error"] and expected in item["error"]
    assert [r["offset"] for r in out["files"][1]["records"]] == [0]   # the next file is still read
    with pytest.raises(PayloadError) as e:
        _dump(*lines, strict=True)
    assert (e.value.source, e.value.field) == ("dump.txt", f"line {line_no}")


def test_strict_mode_wants_a_dumping_line():
    with pytest.raises(PayloadError, match="Dumping"):
        parse_dump_log("hello\n", "x.txt", strict=True)
    assert parse_dump_log("hello\n", "x.txt")["files"] == []


def test_sniff():
    assert looks_like_dump_log((REAL / "kafka-dump-log-02.txt").read_text())
    assert looks_like_dump_log(LOG + "\nStarting offset: 0\n")
    assert not looks_like_dump_log("Dumping core\nnothing else\n")
