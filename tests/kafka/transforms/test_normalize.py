"""The Kafka normalize job over a raw folder holding the real broker log dir (scanned as the collector scans it),
hand-written collector documents, records written with the project's encoders, imported tool output, and bad input
of every kind: each bad payload is one quarantine row naming the key, the field and what was expected, and
everything else still decodes."""
from __future__ import annotations

import base64
import json
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from audit.systems.kafka.collect.logdir import scan_log_dir
from audit.systems.kafka.formats import kraft
from audit.systems.kafka.formats.checkpoint import encode_leader_epoch_checkpoint, encode_offsets_checkpoint
from audit.systems.kafka.formats.kraft_wire import uuid_text
from audit.systems.kafka.formats.mm2 import Checkpoint, OffsetSync, encode_checkpoint, encode_offset_sync
from audit.systems.kafka.formats.properties import encode_partition_metadata
from audit.systems.kafka.transforms import normalize
from audit.systems.kafka.transforms.tables import SCHEMAS

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
T0 = 1_721_600_000_000
TOPIC_ID = uuid_text(bytes(range(1, 17)))
B1 = "kafka/east/brokers/1/dir0/"


def _write(root: Path, key: str, data: bytes) -> None:
    p = root / key
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)


def _json(doc) -> bytes:
    return json.dumps(doc).encode()


def _columns(batches: list[tuple[int, int, int]]) -> dict:
    """batches.json columns of v2 batches given as (base offset, last offset, leader epoch)."""
    n = len(batches)
    return {"base_offset": [b for b, _, _ in batches], "last_offset": [last for _, last, _ in batches],
            "partition_leader_epoch": [e for _, _, e in batches], "magic": [2] * n, "crc": [7 + i for i in range(n)],
            "crc_valid": [None] * n, "attributes": [0x10 if i == 0 else 0 for i in range(n)],
            "max_timestamp": [T0 + i for i in range(n)], "base_timestamp": [T0 + i for i in range(n)],
            "producer_id": [5] * n, "producer_epoch": [0] * n, "base_sequence": [i for i in range(n)],
            "records_count": [last - b + 1 for b, last, _ in batches], "position": [100 * i for i in range(n)],
            "size": [100] * n}


def _segment(name: str, base: int, batches, **extra) -> dict:
    return {"file": name, "base_offset": base, "size_at_start": 100 * len(batches), "read_bytes": 100 * len(batches),
            "active": False, "vanished": False, "tail": None, "error": None, "batches": _columns(batches), **extra}


def _broker1(raw: Path) -> None:
    """A hand-made scan of broker 1: t-0 (two segments, the active one with a partial batch at its end), t-1 (an
    epoch checkpoint whose count line lies, a segment that vanished), t-2 (listed, no batch index), and a
    recovery-point checkpoint that does not decode."""
    scan = {"broker": 1, "log_dir": "/var/kafka/d0", "started_at_ms": T0, "checkpoints_read_at_ms": T0 + 1,
            "listed_at_ms": T0 + 2, "finished_at_ms": T0 + 9, "verify_crc": False,
            "partitions": ["t-0", "t-1", "t-2"], "skipped": [{"dir": "t-3.abc-delete", "why": "marked for deletion"}],
            "vanished": [{"file": "t-1/00000000000000000000.log", "why": "segment deleted after the listing"}],
            "errors": []}
    _write(raw, B1 + "scan.json", _json(scan))
    _write(raw, B1 + "replication-offset-checkpoint", encode_offsets_checkpoint([("t", 0, 4), ("t", 1, 2)]))
    _write(raw, B1 + "log-start-offset-checkpoint", encode_offsets_checkpoint([("t", 0, 1)]))
    _write(raw, B1 + "recovery-point-offset-checkpoint", b"0\n2\nt 0 3\n")   # the count line lies
    _write(raw, B1 + "t-0/leader-epoch-checkpoint", encode_leader_epoch_checkpoint([(0, 0), (3, 2)]))
    _write(raw, B1 + "t-0/partition.metadata", encode_partition_metadata(TOPIC_ID))
    _write(raw, B1 + "t-0/batches.json", _json({"version": 1, "partition_dir": "t-0", "segments": [
        _segment("00000000000000000002.log", 2, [(2, 3, 3), (4, 5, 3)], active=True,
                 tail={"offset": 200, "why": "partial batch"}),
        _segment("00000000000000000000.log", 0, [(0, 0, 0), (1, 1, 0)])]}))
    _write(raw, B1 + "t-1/leader-epoch-checkpoint", b"0\n3\n0 0\n1 5\n")
    _write(raw, B1 + "t-1/batches.json", _json({"version": 1, "partition_dir": "t-1", "segments": [
        _segment("00000000000000000000.log", 0, [], vanished=True),
        _segment("00000000000000000009.log", 9, [], active=True)]}))


