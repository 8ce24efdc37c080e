"""The Pulsar part of the lab scorecard: failover rows compared count by count (unsettled and ambiguous too, where
the audit's rows carry them), and per lab seed with the seed's findings."""
from __future__ import annotations

from audit.systems.pulsar.report import failover_scorecard, text

KEY = {"topic": "persistent://lab/geo/t", "subscription": "s"}


def _truth(cluster, seed, target, **counts):
    row = {**KEY, "source_cluster": cluster, "target_cluster": target, "redelivered": 0, "skipped": 0, "lost": 0,
           **counts}
    return {"system": "pulsar", "cluster": cluster, "seed": seed, "findings": [], "failover": [row]}


def test_rows_are_scored_per_seed_on_every_count_both_carry():
    truths = [_truth("a1", 1, "a2", unsettled=2), _truth("a2", 1, "a1"), _truth("b1", 2, "b2", ambiguous=3),
              {"system": "bookkeeper", "cluster": "bk", "seed": 9, "findings": []}]
    rows = [{**KEY, "source_cluster": "a1", "target_cluster": "a2", "redelivered": 0, "skipped": 0, "lost": 0,
             "unsettled": 2},
            {**KEY, "source_cluster": "a2", "target_cluster": "a1", "redelivered": 0, "skipped": 0, "lost": 0},
            {**KEY, "source_cluster": "b1", "target_cluster": "b2", "redelivered": 0, "skipped": 0, "lost": 0,
             "ambiguous": 4}]
    card = failover_scorecard(truths, rows, limit=10)
    assert (card["matched"], card["mismatched"]) == (2, 1) and not card["perfect"]
    assert card["mismatched_items"][0]["got"]["ambiguous"] == 4
    assert card["by_seed"] == {
        "1": {"clusters": ["a1", "a2"], "expected": 2, "matched": 2, "mismatched": 0, "missing": 0, "unexpected": 0},
        "2": {"clusters": ["b1"], "expected": 1, "matched": 0, "mismatched": 1, "missing": 0, "unexpected": 0}}
    lab = {"failover": card, "by_cluster": {c: {"injected": 1, "detected": 1, "wrong_count": 0, "missed": 0,
                                                "false_alarms": int(c == "b1")} for c in ("a1", "a2", "b1")}}
    lines = text({"lab": lab})
    assert lines[1] == ("    pulsar seed 1 (a1, a2): injected 2, detected 2, wrong count 0, missed 0, false alarms 0; "
                        "failover 2/2 matched, mismatched 0, missing 0, unexpected 0")
    assert lines[2].startswith("    pulsar seed 2 (b1): injected 1, detected 1, wrong count 0, missed 0, "
                               "false alarms 1")
