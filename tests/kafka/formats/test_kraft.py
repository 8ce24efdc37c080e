"""KRaft metadata: record framing and the flexible wire format, metadata batches and logs, snapshot files,
quorum-state, and the replay into partition and broker state; bad input names source, offset and field."""
from __future__ import annotations

from pathlib import Path

import pytest

from audit.errors import PayloadError
from audit.systems.kafka.formats import kraft
from audit.systems.kafka.formats.batch import decode_header, encode_batch
from audit.systems.kafka.formats.kraft_records import (METADATA, REDACTED, decode_control_value, decode_metadata_value,
                                               encode_control, encode_metadata_value)
from audit.systems.kafka.formats.kraft_wire import ZERO_UUID, uuid_text
from audit.systems.kafka.formats.records import SimpleRecord, write_unsigned_varint

DUMP = Path(__file__).parents[2] / "fixtures/real/kafka-dump-log-01.txt"
SRC = "brokers/1/dir0/__cluster_metadata-0/00000000000000000000.log"
TOPIC = uuid_text(bytes(range(16)))
OTHER = uuid_text(bytes(range(16, 32)))
TS = 1_700_000_000_000


def _register(broker: int, epoch: int, version: int = 0) -> tuple[str, int, dict]:
    return ("RegisterBrokerRecord", version, {"broker_id": broker, "broker_epoch": epoch, "rack": None,
                                              "end_points": [{"name": "PLAINTEXT", "host": f"b{broker}",
                                                              "port": 9092, "security_protocol": 0}]})


def _partition(partition: int, replicas: list[int], leader: int, version: int = 0, **extra) -> tuple:
    return ("PartitionRecord", version, {"partition_id": partition, "topic_id": TOPIC, "replicas": replicas,
                                         "isr": replicas, "leader": leader, "leader_epoch": 0,
                                         "partition_epoch": 0, **extra})


def _change(partition: int, version: int = 0, **fields) -> tuple:
    return ("PartitionChangeRecord", version, {"partition_id": partition, "topic_id": TOPIC, **fields})


def _log(*batches: list[tuple], epoch: int = 1) -> tuple[bytes, list[dict]]:
    """Batches of metadata records, back to back like a segment, and their decoded records."""
    data, offset = b"", 0
    for records in batches:
        data += kraft.encode_metadata_batch(offset, epoch, records, TS + offset)
        offset += len(records)
    log = kraft.decode_metadata_log(data, SRC)
    assert log["tail"] is None and log["errors"] == [] and log["batches"] == len(batches)
    return data, log["records"]


def _error(fn, *args) -> PayloadError:
    with pytest.raises(PayloadError) as exc:
        fn(*args)
    return exc.value


# --- the real dump fixture (kafka-dump-log --cluster-metadata-decoder of a snapshot, PR #12084) ---------------------

def _dump_batch(line_number: int) -> dict[str, str]:
    """`key: value` pairs of one batch line of the dump (values without spaces)."""
    words = DUMP.read_text().splitlines()[line_number].split()
    return {words[i].rstrip(":"): words[i + 1] for i in range(0, len(words) - 1) if words[i].endswith(":")}


def test_snapshot_header_batch_matches_the_real_dump_byte_for_byte():
    line = _dump_batch(4)
    assert (line["isControl"], line["count"], line["position"]) == ("true", "1", "0")
    batch = kraft.encode_control_batch(0, 0, [("SNAPSHOT_HEADER", {"version": 0, "last_contained_log_timestamp":
                                                                   10000})], int(line["CreateTime"]))
    header = decode_header(batch, SRC, 0)
    assert (len(batch), header.crc) == (int(line["size"]), int(line["crc"]))  # 83, 3406426388
    key, value = encode_control("SNAPSHOT_HEADER", {"version": 0, "last_contained_log_timestamp": 10000})
    assert (len(key), len(value)) == (4, 11)  # "keySize: 4 valueSize: 11"
    [record] = kraft.decode_metadata_batch(batch, SRC, 0)
    assert record == {"offset": 0, "partition_leader_epoch": 0, "timestamp": 1653548892941, "control": True,
                      "api_key": None, "control_type": 3, "type": "SnapshotHeaderRecord", "version": 0,
                      "fields": {"version": 0, "last_contained_log_timestamp": 10000}, "error": None}


