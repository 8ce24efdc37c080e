"""Naive per-entry ReplicasCheck: the reference the range arithmetic is compared against.
Deliberately written entry by entry, straight from docs/formats/bookkeeper.md §1.6-1.7."""
from __future__ import annotations

from typing import Mapping

from audit.systems.bookkeeper.domain.model import CLOSED, LedgerMetadata
from audit.systems.bookkeeper.domain.evidence import expected_holdings
from audit.systems.bookkeeper.domain.replicas import NO_ANSWER, OK, UNMAPPABLE_PROBES, BookieAnswer
from audit.systems.bookkeeper.formats.availability import groups_contain


def _runs(flags: list[tuple[int, bool]]) -> list[tuple[int, int]]:
    """Maximal runs of True in an ordered list of (entry, flag)."""
    out, cur = [], None
    for e, f in flags:
        if f:
            cur = [e, e] if cur is None else [cur[0], e]
        elif cur is not None:
            out.append(tuple(cur))
            cur = None
    if cur is not None:
        out.append(tuple(cur))
    return out


class _Answers:
    """The ledger's metadata and the bookies' answers, asked one entry at a time."""

    def __init__(self, md: LedgerMetadata, availability: Mapping[str, BookieAnswer]):
        self.md, self.availability = md, availability
        self.E, self.Qw, self.Qa = md.ensemble_size, md.write_quorum_size, md.ack_quorum_size

    def expected_on(self, bookie: str, e: int) -> bool:
        E, Qw = self.E, self.Qw
        return any(first <= e <= last and any(b == bookie and (i - e) % E < Qw for i, b in enumerate(seg.ensemble))
                   for seg, first, last in self.md.segment_bounds())

    def in_write_set(self, ens, bookie: str, e: int) -> bool:
        """Whether ensemble `ens` places entry e on `bookie`."""
        return any(ens[i] == bookie and (i - e) % self.E < self.Qw for i in range(self.E))

    def holds(self, bookie: str, e: int) -> bool | None:
        """None when the bookie's answer says nothing of its entries."""
        a = self.availability.get(bookie)
        if a is None or a.status not in (OK, "no_such_ledger"):
            return None
        if a.is_probe:   # every expected entry but the probed-absent ones
            if expected_holdings(self.md, bookie) is None:
                return None
            return self.expected_on(bookie, e) and e not in a.absent
        return a.status == OK and groups_contain(a.groups, e)

    def why(self, bookie: str) -> str:
        a = self.availability.get(bookie)
        return NO_ANSWER if a is None else UNMAPPABLE_PROBES if a.is_probe else a.error or a.status

    def missing_copies(self, ens, e: int) -> int:
        """Bookies of e's write set seen without e (m)."""
        m = 0
        for w in range(self.Qw):
            if self.holds(ens[(e + w) % self.E], e) is False:
                m += 1
        return m

    def held_outside_write_set(self, ens, e: int) -> bool:
        return bool([b for b in self.availability if self.holds(b, e) and not self.in_write_set(ens, b, e)])


class _Tally:
    """What the oracle has counted so far, segment by segment."""

    def __init__(self):
        self.max_m, self.lost, self.below_ack, self.below_write, self.wrong = 0, 0, 0, 0, 0
        self.fragments, self.outside, self.unavailable, self.wrong_by = {}, {}, {}, {}

    def entry(self, m: int, Qw: int, Qa: int) -> None:
        """One entry with m missing copies."""
        self.max_m = max(self.max_m, m)
        self.lost += Qw - m == 0
        self.below_ack += Qw - m < Qa
        self.below_write += Qw - m < Qw


def oracle(md: LedgerMetadata, availability: Mapping[str, BookieAnswer]) -> dict:
    ledger, tally = _Answers(md, availability), _Tally()
    for seg, first, last in md.segment_bounds():
        first = max(first, 0)
        if last < first:
            continue
        for b in seg.ensemble:
            if ledger.holds(b, 0) is None:
                tally.unavailable[b] = ledger.why(b)
        short = _count_segment(ledger, seg.ensemble, first, last, tally)
        _strays_of_segment(ledger, seg.ensemble, first, last, short, tally)
    return {"least_replicas": ledger.Qw - tally.max_m, "lost": tally.lost, "below_ack": tally.below_ack,
            "below_write": tally.below_write, "fragments": tally.fragments, "outside": tally.outside,
            "unavailable": sorted(tally.unavailable.items()), "entries": md.last_entry_id + 1, "wrong": tally.wrong,
            "wrong_by": tally.wrong_by}


def _count_segment(ledger: _Answers, ens, first: int, last: int, tally: _Tally) -> set[int]:
    """Counts the segment's entries e by their m, its missing fragments per ensemble index and its entries of the
    #4651 shape; -> the entries short of a copy."""
    E, Qw = ledger.E, ledger.Qw
    per_index = {i: [] for i in range(E)}
    short = set()
    for e in range(first, last + 1):
        m = ledger.missing_copies(ens, e)
        if m:
            short.add(e)
            tally.wrong += ledger.held_outside_write_set(ens, e)
        for i in range(E):
            if (i - e) % E < Qw:
                per_index[i].append((e, ledger.holds(ens[i], e) is False))
        tally.entry(m, Qw, ledger.Qa)
    for i, flags in per_index.items():
        n = sum(f for _, f in flags)
        if n:
            tally.fragments[(first, i)] = (ens[i], n, _runs(flags))
    return short


def _strays_of_segment(ledger: _Answers, ens, first: int, last: int, short: set[int], tally: _Tally) -> None:
    """Per answering bookie: the segment's entries it holds outside their write set, and those of them short of a
    copy."""
    for b in ledger.availability:
        if ledger.holds(b, 0) is None:
            continue
        flags = []
        for e in range(first, last + 1):
            if ledger.holds(b, e):
                flags.append((e, not ledger.in_write_set(ens, b, e)))
        n = sum(f for _, f in flags)
        if n:
            tally.outside[(first, b)] = (n, _runs(flags))
        wflags = [(e, f and e in short) for e, f in flags]
        n = sum(f for _, f in wflags)
        if n:
            tally.wrong_by[(first, b)] = (n, _runs(wflags))


def verdict_as_oracle(v) -> dict:
    return {"least_replicas": v.least_replicas, "lost": v.entries_lost, "below_ack": v.entries_below_ack_quorum,
            "below_write": v.entries_below_write_quorum,
            "fragments": {(f.segment_first_entry_id, f.bookie_index): (f.bookie, f.missing_count,
                                                                        list(f.missing_ranges))
                          for f in v.fragments},
            "outside": {(o.segment_first_entry_id, o.bookie): (o.entry_count, list(o.ranges))
                        for o in v.outside_ensemble},
            "unavailable": list(v.unavailable_bookies), "entries": v.entries, "wrong": v.wrong_ensemble_entries,
            "wrong_by": {(o.segment_first_entry_id, o.bookie): (o.entry_count, list(o.ranges))
                         for o in v.wrong_ensemble}}


def is_closed_auditable(md: LedgerMetadata) -> bool:
    return md.state == CLOSED and md.last_entry_id >= 0
