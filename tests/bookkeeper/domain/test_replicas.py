
import pytest

from audit.systems.bookkeeper.domain.model import IN_RECOVERY, OPEN, SequenceGroup
from audit.systems.bookkeeper.domain.replicas import BookieAnswer, audit_ledger
from audit.systems.bookkeeper.domain.striping import stripe_groups
from tests.bookkeeper.domain.cases import expected_entries, healthy, ledger, ok
from tests.bookkeeper.domain.oracle import oracle, verdict_as_oracle

E3 = {0: ["b1", "b2", "b3"]}
TWO_SEGS = {0: ["b1", "b2", "b3"], 10: ["b1", "b4", "b3"]}
# apache/bookkeeper#4651 (../fixtures/real/bk-fault-ensemble-mismatch-01.txt): E2/W2/A1, entries 5,6 were
# acked by [BK1, BK2] while the segment at 5 was replaced by [BK3, BK4].
BUG4651 = {0: ["BK1", "BK2"], 5: ["BK3", "BK4"]}
_ALL = list(range(11))
ANSWERS_4651 = {"BK1": ok(_ALL[:7]), "BK2": ok(_ALL[:7]), "BK3": ok(_ALL[7:]), "BK4": ok(_ALL[7:])}


def _without(md, bookie, drop):
    return ok([e for e in expected_entries(md, bookie) if e not in drop])


CASES = [
    # id, metadata, availability (callable md -> answers), expected verdict fields
    ("open_not_checked", ledger(E3, -1, state=OPEN), healthy,
     dict(audited=False, reason="state OPEN: only CLOSED ledgers are checked")),
    ("in_recovery_not_checked", ledger(E3, -1, state=IN_RECOVERY), healthy, dict(audited=False)),
    ("closed_empty_not_checked", ledger(E3, -1), healthy,
     dict(audited=False, reason="CLOSED with lastEntryId -1: no entries")),
    ("bad_quorum_not_checked", ledger(E3, 5, Qw=4), healthy, dict(audited=False)),
    ("healthy", ledger(E3, 29), healthy,
     dict(audited=True, entries=30, least_replicas=2, entries_lost=0, entries_below_ack_quorum=0,
          entries_below_write_quorum=0, fragments=(), outside_ensemble=())),
    ("healthy_unmerged_groups", ledger(TWO_SEGS, 40), lambda md: healthy(md, merged=False),
     dict(least_replicas=2, entries_below_write_quorum=0, fragments=())),
    ("one_entry_missing_once", ledger(E3, 29), lambda md: healthy(md, b2=_without(md, "b2", {4})),
     dict(least_replicas=1, entries_lost=0, entries_below_ack_quorum=0, entries_below_write_quorum=1)),
    ("entry_lost", ledger(E3, 29),
     lambda md: healthy(md, b2=_without(md, "b2", {4}), b3=_without(md, "b3", {4})),
     dict(least_replicas=0, entries_lost=1, entries_below_ack_quorum=1, entries_below_write_quorum=1)),
    ("no_such_ledger_on_one_bookie", ledger(E3, 29), lambda md: healthy(md, b1=BookieAnswer.no_such_ledger()),
     dict(least_replicas=1, entries_lost=0, entries_below_ack_quorum=0, entries_below_write_quorum=20)),
    ("unavailable_bookie_is_a_gap_not_a_loss", ledger(E3, 29),
     lambda md: healthy(md, b1=BookieAnswer.unavailable("timeout")),
     dict(least_replicas=2, entries_below_write_quorum=0, unavailable_bookies=(("b1", "timeout"),))),
    ("missing_answer_is_a_gap", ledger(E3, 29), lambda md: {k: v for k, v in healthy(md).items() if k != "b3"},
     dict(least_replicas=2, unavailable_bookies=(("b3", "no answer collected"),))),
    ("middle_segment_empty", ledger([(0, ["b1", "b2"]), (5, ["b3", "b4"]), (5, ["b1", "b2"])], 9), healthy,
     dict(least_replicas=2, entries=10, fragments=(), outside_ensemble=())),
    ("last_segment_empty", ledger({0: ["b1", "b2"], 10: ["b3", "b4"]}, 9),
     lambda md: healthy(md, b3=BookieAnswer.unavailable("down")), dict(least_replicas=2, unavailable_bookies=())),
    # b1 (index 0) lost entry 0 but a group starting on the previous group's last entry makes the
    # naive group total equal the expected total: the floor rule counts entry 3 once.
    ("overlapping_groups_counted_once", ledger(E3, 9),
     lambda md: healthy(md, b1=BookieAnswer.ok([SequenceGroup(2, 2, 2, 0), SequenceGroup(3, 3, 1, 0),
                                                SequenceGroup(5, 8, 2, 3)])),
     dict(least_replicas=1, entries_below_write_quorum=1, entries_below_ack_quorum=0)),
    ("ensemble_4651", ledger(BUG4651, 10), lambda md: ANSWERS_4651,
     dict(least_replicas=0, entries_lost=2, entries_below_ack_quorum=2, entries_below_write_quorum=2)),
]


