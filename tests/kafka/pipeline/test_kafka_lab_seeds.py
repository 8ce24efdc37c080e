"""Twenty lab Kafka worlds, one per seed (lab/estate-kafka-seeds.yaml): every scenario of docs/kafka/lab.md in
each world, brokers scanned 0 to 120 s apart under traffic, ZooKeeper and KRaft brokers, 3 to 5 brokers, several log
dirs on a broker, MirrorMaker 2 releases from 3.4 to 3.7.1. Audited in one run through the CLI: no false alarm,
every finding with its count, every MirrorMaker 2 failover row equal to the simulated failover, seed by seed."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from pyspark.sql import SparkSession

from audit.cli.main import EXIT_CLEAN, main
from tests.estates import exact_seed_by_seed

pytestmark = pytest.mark.slow   # a twenty-seed scorecard: make scorecard and CI

SEEDS_ESTATE = Path(__file__).resolve().parents[3] / "lab" / "estate-kafka-seeds.yaml"
WORLDS = range(1, 21)
CLUSTERS_PER_WORLD = 8
# per world: mm2-sparse-syncs (3 groups x 3 partitions), mm2-restart (2 x 2), mm2-pre-3.4.1-overshoot (2 x 2)
FAILOVER_ROWS_PER_WORLD = 17


def test_twenty_kafka_worlds_score_exact_seed_by_seed(tmp_path, capsys):
    code, lab = _demo(tmp_path, capsys)
    exact_seed_by_seed(lab, clusters=CLUSTERS_PER_WORLD * len(WORLDS), seeds=WORLDS)
    fo = lab["mm2_failover"]
    assert fo["perfect"], (fo["mismatched_items"], fo["missing_items"], fo["unexpected_items"])
    assert fo["expected"] == fo["matched"] == FAILOVER_ROWS_PER_WORLD * len(WORLDS)
    # the worlds' faults were found: the high-watermark rule's divergence (KIP-101), the committed offsets an
    # unclean election loses, the messages a failover of the pre-3.4.1 flows skips and of the others redelivers
    for check in ("kafka.divergent_logs", "kafka.committed_data_lost", "kafka.mm2_target_group_ahead",
                  "kafka.mm2_failover_redelivery"):
        assert lab["by_check"][check]["detected"] == lab["by_check"][check]["injected"] > 0, check
    # the lab's table (docs/kafka/lab.md "Scenarios"): under leader epochs the KIP-101 scenarios, a power loss and
    # rolling restarts lose nothing, and the replicas of a healthy cluster or of a MirrorMaker 2 target have nothing
    # to find, however far apart its brokers are scanned; a loss claimed there is one the ground truth and the
    # audit agree on by mistake, which the scorecard cannot see
    quiet = {f"k{seed:02d}-{role}" for seed in WORLDS
             for role in ("epoch-s1", "epoch-s2", "primary", "dr", "dr-legacy")}
    quiet |= {name for name in _leader_epoch_clusters() if name.endswith(("-power", "-rolling"))}
    claimed = sorted((t["cluster"], f["check"], f'{f["topic"]}-{f["partition"]}', f.get("broker"), f["entry_count"])
                     for t in _ground_truths(tmp_path) if t["cluster"] in quiet
                     for f in t["findings"] if not f["check"].startswith("kafka.mm2_"))
    assert claimed == []
    assert code == EXIT_CLEAN


def _demo(tmp_path: Path, capsys) -> tuple[int, dict]:
    """`replaudit demo --json` on the seeds estate, its store under `tmp_path`, on two cores: (exit code, the
    summary's `lab` scorecard). Unlike tests.estates.demo_seeds, the estate's Spark SQL settings are kept (on the
    session an earlier test left active too, for this run only)."""
    estate = yaml.safe_load(SEEDS_ESTATE.read_text())
    estate["store"] = {"uri": f"file://{tmp_path / 'store'}"}
    estate["spark"]["master"] = "local[2]"
    path = tmp_path / "estate.yaml"
    path.write_text(yaml.safe_dump(estate))
    active = SparkSession.getActiveSession()
    sql = {k: str(v) for k, v in estate["spark"]["conf"].items() if k.startswith("spark.sql.")} if active else {}
    saved = {k: active.conf.get(k, None) for k in sql}
    for k, v in sql.items():
        active.conf.set(k, v)
    try:
        code = main(["demo", "--estate", str(path), "--json"])
    finally:
        for k, v in saved.items():
            if v is None:
                active.conf.unset(k)
            else:
                active.conf.set(k, v)
    return code, json.loads(capsys.readouterr().out)["lab"]


def _ground_truths(tmp_path: Path) -> list[dict]:
    """Every lab cluster's ground truth the run stored (raw/_lab/<cluster>/ground_truth.json)."""
    paths = (tmp_path / "store").glob("*/runs/*/attempts/*/raw/_lab/*/ground_truth.json")
    return [json.loads(path.read_text()) for path in paths]


def _leader_epoch_clusters() -> set[str]:
    """The estate's clusters whose simulated brokers truncate by leader epoch (the lab mapping's `policy`)."""
    estate = yaml.safe_load(SEEDS_ESTATE.read_text())
    return {c["name"] for entry in estate["systems"]["kafka"] for c in entry["lab"]["clusters"]
            if c.get("policy", "leader-epoch") == "leader-epoch"}
