"""The Kafka audit job (audit/systems/kafka/transforms/audit.py `run`) over hand-built kafka_* tables written with the
normalizer's schemas: the KIP-101 seed's scenario 1 and 2 (exact offsets and counts, under the high-watermark and
the leader-epoch truncation policies), a healthy partition, log dirs without metadata, replicas read in an order
that proves nothing, and what the batch headers alone show (epochs outside the cache, producer sequence gaps)."""
from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from audit.contracts import AuditRequest
from audit.systems.kafka.domain.epochs import EpochEntry
from audit.systems.kafka.domain.partition import UNKNOWN_CACHE, PartitionMetadata, PartitionState, ReplicaState, metrics
from audit.systems.kafka.transforms.audit import run
from audit.systems.kafka.transforms.audit_rows import FOLLOWER, PARTITION_METRICS
from audit.systems.kafka.transforms.tables import SCHEMAS

T0 = 1_760_000_000_000
OLD, NEW = "old", "new"          # clusters: brokers before KIP-101 (0.10.2) and current ones (3.6)


class Tables:
    """Rows of every kafka_* table, written as the normalizer writes them."""

    def __init__(self):
        self.rows = {name: [] for name in SCHEMAS}

    def replica(self, cluster, topic, partition, broker, batches, epochs, hw, *, lso=0, read_at=None, hw_at=None,
                cleaner=None, epoch_file=True, epoch_error=None, dir_="dir0"):
        """batches: (base, last, epoch, crc[, producer_id, producer_epoch, base_sequence]) tuples."""
        read_at = T0 + 1000 * broker if read_at is None else read_at
        hw_at = read_at - 10 if hw_at is None else hw_at
        key = {"cluster": cluster, "broker": broker, "dir": dir_, "log_dir": f"/var/kafka/{dir_}", "topic": topic,
               "partition": partition}
        leo = batches[-1][1] + 1 if batches else lso
        self.rows["kafka_replicas"].append({
            **key, "high_watermark": hw, "log_start_offset": lso, "cleaner_offset": cleaner, "log_end_offset": leo,
            "first_batch_offset": batches[0][0] if batches else None, "segments": 1, "batches": len(batches),
            "epoch_checkpoint": epoch_file, "epoch_checkpoint_error": epoch_error, "index_complete": True,
            "read_started_at_ms": min(read_at, hw_at) - 5, "read_finished_at_ms": max(read_at, hw_at) + 5,
            "checkpoints_read_at_ms": hw_at, "listed_at_ms": read_at})
        for i, (epoch, start) in enumerate(epochs):
            self.rows["kafka_epochs"].append({**key, "entry_index": i, "epoch": epoch, "start_offset": start})
        for b in batches:
            base, last, epoch, crc, *producer = b
            pid, pepoch, seq = producer or (-1, -1, -1)
            self.rows["kafka_batches"].append({
                **key, "segment": 0, "base_offset": base, "last_offset": last, "partition_leader_epoch": epoch,
                "magic": 2, "crc": crc, "crc_valid": None, "attributes": 0, "transactional": False,
                "control": False, "base_timestamp": T0 + base, "max_timestamp": T0 + last, "producer_id": pid,
                "producer_epoch": pepoch, "base_sequence": seq, "records_count": last - base + 1,
                "position": 0, "size": 100})

    def metadata(self, cluster, topic, partition, leader, leader_epoch, replicas, isr, read_at=T0 + 50_000):
        self.rows["kafka_partitions"].append({
            "cluster": cluster, "topic": topic, "partition": partition, "origin": "admin", "leader": leader,
            "leader_epoch": leader_epoch, "replicas": replicas, "isr": isr, "error_code": 0,
            "read_started_at_ms": read_at - 5, "read_finished_at_ms": read_at})

    def write(self, tables_dir):
        for name, rows in self.rows.items():
            if not rows or name == "quarantine":
                continue
            schema = to_arrow_schema(SCHEMAS[name])
            full = [{f.name: r.get(f.name) for f in schema} for r in rows]
            os.makedirs(os.path.join(tables_dir, name), exist_ok=True)
            pq.write_table(pa.Table.from_pylist(full, schema=schema),
                           os.path.join(tables_dir, name, "part-0.parquet"))


