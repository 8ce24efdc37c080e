"""An epoch bumped between the listing of a log dir and the read of a partition's leader-epoch-checkpoint: the
collector lists segment sizes first and reads the checkpoint later, so the leader's file may start a new epoch
above the log end it listed. Kafka never loads such an entry (LogLoader: truncateFromEndAsyncFlush(nextOffset));
the audit cuts it too. Real encoded files, KafkaCollector, spark_jobs/run.py normalize and audit.

Leader 1 (listed at LEO 8, all in epoch 0) and follower 2 (read later: offsets 0..11 in epoch 0, HW 12).
- race: the leader's checkpoint says epoch 1 starts at 12, past its listed end (appends 8..11 and the bump came
  after the listing): the follower's 8..11 are the leader's own later appends, nothing is lost;
- no race: the leader's epoch 1 starts at 8, its log end: the follower exposed 8..11 in epoch 0, which the leader
  can never get: committed data lost, offsets 8..11."""
from __future__ import annotations

import pytest

from tests.kafka.collect.build import batches, write_log_dir, write_partition
from tests.kafka.transforms.test_audit_kraft import ORDERS, TOPIC, _collect_and_audit, _findings, _metadata_log

LEADER = ("PartitionRecord", 0, {"partition_id": 0, "topic_id": ORDERS, "replicas": [1, 2], "isr": [1, 2],
                                 "leader": 1, "leader_epoch": 1, "partition_epoch": 0})
CASES = {"race": [(0, 0), (1, 12)], "no-race": [(0, 0), (1, 8)]}


@pytest.fixture(scope="module")
def outputs(spark, tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("epoch-race")
    for case, leader_epochs in CASES.items():
        for broker, (log, end, hw, epochs) in {1: (batches(0, 4, 0), 8, 8, leader_epochs),
                                                2: (batches(0, 6, 0), 12, 12, [(0, 0)])}.items():
            root = write_log_dir(tmp / case / f"b{broker}", broker, [("orders", 0, hw)], kraft=True)
            write_partition(root, "orders-0", {0: log}, epochs, topic_id=ORDERS)
            _metadata_log(root, [(1, [TOPIC]), (1, [LEADER])], [(1, 0)])
    return _collect_and_audit(tmp, {case: (1, 2) for case in CASES})


def test_an_epoch_past_the_listed_log_end_is_not_loaded(outputs):
    assert _findings(outputs["race"]) == []
    assert [r["latest_epoch"] for r in outputs["race"]["replicas"] if (r["topic"], r["broker"]) == ("orders", 1)] == [0]


def test_the_same_files_without_the_race_give_the_loss(outputs):
    assert _findings(outputs["no-race"]) == [("orders", 0, "kafka.committed_data_lost", 1, 8, 11, 4)]
