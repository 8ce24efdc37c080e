"""Both ReplicatedSubscriptionSnapshotCache rules on one snapshot sequence, and the rule of a broker version."""
from __future__ import annotations

import pytest

from audit.systems.pulsar.domain.positions import Position
from audit.systems.pulsar.domain.snapshot_cache import (NEWEST, SPREAD, CacheModel, SnapshotCache, broker_cache_model,
                                                        surviving)


def P(e: int) -> Position:
    return Position(1, e)


def by_id(a: Position, b: Position) -> int:
    return b.entry_id - a.entry_id   # the distance upstream's own unit test uses


# The scenario of upstream's testSnapshotCachePruningScenarios (size 5, entry ids below), step by step:
# (added, surviving under SPREAD, surviving under NEWEST)
STEPS = [
    (1, [1], [1]), (2, [1, 2], [1, 2]), (10, [1, 2, 10], [1, 2, 10]), (15, [1, 2, 10, 15], [1, 2, 10, 15]),
    (25, [1, 2, 10, 15, 25], [1, 2, 10, 15, 25]),
    (100, [1, 10, 15, 25, 100], [2, 10, 15, 25, 100]),     # spread: 2 goes (right after the head)
    (110, [1, 15, 25, 100, 110], [10, 15, 25, 100, 110]),  # spread: 10 goes (a middle entry)
    (112, [1, 15, 25, 100, 112], [15, 25, 100, 110, 112]),  # spread: 110 goes (right before the tail)
    (113, [1, 15, 25, 100, 113], [25, 100, 110, 112, 113]),
    (200, [1, 25, 100, 113, 200], [100, 110, 112, 113, 200]),
    (50, [50], [100, 110, 112, 113, 200]),                  # spread: below the tail = a reset, the cache clears
]


@pytest.mark.parametrize("kind,column", [(SPREAD, 1), (NEWEST, 2)])
def test_upstream_pruning_scenario(kind, column):
    cache = SnapshotCache(CacheModel(kind, 5), by_id)
    for step in STEPS:
        cache.add(P(step[0]), step[0])
        assert [p.entry_id for p in cache.positions()] == step[column], step[0]


def test_newest_put_replaces_and_pop_returns_the_last_at_or_below():
    cache = SnapshotCache(CacheModel(NEWEST, 3))
    for e in (10, 20, 20, 30, 40):
        cache.add(P(e), e)
    assert cache.positions() == [P(20), P(30), P(40)]
    assert cache.advanced_mark_delete(P(35)) == 30 and cache.positions() == [P(40)]
    assert cache.advanced_mark_delete(P(35)) is None


def test_same_sequence_different_survivors():
    seq = [(P(e), e) for e in (0, 1, 50, 51, 52, 100)]
    assert surviving(CacheModel(NEWEST, 4), seq, by_id) == [50, 51, 52, 100]
    assert surviving(CacheModel(SPREAD, 4), seq, by_id) == [0, 50, 52, 100]


@pytest.mark.parametrize("version,kind", [
    ("2.10.6", NEWEST), ("3.0.4", NEWEST), ("3.0.x", NEWEST), ("4.0.8", NEWEST), ("4.0.9", SPREAD),
    ("4.1.2", NEWEST), ("4.1.3", SPREAD), ("4.2.0", SPREAD), ("4.2.x", SPREAD), ("4.0.9-SNAPSHOT", SPREAD),
    ("4.0.x", None), ("4.1.x", None), ("master", None), ("", None)])
def test_broker_version_picks_the_rule(version, kind):
    model = broker_cache_model(version)
    assert (model.kind if model else None) == kind


def test_spread_needs_three():
    with pytest.raises(ValueError):
        CacheModel(SPREAD, 2)
