"""audit_ledger against the per-entry oracle on random small ledgers."""
from hypothesis import HealthCheck, given, settings, strategies as st

from audit.systems.bookkeeper.domain.model import CLOSED, SequenceGroup
from audit.systems.bookkeeper.domain.replicas import BookieAnswer, audit_ledger
from audit.systems.bookkeeper.formats.availability import canonical_groups, entries_to_groups
from tests.bookkeeper.domain.cases import expected_entries, ledger
from tests.bookkeeper.domain.oracle import oracle, verdict_as_oracle

POOL = [f"bk{i}:3181" for i in range(8)]


@st.composite
def ledgers(draw):
    E = draw(st.integers(1, 5))
    Qw = draw(st.integers(1, E))
    Qa = draw(st.integers(1, Qw))
    last = draw(st.one_of(st.integers(0, 40), st.integers(41, 250)))
    n_seg = draw(st.integers(1, 4))
    keys = sorted(draw(st.lists(st.integers(0, last + 3), min_size=n_seg - 1, max_size=n_seg - 1)))
    pool = POOL[:E + draw(st.integers(0, 3))]
    segments = []
    for k in [0] + keys:
        if draw(st.integers(0, 9)) == 0:     # occasionally a repeated bookie inside one ensemble
            ens = draw(st.lists(st.sampled_from(pool), min_size=E, max_size=E))
        else:
            ens = draw(st.permutations(pool))[:E]
        segments.append((k, ens))
    return ledger(segments, last, E=E, Qw=Qw, Qa=Qa)


@st.composite
def answers(draw, md):
    bookies = sorted({b for s in md.segments for b in s.ensemble} | set(draw(st.lists(st.sampled_from(POOL),
                                                                                        max_size=2))))
    out = {}
    for b in bookies:
        kind = draw(st.sampled_from(["ok"] * 6 + ["no_such_ledger", "unavailable", "absent", "probe"]))
        if kind == "absent":
            continue
        if kind == "probe":      # read probes: every expected entry but the probed-absent ones
            absent = draw(st.lists(st.integers(0, md.last_entry_id + 2), max_size=6))
            out[b] = BookieAnswer.read_probes(draw(st.sampled_from([1, 10, 100])), len(absent) + 3, absent)
            continue
        if kind == "no_such_ledger":
            out[b] = BookieAnswer.no_such_ledger()
            continue
        if kind == "unavailable":
            out[b] = BookieAnswer.unavailable(draw(st.sampled_from(["timeout", "unreachable"])))
            continue
        held = set(expected_entries(md, b))
        for _ in range(draw(st.integers(0, 3))):          # lost ranges
            lo = draw(st.integers(0, md.last_entry_id + 2))
            held -= set(range(lo, lo + draw(st.integers(1, 12))))
        held -= set(draw(st.lists(st.integers(0, md.last_entry_id + 2), max_size=4)))
        if draw(st.integers(0, 2)) == 0:                  # a periodic loss: keeps the pattern periodic
            p, lo = draw(st.integers(2, 7)), draw(st.integers(0, md.last_entry_id + 1))
            k, r, hi = draw(st.integers(1, p - 1)), draw(st.integers(0, 6)), lo + draw(st.integers(0, 200))
            held -= {e for e in range(lo, hi + 1) if (e - r) % p < k}
        held |= set(draw(st.lists(st.integers(0, md.last_entry_id + 4), max_size=4)))     # strays
        if draw(st.booleans()):
            lo = draw(st.integers(0, md.last_entry_id + 2))
            held |= set(range(lo, lo + draw(st.integers(1, 10))))
        groups = entries_to_groups(sorted(held))
        encoding = draw(st.sampled_from(["bookkeeper", "merged", "raw"]))
        if encoding == "merged":
            groups = canonical_groups(groups)
        elif encoding == "raw":      # arbitrary valid groups: overlapping ones are cut by the floor rule
            groups = _random_groups(draw)
        out[b] = BookieAnswer.ok(groups)
    return out


def _random_groups(draw):
    out, start = [], 0
    for _ in range(draw(st.integers(0, 4))):
        first = start + draw(st.integers(0, 40))
        size = draw(st.integers(1, 4))
        runs = draw(st.integers(0, 40))
        period = size + draw(st.integers(0, 5)) if runs else draw(st.integers(0, 5))
        out.append(SequenceGroup(first, first + runs * period, size, period))
        start = first + 1
    return out


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_audit_ledger_matches_per_entry_oracle(data):
    md = data.draw(ledgers())
    availability = data.draw(answers(md))
    v = audit_ledger(md, availability, max_ranges=10**9)
    assert md.state == CLOSED and v.audited
    assert verdict_as_oracle(v) == oracle(md, availability)


@st.composite
def near_healthy(draw, md):
    """Every bookie holds its stripe, then one bookie swaps entries so that totals stay equal: the
    cases a count-based shortcut could get wrong."""
    out = {}
    bookies = sorted({b for s in md.segments for b in s.ensemble})
    victim = draw(st.sampled_from(bookies))
    for b in bookies:
        held = set(expected_entries(md, b))
        if b == victim and held:
            for _ in range(draw(st.integers(1, 3))):
                kind = draw(st.sampled_from(["swap", "shift", "overlap"]))
                if kind == "swap" and held:
                    held.discard(draw(st.sampled_from(sorted(held))))
                    held.add(draw(st.integers(0, md.last_entry_id + 3)))
                elif kind == "shift":
                    d = draw(st.sampled_from([-1, 1]))
                    held = {e + d for e in held if e + d >= 0}
        groups = entries_to_groups(sorted(held))
        if draw(st.booleans()):
            groups = canonical_groups(groups)
        if b == victim and draw(st.integers(0, 3)) == 0 and groups:   # a group overlapping the next one
            g = draw(st.sampled_from(groups))
            groups = sorted(groups + [SequenceGroup(g.first_sequence_start + 1, g.first_sequence_start + 1,
                                                    g.sequence_size, 0)], key=lambda x: x.first_sequence_start)
            groups = [g for k, g in enumerate(groups)
                      if k == 0 or g.first_sequence_start != groups[k - 1].first_sequence_start]
        out[b] = BookieAnswer.ok(groups)
    return out


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_near_healthy_ledgers_match_oracle(data):
    md = data.draw(ledgers())
    availability = data.draw(near_healthy(md))
    v = audit_ledger(md, availability, max_ranges=10**9)
    assert verdict_as_oracle(v) == oracle(md, availability)
