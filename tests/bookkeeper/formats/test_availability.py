"""AvailabilityOfEntriesOfLedger: byte layout, BookKeeper's grouping rules, lookups, bad input."""
from __future__ import annotations

import struct

import pytest

from audit.systems.bookkeeper.domain.model import SequenceGroup
from audit.systems.bookkeeper.formats.availability import (
    count_entries, decode, encode_entries, encode_groups, entries_to_groups, groups_contain, iter_entries)
from audit.errors import PayloadError


def _header(version: int, count: int) -> bytes:
    return struct.pack(">ii", version, count) + bytes(56)


def test_empty_ledger_is_header_only():
    assert encode_entries([]) == _header(0, 0)
    assert decode(_header(0, 0), "b") == []


def test_byte_layout_is_big_endian_header_then_groups():
    data = encode_entries([0, 1, 2, 5, 6, 9])
    assert data == (_header(0, 3)
                    + struct.pack(">qqii", 0, 0, 3, 0) + struct.pack(">qqii", 5, 5, 2, 0)
                    + struct.pack(">qqii", 9, 9, 1, 0))
    assert len(data) == 64 + 3 * 24


def test_every_run_is_its_own_group_like_bookkeeper():
    # equal-size runs at a fixed period still give one group each: a new group starts with
    # sequencePeriod 0, so BookKeeper's "runStart - lastSequenceStart == period" never holds
    groups = entries_to_groups([0, 1, 10, 11, 20, 21])
    assert groups == [SequenceGroup(0, 0, 2, 0), SequenceGroup(10, 10, 2, 0), SequenceGroup(20, 20, 2, 0)]


def test_duplicates_and_unsorted_input_follow_bookkeeper():
    assert entries_to_groups([1, 1, 2, 2, 3]) == [SequenceGroup(1, 1, 3, 0)]
    # runs [3..5], [10..13], [5..8]: groups keyed by first start, written in key order (overlap allowed)
    assert entries_to_groups([3, 4, 5, 10, 11, 12, 13, 5, 6, 7, 8]) == [
        SequenceGroup(3, 3, 3, 0), SequenceGroup(5, 5, 4, 0), SequenceGroup(10, 10, 4, 0)]
    # a later run with the same start replaces the earlier group (TreeMap.put)
    assert entries_to_groups([3, 4, 9, 3]) == [SequenceGroup(3, 3, 1, 0), SequenceGroup(9, 9, 1, 0)]


def test_negative_entry_rejected():
    with pytest.raises(ValueError):
        encode_entries([-1, 0])


def test_round_trip_and_lookups():
    entries = [0, 1, 2, 7, 8, 20, 30, 31, 32, 33]
    groups = decode(encode_entries(entries), "rt")
    assert list(iter_entries(groups)) == entries and count_entries(groups) == len(entries)
    for e in range(-2, 40):
        assert groups_contain(groups, e) == (e in entries)


def test_periodic_group_from_another_writer():
    g = [SequenceGroup(0, 20, 2, 5)]  # runs 0-1, 5-6, ..., 20-21
    assert decode(encode_groups(g), "p") == g
    expected = [s + k for s in range(0, 21, 5) for k in (0, 1)]
    assert list(iter_entries(g)) == expected
    assert [e for e in range(30) if groups_contain(g, e)] == expected


def test_floor_group_semantics_on_overlap():
    groups = [SequenceGroup(0, 0, 10, 0), SequenceGroup(2, 2, 2, 0)]
    # BookKeeper consults only the floor group: 5 is inside group 0 but the floor of 5 is group 2
    assert not groups_contain(groups, 5) and groups_contain(groups, 1) and groups_contain(groups, 3)
    assert list(iter_entries(groups)) == [0, 1, 2, 3]


def test_a_million_entries():
    missing = set(range(0, 1_000_000, 1000))
    entries = (e for e in range(1_000_000) if e not in missing)
    data = encode_entries(entries)
    groups = decode(data, "big")
    assert len(groups) == 1000 and count_entries(groups) == 1_000_000 - len(missing)
    assert not groups_contain(groups, 5000) and groups_contain(groups, 5001)


@pytest.mark.parametrize("data,field", [
    (b"", "header"),
    (_header(0, 0)[:63], "header"),
    (_header(0, 0) + b"\x00", "length"),
    (_header(0, 1) + bytes(23), "length"),
    (_header(0, 2) + struct.pack(">qqii", 0, 0, 1, 0), "length"),
    (_header(0, -1), "length"),
    (_header(1, 0), "header.version"),
    (struct.pack(">ii", 0, 0) + b"\x01" + bytes(55), "header.padding"),
    (_header(0, 1) + struct.pack(">qqii", 0, 0, 0, 0), "group[0]"),
    (_header(0, 1) + struct.pack(">qqii", 5, 4, 1, 0), "group[0]"),
    (_header(0, 1) + struct.pack(">qqii", -3, -3, 1, 0), "group[0]"),
    (_header(0, 1) + struct.pack(">qqii", 0, 10, 2, 3), "group[0]"),
    (_header(0, 1) + struct.pack(">qqii", 0, 10, 2, 0), "group[0]"),
    (_header(0, 2) + struct.pack(">qqii", 5, 5, 1, 0) + struct.pack(">qqii", 5, 5, 2, 0), "group[1]"),
])
def test_bad_bytes(data, field):
    with pytest.raises(PayloadError) as ei:
        decode(data, "raw/bookkeeper/c1/entries-of-ledger/bk1/7.pb")
    assert ei.value.field == field and ei.value.source.endswith("7.pb")


def test_encode_groups_rejects_out_of_range():
    with pytest.raises(ValueError):
        encode_groups([SequenceGroup(0, 0, 2**31, 0)])


from audit.systems.bookkeeper.formats.availability import canonical_groups  # noqa: E402


@pytest.mark.parametrize("entries", [
    [e for e in range(1000) if (0 - e) % 5 < 3],          # a healthy E=5/Qw=3 stripe of index 0
    [e for e in range(1000) if (2 - e) % 5 < 3 and not 400 <= e < 520],
    list(range(0, 50)) + list(range(60, 62)) + list(range(70, 72)) + [90, 95, 100],
    [],
])
def test_canonical_groups_keep_the_entry_set_and_compress(entries):
    groups = entries_to_groups(entries)
    canon = canonical_groups(groups)
    assert list(iter_entries(canon)) == entries
    assert len(canon) <= 4 or len(canon) < len(groups)
