"""KRaft evidence through the real jobs: a `source: log-dirs` cluster (no admin endpoint) collected by
KafkaCollector from log dirs written with the formats' encoders, then spark_jobs/run.py normalize and audit.
1. Leaders, ISR and leader epochs come from the brokers' `__cluster_metadata-0` copies (PartitionRecord, then
   PartitionChangeRecords; the furthest copy wins): an ISR member missing committed data is judged against them.
2. `__cluster_metadata-0` itself, replicated on three controllers, is audited like any partition: its leader is
   quorum-state's, a healthy copy gives nothing, a diverging one the finding a user partition would get."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from audit.collectors.base import DirSink
from audit.systems.kafka.collect.collector import KafkaCollector
from audit.config.estate import load_estate
from audit.config.secrets import SecretResolver
from audit.systems.kafka.formats import kraft
from audit.systems.kafka.formats.batch import encode_batch
from audit.systems.kafka.formats.checkpoint import encode_leader_epoch_checkpoint
from audit.systems.kafka.formats.kraft_wire import uuid_text
from spark_jobs import run
from tests.kafka.collect.build import batches, segment_name, write_log_dir, write_partition

T0 = 1_730_000_000_000
META = "__cluster_metadata-0"
ORDERS = uuid_text(bytes(range(1, 17)))


def _metadata_log(root: Path, batches_: list[tuple[int, list[tuple[str, int, dict]] | tuple[str, dict]]],
                  epochs: list[tuple[int, int]], quorum: dict | None = None, snapshot: tuple | None = None) -> None:
    """`root`/__cluster_metadata-0: one batch per entry (epoch, metadata records | a control record), one offset
    per record, from the snapshot's end offset when there is one (end offset, epoch, records: segments below it
    deleted), else from 0; its leader-epoch-checkpoint and quorum-state."""
    d = root / META
    d.mkdir(parents=True, exist_ok=True)
    base = 0
    if snapshot is not None:
        base, epoch, records = snapshot
        name, data = kraft.encode_snapshot(base, epoch, records, last_contained_log_timestamp=T0, timestamp=T0)
        (d / name).write_bytes(data)
    log, offset = b"", base
    for epoch, body in batches_:
        if isinstance(body, tuple):
            log += kraft.encode_control_batch(offset, epoch, [body], T0)
            offset += 1
        else:
            log += kraft.encode_metadata_batch(offset, epoch, body, T0)
            offset += len(body)
    (d / segment_name(base)).write_bytes(log)
    (d / "leader-epoch-checkpoint").write_bytes(encode_leader_epoch_checkpoint(epochs))
    if quorum is not None:
        (d / kraft.QUORUM_STATE_FILE).write_bytes(kraft.encode_quorum_state({"data_version": 0, **quorum}))


def _estate(tmp: Path, clusters: dict[str, tuple]) -> Path:
    """One `source: log-dirs` cluster per name, its brokers' log dirs under tmp/<name>/b<broker>."""
    text = f"estate: kraft\nstore: {{uri: file://{tmp / 'store'}}}\nsystems:\n  kafka:\n"
    for name, brokers in clusters.items():
        dirs = "".join(f"        - {{broker: {b}, path: {tmp / name / f'b{b}'}}}\n" for b in brokers)
        text += f"    - name: {name}\n      source: log-dirs\n      version: \"3.7\"\n      log_dirs:\n{dirs}"
    path = tmp / "estate.yaml"
    path.write_text(text)
    return path


