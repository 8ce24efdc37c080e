"""A topic deleted and re-created while broker 3 was down: broker 3 still holds `orders-0` of the old topic (its
partition.metadata names the old topic id; Kafka renames such a folder `-stray` only when the broker starts). Real
encoded files, KafkaCollector, spark_jobs/run.py normalize and audit, KRaft metadata assigning the new topic an hour
before the scan.
- re-created: broker 3's copy is `kafka.stray_replica`, left out of every other rule, and the new topic's replica on
  broker 3 is `kafka.replica_missing`; the old data is never compared with the new topic's;
- the same files with broker 3's copy of the current topic id: its different batches are judged (the true
  finding of a replica whose log differs from the leader's: divergent offsets 0..3)."""
from __future__ import annotations

import pytest

from audit.systems.kafka.formats.kraft_wire import uuid_text
from tests.kafka.collect.build import batches, write_log_dir, write_partition
from tests.kafka.transforms.test_audit_assignment import HOUR, _metadata_log
from tests.kafka.transforms.test_audit_kraft import ORDERS, T0, _collect_and_audit, _findings

OLD = uuid_text(bytes(range(16, 32)))
RECORDS = [(T0 - HOUR, [("TopicRecord", 0, {"name": "orders", "topic_id": ORDERS})]),
           (T0 - HOUR, [("PartitionRecord", 0, {"partition_id": 0, "topic_id": ORDERS, "replicas": [1, 2, 3],
                                                "isr": [1, 2], "leader": 1, "leader_epoch": 0,
                                                "partition_epoch": 0})])]
CASES = {"re-created": OLD, "same-topic": ORDERS}


@pytest.fixture(scope="module")
def outputs(spark, tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("stray")
    for case, third_id in CASES.items():
        for broker in (1, 2, 3):
            # brokers 1 and 2: the new topic, 4 offsets in epoch 0; broker 3: 6 offsets of other batches
            log, topic_id = (batches(0, 2, 0), ORDERS) if broker < 3 else (batches(0, 3, 0, size=30), third_id)
            root = write_log_dir(tmp / case / f"b{broker}", broker, [("orders", 0, 4)], kraft=True)
            write_partition(root, "orders-0", {0: log}, [(0, 0)], topic_id=topic_id)
            _metadata_log(root, RECORDS)
    return _collect_and_audit(tmp, {case: (1, 2, 3) for case in CASES})


def test_a_copy_of_the_deleted_topic_is_stray_and_judged_for_nothing_else(outputs):
    out = outputs["re-created"]
    assert _findings(out) == [("orders", 0, "kafka.replica_missing", 3, None, None, 0),
                              ("orders", 0, "kafka.stray_replica", 3, None, None, 0)]
    (stray,) = [v for v in out["violations"] if v["check"] == "kafka.stray_replica"]
    assert (stray["evidence"]["replica_topic_id"], stray["evidence"]["metadata_topic_id"]) == (OLD, ORDERS)
    assert sorted(r["broker"] for r in out["replicas"] if r["topic"] == "orders") == [1, 2]


def test_the_same_files_of_the_current_topic_are_judged(outputs):
    # broker 3 (in no ISR, its HW 4 read before the leader's log) keeps offsets 0..3 that differ from the leader's
    assert _findings(outputs["same-topic"]) == [("orders", 0, "kafka.divergent_logs", 3, 0, 3, 4)]
