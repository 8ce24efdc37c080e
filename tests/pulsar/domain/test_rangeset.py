"""individuallyDeletedMessages parsing and range-set arithmetic (docs/formats/pulsar.md §2.2, §2.3)."""
from __future__ import annotations

import pytest

from audit.systems.pulsar.domain.positions import Position, parse_position
from audit.systems.pulsar.domain.rangeset import AckRanges, parse_individually_deleted
from audit.errors import PayloadError

SRC = "persistent://t/ns/topic#sub"


def P(text: str) -> Position:
    return parse_position(text, "test")


def R(*pairs: str) -> tuple:
    return tuple((P(lo), P(hi)) for lo, hi in (p.split("..") for p in pairs))


SPELLINGS = [
    ("empty", "[]", R()),
    ("default-no-space", "[(3:4..3:6],(3:8..3:9]]", R("3:4..3:6", "3:8..3:9")),
    ("guava-comma-space", "[(3:4..3:6], (3:8..3:9]]", R("3:4..3:6", "3:8..3:9")),
    ("old-guava-two-dot-leader", "[(3:4\u20253:6], (3:8\u20253:9]]", R("3:4..3:6", "3:8..3:9")),
    ("old-guava-trailing-comma", "[(3:4\u20253:6], (3:8\u20253:9], ]", R("3:4..3:6", "3:8..3:9")),
    ("trailing-comma-no-space", "[(3:4..3:6],]", R("3:4..3:6")),
    ("spans-ledgers", "[(5:99..7:0]]", R("5:99..7:0")),
    ("fresh-ledger-sentinel", "[(7:-1..7:3]]", R("7:-1..7:3")),
]


@pytest.mark.parametrize("text,expected", [(t, e) for _, t, e in SPELLINGS], ids=[i for i, _, _ in SPELLINGS])
def test_spellings(text, expected):
    got = parse_individually_deleted(text, SRC)
    assert got.ranges == expected
    assert len(got) == len(expected)


@pytest.mark.parametrize("text", [t for _, t, _ in SPELLINGS], ids=[i for i, _, _ in SPELLINGS])
def test_round_trip_to_default_spelling(text):
    s = parse_individually_deleted(text, SRC).to_string()
    assert "\u2025" not in s and ", " not in s and ",]" not in s
    assert parse_individually_deleted(s, SRC).to_string() == s


def test_to_string_default_style():
    assert parse_individually_deleted("[(3:4..3:6], (3:8..3:9]]", SRC).to_string() == "[(3:4..3:6],(3:8..3:9]]"
    assert AckRanges().to_string() == "[]"


def test_contains_boundaries():
    rs = parse_individually_deleted("[(3:4..3:6],(5:99..7:0]]", SRC)
    assert not rs.contains(P("3:4"))  # lower excluded
    assert rs.contains(P("3:5"))
    assert rs.contains(P("3:6"))  # upper included
    assert not rs.contains(P("3:7"))
    assert not rs.contains(P("5:99"))
    assert rs.contains(P("6:12345"))  # inside a cross-ledger range
    assert rs.contains(P("7:0"))
    assert not rs.contains(P("7:1"))
    assert not AckRanges().contains(P("1:1"))


def test_union_coalesces_touching_ranges():
    a = parse_individually_deleted("[(1:1..1:3]]", SRC)
    b = parse_individually_deleted("[(1:3..1:5]]", SRC)
    u = a.union(b)
    assert u.ranges == R("1:1..1:5") and len(u) == 1
    assert b.union(a) == u


def test_union_keeps_holes_and_merges_overlaps():
    a = parse_individually_deleted("[(1:1..1:3],(1:8..1:9]]", SRC)
    b = parse_individually_deleted("[(1:4..1:5],(1:2..1:6]]", SRC)
    assert a.union(b).ranges == R("1:1..1:6", "1:8..1:9")
    gap = parse_individually_deleted("[(1:1..1:3],(1:4..1:5]]", SRC)
    assert len(gap) == 2  # 1:4 itself is un-acked


def test_below_mark_delete_position():
    rs = parse_individually_deleted("[(3:4..3:6],(3:8..3:9]]", SRC)
    assert rs.below(P("3:4")) == ()
    assert rs.below(P("3:5")) == R("3:4..3:6")
    assert rs.below(P("4:-1")) == R("3:4..3:6", "3:8..3:9")


def test_position_order_and_str():
    assert P("3:-1") < P("3:0") < P("3:9") < P("4:-1")
    assert str(P("5:-1")) == "5:-1"
    with pytest.raises(PayloadError):
        parse_position("1:2:0", "test")


@pytest.mark.parametrize("text", [
    "[(3:4..3:6]",       # unclosed list
    "[(3:4-3:6]]",       # wrong separator
    "[(a:4..3:6]]",      # non-numeric ledger
    "[(3:6..3:4]]",      # lower > upper
    "[(3:4..3:4]]",      # empty range
    "(3:4..3:6]",        # no brackets
    "[(3:4..3:6](3:8..3:9]]",  # missing comma
    "[,]",
    "[(3:4..3:6],,(3:8..3:9]]",
    "",
])
def test_malformed(text):
    with pytest.raises(PayloadError) as exc:
        parse_individually_deleted(text, SRC)
    msg = str(exc.value)
    assert "individuallyDeletedMessages" in msg and SRC in msg
    assert exc.value.field == "individuallyDeletedMessages"


def test_immutable():
    rs = AckRanges()
    with pytest.raises(AttributeError):
        rs._ranges = ()
