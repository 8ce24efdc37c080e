"""Which entries a fragment verification reads (LedgerChecker.verifyLedgerFragment), table-driven."""
from __future__ import annotations

import random

import pytest

from audit.systems.bookkeeper.domain.verification import (Fragment, entries_to_verify, fragment_seed, fragments_of,
                                                  iter_ledger_probes)
from tests.bookkeeper.domain.cases import expected_entries, ledger


def frag(first: int, last: int, index: int, E: int = 3, Qw: int = 2) -> Fragment:
    return Fragment(1, first, last, index, f"b{index}", E, Qw)


# (fragment, percent, exact entries read). E=3/Qw=2 striping: index i stores e iff (i - e) mod 3 < 2, so over
# [0, 9] index 0 stores 0 2 3 5 6 8 9, index 1 stores 0 1 3 4 6 7 9, index 2 stores 1 2 4 5 7 8.
EXACT = [
    pytest.param(frag(0, 9, 0), 0, [0, 9], id="E3Qw2-index0-0%-first-and-last"),
    pytest.param(frag(0, 9, 2), 0, [1, 8], id="E3Qw2-index2-0%-first-last-it-stores"),
    pytest.param(frag(0, 9, 0), 100, [0, 2, 3, 5, 6, 8, 9], id="E3Qw2-index0-100%-every-stored"),
    pytest.param(frag(0, 9, 1), 100, [0, 1, 3, 4, 6, 7, 9], id="E3Qw2-index1-100%"),
    pytest.param(frag(0, 9, 2), 100, [1, 2, 4, 5, 7, 8], id="E3Qw2-index2-100%"),
    pytest.param(frag(5, 5, 2), 0, [5], id="single-entry-in-write-set"),
    pytest.param(frag(5, 5, 0), 100, [5], id="single-entry-in-write-set-100%"),
    pytest.param(frag(5, 5, 1), 100, [], id="single-entry-not-on-this-index"),
    pytest.param(frag(10, 11, 0), 0, [11], id="two-entries-one-stored-is-first-and-last"),
    pytest.param(frag(7, 6, 0), 100, [], id="empty-segment"),
    pytest.param(frag(0, 99, 0, E=1, Qw=1), 99, [e for e in range(100) if e not in (97, 98)],
                 id="99%-bucket-1-upstream-loop-bound-skips-two-before-last"),
    pytest.param(frag(0, 3, 0, E=2, Qw=2), 0, [0, 3], id="E=Qw-0%"),
    pytest.param(frag(0, 3, 0, E=2, Qw=2), 100, [0, 1, 2, 3], id="E=Qw-100%"),
]


@pytest.mark.parametrize("fragment,percent,expected", EXACT)
def test_entries_read_exactly(fragment, percent, expected):
    assert entries_to_verify(fragment, percent, random.Random(0)) == expected


def test_ten_percent_samples_one_stored_candidate_per_bucket():
    fragment = frag(0, 99, 0)  # stored: e mod 3 in {0, 2}; firstStored 0, lastStored 99
    picked = entries_to_verify(fragment, 10, random.Random("x"))
    stored = {e for e in range(100) if e % 3 in (0, 2)}
    assert picked[0] == 0 and picked[-1] == 99 and set(picked) <= stored
    # 10 % of 100 -> buckets of 10 starting at 0, 10, ..., 80 (< 99 - 10 - 1): at most one pick each, none in
    # [90, 98].
    middle = picked[1:-1]
    assert all(e < 90 for e in middle)
    assert len({e // 10 for e in middle}) == len(middle)
    assert picked == sorted(set(picked))


def test_draws_are_reproducible_per_fragment_and_differ_between_fragments():
    md = ledger({0: ["a", "b", "c"], 1000: ["a", "d", "c"]}, 2999, Qw=2, ledger_id=42)
    first = list(iter_ledger_probes(md, "a", 10, cluster="bk-a"))
    assert first == list(iter_ledger_probes(md, "a", 10, cluster="bk-a"))
    assert first != list(iter_ledger_probes(md, "a", 10, cluster="bk-b"))
    f0, f1 = fragments_of(md, "a")
    assert fragment_seed("bk-a", f0) != fragment_seed("bk-a", f1)


@pytest.mark.parametrize("percent", [0, 10, 100])
def test_ledger_probes_are_ascending_and_only_entries_the_bookie_must_hold(percent):
    md = ledger({0: ["a", "b", "c"], 10: ["d", "b", "a"], 25: ["a", "b", "c"]}, 40, Qw=2)
    for bookie in "abcd":
        probes = list(iter_ledger_probes(md, bookie, percent))
        expected = expected_entries(md, bookie)
        assert probes == sorted(set(probes)) and set(probes) <= set(expected)
        if percent == 100:
            assert probes == expected


def test_zero_percent_reads_first_and_last_of_each_fragment():
    md = ledger({0: ["a", "b", "c"], 10: ["a", "d", "c"]}, 20, Qw=2)
    # a is index 0 in both segments: [0, 9] stores 0 2 3 5 6 8 9; [10, 20] stores e mod 3 in {0, 2}: 11..20.
    assert list(iter_ledger_probes(md, "a", 0)) == [0, 9, 11, 20]
    assert list(iter_ledger_probes(md, "d", 0)) == [10, 19]  # index 1 of [10, 20]: e mod 3 in {1, 0}


def test_closed_empty_ledger_and_not_a_member_read_nothing():
    assert list(iter_ledger_probes(ledger({0: ["a", "b"]}, -1), "a", 100)) == []
    assert list(iter_ledger_probes(ledger({0: ["a", "b"]}, 9), "z", 100)) == []


def test_percent_out_of_range_is_refused():
    with pytest.raises(ValueError):
        entries_to_verify(frag(0, 9, 0), 101, random.Random(0))