def _admin(raw: Path) -> None:
    read = {"read_started_at_ms": T0 + 20, "read_finished_at_ms": T0 + 25}
    _write(raw, "kafka/east/admin/metadata.json", _json({**read, "cluster_id": "c1", "controller": 1, "brokers": [],
                                                         "partitions": [
        {"topic": "t", "partition": 0, "topic_id": TOPIC_ID, "leader": 1, "leader_epoch": 3, "replicas": [1, 2],
         "isr": [1], "elr": None, "offline": [], "error_code": 0}]}))
    _write(raw, "kafka/east/admin/list-offsets.json", _json({"read_started_at_ms": T0 + 30, "read_finished_at_ms":
                                                             T0 + 31, "partitions": [
        {"topic": "t", "partition": 0, "earliest": 1, "latest": 6, "latest_leader_epoch": 3, "error_code": 0}]}))
    _write(raw, "kafka/east/admin/log-dirs.json", _json({**read, "brokers": [
        {"broker": 1, "error": None, "read_started_at_ms": T0 + 21, "read_finished_at_ms": T0 + 22,
         "log_dirs": [{"log_dir": "/var/kafka/d0", "error_code": 0, "partitions": [
            {"topic": "t", "partition": 0, "size": 400, "offset_lag": 0, "is_future": False}]}]},
        {"broker": 2, "error": "timed out", "log_dirs": []}]}))
    _write(raw, "kafka/east/admin/offsets-for-leader-epoch.json", _json({**read, "answers": [
        {"broker": 1, "topic": "t", "partition": 0, "requested_epoch": 0, "current_leader_epoch": 3, "round": 1,
         "leader_epoch": 0, "end_offset": 2, "error_code": 0, "read_started_at_ms": T0 + 23,
         "read_finished_at_ms": T0 + 24}]}))


def _record(key: bytes | None, value: bytes | None, offset: int, **extra) -> dict:
    b64 = (lambda b: None if b is None else base64.b64encode(b).decode())
    return {"partition": 0, "offset": offset, "timestamp": T0 + offset, "key_b64": b64(key), "value_b64": b64(value),
            **extra}


