"""MirrorMaker 2 failover counts where the target partition's log start moved (retention) and where a restarted
task copied records twice: the lab's `mm2-sparse-syncs` and `mm2-restart` numbers, the restarts the syncs show,
and, on simulated copy histories with restarts, the true counts always within the bounds."""
from __future__ import annotations

import random

import pytest

from audit.systems.kafka.domain.mm2 import (GroupPartition, Mm2Settings, Restart, SyncWriterPartition,
                                    downstream_bounds, evaluate_group, failover, restarts)

# the lab's primary -> dr, seed 7, orders-mm-0: a restart 90 s before the scans copied again from 576 (its first
# sync lost), retention moved the target's log start to 103; `analytics` at U 499 failed over from D 1
ORDERS = [(0, 0), (101, 101), (202, 202), (303, 303), (404, 404), (505, 505), (576, 582), (677, 683), (778, 784),
          (879, 885)]
# the same flow with offset.flush.interval 60 s: the restart resumed at 431, its first sync (431, 550) lost
HIDDEN = [(0, 0), (101, 101), (202, 202), (303, 303), (404, 404), (505, 505), (532, 651), (633, 752), (734, 853)]
# seed 26: the restarted task's first sync reached the topic (an upstream rewind), the previous lifetime had
# copied up to 518
REWOUND = [(0, 0), (101, 101), (202, 202), (303, 303), (404, 404), (505, 505), (502, 519), (603, 620), (704, 721)]


def test_restarts_the_syncs_show():
    assert restarts(ORDERS) == [Restart((505, 505), (576, 582))]
    (r,) = restarts(HIDDEN)
    assert (r.excess, r.last_copied, r.lowest_resume) == (119, 650, 387)
    (r,) = restarts(REWOUND)
    assert (r.excess, r.last_copied, r.lowest_resume) == (17, 518, 489)
    assert restarts([(0, 0), (100, 90), (200, 190)]) == []        # upstream gaps: fewer downstream offsets
    assert restarts([(0, 0), (100, 100), (5, 40)]) == []          # downstream truncated: a new generation only


@pytest.mark.parametrize("syncs, upstream, target, log_start, redelivered, skipped", [
    # retention deleted the target's records below 103: a consumer at 1 reads from 103 (lab truth 302 and 396)
    (ORDERS, 499, 1, 103, (302, 396), (0, 0)),
    (ORDERS, 499, 1, None, (404, 498), (0, 0)),
    # below the restart the restarted task copied 431..492 a second time, after X (lab truth 451 redelivered)
    (HIDDEN, 492, 1, 102, (303, 495), (0, 0)),
    # the previous lifetime copied 516..518 before X: they are not redelivered (lab truth 413, 426)
    (REWOUND, 516, 1, 104, (413, 429), (0, 0)),
    # a target group placed past the copies: nothing is a certain skip across a restart that may have copied
    # offsets >= U again; the previous lifetime may hold copies of 560..650 below 700
    (HIDDEN, 560, 700, None, (0, 0), (0, 139)),
    (ORDERS, 700, 800, None, (0, 0), (94, 116)),    # past every restart: judged as before
])
def test_failover_counts(syncs, upstream, target, log_start, redelivered, skipped):
    f = failover(upstream, downstream_bounds(syncs, upstream), target, log_start, restarts(syncs))
    assert ((f.redelivered_min, f.redelivered_max), (f.skipped_min, f.skipped_max)) == (redelivered, skipped)


def test_the_finding_counts_what_a_consumer_can_read():
    g = GroupPartition("dr", "primary", "analytics", "orders-mm", 0, "3.6.0", tuple(ORDERS), None, 499, 10, 1, 10,
                       target_log_start=103)
    rows, metrics = evaluate_group(g, Mm2Settings())
    assert [(r["check"], r["offset_from"], r["offset_to"], r["entry_count"]) for r in rows] == [
        ("kafka.mm2_failover_redelivery", 103, 404, 302)]
    assert (metrics["redelivered_min"], metrics["redelivered_max"], metrics["exact"]) == (302, 396, False)


def simulate(rng: random.Random):
    """One upstream partition (no gaps) copied by task lifetimes: each resumes at its committed offset + 1 (at most
    where the previous one stopped), copies on, and emits syncs by the 3.4.1+ rule; now and then a lifetime's first
    sync waits (ten in flight) and the next one replaces it. -> (syncs in topic order, downstream records (d, u))."""
    records, syncs, copied = [], [], 0
    for _ in range(rng.randint(1, 4)):
        resume = rng.randint(max(0, copied - 60), copied)
        stop = resume + rng.randint(1, 200)
        writer = SyncWriterPartition(rng.choice((10, 25, 100)), "3.6.0")
        pending = None
        for u in range(resume, stop):
            d = len(records)
            records.append((d, u))
            if writer.update(u, d):
                if u == resume and rng.random() < 0.5:
                    pending = (u, d)
                else:
                    pending = None
                    syncs.append((u, d))
        if pending is not None:       # never replaced: sent once a sync in flight completes
            syncs.append(pending)
        copied = stop
    return syncs, records


def truth(records, upstream, target, log_start):
    readable = [(d, u) for d, u in records if d >= log_start]
    redelivered = sum(1 for d, u in readable if d >= target and u < upstream)
    last: dict[int, int] = {}
    for d, u in readable:
        if u >= upstream:
            last[u] = max(last.get(u, -1), d)
    return redelivered, sum(1 for d in last.values() if d < target)


def within(value, low, high):
    return (low is None or low <= value) and (high is None or value <= high)


@pytest.mark.parametrize("seed", range(60))
def test_true_counts_lie_within_the_bounds(seed):
    rng = random.Random(seed)
    syncs, records = simulate(rng)
    top_u, top_d = max(u for _, u in records), len(records)
    for _ in range(40):
        upstream, target = rng.randint(0, top_u + 1), rng.randint(0, top_d)
        log_start = rng.choice((0, 0, rng.randint(0, top_d)))
        f = failover(upstream, downstream_bounds(syncs, upstream), target, log_start, restarts(syncs))
        redelivered, skipped = truth(records, upstream, target, log_start)
        assert within(redelivered, f.redelivered_min, f.redelivered_max), (syncs, upstream, target, log_start, f)
        assert within(skipped, f.skipped_min, f.skipped_max), (syncs, upstream, target, log_start, f)
        if f.exact:
            assert f.redelivered_min == redelivered and f.skipped_min == skipped
