"""Evidence other than list answers (audit.systems.bookkeeper.domain.evidence) and apache/bookkeeper#4651 against benign
entries outside the ensemble, each rule as one table of cases."""

import pytest

from audit.systems.bookkeeper.domain.evidence import (complete_inventory_misses, expected_holdings, probe_holdings,
                                              without)
from audit.systems.bookkeeper.domain.replicas import BookieAnswer, audit_ledger, better_answer
from audit.systems.bookkeeper.domain.striping import Holding
from tests.bookkeeper.domain.cases import expected_entries, healthy, ledger, ok
from tests.bookkeeper.domain.oracle import oracle, verdict_as_oracle


def _entries(holdings):
    return sorted(e for h in holdings for e in range(h.lo, h.hi + 1) if h.contains(e))


# -- read probes: every expected entry but the probed-absent ones ------------------------------------------------
PROBE_CASES = [
    # id, segments, last, E, Qw, bookie, absent
    ("stripe_e3_qw2", {0: ["b1", "b2", "b3"]}, 29, 3, 2, "b2", []),
    ("qw_equals_e", {0: ["b1", "b2"]}, 9, 2, 2, "b1", [0, 5, 9]),
    ("absent_splits_a_run", {0: ["b1", "b2", "b3", "b4", "b5"]}, 99, 5, 3, "b3", [12, 13, 50]),
    ("absent_not_expected_is_ignored", {0: ["b1", "b2", "b3"]}, 29, 3, 2, "b1", [1, 100]),
    ("two_segments", {0: ["b1", "b2", "b3"], 10: ["b4", "b1", "b3"]}, 40, 3, 2, "b1", [10, 11, 39]),
    ("not_in_any_ensemble", {0: ["b1", "b2"]}, 9, 2, 1, "b9", [3]),
    ("first_segment_empty", [(0, ["b1", "b2"]), (0, ["b2", "b1"])], 9, 2, 1, "b1", []),
]


@pytest.mark.parametrize("name, segs, last, E, Qw, bookie, absent", PROBE_CASES, ids=[c[0] for c in PROBE_CASES])
def test_probe_holdings_are_expected_minus_absent(name, segs, last, E, Qw, bookie, absent):
    md = ledger(segs, last, E=E, Qw=Qw)
    got = probe_holdings(md, bookie, absent)
    assert _entries(got) == [e for e in expected_entries(md, bookie) if e not in absent]
    assert all(a.hi < b.lo for a, b in zip(got, got[1:]))                       # disjoint, sorted
    assert len(got) <= len(md.segments) + 2 * len(absent)                      # follows the changes, not length


def test_a_bookie_listed_twice_apart_has_no_single_pattern():
    md = ledger({0: ["b1", "b2", "b1", "b3"]}, 20, Qw=1)
    assert expected_holdings(md, "b1") is None
    v = audit_ledger(md, {**healthy(md), "b1": BookieAnswer.read_probes(100, 5)})
    assert dict(v.unavailable_bookies)["b1"].startswith("read probes of a bookie listed twice")


@pytest.mark.parametrize("holdings, ids, want", [
    ([Holding(0, 9)], [0, 9], [Holding(1, 8)]),
    ([Holding(0, 9)], [4], [Holding(0, 3), Holding(5, 9)]),
    ([Holding(0, 20, 0, 2, 5)], [1, 2], [Holding(0, 0, 0, 2, 5), Holding(2, 20, 0, 2, 5)]),   # 2 is not held
    ([Holding(0, 3), Holding(10, 12)], [11, 11, 50], [Holding(0, 3), Holding(10, 10), Holding(12, 12)]),
    ([Holding(5, 5)], [5], []),
])
def test_without(holdings, ids, want):
    assert without(holdings, ids) == want


def test_probes_stay_cheap_on_a_million_entries():
    md = ledger({0: ["b1", "b2", "b3", "b4", "b5"], 400_000: ["b1", "b6", "b3", "b4", "b5"]}, 999_999, Qw=3, Qa=2)
    answers = {b: BookieAnswer.read_probes(1, 100) for b in ["b1", "b2", "b3", "b4", "b5", "b6"]}
    answers["b1"] = BookieAnswer.read_probes(1, 100, [10, 500_001, 999_998])   # b1 (index 0) holds e mod 5 in 0,3,4
    v = audit_ledger(md, answers)
    assert [(f.bookie, f.missing_count, f.missing_ranges) for f in v.fragments] == [
        ("b1", 1, ((10, 10),)), ("b1", 1, ((999_998, 999_998),))]       # 500,001 is not b1's: not judged
    assert v.entries_below_write_quorum == 2 and v.outside_ensemble == () and v.least_replicas == 2


# -- complete location-index inventories: a member without an answer holds nothing ------------------------------
MD7 = ledger({0: ["b1", "b2", "b3"], 10: ["b1", "b4", "b3"]}, 20, ledger_id=7)