def test_snapshot_records_batch_has_the_real_dumps_sizes():
    line = _dump_batch(6)
    # DumpLogSegmentsTest.testDumpMetadataSnapshot writes these four records (random topic ids: the CRC differs)
    records = [("RegisterBrokerRecord", 0, {"broker_id": 0, "broker_epoch": 10}),
               ("RegisterBrokerRecord", 0, {"broker_id": 1, "broker_epoch": 20}),
               ("TopicRecord", 0, {"name": "test-topic", "topic_id": TOPIC}),
               _change(0, leader=1, isr=[0, 1, 2])]
    assert len(encode_metadata_value(*records[0])) == 36  # "keySize: -1 valueSize: 36"
    batch = kraft.encode_metadata_batch(1, 0, records, int(line["CreateTime"]))
    header = decode_header(batch, SRC, int(line["position"]))
    assert (header.size, header.base_offset, header.last_offset, header.records_count) == (
        int(line["size"]), int(line["baseOffset"]), int(line["lastOffset"]), int(line["count"]))  # 237, 1, 4, 4
    decoded = kraft.decode_metadata_batch(batch, SRC, 83)
    assert [(r["offset"], r["api_key"], r["type"]) for r in decoded] == [
        (1, 0, "RegisterBrokerRecord"), (2, 0, "RegisterBrokerRecord"), (3, 2, "TopicRecord"),
        (4, 5, "PartitionChangeRecord")]
    assert decoded[0]["fields"] == {"broker_id": 0, "incarnation_id": ZERO_UUID, "broker_epoch": 10,
                                    "end_points": [], "features": [], "rack": "", "fenced": True}
    assert decoded[3]["fields"]["isr"] == [0, 1, 2] and decoded[3]["fields"]["replicas"] is None


# --- wire format -------------------------------------------------------------------------------------------------

def test_partition_change_bytes_put_leader_and_isr_in_tagged_fields():
    value = encode_metadata_value(*_change(7, leader=2, isr=[2, 3]))
    assert value == (b"\x01\x05\x00" + (7).to_bytes(4, "big") + bytes(range(16))
                     + b"\x02" + b"\x00\x09\x03" + (2).to_bytes(4, "big") + (3).to_bytes(4, "big")
                     + b"\x01\x04" + (2).to_bytes(4, "big"))
    _, _, fields = decode_metadata_value(value, SRC, "record@0")
    assert fields == {"partition_id": 7, "topic_id": TOPIC, "isr": [2, 3], "leader": 2, "replicas": None,
                      "removing_replicas": None, "adding_replicas": None, "leader_recovery_state": -1}


def test_versions_decide_fields_and_tags():
    v2 = encode_metadata_value(*_partition(0, [1, 2], 1, version=2, eligible_leader_replicas=[3],
                                           directories=[ZERO_UUID, ZERO_UUID]))
    schema, version, fields = decode_metadata_value(v2, SRC, "record@0")
    assert (schema.name, version, fields["eligible_leader_replicas"], fields["last_known_elr"]) == \
        ("PartitionRecord", 2, [3], None)
    _, _, v0 = decode_metadata_value(encode_metadata_value(*_partition(0, [1, 2], 1)), SRC, "record@0")
    assert "directories" not in v0 and "eligible_leader_replicas" not in v0
    with pytest.raises(ValueError, match="not in version 0"):
        encode_metadata_value(*_partition(0, [1], 1, eligible_leader_replicas=[3]))