def _collect_and_audit(tmp: Path, clusters: dict[str, tuple], sink=DirSink) -> dict[str, dict]:
    """Collect each cluster's log dirs as the collector does (brokers one after another, one clock), then both jobs
    once over every cluster (one Spark job per stage for all the cases); the outputs split by cluster. `sink(root)`:
    the raw sink of a cluster (a test's sink may change the log dirs while they are read)."""
    estate = _estate(tmp, clusters)
    for cluster in load_estate(str(estate)).clusters("kafka"):
        report = KafkaCollector(now_ms=itertools.count(T0).__next__).collect(
            cluster, sink(tmp / "raw" / "kafka" / cluster.name), SecretResolver(environ={}))
        assert report.gaps == [] and report.counts["log_dirs_scanned"] == len(clusters[cluster.name])
    run.main(["--system", "kafka", "--stage", "normalize", "--input", str(tmp / "raw"),
              "--output", str(tmp / "tables")])
    run.main(["--system", "kafka", "--stage", "audit", "--input", str(tmp / "tables"),
              "--output", str(tmp / "attempt"), "--estate", str(estate), "--run-id", "r1"])
    outs: dict[str, dict] = {name: {} for name in clusters}
    for table, path in (("tables", tmp / "tables" / "kafka_partitions"),
                        ("tables_replicas", tmp / "tables" / "kafka_replicas"),
                        ("quarantine", tmp / "tables" / "quarantine"),
                        ("partitions", tmp / "attempt" / "metrics" / "kafka_partitions"),
                        ("replicas", tmp / "attempt" / "metrics" / "kafka_replicas"),
                        ("coverage", tmp / "attempt" / "metrics" / "kafka_coverage"),
                        ("violations", tmp / "attempt" / "findings" / "violations" / "system=kafka")):
        rows = ds.dataset(str(path), format="parquet").to_table().to_pylist() if path.exists() else []
        for name in clusters:
            outs[name][table] = [r for r in rows if r.get("cluster") == name]
    for out in outs.values():
        for v in out["violations"]:
            v["evidence"] = json.loads(v["evidence"])
    return outs


def _findings(out: dict) -> list[tuple]:
    return sorted((v["evidence"]["topic"], v["evidence"]["partition"], v["check"], v["evidence"].get("broker"),
                   v["evidence"]["offset_from"], v["evidence"]["offset_to"], v["entry_count"])
                  for v in out["violations"])


def _partition(out: dict, topic: str, partition: int = 0) -> dict:
    (m,) = [m for m in out["partitions"] if (m["topic"], m["partition"]) == (topic, partition)]
    return m


# -- 1. leaders and ISR from the metadata partition -------------------------------------------------------------
TOPIC = ("TopicRecord", 0, {"name": "orders", "topic_id": ORDERS})


def _orders(partition: int, leader: int) -> tuple:
    return ("PartitionRecord", 0, {"partition_id": partition, "topic_id": ORDERS, "replicas": [1, 2, 3],
                                   "isr": [1, 2, 3], "leader": leader, "leader_epoch": 0, "partition_epoch": 0})


def _change(**fields) -> tuple:
    return ("PartitionChangeRecord", 0, {"partition_id": 0, "topic_id": ORDERS, **fields})


def _config(value: str) -> list:
    return [("ConfigRecord", 0, {"resource_type": 2, "resource_name": "orders", "name": "retention.ms",
                                 "value": value})]


# orders-0: led by 3 in epoch 0; 3 is fenced, 1 leads epoch 1 (isr [1, 2]); then 3 is let back into the ISR
# though it lacks committed offsets. Broker 1's copy was read before that last record reached it.
METADATA = [(1, [TOPIC]), (1, [_orders(0, 3)]), (1, [_orders(1, 1)]), (1, [_change(leader=1, isr=[1, 2])]),
            (1, [_change(isr=[1, 2, 3])])]
# the same state as a snapshot ending at offset 5 holds it (one PartitionRecord per partition), then one record
SNAPSHOT = (5, 1, [TOPIC, ("PartitionRecord", 0, {**_orders(0, 1)[2], "leader_epoch": 1, "partition_epoch": 2}),
                   _orders(1, 1)])
COPIES = {   # broker -> (its metadata log, its snapshot)
    # brokers 2 and 3 replay the whole log; broker 2's copy is chosen (furthest, then the smaller id)
    "log": {1: (METADATA[:4], None), 2: (METADATA, None), 3: (METADATA, None)},
    # broker 2 has a snapshot and the log after it, 1 and 3 the log without the last record: broker 2's
    # partitions stand at the snapshot's end, further than the others' last record
    "snapshot": {1: (METADATA[:4], None), 2: ([(1, _config("1"))], SNAPSHOT), 3: (METADATA[:4], None)},
}


