"""Partitions never vanish: a KRaft metadata log (real encoded records) assigns partitions to three brokers whose log
dirs are collected by KafkaCollector; some assigned folders are absent. Through spark_jobs/run.py normalize and
audit: a replica the metadata has assigned for an hour and a fully read broker lacks is `kafka.replica_missing`;
the same absence right after the assignment, or beside a `-delete` folder of the partition, is not judged; a
partition no broker holds is still a row of metrics/kafka_partitions."""
from __future__ import annotations

from pathlib import Path

import pytest

from audit.systems.kafka.formats import kraft
from audit.systems.kafka.formats.checkpoint import encode_leader_epoch_checkpoint
from tests.kafka.collect.build import batches, segment_name, write_log_dir, write_partition
from tests.kafka.transforms.test_audit_kraft import META, ORDERS, T0, TOPIC, _collect_and_audit, _partition

HOUR = 3_600_000


def _assign(partition: int, replicas: list[int]) -> tuple:
    return ("PartitionRecord", 0, {"partition_id": partition, "topic_id": ORDERS, "replicas": replicas,
                                   "isr": replicas, "leader": replicas[0], "leader_epoch": 0, "partition_epoch": 0})


# (batch timestamp, records): orders-0..3 assigned an hour before the scan; orders-4 created at the scan's instant
RECORDS = [(T0 - HOUR, [TOPIC]), (T0 - HOUR, [_assign(p, [1, 2, 3]) for p in range(4)]),
           (T0, [_assign(4, [1, 2, 3])])]
FOLDERS = {   # broker -> the orders partitions its log dir holds
    1: {0, 1, 3},        # lacks orders-2 (held by nobody) and orders-4 (created as the dir was listed)
    2: {0, 3, 4},        # lacks orders-1 and orders-2
    3: {0, 1, 4},        # lacks orders-2 and orders-3, but holds orders-3 as a -delete folder
}


def _metadata_log(root: Path, batches_: list[tuple[int, list]] | None = None) -> None:
    """`root`/__cluster_metadata-0: one batch per (timestamp, records) of `batches_` (default RECORDS)."""
    d = root / META
    d.mkdir(parents=True, exist_ok=True)
    log, offset = b"", 0
    for ts, records in RECORDS if batches_ is None else batches_:
        log += kraft.encode_metadata_batch(offset, 1, records, ts)
        offset += len(records)
    (d / segment_name(0)).write_bytes(log)
    (d / "leader-epoch-checkpoint").write_bytes(encode_leader_epoch_checkpoint([(1, 0)]))


@pytest.fixture(scope="module")
def outputs(spark, tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("kraft-assignment")
    for broker, held in FOLDERS.items():
        root = write_log_dir(tmp / "c" / f"b{broker}", broker, [("orders", p, 4) for p in sorted(held)], kraft=True)
        for p in held:
            write_partition(root, f"orders-{p}", {0: batches(0, 2, 0)}, [(0, 0)], topic_id=ORDERS)
        _metadata_log(root)
    write_partition(tmp / "c" / "b3", "orders-3.5f1c0a9e4b7d4a2c8e6f1b3d5a7c9e0f-delete", {0: batches(0, 2, 0)},
                    [(0, 0)], topic_id=ORDERS)
    return _collect_and_audit(tmp, {"c": (1, 2, 3)})["c"]


def test_assigned_replicas_absent_from_read_log_dirs_are_missing(outputs):
    missing = sorted((v["evidence"]["partition"], v["evidence"]["broker"]) for v in outputs["violations"]
                     if v["check"] == "kafka.replica_missing")
    # orders-1 on broker 2, and orders-2 on all three; orders-3 (being deleted on 3) and orders-4 (new) are not
    assert missing == [(1, 2), (2, 1), (2, 2), (2, 3)]
    assert {v["check"] for v in outputs["violations"]} == {"kafka.replica_missing"}
    (v,) = [v for v in outputs["violations"] if (v["evidence"]["partition"], v["evidence"]["broker"]) == (1, 2)]
    assert v["severity"] == "major" and v["subject"] == "orders-1 broker 2"
    assert v["evidence"]["in_isr"] is True and v["evidence"]["assigned_by_ms"] == T0 - HOUR
    assert v["evidence"]["assigned_for_ms"] >= HOUR


def test_absences_a_change_under_way_explains_are_not_judged(outputs):
    items = sorted((c["partition"], c["broker"], c["what"].split(":")[0]) for c in outputs["coverage"])
    assert items == [
        (3, 3, "assigned replica found only as a -delete, -future or -stray folder (a deletion, move or "
               "re-creation under way)"),
        (4, 1, "assigned replica absent from a log dir listed too soon after the assignment (or at an unknown "
               "instant)"),
        (4, 1, "leader's log not collected")]    # the partition audit's own item: its reference is the leader


def test_every_partition_the_metadata_knows_is_counted(outputs):
    assert sorted(m["partition"] for m in outputs["partitions"] if m["topic"] == "orders") == [0, 1, 2, 3, 4]
    lost = _partition(outputs, "orders", 2)
    assert (lost["collected_replicas"], lost["replica_count"], lost["reference_rule"], lost["findings"]) == (
        0, 3, "no-replica-collected", 3)
    assert (_partition(outputs, "orders", 1)["findings"], _partition(outputs, "orders", 0)["findings"]) == (1, 0)
    assert _partition(outputs, "orders", 4)["not_judged"] == 2