def request(run_id="r1", clusters=None, tolerance=0):
    thresholds = SimpleNamespace(kafka_follower_lag_max=10_000, kafka_mm2_redelivery_tolerance=tolerance)
    declared = clusters if clusters is not None else (SimpleNamespace(name=OLD, version="0.10.2", mirrors=()),
                                                      SimpleNamespace(name=NEW, version="3.6", mirrors=()))
    return AuditRequest(run_id, T0 + 100_000, thresholds, tuple(declared))


def audited(spark, tmp_path, t: Tables, req=None):
    tables, root = str(tmp_path / "tables"), str(tmp_path / "out")
    t.write(tables)
    counts = run(spark, tables, root, req or request())
    read = {name: [r.asDict(recursive=True) for r in spark.read.parquet(os.path.join(root, "metrics", name))
                   .collect()] for name in ("kafka_partitions", "kafka_replicas", "kafka_coverage",
                                            "kafka_mm2_failover")}
    read["violations"] = [r.asDict() for r in spark.read.parquet(
        os.path.join(root, "findings", "violations", "system=kafka")).collect()]
    for v in read["violations"]:
        v["evidence"] = json.loads(v["evidence"])
    return counts, read


def findings(read, topic=None, partition=None):
    return sorted(((v["cluster"], v["evidence"]["topic"], v["evidence"]["partition"], v["check"],
                    v["evidence"].get("broker"), v["evidence"]["offset_from"], v["evidence"]["offset_to"],
                    v["entry_count"]) for v in read["violations"]
                   if (topic is None or v["evidence"]["topic"] == topic)
                   and (partition is None or v["evidence"]["partition"] == partition)), key=str)


def scenario_1(t: Tables, cluster: str, partition: int):
    """KIP-101 scenario 1: A (1) led with m1, m2 committed (its HW 2); B (2), its HW still 1, restarted and cut
    its log to 1; A died and B leads epoch 1 with one message. A's log dir was read before it came back."""
    t.replica(cluster, "orders", partition, 1, [(0, 0, 0, 100), (1, 1, 0, 200)], [(0, 0)], 2)
    t.replica(cluster, "orders", partition, 2, [(0, 0, 0, 100)], [(0, 0), (1, 1)], 1)
    t.metadata(cluster, "orders", partition, 2, 1, [1, 2], [2])


def scenario_2(t: Tables, cluster: str, partition: int, with_metadata=True):
    """KIP-101 scenario 2: after both crashed, B (2) came back first and leads epoch 1 with m3 at offset 1; A (1)
    keeps m2 at offset 1 (cut at its high watermark 2). Both high watermarks are 2."""
    t.replica(cluster, "orders", partition, 1, [(0, 0, 0, 100), (1, 1, 0, 200)], [(0, 0)], 2)
    t.replica(cluster, "orders", partition, 2, [(0, 0, 0, 100), (1, 1, 1, 300)], [(0, 0), (1, 1)], 2)
    if with_metadata:
        t.metadata(cluster, "orders", partition, 2, 1, [1, 2], [1, 2])


def healthy(t: Tables, cluster: str, topic: str, partition: int, n: int = 50):
    batches = [(10 * i, 10 * i + 9, 0 if i < 20 else 3, 1000 + i, 7, 0, 10 * i) for i in range(n)]
    for broker in (1, 2, 3):
        t.replica(cluster, topic, partition, broker, batches, [(0, 0), (3, 200)], 10 * n)
    t.metadata(cluster, topic, partition, 1, 3, [1, 2, 3], [1, 2, 3])


