"""Twenty lab BookKeeper clusters, one per seed, with every default fault and every production behaviour
(DbLedgerStorage bookies read through their location index or read probes, default clients without ctime, slow
bookies, re-replication, writes during collection), audited in one run through the CLI: every seed exact. Eight
seeds read their probes at a share below 100 % (10 % and 50 %): the truth then counts only the lost entries the
probes read, and the audit must find exactly those."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from audit.cli.main import EXIT_CLEAN
from audit.tables import read_rows
from tests.estates import demo_seeds, exact_seed_by_seed

pytestmark = pytest.mark.slow   # a twenty-seed scorecard: make scorecard and CI

SEEDS_ESTATE = Path(__file__).resolve().parents[3] / "lab" / "estate-seeds.yaml"
COUNT_CHECKS = ("bk.entries_lost", "bk.entries_below_ack_quorum", "bk.entries_below_write_quorum")


def test_twenty_seeds_zero_false_alarms_and_every_fault_found_with_its_count(tmp_path, capsys):
    code, lab = demo_seeds(SEEDS_ESTATE, tmp_path, capsys)
    seeds = exact_seed_by_seed(lab, clusters=20)
    assert all(c["injected"] == c["detected"] > 0 for c in seeds.values())
    # the production behaviours produced no finding of their own, and the open-too-long check found the abandoned
    # ledgers although their clients stored no ctime
    assert lab["by_check"]["bk.ledger_open_too_long"]["detected"] == 20
    assert code == EXIT_CLEAN

    (run,) = (tmp_path / "store").glob("*/runs/*/attempts/*")
    truths = {p.parent.name: json.loads(p.read_text()) for p in (run / "raw" / "_lab").glob("*/ground_truth.json")}
    assert Counter(t["read_probe_percent"] for t in truths.values()) == {100: 12, 50: 4, 10: 4}
    hits = [(t["read_probe_percent"], h) for t in truths.values() for f in t["faults"] for h in f["hits"]]
    # faults land on both kinds of DbLedgerStorage evidence, and on probe bookies at every share
    assert any(h["evidence"] == "location_index" for _, h in hits)
    for share in (10, 50, 100):
        on_probes = [h for s, h in hits if s == share and h["evidence"] == "read_probe"]
        assert on_probes and all(h["seen"] > 0 for h in on_probes)
        assert all(h["seen"] == h["lost"] for h in on_probes) == (share == 100)   # below 100 % some go unread
    # a fault no probe reads is expected to give no finding: none on its ledgers
    violations = read_rows(run / "findings" / "violations")
    counted = {(v["cluster"], json.loads(v["evidence"]).get("ledger_id")) for v in violations
               if v["check"] in COUNT_CHECKS}
    for t in truths.values():
        for f in t["faults"]:
            if f["outcome"] == "not_probed":
                assert not counted & {(t["cluster"], lid) for lid in f["ledgers"]}
    # the audit's missing fragments are the truth's: probe-confirmed entries only, entry for entry
    fragments = read_rows(run / "findings" / "bk_missing_fragments")
    key = ("cluster", "ledger_id", "segment_first_entry_id", "bookie", "missing_count")
    assert {tuple(r[k] for k in key) for r in fragments} == {
        tuple(f[k] for k in key) for t in truths.values() for f in t["missing_fragments"]}
    # sampled findings (probes below 100 %) were found with the truth's count (every seed is exact above)
    sampled = [(v["cluster"], json.loads(v["evidence"])["ledger_id"], v["check"], v["entry_count"]) for v in violations
               if any(p["share_percent"] < 100 for p in json.loads(v["evidence"]).get("sampled", []))]
    expected = {(f["cluster"], f["ledger_id"], f["check"], f["entry_count"]) for t in truths.values()
                for f in t["findings"] if "entry_count" in f}
    assert sampled and set(sampled) <= expected
