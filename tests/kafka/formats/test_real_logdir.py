"""The real Kafka 3.6.2 broker log dir (tests/fixtures/real/kafka-broker-logdir-01) decodes cleanly, file by file,
with the values read from its bytes."""
from __future__ import annotations

from pathlib import Path

import pytest

from audit.systems.kafka.formats.checkpoint import (OFFSET_CHECKPOINT_FILES, parse_leader_epoch_checkpoint,
                                            parse_offsets_checkpoint)
from audit.systems.kafka.formats.properties import parse_meta_properties, parse_partition_metadata
from audit.systems.kafka.formats.segment import scan_segment, segment_base_offset

LOGDIR = Path(__file__).parents[2] / "fixtures" / "real" / "kafka-broker-logdir-01"
PARTITIONS = sorted(p for p in LOGDIR.iterdir() if p.is_dir())


def checkpoint(name: str) -> dict[tuple[str, int], int]:
    entries = parse_offsets_checkpoint((LOGDIR / name).read_bytes(), name)
    return {(e.topic, e.partition): e.offset for e in entries}


def scan(path: Path, verify: bool = True):
    with open(path, "rb", buffering=0) as f:
        return scan_segment(f, str(path.relative_to(LOGDIR)), limit=path.stat().st_size, verify_crc=verify)


def test_meta_properties():
    assert parse_meta_properties((LOGDIR / "meta.properties").read_bytes(), "meta.properties") == {
        "version": 0, "mode": "zookeeper", "broker_id": 0, "cluster_id": "6FP5xR3jTsO5HbmLMGrOBw",
        "directory_id": None}


def test_offset_checkpoints():
    hw, recovery = checkpoint("replication-offset-checkpoint"), checkpoint("recovery-point-offset-checkpoint")
    assert len(PARTITIONS) == 51 and len(hw) == 51 and len(recovery) == 51
    assert set(hw) == {(p.name.rsplit("-", 1)[0], int(p.name.rsplit("-", 1)[1])) for p in PARTITIONS}
    assert hw[("one", 0)] == 11 and hw[("__consumer_offsets", 38)] == 1
    assert sum(hw.values()) == 12 and set(recovery.values()) == {0}
    assert checkpoint("log-start-offset-checkpoint") == {}     # "0\n0\n"
    assert checkpoint("cleaner-offset-checkpoint") == {}       # 0 bytes: the broker reads no entries
    assert set(OFFSET_CHECKPOINT_FILES) <= {p.name for p in LOGDIR.iterdir()}


@pytest.mark.parametrize("partition", PARTITIONS, ids=lambda p: p.name)
def test_every_partition_dir(partition):
    epochs = parse_leader_epoch_checkpoint((partition / "leader-epoch-checkpoint").read_bytes(), partition.name)
    assert epochs == [(0, 0)]
    metadata = parse_partition_metadata((partition / "partition.metadata").read_bytes(), partition.name)
    topic = partition.name.rsplit("-", 1)[0]
    assert metadata == {"version": 0, "topic_id": "0GiFCHgWSn6oW8MZMNOqbg" if topic == "one"
                        else "ERTo-fcmQaS7ek3WyUaolg"}
    (log,) = partition.glob("*.log")
    assert segment_base_offset(log.name) == 0
    result = scan(log)
    assert (result.read_bytes, result.tail, result.error) == (log.stat().st_size, None, None)
    assert all(valid for _, _, valid in result.batches)
    hw = checkpoint("replication-offset-checkpoint")[(topic, int(partition.name.rsplit("-", 1)[1]))]
    log_end = result.batches[-1][1].last_offset + 1 if result.batches else 0
    assert log_end == hw      # a single-broker cluster at rest: HW = LEO


def test_topic_one_segment():
    result = scan(LOGDIR / "one-0" / "00000000000000000000.log")
    headers = [h for _, h, _ in result.batches]
    assert [p for p, _, _ in result.batches] == [0, 83, 166, 247, 331, 412, 495, 584, 673, 754, 835]
    assert [h.base_offset for h in headers] == list(range(11)) == [h.last_offset for h in headers]
    assert {h.partition_leader_epoch for h in headers} == {0} and {h.records_count for h in headers} == {1}
    assert [h.base_sequence for h in headers] == list(range(11))   # idempotent producer 0, epoch 0
    assert {(h.producer_id, h.producer_epoch, h.codec) for h in headers} == {(0, 0, "none")}
    assert [h.crc for h in headers][:3] == [4038045978, 91000036, 154766512]
    assert headers[-1].max_timestamp == 1721563997097
    assert [v for _, _, v in result.batches] == [True] * 11


def test_consumer_offsets_38_holds_one_group_metadata_record():
    (position, header, valid), = scan(LOGDIR / "__consumer_offsets-38" / "00000000000000000000.log").batches
    assert (position, header.base_offset, header.size, header.producer_id, valid) == (0, 0, 340, -1, True)
