"""Small builders for BookKeeper domain tests."""
from __future__ import annotations

from audit.systems.bookkeeper.domain.model import CLOSED, LedgerMetadata, Segment
from audit.systems.bookkeeper.domain.replicas import BookieAnswer
from audit.systems.bookkeeper.formats.availability import canonical_groups, entries_to_groups


def ledger(segments, last: int, E: int | None = None, Qw: int = 2, Qa: int = 1,
           state: str = CLOSED, ledger_id: int = 1, **kw) -> LedgerMetadata:
    pairs = segments.items() if isinstance(segments, dict) else segments  # a list allows repeated keys
    segs = tuple(Segment(k, tuple(v)) for k, v in pairs)
    E = E if E is not None else len(segs[0].ensemble)
    return LedgerMetadata(ledger_id, 3, E, Qw, Qa, state, last, 100 if state == CLOSED else 0, segs,
                          kw.pop("digest_type", "CRC32C"), kw.pop("has_password", True), **kw)


def expected_entries(md: LedgerMetadata, bookie: str) -> list[int]:
    out = set()
    for seg, first, last in md.segment_bounds():
        for e in range(max(first, 0), last + 1):
            if any(seg.ensemble[(e + w) % md.ensemble_size] == bookie for w in range(md.write_quorum_size)):
                out.add(e)
    return sorted(out)


def ok(entries, merged: bool = True) -> BookieAnswer:
    groups = entries_to_groups(sorted(set(entries)))
    return BookieAnswer.ok(canonical_groups(groups) if merged else groups)


def healthy(md: LedgerMetadata, merged: bool = True, **overrides) -> dict[str, BookieAnswer]:
    bookies = {b for s in md.segments for b in s.ensemble}
    out = {b: ok(expected_entries(md, b), merged) for b in sorted(bookies)}
    out.update(overrides)
    return out
