"""Brokers that move while their log dirs are read, one cluster per case, collected by KafkaCollector from real
encoded files (brokers one after another, one clock) and audited by one spark_jobs/run.py normalize and audit. Each
race gives no finding; the same files without the race still give the true finding with its exact offsets.
orders-0 lives on brokers 1 and 2 of every cluster.

1. An epoch bumped between the listing and the read of leader-epoch-checkpoint (clusters epoch-*; Kafka never loads
   a cache entry past the log end, LogLoader, docs/formats/kafka.md §11.4). Leader 1 listed at LEO 8 in epoch 0,
   follower 2 read later with 0..11 in epoch 0, HW 12.
   - race: the leader's epoch 1 starts at 12, past its listed end: the follower's 8..11 are the leader's later
     appends, nothing is lost;
   - no race: epoch 1 starts at 8, its log end: the follower exposed 8..11 in epoch 0, which the leader can never
     get: committed data lost, offsets 8..11.
2. The log cleaner during the read (clusters cleaner-*; it rewrites batches before it checkpoints the pass,
   docs/formats/kafka.md §11.5). Offsets 0..11 in epoch 0: segments at 0 and 4 (two batches of two records), the
   active one at 8; cleaned, a batch keeps its base and last offset and loses its first record. The collector's
   sink changes the dir right after it stored the raced broker's first cleaner-offset-checkpoint read.
   - pass-ended: broker 1's segments 0 and 4 are cleaned and 8 checkpointed: no finding;
   - pass-running: broker 2's segment 0 is cleaned, segment 4's `.cleaned` file is being written: no finding;
   - no-race: broker 1 holds those cleaned segments, nothing checkpointed, no pass running: follower 2 holds batches
     the leader never wrote, the true divergence, offsets 0..7.
3. A leader elected between the metadata read and the scan (clusters leader-*; docs/formats/kafka.md §11.6). The
   brokers' copies of the KRaft metadata log (read before each dir's user partitions) say broker 1 leads in epoch
   0; broker 2 became leader in epoch 1 at offset 8 and appended 8..11 before its orders-0 was read.
   - race: the metadata knows epoch 0 only: judged against broker 2 (newest epoch), broker 1 only lags;
   - no-race: the metadata knows broker 1 led again from 8 in epoch 2 (its cache says so): broker 2's 8..11,
     exposed in epoch 1 under its high watermark 12, are lost: offsets 8..11."""
from __future__ import annotations

from pathlib import Path

import pytest

from audit.collectors.base import DirSink
from audit.systems.kafka.domain.partition import NEWER_EPOCH
from audit.systems.kafka.formats.batch import encode_batch
from audit.systems.kafka.formats.checkpoint import encode_offsets_checkpoint
from tests.kafka.collect.build import batches, segment_name, write_log_dir, write_partition
from tests.kafka.transforms.test_audit_kraft import (ORDERS, TOPIC, _change, _collect_and_audit, _findings,
                                                     _metadata_log, _partition)


def _leader(epoch: int) -> tuple:
    return ("PartitionRecord", 0, {"partition_id": 0, "topic_id": ORDERS, "replicas": [1, 2], "isr": [1, 2],
                                   "leader": 1, "leader_epoch": epoch, "partition_epoch": 0})


def _cluster(tmp: Path, name: str, brokers: dict, records: list) -> dict[int, Path]:
    """Per broker (segments {base: bytes}, high watermark, leader-epoch entries): its log dir with orders-0 and the
    metadata log `records`; the partition dirs by broker."""
    out = {}
    for broker, (segments, hw, epochs) in brokers.items():
        root = write_log_dir(tmp / name / f"b{broker}", broker, [("orders", 0, hw)], kraft=True)
        out[broker] = write_partition(root, "orders-0", segments, epochs, topic_id=ORDERS)
        _metadata_log(root, records, [(records[0][0], 0)])
    return out


# -- 1. epochs ------------------------------------------------------------------------------------------------------
EPOCH_CASES = {"epoch-race": [(0, 0), (1, 12)], "epoch-no-race": [(0, 0), (1, 8)]}


def _epoch_cases(tmp: Path) -> None:
    for name, leader_epochs in EPOCH_CASES.items():
        _cluster(tmp, name, {1: ({0: batches(0, 4, 0)}, 8, leader_epochs), 2: ({0: batches(0, 6, 0)}, 12, [(0, 0)])},
                 [(1, [TOPIC]), (1, [_leader(1)])])


# -- 2. the log cleaner ---------------------------------------------------------------------------------------------
SEGMENTS = (0, 4, 8)


def _segment(base: int, cleaned: bool) -> bytes:
    """Two batches of two records (`base`, `base + 2`); cleaned: each keeps only its second record."""
    out = b""
    for b in (base, base + 2):
        records = [bytes([65 + b]) * 8, bytes([66 + b]) * 8]
        out += encode_batch(b, 0, records[1:], offset_deltas=[1], last_offset_delta=1,
                            base_timestamp=1_700_000_000_000) if cleaned else \
            encode_batch(b, 0, records, base_timestamp=1_700_000_000_000)
    return out


def _clean(pdir: Path, bases: tuple[int, ...]) -> None:
    for base in bases:
        (pdir / segment_name(base)).write_bytes(_segment(base, cleaned=True))


