import pytest
from hypothesis import given, settings, strategies as st

from audit.systems.bookkeeper.domain.model import SequenceGroup
from audit.systems.bookkeeper.domain.striping import (Holding, count_expected, count_group_expected,
                                                      count_holding_expected, first_expected_at_or_after,
                                                      holdings_from_groups, is_expected, last_expected_at_or_before,
                                                      write_set)
from audit.systems.bookkeeper.formats.availability import groups_contain


# (E, Qw, ensemble index) with 1 <= Qw <= E
ENSEMBLE_QUORUM_INDEX = st.integers(1, 7).flatmap(
    lambda E: st.tuples(st.just(E), st.integers(1, E), st.integers(0, E - 1)))


@pytest.mark.parametrize("e, E, Qw, expected", [
    (0, 3, 2, (0, 1)), (1, 3, 2, (1, 2)), (2, 3, 2, (2, 0)),      # docs/formats/bookkeeper.md §1.6 example
    (7, 5, 3, (2, 3, 4)), (9, 5, 3, (4, 0, 1)), (4, 1, 1, (0,)),
])
def test_write_set(e, E, Qw, expected):
    assert write_set(e, E, Qw) == expected
    assert all(is_expected(i, e, E, Qw) == (i in expected) for i in range(E))


@pytest.mark.parametrize("index, first, last, E, Qw, expected", [
    (0, 0, 9, 3, 2, 7),          # index 0 holds e = 0,2,3,5,6,8,9
    (0, 1, 1, 3, 2, 0),
    (2, 10, 10**12 - 1, 5, 3, (10**12 - 10) * 3 // 5),   # length does not cost anything
    (4, 0, 4, 5, 5, 5),
    (1, 5, 4, 3, 2, 0),          # empty range
    (3, 100, 109, 5, 1, 2),
])
def test_count_expected(index, first, last, E, Qw, expected):
    assert count_expected(index, first, last, E, Qw) == expected


@settings(max_examples=300, deadline=None)
@given(ENSEMBLE_QUORUM_INDEX,
       st.integers(0, 60), st.integers(-1, 40))
def test_count_and_neighbours_match_brute_force(eqi, first, length):
    E, Qw, i = eqi
    last = first + length
    brute = [e for e in range(first, last + 1) if (i - e) % E < Qw]
    assert count_expected(i, first, last, E, Qw) == len(brute)
    nxt = first_expected_at_or_after(i, first, E, Qw)
    assert nxt == min(e for e in range(first, first + E) if (i - e) % E < Qw)
    prv = last_expected_at_or_before(i, first + E, E, Qw)
    assert prv == max(e for e in range(first + 1, first + E + 1) if (i - e) % E < Qw)


@pytest.mark.parametrize("groups, holdings", [
    ([], []),
    ([SequenceGroup(3, 3, 3, 0), SequenceGroup(8, 8, 3, 0), SequenceGroup(13, 13, 3, 0)],
     [Holding(3, 15, 3, 3, 5)]),                                 # one group per run, merged
    ([SequenceGroup(0, 0, 4, 0), SequenceGroup(4, 4, 2, 0)], [Holding(0, 5)]),   # adjacent runs join
    ([SequenceGroup(0, 20, 2, 10), SequenceGroup(25, 25, 1, 0)], [Holding(0, 21, 0, 2, 10), Holding(25, 25)]),
    ([SequenceGroup(0, 20, 2, 10), SequenceGroup(30, 30, 2, 0)], [Holding(0, 31, 0, 2, 10)]),  # same stride
    ([SequenceGroup(0, 0, 10, 0), SequenceGroup(5, 5, 1, 0)], [Holding(0, 5)]),   # floor group cuts
    ([SequenceGroup(0, 20, 2, 10), SequenceGroup(11, 11, 3, 0)],
     [Holding(0, 10, 0, 2, 10), Holding(11, 13)]),  # cut mid-run
])
def test_holdings_from_groups(groups, holdings):
    assert holdings_from_groups(groups) == holdings


_group = st.tuples(st.integers(0, 40), st.integers(0, 4), st.integers(1, 5), st.integers(0, 8))


def _valid_groups(raw):
    out, start = [], 0
    for gap, runs, size, extra in raw:
        first = start + gap
        period = size + extra if runs else extra
        last = first + runs * period if runs else first
        out.append(SequenceGroup(first, last, size, period))
        start = first + 1
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(_group, max_size=5), st.integers(1, 6).flatmap(
    lambda E: st.tuples(st.just(E), st.integers(1, E), st.integers(0, E - 1))), st.integers(0, 80), st.integers(0, 80))
def test_holdings_and_intersections_match_brute_force(raw, eqi, a, length):
    E, Qw, i = eqi
    groups = _valid_groups(raw)
    holdings = holdings_from_groups(groups)
    top = 300
    assert [e for e in range(top) if any(h.contains(e) for h in holdings)] == \
        [e for e in range(top) if groups_contain(groups, e)]
    b = a + length
    for h in holdings:
        brute = sum(1 for e in range(a, b + 1) if h.contains(e) and (i - e) % E < Qw)
        assert count_holding_expected(h, i, a, b, E, Qw) == brute
        assert h.count(a, b) == sum(1 for e in range(a, b + 1) if h.contains(e))
    for g in groups:
        brute = sum(1 for e in range(a, b + 1) if groups_contain([g], e) and (i - e) % E < Qw)
        assert count_group_expected(g, i, a, b, E, Qw) == brute


def test_group_intersection_cost_does_not_follow_length():
    g = SequenceGroup(3, 3 + 5 * (10**11), 3, 5)       # 3*10^11 entries
    assert count_group_expected(g, 0, 0, 10**12, 5, 3) == 3 * (10**11 + 1)   # exactly its stripe
    assert count_group_expected(g, 1, 0, 10**12, 5, 3) == 2 * (10**11 + 1)


@settings(max_examples=300, deadline=None)
@given(ENSEMBLE_QUORUM_INDEX,
       st.integers(0, 40), st.integers(-1, 40))
def test_stripe_groups_hold_exactly_the_stripe(eqi, first, length):
    from audit.systems.bookkeeper.domain.striping import stripe_groups
    E, Qw, i = eqi
    last = first + length
    groups = stripe_groups(i, first, last, E, Qw)
    assert len(groups) <= 3
    assert [e for e in range(last + 10) if groups_contain(groups, e)] == \
        [e for e in range(first, last + 1) if (i - e) % E < Qw]
