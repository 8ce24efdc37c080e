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


def oracle(md: LedgerMetadata, availability: Mapping[str, BookieAnswer]) -> dict:
    E, Qw, Qa = md.ensemble_size, md.write_quorum_size, md.ack_quorum_size

    def expected_on(bookie: str, e: int) -> bool:
        return any(first <= e <= last and any(b == bookie and (i - e) % E < Qw for i, b in enumerate(seg.ensemble))
                   for seg, first, last in md.segment_bounds())

    def holds(bookie: str, e: int) -> bool | None:
        a = availability.get(bookie)
        if a is None or a.status not in (OK, "no_such_ledger"):
            return None
        if a.is_probe:   # every expected entry but the probed-absent ones
            if expected_holdings(md, bookie) is None:
                return None
            return expected_on(bookie, e) and e not in a.absent
        return a.status == OK and groups_contain(a.groups, e)

    def why(bookie: str) -> str:
        a = availability.get(bookie)
        return NO_ANSWER if a is None else UNMAPPABLE_PROBES if a.is_probe else a.error or a.status

    max_m, lost, below_ack, below_write = 0, 0, 0, 0
    fragments, outside, unavailable, wrong_by, wrong = {}, {}, {}, {}, 0
    for seg, first, last in md.segment_bounds():
        first = max(first, 0)
        if last < first:
            continue
        ens = seg.ensemble
        for b in ens:
            if holds(b, 0) is None:
                unavailable[b] = why(b)
        per_index = {i: [] for i in range(E)}
        short = set()
        for e in range(first, last + 1):
            m = 0
            for w in range(Qw):
                i = (e + w) % E
                h = holds(ens[i], e)
                if h is False:
                    m += 1
            if m:
                short.add(e)
                elsewhere = [b for b in availability if holds(b, e) and
                             not any(ens[i] == b and (i - e) % E < Qw for i in range(E))]
                wrong += bool(elsewhere)
            for i in range(E):
                if (i - e) % E < Qw:
                    per_index[i].append((e, holds(ens[i], e) is False))
            max_m = max(max_m, m)
            lost += Qw - m == 0
            below_ack += Qw - m < Qa
            below_write += Qw - m < Qw
        for i, flags in per_index.items():
            n = sum(f for _, f in flags)
            if n:
                fragments[(first, i)] = (ens[i], n, _runs(flags))
        for b in availability:
            if holds(b, 0) is None:
                continue
            flags = []
            for e in range(first, last + 1):
                if holds(b, e):
                    expected = any(ens[i] == b and (i - e) % E < Qw for i in range(E))
                    flags.append((e, not expected))
            n = sum(f for _, f in flags)
            if n:
                outside[(first, b)] = (n, _runs(flags))
            wflags = [(e, f and e in short) for e, f in flags]
            n = sum(f for _, f in wflags)
            if n:
                wrong_by[(first, b)] = (n, _runs(wflags))
    return {"least_replicas": Qw - max_m, "lost": lost, "below_ack": below_ack, "below_write": below_write,
            "fragments": fragments, "outside": outside, "unavailable": sorted(unavailable.items()),
            "entries": md.last_entry_id + 1, "wrong": wrong, "wrong_by": wrong_by}


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