def test_seed_scenarios_under_both_policies_and_a_healthy_partition(spark, tmp_path):
    t = Tables()
    scenario_1(t, OLD, 0)
    scenario_2(t, OLD, 1)
    scenario_1(t, NEW, 0)
    scenario_2(t, NEW, 1)
    healthy(t, NEW, "payments", 0)
    counts, read = audited(spark, tmp_path, t)
    assert findings(read) == sorted([
        # scenario 1: offset 1 (m2) was committed on A, B never got it: lost under either policy
        (OLD, "orders", 0, "kafka.committed_data_lost", 2, 1, 1, 1),
        (NEW, "orders", 0, "kafka.committed_data_lost", 2, 1, 1, 1),
        # scenario 2: before KIP-101 A keeps m2 where B holds m3; with epochs A's cut removes it: lost instead
        (OLD, "orders", 1, "kafka.divergent_logs", 1, 1, 1, 1),
        (NEW, "orders", 1, "kafka.committed_data_lost", 2, 1, 1, 1),
    ], key=str)
    assert counts["kafka_violations"] == 4
    assert counts["kafka_violations_by_check"] == {"kafka.committed_data_lost": 3, "kafka.divergent_logs": 1}
    by_partition = {(m["cluster"], m["topic"], m["partition"]): m for m in read["kafka_partitions"]}
    assert by_partition[(NEW, "payments", 0)]["findings"] == 0
    assert by_partition[(NEW, "payments", 0)]["reference_broker"] == 1
    assert by_partition[(OLD, "orders", 1)]["reference_broker"] == 2
    replicas = {(r["cluster"], r["topic"], r["partition"], r["broker"]): r for r in read["kafka_replicas"]}
    assert replicas[(OLD, "orders", 1, 1)]["first_mismatch_offset"] == 1
    assert replicas[(OLD, "orders", 1, 2)]["role"] == "reference"
    assert replicas[(NEW, "payments", 0, 2)]["first_mismatch_offset"] is None
    assert replicas[(NEW, "payments", 0, 3)]["batches"] == 50
    lost = next(v for v in read["violations"] if v["cluster"] == NEW and v["evidence"]["partition"] == 0)
    assert lost["subject"] == "orders-0 broker 2"
    assert lost["severity"] == "critical" and lost["system"] == "kafka" and lost["run_id"] == "r1"
    exposed = lost["evidence"]["exposed_by"]
    assert [e["broker"] for e in exposed] == [1]
    assert read["kafka_mm2_failover"] == []


def test_log_dirs_alone_are_enough(spark, tmp_path):
    """Without kafka_partitions the reference is the replica with the highest latest epoch (B)."""
    t = Tables()
    scenario_2(t, OLD, 1, with_metadata=False)
    _, read = audited(spark, tmp_path, t)
    assert findings(read) == [(OLD, "orders", 1, "kafka.divergent_logs", 1, 1, 1, 1)]
    (m,) = read["kafka_partitions"]
    assert (m["reference_broker"], m["leader"], m["under_replicated"]) == (2, None, None)


def test_snapshots_apart_become_coverage_not_findings(spark, tmp_path):
    """A's high watermark checkpoint was read after its log was listed: its claim proves nothing."""
    t = Tables()
    t.replica(NEW, "orders", 0, 1, [(0, 0, 0, 100), (1, 1, 0, 200)], [(0, 0)], 2, read_at=T0, hw_at=T0 + 20)
    t.replica(NEW, "orders", 0, 2, [(0, 0, 0, 100), (1, 1, 1, 300)], [(0, 0), (1, 1)], 2)
    t.metadata(NEW, "orders", 0, 2, 1, [1, 2], [1, 2])
    t.replica(NEW, "single", 0, 1, [(0, 4, 0, 9)], [(0, 0)], 5)
    t.metadata(NEW, "single", 0, 1, 0, [1, 2, 3], [1])
    counts, read = audited(spark, tmp_path, t)
    assert findings(read) == []
    whats = [(c["topic"], c["broker"], c["what"], c["offset_from"], c["offset_to"]) for c in read["kafka_coverage"]]
    assert ("orders", 1, "exposed offsets not on the leader: high watermark read after the log", 1, 1) in whats
    assert ("single", 1, "one replica's evidence only: nothing to compare it with", None, None) in whats
    assert counts["kafka_coverage"] == len(read["kafka_coverage"])


ONE_BROKER = "3 partition(s) found on one broker only and no metadata: cross-replica rules not run; "


def _declaring(brokers):
    return request(clusters=(SimpleNamespace(name=NEW, version="3.6", mirrors=(), brokers=brokers),))


def _log_dir(t: Tables, broker: int) -> None:
    t.rows["kafka_log_dirs"].append({"cluster": NEW, "broker": broker, "dir": "dir0", "log_dir": "/var/kafka",
                                     "partitions": 0})