def test_unknown_tag_is_skipped_and_a_tag_outside_its_versions_is_refused():
    body = b"\x01\x05\x00" + bytes(4) + bytes(16)
    unknown = body + b"\x01" + b"\x1e\x02\xab\xcd"  # tag 30, two bytes
    assert decode_metadata_value(unknown, SRC, "record@4")[2]["leader"] == -2
    elr_in_v0 = body + b"\x01" + b"\x06\x02\x02" + b"\x00"  # tag 6 = ELR, only valid from version 2
    err = _error(decode_metadata_value, elr_in_v0, SRC, "record@4")
    assert err.field == "record@4.PartitionChangeRecord.eligible_leader_replicas" and "version 0" in err.expected


def test_secrets_are_redacted():
    def config(resource_type: int) -> dict:
        value = encode_metadata_value("ConfigRecord", 0, {"resource_type": resource_type, "resource_name": "1",
                                                          "name": "x", "value": "s3cret"})
        return decode_metadata_value(value, SRC, "record@0")[2]
    assert config(2)["value"] == "s3cret" and config(4)["value"] == REDACTED
    scram = encode_metadata_value("UserScramCredentialRecord", 0, {"name": "u", "mechanism": 1, "salt": b"salt",
                                                                   "stored_key": b"k1", "server_key": b"k2",
                                                                   "iterations": 4096})
    fields = decode_metadata_value(scram, SRC, "record@0")[2]
    assert fields == {"name": "u", "mechanism": 1, "salt": REDACTED, "stored_key": REDACTED,
                      "server_key": REDACTED, "iterations": 4096}


@pytest.mark.parametrize("name, version", [(s.name, v) for s in METADATA.values()
                                           for v in range(s.versions[0], s.versions[1] + 1)])
def test_every_schema_round_trips_its_defaults(name, version):
    _, read_version, fields = decode_metadata_value(encode_metadata_value(name, version, {}), SRC, "record@0")
    assert read_version == version
    again = {k: v for k, v in fields.items() if v != REDACTED}
    assert decode_metadata_value(encode_metadata_value(name, version, again), SRC, "record@0")[2] == fields


def test_control_types_without_a_schema_are_named():
    assert decode_control_value(1, b"\x00\x00\x00\x00\x00\x05", SRC, "record@0") == ("COMMIT", "COMMIT", {})
    assert decode_control_value(42, b"", SRC, "record@0") == ("UNKNOWN", "UNKNOWN", {})


# --- bad input ---------------------------------------------------------------------------------------------------

def _one_record_batch(value: bytes, base_offset: int = 5) -> bytes:
    return encode_batch(base_offset, 1, [SimpleRecord(None, value, TS)])


def test_unknown_api_key_is_reported_and_skipped():
    unknown = write_unsigned_varint(1) + write_unsigned_varint(99) + b"\x00\x00"
    batch = encode_batch(0, 1, [SimpleRecord(None, encode_metadata_value("TopicRecord", 0, {"name": "t",
                                                                                          "topic_id": TOPIC}), TS),
                                SimpleRecord(None, unknown, TS)])
    first, second = kraft.decode_metadata_batch(batch, SRC, 0)
    assert first["type"] == "TopicRecord" and first["error"] is None
    assert (second["offset"], second["api_key"], second["type"]) == (1, 99, None)
    assert SRC in second["error"] and "record@1.api_key" in second["error"]
    state = kraft.replay([first, second])
    assert state["problems"] == [f"record@1: not applied ({second['error']})"]


def test_truncated_record_names_source_offset_and_field():
    value = encode_metadata_value(*_partition(3, [1, 2, 3], 1))
    err = _error(kraft.decode_metadata_batch, _one_record_batch(value[:30]), SRC, 0)
    # frame 3 bytes, partition 4, topic id 16, replicas: length at byte 23, items at 24, 28 (cut at 30)
    assert (err.source, err.field, err.expected, err.got) == (
        SRC, "record@5.PartitionRecord.replicas[1]", "4 more bytes (byte 28 of the value)", "2 bytes left")


