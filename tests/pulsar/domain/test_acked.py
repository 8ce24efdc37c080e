"""Window-relative position keys and a cursor's acked set over a window (docs/formats/pulsar.md §2.2, §2.3)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.systems.pulsar.domain.acked import CursorAcks, acked_mask, ranges_below_mark_delete
from audit.systems.pulsar.domain.positions import Position
from audit.systems.pulsar.domain.rangeset import parse_individually_deleted
from audit.systems.pulsar.domain.records import P, cursor_of
from audit.systems.pulsar.domain.window import PositionIndex

BIG = 1 << 40  # a ledger id far beyond 2^20, as cluster-global ids become


def index_of(*positions: str) -> PositionIndex:
    ps = [P(p) for p in positions]
    return PositionIndex(np.array([p.ledger_id for p in ps]), np.array([p.entry_id for p in ps]))


def acked(window: list[str], mdp: str, ranges=(), read=None) -> list[str]:
    idx = index_of(*window)
    mask = acked_mask(idx, cursor_of(mdp, ranges, read))
    return [p for p, a in zip(window, mask.tolist()) if a]


W = ["5:97", "5:98", "5:99", "7:0", "7:1", "7:2", "9:0"]
CASES = [
    # (id, window, markDeletePosition, ranges, acked positions)
    ("nothing-acked-fresh-cursor", W, "5:-1", [], []),
    ("fresh-cursor-on-later-ledger", W, "7:-1", [], ["5:97", "5:98", "5:99"]),
    ("mdp-inside", W, "5:98", [], ["5:97", "5:98"]),
    ("mdp-between-ledgers", W, "6:3", [], ["5:97", "5:98", "5:99"]),
    ("mdp-beyond-window", W, "12:0", [], W),
    ("range-spans-ledgers", W, "5:97", ["5:98..7:0"], ["5:97", "5:99", "7:0"]),
    ("range-lower-excluded", W, "5:-1", ["5:98..5:99"], ["5:99"]),
    ("range-from-sentinel", W, "5:99", ["7:-1..7:1"], ["5:97", "5:98", "5:99", "7:0", "7:1"]),
    ("range-bounds-outside-window", W, "5:-1", ["6:0..8:5"], ["7:0", "7:1", "7:2"]),
    ("range-beyond-entries", W, "5:-1", ["7:1..7:99999999"], ["7:2"]),
    ("unsorted-overlapping-ranges", W, "5:-1", ["7:0..7:2", "5:97..7:1"], ["5:98", "5:99", "7:0", "7:1", "7:2"]),
    ("empty-window", [], "5:3", ["5:4..5:9"], []),
    ("entry-ids-beyond-2^20", ["3:1048575", "3:1048576", "3:5000000", f"{BIG}:0", f"{BIG}:1"],
     "3:1048575", [f"3:1048576..{BIG}:0"], ["3:1048575", "3:5000000", f"{BIG}:0"]),
]


@pytest.mark.parametrize("window,mdp,ranges,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_acked_mask(window, mdp, ranges, expected):
    assert acked(window, mdp, ranges) == expected
    cursor = cursor_of(mdp, ranges)
    assert [p for p in window if cursor.contains(P(p))] == expected   # the scalar form agrees


def test_keys_are_exact_for_wide_ids():
    idx = index_of("3:0", "3:1048576", f"{BIG}:0", f"{BIG}:{1 << 33}")
    assert np.all(np.diff(idx.keys) > 0)
    # Outside positions fall exactly between their neighbours.
    assert idx.count_at_or_below(P("3:1048575")) == 1
    assert idx.count_at_or_below(P(f"{BIG - 1}:999999999999")) == 2
    assert idx.count_below(P(f"{BIG}:-1")) == 2 and idx.count_at_or_below(P(f"{BIG}:-1")) == 2
    assert idx.count_below(P(f"{BIG}:{1 << 33}")) == 3 and idx.count_at_or_below(P(f"{BIG + 1}:0")) == 4


def test_window_must_be_sorted():
    with pytest.raises(ValueError, match="strictly increasing"):
        index_of("5:2", "5:1")


def test_cursor_from_parsed_range_set():
    rs = parse_individually_deleted("[(5:98..7:0],(7:1..7:2]]", "t")
    cursor = CursorAcks.of(P("5:97"), rs, P("7:3"))
    assert cursor.ranges() == list(rs.ranges)
    assert acked_mask(index_of(*W), cursor).tolist() == [True, False, True, True, False, True, False]


BELOW = [
    ("none", "3:4", [], []),
    ("lower-equals-mdp-is-fine", "3:4", ["3:4..3:6"], []),
    ("lower-below-mdp", "3:4", ["3:2..3:5", "3:7..3:9"], [("3:2", "3:5")]),
    ("entirely-below", "3:9", ["3:1..3:2"], [("3:1", "3:2")]),
    ("spans-ledgers-below", "7:-1", ["5:99..7:0"], [("5:99", "7:0")]),
    ("earlier-ledger-higher-entry", "7:3", ["6:900..7:5"], [("6:900", "7:5")]),
    ("later-ledger-lower-entry", "7:3", ["8:0..8:1"], []),
]


@pytest.mark.parametrize("mdp,ranges,expected", [c[1:] for c in BELOW], ids=[c[0] for c in BELOW])
def test_ranges_below_mark_delete(mdp, ranges, expected):
    got = ranges_below_mark_delete(cursor_of(mdp, ranges))
    assert got == [(P(a), P(b)) for a, b in expected]
    # Same verdict as the range set's own invariant check.
    rs = parse_individually_deleted("[" + ",".join(f"({r}]" for r in ranges) + "]", "t")
    assert len(rs.below(P(mdp))) == len(expected)


positions = st.tuples(st.sampled_from([2, 3, 1 << 35]), st.integers(-1, 40)).map(lambda t: Position(*t))


@settings(max_examples=200, deadline=None)
@given(window=st.sets(st.tuples(st.sampled_from([2, 3, 1 << 35]), st.integers(0, 40)), max_size=30),
       mdp=positions, ranges=st.lists(st.tuples(positions, positions).filter(lambda r: r[0] < r[1]), max_size=6))
def test_acked_mask_matches_scalar_membership(window, mdp, ranges):
    ws = sorted(Position(*w) for w in window)
    idx = PositionIndex(np.array([p.ledger_id for p in ws], dtype=np.int64),
                        np.array([p.entry_id for p in ws], dtype=np.int64))
    cursor = CursorAcks.of(mdp, ranges)
    assert acked_mask(idx, cursor).tolist() == [cursor.contains(p) for p in ws]
