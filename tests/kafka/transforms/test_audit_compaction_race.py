"""The log cleaner working while a broker's log dir is read. The collector reads cleaner-offset-checkpoint first and
the segments later; a pass that ends in between rewrites batches (same base and last offset, fewer records, another
CRC) below the first dirty offset it then checkpoints, and a pass still running has replaced its first segments
while its `.cleaned` file is being written and nothing is checkpointed yet (LogCleaner.cleanSegments, then
LogCleanerManager.doneCleaning; docs/formats/kafka.md §11.5). Real encoded files, KafkaCollector (whose sink changes
the dir right after it stored the first cleaner-offset-checkpoint read), spark_jobs/run.py normalize and audit.

orders-0 on brokers 1 (leader) and 2, offsets 0..11 in epoch 0: segments at 0 and 4 (two batches of two records
each), the active one at 8. Cleaned, a batch keeps its base and last offset and loses its first record.
- pass-ended: broker 1's segments 0 and 4 are cleaned and 8 checkpointed after the first read: no finding;
- pass-running: broker 2's segment 0 is cleaned, segment 4's `.cleaned` file is being written: no finding;
- no-race: broker 1 holds the same cleaned segments with no cleaning ever checkpointed and no pass running: its
  follower 2 holds batches the leader never wrote: the true divergence, offsets 0..7."""
from __future__ import annotations

from pathlib import Path

import pytest

from audit.collectors.base import DirSink
from audit.systems.kafka.formats.batch import encode_batch
from audit.systems.kafka.formats.checkpoint import encode_offsets_checkpoint
from tests.kafka.collect.build import segment_name, write_log_dir, write_partition
from tests.kafka.transforms.test_audit_kraft import ORDERS, TOPIC, _collect_and_audit, _findings, _metadata_log

LEADER = ("PartitionRecord", 0, {"partition_id": 0, "topic_id": ORDERS, "replicas": [1, 2], "isr": [1, 2],
                                 "leader": 1, "leader_epoch": 0, "partition_epoch": 0})
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

    def __init__(self, root, broker: int, race):
        super().__init__(root)
        self.key, self.race = f"brokers/{broker}/dir0/cleaner-offset-checkpoint", race

    def put(self, key, data):
        super().put(key, data)
        if key == self.key and self.race is not None:
            self.race, race = None, self.race
            race()


@pytest.fixture(scope="module")
def outputs(spark, tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("compaction-race")
    pdirs = {}
    for case in ("pass-ended", "pass-running", "no-race"):
        for broker in (1, 2):
            root = write_log_dir(tmp / case / f"b{broker}", broker, [("orders", 0, 12)], kraft=True)
            cleaned = case == "no-race" and broker == 1
            pdirs[case, broker] = write_partition(
                root, "orders-0", {b: _segment(b, cleaned and b < 8) for b in SEGMENTS}, [(0, 0)], topic_id=ORDERS)
            _metadata_log(root, [(0, [TOPIC]), (0, [LEADER])], [(0, 0)])

    def pass_ended():
        _clean(pdirs["pass-ended", 1], (0, 4))
        (pdirs["pass-ended", 1].parent / "cleaner-offset-checkpoint").write_bytes(
            encode_offsets_checkpoint([("orders", 0, 8)]))

    def pass_running():
        _clean(pdirs["pass-running", 2], (0,))
        (pdirs["pass-running", 2] / f"{segment_name(4)}.cleaned").write_bytes(_segment(4, cleaned=True)[:30])

    races = {"pass-ended": (1, pass_ended), "pass-running": (2, pass_running)}

    def sink(root: Path):
        broker, race = races.get(root.name, (None, None))
        return _CleanerRace(root, broker, race)

    return _collect_and_audit(tmp, {case: (1, 2) for case in ("pass-ended", "pass-running", "no-race")}, sink)


def test_a_cleaning_pass_that_ended_during_the_read_gives_no_finding(outputs):
    out = outputs["pass-ended"]
    assert _findings(out) == []
    cleaner = {r["broker"]: r["cleaner_offset"] for r in out["tables_replicas"]}
    assert cleaner == {1: 8, 2: None}      # the second read's first dirty offset


def test_a_cleaning_pass_still_running_gives_no_finding(outputs):
    out = outputs["pass-running"]
    assert _findings(out) == []
    assert {r["broker"]: r["cleaning_below"] for r in out["tables_replicas"]} == {1: None, 2: 8}


def test_the_same_files_without_the_race_give_the_divergence(outputs):
    assert _findings(outputs["no-race"]) == [("orders", 0, "kafka.divergent_logs", 2, 0, 7, 8)]