def _mm2(raw: Path) -> None:
    read = {"read_started_at_ms": T0 + 40, "read_finished_at_ms": T0 + 41}
    sync = encode_offset_sync(OffsetSync("orders", 0, 100, 40))
    _write(raw, "kafka/east/mm2/west/offset-syncs.json", _json({**read, "topic": "mm2-offset-syncs.east.internal",
                                                                "end_offsets": {"0": 3}, "records": [
        _record(*sync, 0), _record(sync[0], b"\x00\x01", 1), {**_record(*sync, 2), "key_b64": "%%%"}]}))
    cp = encode_checkpoint(Checkpoint("g1", "west.orders", 0, 100, 40, "m"))
    _write(raw, "kafka/east/mm2/west/checkpoints.json", _json({**read, "topic": "west.checkpoints.internal",
                                                               "end_offsets": {"0": 1}, "records": [_record(*cp, 0)]}))
    _write(raw, "kafka/east/mm2/west/groups.json", _json({**read, "source": {"g1": [
        {"topic": "orders", "partition": 0, "offset": 100}]}, "target": {"g1": [
            {"topic": "west.orders", "partition": 0, "offset": 41}]}, "source_end_offsets": [
        {"topic": "orders", "partition": 0, "log_start": 0, "end": 120}], "target_end_offsets": []}))
    # the reader's layout: target, source, target again, each read with its own instants
    _write(raw, "kafka/east/mm2/north/groups.json", _json({
        "read_started_at_ms": T0 + 60, "target_read_started_at_ms": T0 + 61, "target_read_finished_at_ms": T0 + 62,
        "source_read_started_at_ms": T0 + 63, "source_read_finished_at_ms": T0 + 64,
        "target_after_read_started_at_ms": T0 + 65, "target_after_read_finished_at_ms": T0 + 66,
        "read_finished_at_ms": T0 + 67,
        "target": {"g2": [{"topic": "north.logs", "partition": 1, "offset": 7}]},
        "target_after": {"g2": [{"topic": "north.logs", "partition": 1, "offset": 8}]},
        "target_end_offsets": [{"topic": "north.logs", "partition": 1, "log_start": 0, "end": 9}],
        "source": {"g2": [{"topic": "logs", "partition": 1, "offset": 8}]}, "source_end_offsets": []}))
    _write(raw, "kafka/east/mm2/south/groups.json", _json({
        "read_started_at_ms": T0, "read_finished_at_ms": T0 + 9, "target_read_started_at_ms": T0 + 5,
        "target_read_finished_at_ms": T0 + 4, "source": {}, "target": {}, "source_end_offsets": [],
        "target_end_offsets": []}))
    _write(raw, "kafka/east/mm2/up/groups.json", _json({     # a second target read that is not an object
        "read_started_at_ms": T0, "read_finished_at_ms": T0 + 9, "source": {}, "target": {}, "target_after": None,
        "source_end_offsets": [], "target_end_offsets": []}))


def _kraft(raw: Path) -> None:
    """Broker 3's metadata partition: a topic, its partition, a leader change; and its quorum-state."""
    d = "kafka/east/brokers/3/dir0/"
    records = [("TopicRecord", 0, {"name": "m", "topic_id": TOPIC_ID}),
               ("PartitionRecord", 0, {"partition_id": 0, "topic_id": TOPIC_ID, "replicas": [1, 3], "isr": [1, 3],
                                       "leader": 1, "leader_epoch": 4, "partition_epoch": 7}),
               ("PartitionChangeRecord", 0, {"partition_id": 0, "topic_id": TOPIC_ID, "leader": 3, "isr": [3]})]
    log = b"".join(kraft.encode_metadata_batch(i, 2, [r], T0) for i, r in enumerate(records))
    _write(raw, d + "scan.json", _json({"broker": 3, "log_dir": "/k3", "started_at_ms": T0 + 50,
                                        "finished_at_ms": T0 + 59, "verify_crc": False,
                                        "partitions": ["__cluster_metadata-0"], "skipped": [], "vanished": [],
                                        "errors": []}))
    _write(raw, d + "__cluster_metadata-0/00000000000000000000.log", log)
    _write(raw, d + "__cluster_metadata-0/quorum-state",
           b'{"clusterId":"","leaderId":3,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,'
           b'"currentVoters":[{"voterId":3}],"data_version":0}\n')


def _raw(root: Path) -> Path:
    raw = root / "raw"
    # the real broker log dir, scanned as broker 0 exactly as the collector scans it
    scan_log_dir(str(REAL / "kafka-broker-logdir-01"), 0,
                 lambda key, data: _write(raw, "kafka/east/" + key, data), verify_crc=True)
    _broker1(raw)
    _admin(raw)
    _mm2(raw)
    _kraft(raw)
    _write(raw, "kafka/east/brokers/2/dir0/t-0/batches.json", _json({"version": 1, "partition_dir": "t-0",
                                                                      "segments": [{**_segment("0.log", 0, [(0, 0, 0)]),
                                                                                    "batches": {**_columns([(0, 0, 0)]),
                                                                                                "crc": []}}]}))
    _write(raw, "kafka/east/mm2/west/checkpoints-text/cp.txt", (REAL / "kafka-mm2-checkpoints-01.txt").read_bytes())
    _write(raw, "kafka/east/admin/log-dirs-describe/ld.txt", (REAL / "kafka-log-dirs-01.txt").read_bytes())
    _write(raw, "kafka/east/brokers/4/dump-log/d.txt", (REAL / "kafka-dump-log-02.txt").read_bytes())
    _write(raw, "kafka/east/collection.json", b"{}")
    _write(raw, "kafka/east/stray.txt", b"?")
    _write(raw, "pulsar/p1/collection.json", b"{}")   # another system's evidence: not Kafka's to judge
    return raw


