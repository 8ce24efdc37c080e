"""A leader elected between the read of the metadata and the scan of a partition. The brokers' copies of the KRaft
metadata log (`__cluster_metadata-0`, read before the user partitions of each dir) say broker 1 leads orders-0 in
epoch 0; broker 2 became leader in epoch 1 at offset 8 before its orders-0 was read, and appended 8..11. The
metadata's leader is no longer the log the others follow: judged against it, broker 2's new records would be
"divergent" and a repair would rebuild the current leader. They are judged against the newest epoch's log
(docs/formats/kafka.md §11.6). Real encoded files, KafkaCollector, spark_jobs/run.py normalize and audit.

- race: the metadata knows epoch 0 only: judged against broker 2, broker 1 only lags; no finding;
- no-race: the metadata knows broker 1 led again from offset 8 in epoch 2 (its cache says so): broker 2's 8..11,
  exposed in epoch 1 under its high watermark 12, are lost to the leader's log: the true finding, offsets 8..11."""
from __future__ import annotations

import pytest

from audit.systems.kafka.domain.partition import NEWER_EPOCH
from tests.kafka.collect.build import batches, write_log_dir, write_partition
from tests.kafka.transforms.test_audit_kraft import (ORDERS, TOPIC, _change, _collect_and_audit, _findings,
                                                     _metadata_log, _partition)

LEADER = ("PartitionRecord", 0, {"partition_id": 0, "topic_id": ORDERS, "replicas": [1, 2], "isr": [1, 2],
                                 "leader": 1, "leader_epoch": 0, "partition_epoch": 0})
CASES = {"race": ([(0, [TOPIC]), (0, [LEADER])], [(0, 0)]),
         "no-race": ([(0, [TOPIC]), (0, [LEADER]), (0, [_change(leader=2)]),
                      (0, [_change(leader=1)])], [(0, 0), (2, 8)])}


@pytest.fixture(scope="module")
def outputs(spark, tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("leader-race")
    for case, (records, leader_epochs) in CASES.items():
        for broker, (segments, hw, epochs) in {1: ({0: batches(0, 4, 0)}, 8, leader_epochs),
                                                2: ({0: batches(0, 4, 0) + batches(8, 2, 1)}, 12,
                                                    [(0, 0), (1, 8)])}.items():
            root = write_log_dir(tmp / case / f"b{broker}", broker, [("orders", 0, hw)], kraft=True)
            write_partition(root, "orders-0", segments, epochs, topic_id=ORDERS)
            _metadata_log(root, records, [(0, 0)])
    return _collect_and_audit(tmp, {case: (1, 2) for case in CASES})


def test_a_leader_elected_after_the_metadata_read_is_the_reference(outputs):
    out = outputs["race"]
    assert _findings(out) == []
    assert not [c for c in out["coverage"] if c["topic"] == "orders"]       # judged, nothing left open
    m = _partition(out, "orders")
    assert (m["leader"], m["leader_epoch"], m["reference_broker"], m["reference_rule"]) == (1, 0, 2, NEWER_EPOCH)


def test_the_same_logs_under_the_metadata_that_knows_the_epochs_give_the_loss(outputs):
    out = outputs["no-race"]
    assert _findings(out) == [("orders", 0, "kafka.committed_data_lost", 1, 8, 11, 4)]
    assert _partition(out, "orders")["reference_rule"] == "leader"