@pytest.mark.parametrize("name, md, answers, expected", CASES, ids=[c[0] for c in CASES])
def test_audit_ledger(name, md, answers, expected):
    availability = answers(md)
    v = audit_ledger(md, availability)
    for k, want in expected.items():
        assert getattr(v, k) == want, k
    if v.audited:
        assert verdict_as_oracle(v) == oracle(md, availability)


def test_4651_fragments_and_outside_ensemble():
    v = audit_ledger(ledger(BUG4651, 10), ANSWERS_4651)
    assert [(f.bookie, f.bookie_index, f.missing_count, f.missing_ranges) for f in v.fragments] == \
        [("BK3", 0, 2, ((5, 6),)), ("BK4", 1, 2, ((5, 6),))]
    assert all(f.segment_first_entry_id == 5 and f.segment_last_entry_id == 10 for f in v.fragments)
    assert [(o.bookie, o.entry_count, o.ranges) for o in v.outside_ensemble] == \
        [("BK1", 2, ((5, 6),)), ("BK2", 2, ((5, 6),))]


def test_missing_ranges_follow_the_bookies_stripe():
    md = ledger({0: ["b1", "b2", "b3", "b4", "b5"]}, 99, Qw=3, Qa=2)
    # b1 (index 0) holds e with e mod 5 in {0, 3, 4}; it lost every entry of 10..39 -> one span 10..39
    drop = set(range(10, 40)) | {60}
    v = audit_ledger(md, healthy(md, b1=_without(md, "b1", drop)))
    (f,) = v.fragments
    assert (f.bookie, f.missing_count, f.missing_ranges) == ("b1", 18 + 1, ((10, 39), (60, 60)))
    assert v.entries_below_write_quorum == 19 and v.least_replicas == 2


def test_range_cap_truncates_but_counts_stay_exact():
    md = ledger({0: ["b1", "b2"]}, 1999, Qw=2)
    v = audit_ledger(md, healthy(md, b1=ok(range(0, 2000, 2))), max_ranges=10)
    (f,) = v.fragments
    assert f.missing_count == 1000 and len(f.missing_ranges) == 10 and f.ranges_truncated
    assert f.missing_ranges[:2] == ((1, 1), (3, 3))


def test_cost_does_not_grow_with_ledger_length():
    """10^12 entries, two segments, one bookie lost a span: answered in well under a second."""
    ens0, ens1 = ["b1", "b2", "b3", "b4", "b5"], ["b1", "b6", "b3", "b4", "b5"]
    cut, last, hole = 10**11, 10**12, (5 * 10**11, 5 * 10**11 + 999)
    md = ledger({0: ens0, cut: ens1}, last, Qw=3, Qa=2)
    ans = {}
    for b in set(ens0) | set(ens1):
        spans = []
        if b in ens0:
            spans.append((ens0.index(b), 0, cut - 1))
        if b in ens1:
            spans.append((ens1.index(b), cut, last))
        if b == "b1":
            spans = [(0, 0, cut - 1), (0, cut, hole[0] - 1), (0, hole[1] + 1, last)]
        ans[b] = BookieAnswer.ok([g for i, lo, hi in spans for g in stripe_groups(i, lo, hi, 5, 3)])
    v = audit_ledger(md, ans)
    (f,) = v.fragments
    assert (f.bookie, f.missing_count, f.missing_ranges) == ("b1", 600, ((500000000000, 500000000999),))
    assert v.least_replicas == 2 and v.entries_below_write_quorum == 600 and v.entries_below_ack_quorum == 0
    assert v.outside_ensemble == () and v.entries == 10**12 + 1


def test_overlapping_runs_of_one_group_are_not_double_counted():
    """Qw == E: the stripe is everything, so only the group arithmetic stands between a hole and a pass."""
    from audit.systems.bookkeeper.domain.model import SequenceGroup
    md = ledger({0: ["b1", "b2"]}, 11, Qw=2, Qa=1)
    # b1: 4 runs of 3 every 2 entries = 12 by a naive total (the expected 12), but only entries 0..8
    avail = healthy(md, b1=BookieAnswer.ok([SequenceGroup(0, 6, 3, 2)]))
    v = audit_ledger(md, avail)
    assert verdict_as_oracle(v) == oracle(md, avail)
    assert v.entries_below_write_quorum == 3     # entries 9..11
