"""Twenty lab BookKeeper clusters, one per seed, with every default fault and every production behaviour
(DbLedgerStorage bookies read through their location index or read probes, default clients without ctime, slow
bookies, re-replication, writes during collection), audited in one run through the CLI: every seed exact."""
from __future__ import annotations

from pathlib import Path

from audit.cli.main import EXIT_CLEAN
from tests.estates import demo_seeds, exact_seed_by_seed

SEEDS_ESTATE = Path(__file__).resolve().parents[3] / "audit" / "lab" / "estate-seeds.yaml"


def test_twenty_seeds_zero_false_alarms_and_every_fault_found_with_its_count(tmp_path, capsys):
    code, lab = demo_seeds(SEEDS_ESTATE, tmp_path, capsys)
    seeds = exact_seed_by_seed(lab, clusters=20)
    assert all(c["injected"] == c["detected"] > 0 for c in seeds.values())
    # the production behaviours produced no finding of their own, and the open-too-long check found the abandoned
    # ledgers although their clients stored no ctime
    assert lab["by_check"]["bk.ledger_open_too_long"]["detected"] == 20
    assert code == EXIT_CLEAN