@pytest.mark.parametrize("brokers, scanned, expected", [
    # every declared broker read (3 with an empty log dir): found on one broker, a partition has one replica
    ((1, 2, 3), (3,), []),
    ((1, 2), (), []),
    # a declared broker not read: one item for the cluster naming it, not one per partition
    ((1, 2, 3), (), [ONE_BROKER + "add the log dirs of broker(s) 3 (declared in brokers:)"]),
    # nothing declared, no metadata: one item for the cluster saying what to add
    ((), (), [ONE_BROKER + "add the other brokers' log dirs, or declare the cluster's brokers: in the estate"]),
])
def test_partitions_on_one_broker_without_metadata(spark, tmp_path, brokers, scanned, expected):
    t = Tables()
    for topic, broker in (("a", 1), ("b", 2), ("c", 2)):
        t.replica(NEW, topic, 0, broker, [(0, 4, 0, 9)], [(0, 0)], 5)
    for broker in scanned:
        _log_dir(t, broker)
    counts, read = audited(spark, tmp_path, t, _declaring(brokers))
    assert findings(read) == []
    assert [c["what"] for c in read["kafka_coverage"]] == expected
    for c in read["kafka_coverage"]:
        assert (c["topic"], c["partition"], c["broker"]) == (None, None, None)
        assert json.loads(c["detail"])["partitions"] == 3


def test_batch_headers_alone(spark, tmp_path):
    """Epochs the cache does not give, producer sequence gaps on the leader, a cache the checkpoint cannot give."""
    t = Tables()
    leader = [(0, 4, 0, 1, 7, 0, 0), (5, 9, 0, 2, 7, 0, 5), (10, 14, 2, 3, 7, 0, 12), (15, 19, 1, 4, 8, 0, 0),
              (20, 24, 2, 5, 7, 0, 17), (25, 29, 2, 6)]
    t.replica(NEW, "t", 0, 1, leader, [(0, 0), (2, 10)], 30)
    t.replica(NEW, "t", 0, 2, leader, [(0, 0), (2, 10)], 30)
    t.metadata(NEW, "t", 0, 1, 2, [1, 2], [1, 2])
    t.replica(NEW, "u", 0, 1, [(0, 9, 0, 1)], [], 10, epoch_file=False)
    t.replica(NEW, "u", 0, 2, [(0, 9, 0, 1)], [(0, 0)], 10)
    t.replica(NEW, "v", 0, 1, [(0, 9, 0, 1)], [(0, 0)], 10)
    t.replica(NEW, "v", 0, 2, [(0, 9, 0, 1)], [], 10, epoch_error="line 2: expected 'epoch offset'")
    t.metadata(NEW, "v", 0, 1, 0, [1, 2], [1, 2])
    counts, read = audited(spark, tmp_path, t)
    got = findings(read)
    # batch 15..19 carries epoch 1, the cache gives epoch 2 from offset 10: on both replicas
    assert (NEW, "t", 0, "kafka.batch_epoch_outside_cache", 1, 15, 19, 5) in got
    assert (NEW, "t", 0, "kafka.batch_epoch_outside_cache", 2, 15, 19, 5) in got
    # producer 7: 0..4, 5..9, then 12 (gap), then 17 (after 12..16: no gap); on the leader only
    assert (NEW, "t", 0, "kafka.producer_sequence_gap", 1, 10, 14, 1) in got
    # a replica without a leader-epoch-checkpoint has an unknown cache (not an empty one): no epoch rule, and one
    # "not judged" item for its offsets; likewise a checkpoint that does not decode
    assert len(got) == 3
    replicas = {(r["topic"], r["broker"]): r for r in read["kafka_replicas"]}
    assert replicas[("t", 2)]["sequence_gaps"] == 1
    cov = sorted((c["topic"], c["broker"], c["what"], c["offset_from"], c["offset_to"], c["entry_count"],
                  json.loads(c["detail"])["problems"]) for c in read["kafka_coverage"] if c["topic"] in ("u", "v"))
    assert cov == [("u", 1, UNKNOWN_CACHE, 0, 9, 10, ["no leader-epoch-checkpoint in the evidence"]),
                   ("v", 2, UNKNOWN_CACHE, 0, 9, 10, ["line 2: expected 'epoch offset'"])]


def test_the_metrics_table_holds_every_number_the_domain_gives():
    r = [ReplicaState(b, (EpochEntry(0, 0),), 0, 10, 10, T0) for b in (1, 2)]
    m = metrics(PartitionState(NEW, "t", 0, tuple(r), PartitionMetadata(1, 0, (1, 2), (1, 2), T0)))
    assert set(m) <= set(PARTITION_METRICS.fieldNames())
    assert m["followers"] and set(m["followers"][0]) <= set(FOLLOWER.fieldNames())
