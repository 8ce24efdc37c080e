"""mm2_eval's array formulas against the domain's per-group functions (audit/systems/kafka/domain/mm2.py), on random
sync histories (sparse, with upstream gaps, rewinds, downstream truncations and task restarts that copied records
twice) and target log starts, for every store variant."""
from __future__ import annotations

import random

import numpy as np
import pytest

from audit.systems.kafka.domain.mm2 import (Bounds, Checkpoint, GroupPartition, Mm2Settings, checkpoint_justified,
                                    downstream_bounds, evaluate_group, failover, restarts, rule_for_version,
                                    translate)
from audit.systems.kafka.transforms.mm2_eval import NULL, Groups, evaluate, judged, needs_rules

VERSIONS = ("3.4.0", "3.5.0", "3.5.2", "3.6.1", "3.7.1")


def history(rng: random.Random) -> list[tuple[int, int]]:
    syncs, u, d = [], rng.randint(0, 50), rng.randint(0, 50)
    for _ in range(rng.randint(0, 90)):
        roll = rng.random()
        if roll < 0.03:
            u, d = rng.randint(0, 20), d + 1            # topic recreated upstream: rewinds
        elif roll < 0.06:
            d = max(0, d - rng.randint(1, 30))           # downstream truncated
        elif roll < 0.12:                                # a restart copied records again, rewinding or not
            u, d = max(0, u + rng.randint(-40, 40)), d + rng.randint(41, 120)
        else:
            step = rng.choice((1, 1, 2, 7, 40, 300))
            u, d = u + step, d + rng.choice((step, step, step - 1 if step > 1 else 1))
        syncs.append((u, d))
    return syncs


def opt(v) -> int:
    return NULL if v is None else int(v)


def opt_none(v) -> int | None:
    return None if v == NULL else int(v)


@pytest.mark.parametrize("seed", range(40))
def test_arrays_equal_the_domain(seed):
    rng = random.Random(seed)
    version = VERSIONS[seed % len(VERSIONS)]
    syncs = history(rng)
    top = (syncs[-1][0] if syncs else 50) + 60
    n = 30
    up = [rng.choice((None, rng.randint(0, top))) if rng.random() < 0.1 else rng.randint(0, top) for _ in range(n)]
    cps = []
    for _ in range(n):
        if rng.random() < 0.2 or not syncs:
            cps.append(None)
            continue
        cu = rng.randint(0, top)
        t = translate(syncs, cu, version)
        cps.append(Checkpoint(cu, (t if t is not None and t >= 0 else rng.randint(0, top)) + rng.choice((0, 0, 1, -1))))
    target = [None if rng.random() < 0.1 else rng.randint(0, top + 10) for _ in range(n)]
    log_start = [rng.choice((None, 0, rng.randint(0, top))) for _ in range(n)]
    g = Groups(np.array([opt(v) for v in up]), np.array([opt(v) for v in target]),
               np.array([opt(c and c.upstream_offset) for c in cps]),
               np.array([opt(c and c.downstream_offset) for c in cps]), np.array([opt(v) for v in log_start]))
    got = evaluate(syncs, version, g)
    rule = rule_for_version(version)
    for i in range(n):
        want_t = None if up[i] is None else translate(syncs, up[i], version)
        assert opt(want_t) == got["translated"][i], (i, up[i])
        bounds = downstream_bounds(syncs, up[i]) if up[i] is not None else Bounds(None, None)
        assert (opt(bounds[0]), opt(bounds[1])) == (got["bounds_low"][i], got["bounds_high"][i])
        f = failover(up[i], bounds, target[i], log_start[i], restarts(syncs))
        for name in ("redelivered_min", "redelivered_max", "skipped_min", "skipped_max"):
            assert opt(getattr(f, name)) == got[name][i], (name, i)
        assert f.exact == bool(got["exact"][i]), i
        if cps[i] is not None:
            assert checkpoint_justified(*cps[i], syncs, rule) == bool(got["checkpoint_justified"][i])


@pytest.mark.parametrize("seed", range(10))
def test_flagged_rows_are_exactly_those_with_domain_items(seed):
    """needs_rules never misses a group-partition the domain would report, and judged() returns its items."""
    rng = random.Random(100 + seed)
    version = VERSIONS[seed % len(VERSIONS)]
    syncs = history(rng) or [(5, 5)]
    top = syncs[-1][0] + 40
    n = 40
    up = np.array([rng.randint(0, top) for _ in range(n)])
    target = np.array([rng.randint(0, top + 10) for _ in range(n)])
    cp_u = np.array([rng.randint(0, top) for _ in range(n)])
    cp_d = np.array([rng.randint(0, top) for _ in range(n)])
    log_start = np.array([rng.choice((NULL, rng.randint(0, top))) for _ in range(n)])
    g = Groups(up, target, cp_u, cp_d, log_start)
    src, tgt = np.full(n, 1000), np.full(n, 2000)
    settings = Mm2Settings(redelivery_tolerance=3)
    flagged = needs_rules(evaluate(syncs, version, g), 3)
    base = GroupPartition("east", "west", "", "orders", 0, version, tuple(syncs))
    items = judged(base, g, np.arange(n), src, tgt, settings)
    reported = {f["_row"] for f in items}
    assert reported <= set(np.flatnonzero(flagged).tolist())
    for i in range(n):
        gp = base._replace(group="", checkpoint=Checkpoint(int(cp_u[i]), int(cp_d[i])),
                           upstream_committed=int(up[i]), source_read_at_ms=1000, target_committed=int(target[i]),
                           target_read_at_ms=2000, target_log_start=opt_none(log_start[i]))
        assert bool(evaluate_group(gp, settings)[0]) == (i in reported)


def test_without_log_starts_nothing_is_clipped():
    """Groups built without the target's log starts (older tables) count from the committed offset."""
    syncs = [(0, 0), (100, 100)]
    g = Groups(np.array([150]), np.array([10]), np.array([NULL]), np.array([NULL]))
    got = evaluate(syncs, "3.6.0", g)
    assert (got["redelivered_min"][0], got["redelivered_max"][0]) == (91, 140)
    clipped = evaluate(syncs, "3.6.0", Groups(g.upstream, g.target, g.cp_upstream, g.cp_downstream, np.array([50])))
    assert (clipped["redelivered_min"][0], clipped["redelivered_max"][0]) == (51, 100)
