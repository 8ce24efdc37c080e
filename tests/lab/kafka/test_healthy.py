"""Continuous traffic, retention, rolling restarts, a power loss under the leader-epoch policy, brokers scanned
minutes apart: no ground-truth finding, though the evidence is full of normal differences (followers behind,
checkpoints trailing, log starts apart)."""
from __future__ import annotations

import pytest

from tests.lab.kafka.evidence import batches, high_watermark
from tests.lab.kafka.helpers import cluster, collect, findings


@pytest.mark.parametrize("seed", (1, 2, 3))
def test_healthy_cluster_scanned_minutes_apart_has_no_finding(seed):
    lab = {"seed": seed, "collection_gap_s": 120, "duration_s": 480,
           "clusters": [cluster("busy", "leader-epoch", "healthy-under-load", log_dirs={1: 2}),
                        cluster("old", "high-watermark", "healthy-under-load")]}
    for name in ("busy", "old"):
        raw, report, truth = collect(lab, name)
        assert findings(truth) == [] and report.gaps == []
        # normal differences are there: the first broker read shows shorter logs than the last one
        hw = high_watermark(raw, 1, "orders", 0, d=0) if name == "old" else None
        assert hw is None or hw > 0
        lo = [b for b in (1, 2, 3) if f"brokers/{b}/dir0/orders-0/batches.json" in raw]
        ends = [batches(raw, b, "orders")[-1][1] for b in lo]
        assert ends == sorted(ends) and ends[0] < ends[-1]


@pytest.mark.parametrize("name", ("rolling", "power", "epoch-s1", "epoch-s2", "primary"))
def test_leader_epoch_scenarios_leave_no_finding(name):
    _, _, truth = collect({"seed": 7}, name)
    assert findings(truth) == []


def test_retention_moves_log_starts_and_rolls_segments():
    raw, _, truth = collect({"seed": 7}, "primary")
    starts = [k for k, v in raw.items() if k.endswith("log-start-offset-checkpoint") and v.count(b"\n") > 2]
    assert starts, "some log start above the first segment base was checkpointed"
    segments = sum(1 for k in raw if k.endswith("/batches.json") and raw[k].count(b'"file"') > 1)
    assert segments > 10
    assert truth["acknowledged_lost"] == {}