@pytest.fixture(scope="module")
def isr_outputs(spark, tmp_path_factory) -> dict[str, dict]:
    """Every COPIES case as its own cluster, audited in one run."""
    tmp = tmp_path_factory.mktemp("kraft-isr")
    epoch0, epoch1 = batches(0, 2, 0), batches(4, 2, 1)            # offsets 0..3 led by 3, 4..7 led by 1
    healthy = batches(0, 3, 0)                                       # orders-1: offsets 0..5, every replica
    logs = {1: (epoch0 + epoch1, 8), 2: (epoch0 + epoch1, 8), 3: (epoch0 + epoch1[:len(epoch1) // 2], 6)}
    for copies in COPIES:
        for broker, (orders0, end) in logs.items():
            root = write_log_dir(tmp / copies / f"b{broker}", broker, [("orders", 0, end), ("orders", 1, 6)],
                                 kraft=True)
            write_partition(root, "orders-0", {0: orders0}, [(0, 0), (1, 4)], topic_id=ORDERS)
            write_partition(root, "orders-1", {0: healthy}, [(0, 0)], topic_id=ORDERS)
            log, snapshot = COPIES[copies][broker]
            _metadata_log(root, log, [(1, 0)], snapshot=snapshot)
    return _collect_and_audit(tmp, {copies: (1, 2, 3) for copies in COPIES})


@pytest.mark.parametrize("copies", list(COPIES))
def test_leaders_isr_and_epochs_from_kraft_records_without_an_admin_endpoint(isr_outputs, copies):
    out = isr_outputs[copies]

    assert {r["origin"] for r in out["tables"]} == {"kraft"}      # nothing from an admin endpoint
    rows = {(r["broker"], r["partition"]): (r["leader"], r["leader_epoch"], r["partition_epoch"], r["isr"],
                                            r["metadata_offset"]) for r in out["tables"] if r["topic"] == "orders"}
    # the PartitionChangeRecord naming leader 1 is epoch 1 (partition epoch 1), the next one's ISR partition
    # epoch 2; broker 2's snapshot holds that state and counts as offset 4, the last one it covers
    assert (rows[(1, 0)], rows[(2, 0)]) == ((1, 1, 1, [1, 2], 3), (1, 1, 2, [1, 2, 3], 4))
    assert rows[(2, 1)] == (1, 0, 0, [1, 2, 3], 2 if copies == "log" else 4)

    # broker 3, in the ISR of broker 2's copy (the furthest, read after the leader's high watermark and before
    # broker 3's log), ends at 6 below the leader's high watermark 8
    assert _findings(out) == [("orders", 0, "kafka.isr_missing_committed", 3, 6, 7, 2)]
    (v,) = out["violations"]
    assert v["evidence"]["isr"] == [1, 2, 3] and v["evidence"]["leader"] == 1
    m = _partition(out, "orders")
    assert (m["reference_rule"], m["reference_broker"], m["leader"], m["leader_epoch"], m["isr_size"],
            m["under_replicated"], m["findings"]) == ("leader", 1, 1, 1, 3, False, 1)
    assert {f["broker"]: f["in_isr"] for f in m["followers"]} == {2: True, 3: True}
    healthy_m = _partition(out, "orders", 1)
    assert (healthy_m["reference_rule"], healthy_m["leader"], healthy_m["findings"], healthy_m["not_judged"]) == (
        "leader", 1, 0, 0)
    assert out["coverage"] == []


# -- 2. the metadata partition audited like any partition ---------------------------------------------------------
def _leader_change(leader: int) -> tuple:
    return ("LEADER_CHANGE", {"version": 0, "leader_id": leader, "voters": [{"voter_id": v} for v in (1, 2, 3)],
                              "granting_voters": [{"voter_id": leader}]})


# raft epoch 1 led by controller 1, epoch 2 (from offset 3) by controller 2; one record per offset
QUORUM = [(1, _leader_change(1)), (1, [TOPIC]),
          (1, [("PartitionRecord", 0, {"partition_id": 0, "topic_id": ORDERS, "replicas": [1, 2, 3],
                                       "isr": [1, 2, 3], "leader": 2, "leader_epoch": 2, "partition_epoch": 0})]),
          (2, _leader_change(2)), (2, _config("1000")), (2, _config("2000"))]
EPOCHS = [(1, 0), (2, 3)]


def _user_log(quorum: list) -> bytes:
    """orders-0 laid out as the metadata log (one record per offset, the same epochs, the same values)."""
    return b"".join(encode_batch(offset, epoch, [json.dumps(body).encode()])
                    for offset, (epoch, body) in enumerate(quorum))


CASES = {   # controller 3's log and epoch checkpoint -> (user partition's findings, the metadata partition's)
    "healthy": (QUORUM, EPOCHS, [], []),
    # another record at offset 4, in the same epoch: its truncation keeps it, in either partition
    "batch": (QUORUM[:4] + [(2, _config("9"))] + QUORUM[5:], EPOCHS, [("kafka.divergent_logs", 3, 4, 4, 1)],
              [("kafka.divergent_logs", 3, 4, 4, 1)]),
    # its checkpoint starts epoch 2 at offset 2, where both logs hold an epoch 1 batch. The epoch rules judge
    # committed offsets only, and the raft log's high watermark is never written to disk (KafkaMetadataLog keeps
    # it in memory; no offset checkpoint names the partition): nothing of the metadata partition counts as
    # committed, so only the user partition gets them
    "lineage": (QUORUM, [(1, 0), (2, 2)], [("kafka.batch_epoch_outside_cache", 3, 2, 2, 1),
                                           ("kafka.epoch_lineage_mismatch", 3, 0, 5, 1)], []),
}


@pytest.fixture(scope="module")
def metadata_outputs(spark, tmp_path_factory) -> dict[str, dict]:
    """Three controllers per case (combined mode: each also holds orders-0, laid out as the metadata log, with high
    watermark 6) and their quorum-state naming controller 2 leader of epoch 2; controller 3's copies are the case's.
    Every case is its own cluster, audited in one run."""
    tmp = tmp_path_factory.mktemp("kraft-metadata")
    for case, (third, third_epochs, _, _) in CASES.items():
        for c in (1, 2, 3):
            quorum, epochs = (third, third_epochs) if c == 3 else (QUORUM, EPOCHS)
            root = write_log_dir(tmp / case / f"b{c}", c, [("orders", 0, len(quorum))], kraft=True)
            write_partition(root, "orders-0", {0: _user_log(quorum)}, epochs, topic_id=ORDERS)
            _metadata_log(root, quorum, epochs,
                          quorum={"leader_id": 2, "leader_epoch": 2, "current_voters": [1, 2, 3]})
    return _collect_and_audit(tmp, {case: (1, 2, 3) for case in CASES})


@pytest.mark.parametrize("case", list(CASES))
def test_the_metadata_partition_is_audited_like_a_user_partition(metadata_outputs, case):
    _, _, user, metadata = CASES[case]
    out = metadata_outputs[case]

    got = _findings(out)
    assert [f[2:] for f in got if f[0] == "orders"] == user
    assert [f[2:] for f in got if f[0] == "__cluster_metadata"] == metadata
    assert out["coverage"] == []
    # judged against quorum-state's leader, every voter's copy collected; voters are not an ISR
    m = _partition(out, "__cluster_metadata")
    assert (m["reference_rule"], m["reference_broker"], m["leader"], m["leader_epoch"], m["replica_count"],
            m["collected_replicas"], m["latest_epoch"], m["log_end_offset"]) == ("leader", 2, 2, 2, 3, 3, 2, 6)
    assert (m["isr_size"], m["under_replicated"], [f["in_isr"] for f in m["followers"]]) == (None, None,
                                                                                            [None, None])
    assert (_partition(out, "orders")["isr_size"], _partition(out, "orders")["under_replicated"]) == (3, False)
    roles = {r["broker"]: r["role"] for r in out["replicas"] if r["topic"] == "__cluster_metadata"}
    assert roles == {1: "follower", 2: "reference", 3: "follower"}