class _CleanerRace(DirSink):
    """Stores like DirSink; right after the raced broker's cleaner-offset-checkpoint is stored, `race()` runs."""

    def __init__(self, root, broker: int | None, race):
        super().__init__(root)
        self.key, self.race = f"brokers/{broker}/dir0/cleaner-offset-checkpoint", race

    def put(self, key, data):
        super().put(key, data)
        if key == self.key and self.race is not None:
            self.race, race = None, self.race
            race()


def _cleaner_cases(tmp: Path) -> dict:
    """The races by cluster name: (broker, what the cleaner does right after that broker's first read)."""
    dirs = {name: _cluster(tmp, name, {b: ({s: _segment(s, name == "cleaner-no-race" and b == 1 and s < 8)
                                            for s in SEGMENTS}, 12, [(0, 0)]) for b in (1, 2)},
                           [(0, [TOPIC]), (0, [_leader(0)])])
            for name in ("cleaner-pass-ended", "cleaner-pass-running", "cleaner-no-race")}

    def pass_ended():
        _clean(dirs["cleaner-pass-ended"][1], (0, 4))
        (dirs["cleaner-pass-ended"][1].parent / "cleaner-offset-checkpoint").write_bytes(
            encode_offsets_checkpoint([("orders", 0, 8)]))

    def pass_running():
        _clean(dirs["cleaner-pass-running"][2], (0,))
        (dirs["cleaner-pass-running"][2] / f"{segment_name(4)}.cleaned").write_bytes(_segment(4, cleaned=True)[:30])

    return {"cleaner-pass-ended": (1, pass_ended), "cleaner-pass-running": (2, pass_running)}


# -- 3. leaders -----------------------------------------------------------------------------------------------------
LEADER_CASES = {"leader-race": ([(0, [TOPIC]), (0, [_leader(0)])], [(0, 0)]),
                "leader-no-race": ([(0, [TOPIC]), (0, [_leader(0)]), (0, [_change(leader=2)]),
                                    (0, [_change(leader=1)])], [(0, 0), (2, 8)])}


def _leader_cases(tmp: Path) -> None:
    for name, (records, leader_epochs) in LEADER_CASES.items():
        _cluster(tmp, name, {1: ({0: batches(0, 4, 0)}, 8, leader_epochs),
                             2: ({0: batches(0, 4, 0) + batches(8, 2, 1)}, 12, [(0, 0), (1, 8)])}, records)


@pytest.fixture(scope="module")
def outputs(spark, tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("scan-races")
    _epoch_cases(tmp)
    races = _cleaner_cases(tmp)
    _leader_cases(tmp)
    names = [*EPOCH_CASES, "cleaner-pass-ended", "cleaner-pass-running", "cleaner-no-race", *LEADER_CASES]
    return _collect_and_audit(tmp, {name: (1, 2) for name in names},
                              lambda root: _CleanerRace(root, *races.get(root.name, (None, None))))


def _orders(out: dict, column: str) -> dict[int, int | None]:
    """{broker: `column`} of the orders-0 rows of kafka_replicas."""
    return {r["broker"]: r[column] for r in out["tables_replicas"] if r["topic"] == "orders"}


def test_an_epoch_past_the_listed_log_end_is_not_loaded(outputs):
    out = outputs["epoch-race"]
    assert _findings(out) == []
    assert [r["latest_epoch"] for r in out["replicas"] if (r["topic"], r["broker"]) == ("orders", 1)] == [0]


def test_the_same_files_without_the_epoch_race_give_the_loss(outputs):
    assert _findings(outputs["epoch-no-race"]) == [("orders", 0, "kafka.committed_data_lost", 1, 8, 11, 4)]


def test_a_cleaning_pass_that_ended_during_the_read_gives_no_finding(outputs):
    out = outputs["cleaner-pass-ended"]
    assert _findings(out) == []
    assert _orders(out, "cleaner_offset") == {1: 8, 2: None}       # the second read


def test_a_cleaning_pass_still_running_gives_no_finding(outputs):
    out = outputs["cleaner-pass-running"]
    assert _findings(out) == []
    assert _orders(out, "cleaning_below") == {1: None, 2: 8}


def test_the_same_files_without_the_cleaner_race_give_the_divergence(outputs):
    assert _findings(outputs["cleaner-no-race"]) == [("orders", 0, "kafka.divergent_logs", 2, 0, 7, 8)]


def test_a_leader_elected_after_the_metadata_read_is_the_reference(outputs):
    out = outputs["leader-race"]
    assert _findings(out) == []
    assert not [c for c in out["coverage"] if c["topic"] == "orders"]       # judged, nothing left open
    m = _partition(out, "orders")
    assert (m["leader"], m["leader_epoch"], m["reference_broker"], m["reference_rule"]) == (1, 0, 2, NEWER_EPOCH)


def test_the_same_logs_under_the_metadata_that_knows_the_epochs_give_the_loss(outputs):
    out = outputs["leader-no-race"]
    assert _findings(out) == [("orders", 0, "kafka.committed_data_lost", 1, 8, 11, 4)]
    assert _partition(out, "orders")["reference_rule"] == "leader"
