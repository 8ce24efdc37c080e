"""The dump window of one topic and how it is cut into raw chunks (docs/pulsar/contracts.md, `T/dump.json`).

from (exclusive) = the smallest markDeletePosition among replicated subscriptions and `pulsar.repl.*` replicator
cursors: everything at or below it is acknowledged everywhere that matters for a failover, and may already be
trimmed. to (inclusive) = lastConfirmedEntry when the dump starts.

Positions are enumerated from the stats-internal `ledgers` list, never by arithmetic across ledgers (ledger ids
are not contiguous per topic). The open ledger shows `entries: 0`; its count is `currentLedgerEntries`, which may
include adds still in flight, so lastConfirmedEntry bounds it (docs/formats/pulsar.md §2.1, sample -02).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

from audit.systems.pulsar.domain.positions import BEFORE_FIRST_ENTRY, Position
from audit.systems.pulsar.formats.stats import TopicStats
from audit.systems.pulsar.formats.stats_internal import StatsInternal

WHOLE_TOPIC = "no replicated subscription or replicator cursor: the whole retained topic"


@dataclass(frozen=True)
class LedgerSpan:
    """Entries first..last (inclusive) of one ledger."""

    ledger_id: int
    first: int
    last: int

    @property
    def count(self) -> int:
        return self.last - self.first + 1

    def positions(self) -> Iterator[Position]:
        return (Position(self.ledger_id, e) for e in range(self.first, self.last + 1))

    @property
    def start(self) -> Position:
        return Position(self.ledger_id, self.first)

    @property
    def end(self) -> Position:
        return Position(self.ledger_id, self.last)


@dataclass(frozen=True)
class Chunk(LedgerSpan):
    @property
    def key(self) -> str:
        return f"dump/{self.ledger_id}/{self.first}-{self.last}.jsonl"


@dataclass(frozen=True)
class DumpWindow:
    start: Position  # exclusive
    end: Position  # inclusive
    spans: tuple[LedgerSpan, ...]
    from_cursor: str | None  # the cursor whose markDeletePosition is `start`; None: see `basis`
    basis: str

    @property
    def count(self) -> int:
        return sum(s.count for s in self.spans)

    def positions(self) -> Iterator[Position]:
        for span in self.spans:
            yield from span.positions()


def replicated_subscriptions(si: StatsInternal | None, stats: TopicStats | None) -> list[str]:
    """Subscriptions flagged replicated by the cursor property or by `isReplicated` in stats, sorted."""
    names = {c.name for c in (si.cursors.values() if si else ()) if c.kind == "subscription" and c.replicated}
    names.update(n for n, s in (stats.subscriptions.items() if stats else ()) if s.is_replicated)
    return sorted(names)


def _ledger_entries(si: StatsInternal, ledger_id: int, listed: int) -> int:
    if ledger_id != si.open_ledger_id:
        return listed
    if si.current_ledger_entries is not None:
        return si.current_ledger_entries
    lce = si.last_confirmed_entry
    return lce.entry_id + 1 if lce.ledger_id == ledger_id else 0


def plan_window(si: StatsInternal, replicated: Iterable[str]) -> DumpWindow:
    wanted = set(replicated)
    bounding = [c for c in si.cursors.values()
                if c.kind == "replicator" or (c.kind == "subscription" and c.name in wanted)]
    end = si.last_confirmed_entry
    if bounding:
        cursor = min(bounding, key=lambda c: (c.mark_delete, c.name))
        start, from_cursor = cursor.mark_delete, cursor.name
        basis = f"smallest markDeletePosition: {cursor.kind} cursor {cursor.name}"
    else:
        # Nothing bounds the comparison (e.g. the receiving side of one-way replication): a target's copies
        # must still be visible to the audit, so take every retained entry.
        start = Position(si.ledgers[0].ledger_id, BEFORE_FIRST_ENTRY) if si.ledgers else end
        from_cursor, basis = None, WHOLE_TOPIC
    spans = []
    for lg in si.ledgers:
        if lg.ledger_id > end.ledger_id or lg.ledger_id < start.ledger_id:
            continue
        last = _ledger_entries(si, lg.ledger_id, lg.entries) - 1
        if lg.ledger_id == end.ledger_id:
            last = min(last, end.entry_id)
        first = start.entry_id + 1 if lg.ledger_id == start.ledger_id else 0
        if first <= last:
            spans.append(LedgerSpan(lg.ledger_id, first, last))
    return DumpWindow(start, end, tuple(spans), from_cursor, basis)


def plan_chunks(window: DumpWindow, chunk_entries: int, cap: int) -> tuple[list[Chunk], list[LedgerSpan]]:
    """(chunks to fetch, spans beyond the cap). Chunk boundaries are aligned to multiples of `chunk_entries`
    within each ledger, so the same window always yields the same keys (resume skips chunks already stored)."""
    chunks: list[Chunk] = []
    beyond: list[LedgerSpan] = []
    budget = cap
    for span in window.spans:
        e = span.first
        while e <= span.last:
            last = min(span.last, (e // chunk_entries + 1) * chunk_entries - 1)
            if budget <= 0:
                beyond.append(LedgerSpan(span.ledger_id, e, span.last))
                break
            if last - e + 1 > budget:
                last = e + budget - 1
            chunks.append(Chunk(span.ledger_id, e, last))
            budget -= last - e + 1
            e = last + 1
    return chunks, beyond
