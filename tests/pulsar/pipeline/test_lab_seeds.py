"""Twenty lab Pulsar worlds, one per seed, under continuous traffic: each world's clusters are collected one after
another (0 to 2 minutes apart) while producers, replicators and consumers keep going, then read again by the
reread stage; broker versions differ per world. Audited in one run through the CLI: no false alarm, every
finding with its count, every failover row equal to the simulated failover, seed by seed."""
from __future__ import annotations

from pathlib import Path

import pytest

from audit.cli.main import EXIT_CLEAN
from tests.estates import demo_seeds, exact_seed_by_seed

pytestmark = pytest.mark.slow   # a twenty-seed scorecard: make scorecard and CI

SEEDS_ESTATE = Path(__file__).resolve().parents[3] / "lab" / "estate-pulsar-seeds.yaml"


def test_twenty_pulsar_worlds_score_exact_seed_by_seed(tmp_path, capsys):
    code, lab = demo_seeds(SEEDS_ESTATE, tmp_path, capsys)
    exact_seed_by_seed(lab, clusters=55)
    fo = lab["failover"]
    assert fo["perfect"], (fo["mismatched_items"], fo["missing_items"], fo["unexpected_items"])
    assert sorted(fo["by_seed"], key=int) == [str(s) for s in range(1, 21)]
    assert all(s["matched"] == s["expected"] > 0 for s in fo["by_seed"].values())
    # the worlds' faults were found: the skip/loss of consumers on both sides, the lag of a standby reset behind the
    # UPDATEs it had applied, the one-way subscription, the disconnected replicators, the snapshots that time out
    for check in ("pulsar.failover_skip", "pulsar.failover_loss", "pulsar.failover_redelivery",
                  "pulsar.replicated_subscription_one_way", "pulsar.replicator_disconnected",
                  "pulsar.snapshot_timeout"):
        assert lab["by_check"][check]["detected"] == lab["by_check"][check]["injected"] > 0, check
    assert lab["by_check"]["pulsar.replicator_disconnected"]["detected"] == 40   # two per world
    assert code == EXIT_CLEAN