def test_unknown_version_and_frame_version():
    value = bytearray(encode_metadata_value(*_partition(0, [1], 1)))
    value[2] = 3  # PartitionRecord has versions 0..2
    err = _error(kraft.decode_metadata_batch, _one_record_batch(bytes(value)), SRC, 0)
    assert (err.field, err.expected, err.got) == ("record@5.version", "a PartitionRecord version in 0..2", 3)
    value[0] = 0
    err = _error(kraft.decode_metadata_batch, _one_record_batch(bytes(value)), SRC, 0)
    assert (err.field, err.got) == ("record@5.frame_version", 0)


def test_null_in_a_non_nullable_field_and_trailing_garbage():
    value = encode_metadata_value(*_partition(0, [1], 1))
    nulled = value[:3 + 4 + 16] + b"\x00" + value[3 + 4 + 16 + 1 + 4:]  # replicas [1] -> null
    err = _error(decode_metadata_value, nulled, SRC, "record@9")
    assert err.field == "record@9.PartitionRecord.replicas" and "not nullable" in err.expected
    err = _error(decode_metadata_value, value + b"\x00", SRC, "record@9")
    assert err.field == "record@9.PartitionRecord" and err.got == "1 bytes of garbage"


def test_bad_crc_and_bad_control_key():
    batch = bytearray(_one_record_batch(encode_metadata_value("NoOpRecord", 0, {})))
    batch[-1] ^= 0xFF
    assert _error(kraft.decode_metadata_batch, bytes(batch), SRC, 4096).field == "batch@4096.crc"
    short_key = encode_batch(0, 1, [SimpleRecord(b"\x00", b"\x00\x00", TS)], attributes=kraft.CONTROL_ATTRIBUTE)
    assert _error(kraft.decode_metadata_batch, short_key, SRC, 0).field == "record@0.key"


def test_log_with_a_bad_batch_and_a_partial_tail():
    good = kraft.encode_metadata_batch(0, 1, [("TopicRecord", 0, {"name": "t", "topic_id": TOPIC})], TS)
    bad = bytearray(kraft.encode_metadata_batch(1, 1, [("NoOpRecord", 0, {})], TS))
    bad[-1] ^= 0xFF
    last = kraft.encode_metadata_batch(2, 1, [("NoOpRecord", 0, {})], TS)
    data = good + bytes(bad) + last + last[:40]
    log = kraft.decode_metadata_log(data, SRC)
    assert [r["offset"] for r in log["records"]] == [0, 2] and log["batches"] == 3
    assert log["errors"] == [{"position": len(good), "error": log["errors"][0]["error"]}]
    assert f"batch@{len(good)}.crc" in log["errors"][0]["error"]
    assert log["tail"] == {"position": len(data) - 40, "why": "40 bytes, less than a batch header"}
    padded = kraft.decode_metadata_log(good + bytes(100), SRC)
    assert padded["tail"] == {"position": len(good), "why": "100 zero bytes to the end (preallocated)"}


# --- snapshots -----------------------------------------------------------------------------------------------------

def test_snapshot_round_trip_and_replay_from_it():
    records = [_register(1, 10), ("TopicRecord", 0, {"name": "orders", "topic_id": TOPIC}),
               _partition(0, [1, 2], 1), ("FeatureLevelRecord", 0, {"name": "metadata.version", "feature_level": 20})]
    name, data = kraft.encode_snapshot(1234, 7, records, last_contained_log_timestamp=TS, timestamp=TS + 5)
    assert name == "00000000000000001234-0000000007.checkpoint"
    snap = kraft.decode_snapshot(data, f"/var/kafka/{kraft.METADATA_PARTITION_DIR}/{name}", SRC)
    assert (snap["end_offset"], snap["epoch"], snap["last_contained_log_timestamp"], snap["batches"]) == \
        (1234, 7, TS, 3)
    assert [r["type"] for r in snap["records"]] == ["SnapshotHeaderRecord", "RegisterBrokerRecord", "TopicRecord",
                                                    "PartitionRecord", "FeatureLevelRecord", "SnapshotFooterRecord"]
    log = kraft.encode_metadata_batch(1233, 7, [_change(0, isr=[1])], TS) + \
        kraft.encode_metadata_batch(1234, 7, [_change(0, leader=2, isr=[2])], TS)
    replayed = kraft.partition_states(kraft.since_snapshot(snap, kraft.decode_metadata_log(log, SRC)["records"]))
    assert [(p["leader"], p["isr"], p["leader_epoch"], p["partition_epoch"]) for p in replayed] == [(2, [2], 1, 1)]