@pytest.mark.parametrize("answered, inventories, want", [
    (["b1", "b3"], {"b2": None, "b4": None}, ["b2", "b4"]),
    (["b1", "b2", "b3", "b4"], {"b2": None}, []),                           # answered: its answer counts
    (["b1"], {"b2": frozenset({7}), "b3": frozenset({8})}, ["b2"]),          # b3's inventory was not asked for 7
    (["b1"], {"b9": None}, []),                                              # not a member
    ([], {}, []),
])
def test_complete_inventory_misses(answered, inventories, want):
    assert complete_inventory_misses(MD7, answered, inventories) == want


@pytest.mark.parametrize("a, b, winner", [
    (BookieAnswer.unavailable("timeout"), BookieAnswer.ok([], "location_index"), 1),
    (BookieAnswer.ok([]), BookieAnswer.ok([], "location_index"), 1),
    (BookieAnswer.ok([], "location_index"), BookieAnswer.read_probes(10, 3), 0),
    (BookieAnswer.no_such_ledger(), BookieAnswer.unavailable("x", "read_probe"), 0),
    (BookieAnswer.unavailable("a"), BookieAnswer.unavailable("b"), 0),
])
def test_better_answer(a, b, winner):
    assert better_answer(a, b) is (a, b)[winner]


# -- entries outside the ensemble: information, unless #4651-shaped ----------------------------------------------
def _slow_bookie_kept_a_resent_add(md):
    # entry 4 went to [b2, b3]; b2 was slow, the ensemble changed at 4 and the client re-sent it to b4.
    # b2 persisted it anyway: it holds entry 4, which the metadata now places on b4 and b3, who both have it.
    return healthy(md, b2=ok(expected_entries(md, "b2") + [4]))


def _returning_bookie(md):
    # re-replication moved b2's fragment to b4 and the metadata names b4; b2 comes back with its old entries
    old = ledger({0: ["b1", "b2", "b3"]}, 29)
    return healthy(md, b2=ok(expected_entries(old, "b2")))


def _bug4651(md):   # apache/bookkeeper#4651: entries 5, 6 acked by [BK1, BK2], segment at 5 names [BK3, BK4]
    return {"BK1": ok(range(7)), "BK2": ok(range(7)), "BK3": ok(range(7, 11)), "BK4": ok(range(7, 11))}


def _bug4651_write_set_unavailable(md):
    return {**_bug4651(md), "BK3": BookieAnswer.unavailable("timeout"), "BK4": BookieAnswer.unavailable("timeout")}


def _bug4651_probed(md):   # the listed bookies are read-probed and answered ENOENTRY for 5 (BK3) and 5, 6 (BK4)
    return {**_bug4651(md), "BK3": BookieAnswer.read_probes(10, 2, [5]), "BK4": BookieAnswer.read_probes(10, 3, [5, 6])}


def _off_stripe_member(md):   # b2 lost entry 0 of its stripe, b3 (same ensemble, not e's write set) holds it
    return healthy(md, b2=ok(expected_entries(md, "b2")[1:]), b3=ok([0] + expected_entries(md, "b3")))


BUG = {0: ["BK1", "BK2"], 5: ["BK3", "BK4"]}
OUTSIDE_CASES = [
    # id, metadata, answers, (info {bookie: entries outside}, #4651 entries, {holder: #4651 entries})
    ("slow_bookie_persisted_resent_add", ledger({0: ["b1", "b2", "b3"], 4: ["b1", "b4", "b3"]}, 29),
     _slow_bookie_kept_a_resent_add, ({"b2": 1}, 0, {})),
    ("bookie_back_after_rereplication", ledger({0: ["b1", "b4", "b3"]}, 29), _returning_bookie, ({"b2": 20}, 0, {})),
    ("bug4651", ledger(BUG, 10, Qw=2, Qa=1), _bug4651, ({"BK1": 2, "BK2": 2}, 2, {"BK1": 2, "BK2": 2})),
    ("bug4651_write_set_unavailable", ledger(BUG, 10, Qw=2, Qa=1), _bug4651_write_set_unavailable,
     ({"BK1": 2, "BK2": 2}, 0, {})),
    ("bug4651_probed_write_set", ledger(BUG, 10, Qw=2, Qa=1), _bug4651_probed,
     ({"BK1": 2, "BK2": 2}, 2, {"BK1": 2, "BK2": 2})),
    ("off_stripe_member_holds_a_lacked_entry", ledger({0: ["b1", "b2", "b3"]}, 29), _off_stripe_member,
     ({"b3": 1}, 1, {"b3": 1})),
]


@pytest.mark.parametrize("name, md, answers, want", OUTSIDE_CASES, ids=[c[0] for c in OUTSIDE_CASES])
def test_outside_ensemble_information_and_4651(name, md, answers, want):
    availability = answers(md)
    v = audit_ledger(md, availability)
    info, n, by = want
    got_info: dict = {}
    for o in v.outside_ensemble:
        got_info[o.bookie] = got_info.get(o.bookie, 0) + o.entry_count
    got_by: dict = {}
    for o in v.wrong_ensemble:
        got_by[o.bookie] = got_by.get(o.bookie, 0) + o.entry_count
    assert (got_info, v.wrong_ensemble_entries, got_by) == (info, n, by)
    assert verdict_as_oracle(v) == oracle(md, availability)