def _rows(path: Path) -> list[dict]:
    return ds.dataset(str(path), format="parquet").to_table().to_pylist() if path.exists() else []


@pytest.fixture(scope="module")
def out(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("attempt")
    raw, tables = _raw(root), root / "tables"
    counts = normalize.run(spark, str(raw), str(tables))
    got = {name: _rows(tables / name) for name in SCHEMAS if name != "quarantine"}
    got["quarantine"] = _rows(tables / "quarantine" / "system=kafka")
    return counts, got


def _one(rows: list[dict], **where) -> dict:
    found = [r for r in rows if all(r[k] == v for k, v in where.items())]
    assert len(found) == 1, (where, found)
    return found[0]


def test_every_table_is_written_with_its_schema(out):
    counts, got = out
    assert set(counts) == set(SCHEMAS)
    for name, rows in got.items():
        assert counts[name] == len(rows)
        for r in rows:
            assert list(r) == SCHEMAS[name].fieldNames()


def test_the_real_log_dir_decodes_cleanly_internal_topics_included(out):
    _, got = out
    real = [r for r in got["kafka_replicas"] if r["broker"] == 0]
    assert len(real) == 51 and all(r["index_complete"] and r["epoch_checkpoint"] and r["topic_id"] for r in real)
    one = _one(real, topic="one", partition=0)
    assert (one["high_watermark"], one["log_end_offset"], one["batches"], one["first_batch_offset"]) == (11, 11, 11, 0)
    assert one["log_dir"].endswith("kafka-broker-logdir-01") and one["read_started_at_ms"] is not None
    assert len([r for r in real if r["topic"] == "__consumer_offsets"]) == 50   # in "_"-named dirs Spark hides
    assert not [q for q in got["quarantine"] if "/brokers/0/" in q["source_key"]]
    batches = [b for b in got["kafka_batches"] if b["broker"] == 0 and b["topic"] == "one"]
    assert len(batches) == 11 and all(b["crc_valid"] for b in batches)
    (log_dir,) = [d for d in got["kafka_log_dirs"] if d["broker"] == 0]
    assert (log_dir["meta_broker_id"], log_dir["meta_mode"], log_dir["partitions"]) == (0, "zookeeper", 51)
    assert len(log_dir["checkpoint_files"]) == 5 and log_dir["checkpoint_errors"] == []   # cleaner-offset twice


def test_replicas_join_checkpoints_index_and_scan(out):
    _, got = out
    r = _one(got["kafka_replicas"], broker=1, topic="t", partition=0)
    assert (r["high_watermark"], r["log_start_offset"], r["recovery_point"], r["log_end_offset"]) == (4, 1, None, 6)
    assert (r["first_batch_offset"], r["last_batch_epoch"], r["segments"], r["batches"]) == (0, 3, 2, 4)
    assert (r["index_complete"], r["index_problem"], r["topic_id"], r["epoch_checkpoint"]) == (True, None, TOPIC_ID,
                                                                                                True)
    assert (r["log_dir"], r["read_started_at_ms"], r["checkpoints_read_at_ms"], r["listed_at_ms"]) == (
        "/var/kafka/d0", T0, T0 + 1, T0 + 2)
    lied = _one(got["kafka_replicas"], broker=1, topic="t", partition=1)
    assert lied["epoch_checkpoint"] and "[3] entries as the count line says" in lied["epoch_checkpoint_error"]
    assert not lied["index_complete"] and "vanished" in lied["index_problem"]
    assert lied["log_end_offset"] == 9 and lied["high_watermark"] == 2
    bare = _one(got["kafka_replicas"], broker=1, topic="t", partition=2)
    assert not bare["index_complete"] and "no batch index" in bare["index_problem"] and bare["log_end_offset"] is None


def test_epochs_segments_and_batches(out):
    _, got = out
    epochs = sorted((e["entry_index"], e["epoch"], e["start_offset"], e["read_finished_at_ms"])
                    for e in got["kafka_epochs"] if e["broker"] == 1)
    assert epochs == [(0, 0, 0, T0 + 9), (1, 3, 2, T0 + 9)]   # t-1's lying checkpoint gives no entries
    seg = _one(got["kafka_segments"], broker=1, partition=0, base_offset=2)
    assert (seg["active"], seg["tail_offset"], seg["tail_why"], seg["batches"]) == (True, 200, "partial batch", 2)
    b = _one(got["kafka_batches"], broker=1, partition=0, base_offset=0)
    assert (b["transactional"], b["control"], b["segment"], b["log_dir"], b["crc_valid"]) == (
        True, False, 0, "/var/kafka/d0", None)


def test_log_dir_notes_an_unreadable_checkpoint(out):
    _, got = out
    d = _one(got["kafka_log_dirs"], broker=1)
    assert d["checkpoint_files"] == ["log-start-offset-checkpoint", "replication-offset-checkpoint"]
    (err,) = d["checkpoint_errors"]
    assert err["file"] == "recovery-point-offset-checkpoint" and "entry count" in err["error"]
    assert d["skipped_dirs"] == [{"dir": "t-3.abc-delete", "why": "marked for deletion"}]
    assert d["meta_broker_id"] is None   # no meta.properties in this scan


def test_partitions_from_admin_and_kraft(out):
    _, got = out
    admin = _one(got["kafka_partitions"], origin="admin", topic="t")
    assert (admin["leader"], admin["leader_epoch"], admin["isr"], admin["replicas"], admin["high_watermark"],
            admin["log_start_offset"], admin["read_started_at_ms"], admin["offsets_read_finished_at_ms"]) == (
        1, 3, [1], [1, 2], 6, 1, T0 + 20, T0 + 31)
    k = _one(got["kafka_partitions"], origin="kraft", topic="m")
    # PartitionChangeRecord naming a leader is a new leader epoch and every change a new partition epoch
    assert (k["broker"], k["leader"], k["leader_epoch"], k["partition_epoch"], k["isr"], k["metadata_offset"]) == (
        3, 3, 5, 8, [3], 2)
    assert k["read_finished_at_ms"] == T0 + 59 and k["topic_id"] == TOPIC_ID
    q = _one(got["kafka_partitions"], origin="kraft", topic="__cluster_metadata")
    assert (q["leader"], q["leader_epoch"], q["replicas"]) == (3, 2, [3])


def test_admin_lags_and_epoch_answers(out):
    _, got = out
    lag = _one(got["kafka_replica_lags"], broker=1, source_key="raw/kafka/east/admin/log-dirs.json")
    # each broker's answer has its own read instants; without them, the document's
    assert (lag["size"], lag["offset_lag"], lag["is_future"], lag["read_finished_at_ms"]) == (400, 0, False, T0 + 22)
    down = _one(got["kafka_replica_lags"], broker=2)
    assert (down["broker_error"], down["read_finished_at_ms"]) == ("timed out", T0 + 25)
    a = _one(got["kafka_epoch_answers"], broker=1)
    assert (a["requested_epoch"], a["leader_epoch"], a["end_offset"], a["current_leader_epoch"], a["round"],
            a["read_started_at_ms"]) == (0, 0, 2, 3, 1, T0 + 23)


def test_mm2_records_decode_one_by_one(out):
    _, got = out
    (sync,) = [s for s in got["kafka_mm2_syncs"] if s["record_offset"] is not None]
    assert (sync["topic"], sync["partition"], sync["upstream_offset"], sync["downstream_offset"],
            sync["internal_topic"], sync["record_offset"], sync["read_finished_at_ms"]) == (
        "orders", 0, 100, 40, "mm2-offset-syncs.east.internal", 0, T0 + 41)
    cp = _one(got["kafka_mm2_checkpoints"], source_key="raw/kafka/east/mm2/west/checkpoints.json")
    assert (cp["group"], cp["topic"], cp["upstream_offset"], cp["downstream_offset"], cp["metadata"]) == (
        "g1", "west.orders", 100, 40, "m")
    groups = sorted((g["source_alias"], g["side"], g["group"], g["topic"], g["offset"], g["read_started_at_ms"],
                     g["read_finished_at_ms"]) for g in got["kafka_mm2_groups"])
    # a document with one pair (written before each read had its own) and no second target read: both share it
    assert groups == [("north", "source", "g2", "logs", 8, T0 + 63, T0 + 64),
                      ("north", "target", "g2", "north.logs", 7, T0 + 61, T0 + 62),
                      ("north", "target_after", "g2", "north.logs", 8, T0 + 65, T0 + 66),
                      ("west", "source", "g1", "orders", 100, T0 + 40, T0 + 41),
                      ("west", "target", "g1", "west.orders", 41, T0 + 40, T0 + 41)]
    offsets = sorted((o["source_alias"], o["side"], o["topic"], o["log_start_offset"], o["end_offset"],
                      o["read_started_at_ms"]) for o in got["kafka_mm2_offsets"])
    assert offsets == [("north", "target", "north.logs", 0, 9, T0 + 61),
                       ("west", "checkpoints", "west.checkpoints.internal", None, 1, T0 + 40),
                       ("west", "offset-syncs", "mm2-offset-syncs.east.internal", None, 3, T0 + 40),
                       ("west", "source", "orders", 0, 120, T0 + 40)]
    (backwards,) = [q["reason"] for q in got["quarantine"] if q["source_key"].endswith("mm2/south/groups.json")]
    assert "target_read_finished_at_ms: expected an instant >= target_read_started_at_ms" in backwards
    (no_object,) = [q["reason"] for q in got["quarantine"] if q["source_key"].endswith("mm2/up/groups.json")]
    assert "target_after: expected an object" in no_object
    bad = [q["reason"] for q in got["quarantine"] if q["payload_kind"] == "mm2-offset-syncs"]
    assert len(bad) == 2 and any("records[1]" in r and "offset 1" in r for r in bad)
    assert any("records[2].key_b64: expected base64 bytes" in r for r in bad)


def test_imported_tool_output(out):
    _, got = out
    text_cps = [c for c in got["kafka_mm2_checkpoints"] if c["source_key"].endswith("checkpoints-text/cp.txt")]
    assert text_cps and all(c["record_offset"] is None and c["source_alias"] == "west" for c in text_cps)
    described = [r for r in got["kafka_replica_lags"] if r["source_key"].endswith("ld.txt")]
    assert described and all(r["read_started_at_ms"] is None for r in described)
    dumped = [b for b in got["kafka_batches"] if b["dir"] == "dump-log"]
    assert dumped and all(b["broker"] == 4 for b in dumped)
    assert not [r for r in got["kafka_replicas"] if r["dir"] == "dump-log"]   # never judged as a replica


def test_bad_input_is_quarantined_naming_key_and_field(out):
    _, got = out
    q = {(r["source_key"], r["payload_kind"]): r["reason"] for r in got["quarantine"]}
    assert all(r["system"] == "kafka" and r["cluster"] == "east" for r in got["quarantine"])
    reason = q[("raw/kafka/east/brokers/1/dir0/t-1/leader-epoch-checkpoint", "leader-epoch-checkpoint")]
    assert "line 2" in reason and "[3] entries" in reason
    assert "entry count" in q[("raw/kafka/east/brokers/1/dir0/recovery-point-offset-checkpoint",
                               "recovery-point-offset-checkpoint")]
    assert "segments[0].batches.crc: expected 1 values" in q[("raw/kafka/east/brokers/2/dir0/t-0/batches.json",
                                                               "batch-index")]
    assert q[("raw/kafka/east/stray.txt", "unknown")] == "raw/kafka/east/stray.txt: unrecognised raw key"
    assert not [k for k in q if "collection.json" in k[0] or "pulsar" in k[0]]