def test_snapshot_problems_are_errors():
    name, data = kraft.encode_snapshot(10, 1, [_register(1, 10)], last_contained_log_timestamp=TS, timestamp=TS)
    assert _error(kraft.decode_snapshot, data, "10-1.checkpoint", SRC).field == "name"
    body_size = decode_header(data[83:], SRC).size  # after the 83-byte header batch
    without_footer = data[:83 + body_size]
    err = _error(kraft.decode_snapshot, without_footer, name, SRC)
    assert "SnapshotFooter" in err.expected and err.field == "record@1"
    err = _error(kraft.decode_snapshot, data[:-3], name, SRC)
    assert "complete snapshot" in err.expected
    err = _error(kraft.decode_snapshot, data[83:], name, SRC)
    assert (err.field, err.got) == ("record@0", "RegisterBrokerRecord")


def test_voters_and_kraft_version_in_the_header_batch():
    voters = {"version": 0, "voters": [{"voter_id": 1, "voter_directory_id": OTHER,
                                        "endpoints": [{"name": "CONTROLLER", "host": "c1", "port": 9093}],
                                        "kraft_version_feature": {"min_supported_version": 0,
                                                                  "max_supported_version": 1}}]}
    batch = kraft.encode_control_batch(0, 3, [("SNAPSHOT_HEADER", {"version": 0, "last_contained_log_timestamp": 1}),
                                              ("KRAFT_VERSION", {"version": 0, "kraft_version": 1}),
                                              ("KRAFT_VOTERS", voters)], TS)
    decoded = kraft.decode_metadata_batch(batch, SRC, 0)
    assert [(r["control_type"], r["type"]) for r in decoded] == [(3, "SnapshotHeaderRecord"),
                                                                 (5, "KRaftVersionRecord"), (6, "VotersRecord")]
    assert decoded[2]["fields"] == voters


# --- replay --------------------------------------------------------------------------------------------------------

def test_create_topic_leader_change_and_isr_shrink():
    _, records = _log(
        [_register(1, 100), _register(2, 101), _register(3, 102)],
        [("UnfenceBrokerRecord", 0, {"id": 1, "epoch": 100}), ("UnfenceBrokerRecord", 0, {"id": 2, "epoch": 101})],
        [("TopicRecord", 0, {"name": "orders", "topic_id": TOPIC}), _partition(0, [1, 2, 3], 1),
         _partition(1, [2, 3, 1], 2)],
        [_change(0, leader=2)],             # leader change: leader epoch 0 -> 1
        [_change(0, isr=[2, 3])],           # ISR shrink, leader kept: only the partition epoch moves
        [_change(0, isr=[2], leader=2)],    # the controller names the same leader to force an epoch bump
        [_change(1, version=2, isr=[2], eligible_leader_replicas=[3], last_known_elr=[])])
    p0, p1 = kraft.partition_states(records)
    assert p0 == {"topic": "orders", "topic_id": TOPIC, "partition": 0, "replicas": [1, 2, 3], "isr": [2],
                  "elr": [], "last_known_elr": [], "adding_replicas": [], "removing_replicas": [], "leader": 2,
                  "leader_epoch": 2, "partition_epoch": 3, "leader_recovery_state": 0, "removed": False,
                  "offset": 10, "replicas_at_ms": TS + 5}    # the PartitionRecord's batch: no change named replicas
    assert p1["replicas_at_ms"] == TS + 5
    assert (p1["isr"], p1["elr"], p1["leader"], p1["leader_epoch"], p1["partition_epoch"]) == ([2], [3], 2, 0, 1)
    b1, b2, b3 = kraft.brokers(records)
    assert (b1["fenced"], b2["fenced"], b3["fenced"]) == (False, False, True)
    assert b1["endpoints"] == [{"name": "PLAINTEXT", "host": "b1", "port": 9092, "security_protocol": 0}]


