"""Naive per-entry ReplicasCheck: the reference the range arithmetic is compared against.
Deliberately written entry by entry, straight from docs/formats/bookkeeper.md §1.6-1.7."""
from __future__ import annotations

from typing import Mapping

from audit.domain.bookkeeper.model import CLOSED, LedgerMetadata
from audit.domain.bookkeeper.replicas import NO_ANSWER, OK, BookieAnswer
from audit.formats.bookkeeper.availability import groups_contain


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

    def holds(bookie: str, e: int) -> bool | None:
        a = availability.get(bookie)
        if a is None or a.status not in (OK, "no_such_ledger"):
            return None
        return a.status == OK and groups_contain(a.groups, e)

    max_m, lost, below_ack, below_write = 0, 0, 0, 0
    fragments, outside, unavailable = {}, {}, {}
    for seg, first, last in md.segment_bounds():
        first = max(first, 0)
        if last < first:
            continue
        ens = seg.ensemble
        for b in ens:
            if holds(b, 0) is None:
                a = availability.get(b)
                unavailable[b] = (a.error or a.status) if a else NO_ANSWER
        per_index = {i: [] for i in range(E)}
        for e in range(first, last + 1):
            m = 0
            for w in range(Qw):
                i = (e + w) % E
                h = holds(ens[i], e)
                if h is False:
                    m += 1
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
    return {"least_replicas": Qw - max_m, "lost": lost, "below_ack": below_ack, "below_write": below_write,
            "fragments": fragments, "outside": outside, "unavailable": sorted(unavailable.items()),
            "entries": md.last_entry_id + 1}


def verdict_as_oracle(v) -> dict:
    return {"least_replicas": v.least_replicas, "lost": v.entries_lost, "below_ack": v.entries_below_ack_quorum,
            "below_write": v.entries_below_write_quorum,
            "fragments": {(f.segment_first_entry_id, f.bookie_index): (f.bookie, f.missing_count,
                                                                        list(f.missing_ranges))
                          for f in v.fragments},
            "outside": {(o.segment_first_entry_id, o.bookie): (o.entry_count, list(o.ranges))
                        for o in v.outside_ensemble},
            "unavailable": list(v.unavailable_bookies), "entries": v.entries}


def is_closed_auditable(md: LedgerMetadata) -> bool:
    return md.state == CLOSED and md.last_entry_id >= 0