def test_remove_topic_and_changes_the_broker_would_refuse():
    _, records = _log(
        [_register(1, 100), ("TopicRecord", 0, {"name": "orders", "topic_id": TOPIC}), _partition(0, [1], 1)],
        [("RemoveTopicRecord", 0, {"topic_id": TOPIC}), _change(0, isr=[])],
        [("FenceBrokerRecord", 0, {"id": 1, "epoch": 99}), ("UnregisterBrokerRecord", 0, {"broker_id": 1,
                                                                                           "broker_epoch": 100}),
         ("RemoveTopicRecord", 0, {"topic_id": OTHER})])
    state = kraft.replay(records)
    [p0] = state["partitions"]
    assert (p0["removed"], p0["isr"], p0["offset"]) == (True, [1], 3)
    assert state["brokers"][0]["registered"] is False
    assert state["problems"] == [
        f"record@4 PartitionChangeRecord: no partition {TOPIC}:0 to change",
        "record@5 FenceBrokerRecord: broker 1 epoch 99 is not registered (registered epoch 100)",
        f"record@7 RemoveTopicRecord: no topic {OTHER} to remove"]


def test_broker_registration_changes():
    _, records = _log([_register(4, 50, version=1)],
                      [("BrokerRegistrationChangeRecord", 1, {"broker_id": 4, "broker_epoch": 50, "fenced": -1})],
                      [("BrokerRegistrationChangeRecord", 1, {"broker_id": 4, "broker_epoch": 50,
                                                              "in_controlled_shutdown": 1})],
                      [("BrokerRegistrationChangeRecord", 1, {"broker_id": 4, "broker_epoch": 50, "fenced": 7})])
    state = kraft.replay(records)
    [b4] = state["brokers"]
    assert (b4["fenced"], b4["in_controlled_shutdown"], b4["offset"]) == (False, True, 2)
    assert state["problems"] == ["record@3 BrokerRegistrationChangeRecord: unknown fenced 7 / "
                                 "in_controlled_shutdown 0 value"]


def test_metadata_transactions():
    _, records = _log(
        [("TopicRecord", 0, {"name": "orders", "topic_id": TOPIC}), _partition(0, [1, 2], 1)],
        [("BeginTransactionRecord", 0, {"name": "Bootstrap records"}), _change(0, leader=2)],
        [("AbortTransactionRecord", 0, {"reason": "Controller failover"})],
        [("BeginTransactionRecord", 0, {}), _change(0, isr=[1]), ("EndTransactionRecord", 0, {})],
        [("BeginTransactionRecord", 0, {}), _change(0, leader=-1), ("BeginTransactionRecord", 0, {})])
    state = kraft.replay(records)
    [p0] = state["partitions"]
    assert (p0["leader"], p0["isr"], p0["leader_epoch"], p0["partition_epoch"]) == (1, [1], 0, 1)
    assert state["open_transaction"] is True
    assert state["problems"] == ["record@10 BeginTransactionRecord: a transaction begun at offset 8 is still open",
                                 "transaction begun at offset 8 not ended: 1 records not applied"]


def test_leader_change_control_record_gives_the_quorum_leader():
    lc = {"version": 0, "leader_id": 3, "voters": [{"voter_id": 1}, {"voter_id": 2}, {"voter_id": 3}],
          "granting_voters": [{"voter_id": 3}, {"voter_id": 1}]}
    data = kraft.encode_control_batch(40, 6, [("LEADER_CHANGE", lc)], TS)
    [record] = kraft.decode_metadata_log(data, SRC)["records"]
    assert (record["type"], record["control_type"], record["fields"]) == ("LeaderChangeMessage", 2, lc)
    assert kraft.replay([record])["quorum_leader"] == {"leader_id": 3, "epoch": 6, "voters": [1, 2, 3],
                                                       "offset": 40}


def test_a_snapshot_header_starts_the_image_afresh():
    _, first = _log([_register(1, 10), ("TopicRecord", 0, {"name": "old", "topic_id": OTHER})])
    _, data = kraft.encode_snapshot(2, 1, [_register(2, 20)], last_contained_log_timestamp=TS, timestamp=TS)
    snap = kraft.decode_snapshot(data, kraft.snapshot_name(2, 1), SRC)
    assert [b["broker"] for b in kraft.brokers(first + snap["records"])] == [2]


# --- quorum-state -------------------------------------------------------------------------------------------------

V0 = b'{"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,"currentVoters":[],"data_version":0}'
V1 = b'{"leaderId":-1,"leaderEpoch":2,"votedId":1,"votedDirectoryId":"J8aAPcfLQt2bqs1JT_rMgQ","data_version":1}'


def test_quorum_state_versions_from_the_javadoc_examples():
    v0 = kraft.decode_quorum_state(V0, "quorum-state")
    assert v0 == {"data_version": 0, "cluster_id": "", "leader_id": 1, "leader_epoch": 2, "voted_id": -1,
                  "voted_directory_id": None, "applied_offset": 0, "current_voters": []}
    v1 = kraft.decode_quorum_state(V1 + b"\n", "quorum-state")
    assert v1 == {"data_version": 1, "cluster_id": None, "leader_id": -1, "leader_epoch": 2, "voted_id": 1,
                  "voted_directory_id": "J8aAPcfLQt2bqs1JT_rMgQ", "applied_offset": None, "current_voters": None}
    assert kraft.encode_quorum_state(v0) == V0 and kraft.encode_quorum_state(v1) == V1
    voters = kraft.decode_quorum_state(V0.replace(b'"currentVoters":[]', b'"currentVoters":[{"voterId":3}]'), "q")
    assert voters["current_voters"] == [3]


@pytest.mark.parametrize("data, field, expected", [
    (b"", "file", "a JSON line (the file ended prematurely)"),
    (b"[1]", "file", "a JSON object"),
    (b'{"leaderId":1}', "data_version", "a data_version field"),
    (V1.replace(b'"data_version":1', b'"data_version":2'), "data_version", "data_version 0 or 1"),
    (V1.replace(b'"votedId":1,', b""), "votedId", "present (mandatory in version 1)"),
    (V1.replace(b'"leaderId":-1', b'"leaderId":"1"'), "leaderId", "an integer in -2147483648..2147483647"),
    (V1.replace(b'"J8aAPcfLQt2bqs1JT_rMgQ"', b'"short"'), "votedDirectoryId", "a base64 uuid (22 characters)"),
    (V0.replace(b'"clusterId":""', b'"clusterId":"",'
                b'"votedDirectoryId":"J8aAPcfLQt2bqs1JT_rMgQ"'), "votedDirectoryId",
     "no votedDirectoryId (not in version 0)"),
])
def test_bad_quorum_state(data, field, expected):
    err = _error(kraft.decode_quorum_state, data, "raw/kafka/c/brokers/1/dir0/__cluster_metadata-0/quorum-state")
    assert (err.source, err.field, err.expected) == (
        "raw/kafka/c/brokers/1/dir0/__cluster_metadata-0/quorum-state", field, expected)
