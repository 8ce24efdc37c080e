"""A cursor's acked set: every position <= markDeletePosition, plus the individually-deleted open-closed
ranges (docs/formats/pulsar.md §2.2, §2.3), evaluated over a whole window at once.

Membership is computed on window-relative keys (window.PositionIndex): the window is sorted, so
"<= markDeletePosition" is a prefix and each range (lower..upper] is the slice of entries with
lower < key <= upper, found by two searchsorted calls. Ranges need not be sorted or coalesced here."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from audit.systems.pulsar.domain.positions import Position
from audit.systems.pulsar.domain.rangeset import AckRanges
from audit.systems.pulsar.domain.window import PositionIndex

_EMPTY = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class CursorAcks:
    """markDeletePosition, readPosition (None when not known) and the individually-deleted ranges as four
    int64 columns (lower ledger/entry exclusive, upper ledger/entry inclusive)."""

    mark_delete: Position
    read_position: Position | None = None
    lower_ledger: np.ndarray = field(default_factory=lambda: _EMPTY)
    lower_entry: np.ndarray = field(default_factory=lambda: _EMPTY)
    upper_ledger: np.ndarray = field(default_factory=lambda: _EMPTY)
    upper_entry: np.ndarray = field(default_factory=lambda: _EMPTY)

    @classmethod
    def of(cls, mark_delete: Position, ranges: AckRanges | Iterable[tuple[Position, Position]] = (),
           read_position: Position | None = None) -> "CursorAcks":
        pairs = list(ranges)
        cols = [np.array([getattr(p[k], a) for p in pairs], dtype=np.int64)
                for k in (0, 1) for a in ("ledger_id", "entry_id")]
        return cls(mark_delete, read_position, cols[0], cols[1], cols[2], cols[3])

    def ranges(self) -> list[tuple[Position, Position]]:
        return [(Position(a, b), Position(c, d)) for a, b, c, d in zip(
            self.lower_ledger.tolist(), self.lower_entry.tolist(), self.upper_ledger.tolist(),
            self.upper_entry.tolist())]

    def contains(self, position: Position) -> bool:
        """Slow scalar form of the acked set (for oracles and single positions)."""
        if position <= self.mark_delete:
            return True
        return any(lo < position <= hi for lo, hi in self.ranges())


def acked_mask(index: PositionIndex, cursor: CursorAcks) -> np.ndarray:
    """Boolean mask over the window entries of `index`: True where the cursor has acked the entry."""
    keys = index.keys
    mask = np.zeros(keys.size, dtype=bool)
    mask[:index.count_at_or_below(cursor.mark_delete)] = True
    if cursor.lower_ledger.size:
        starts = np.searchsorted(keys, index.encode(cursor.lower_ledger, cursor.lower_entry), side="right")
        ends = np.searchsorted(keys, index.encode(cursor.upper_ledger, cursor.upper_entry), side="right")
        for s, e in zip(starts.tolist(), ends.tolist()):   # dozens of ranges: slice writes beat a cumsum
            if e > s:
                mask[s:e] = True
    return mask


def ranges_below_mark_delete(cursor: CursorAcks) -> list[tuple[Position, Position]]:
    """Ranges whose lower bound is below the markDeletePosition: they hold acks at or below it, which the
    broker should have folded into the markDeletePosition (docs/formats/pulsar.md §2.3). Compared on the raw
    (ledger, entry) pairs, not on window keys, so a range outside the dump window is judged too."""
    m = cursor.mark_delete
    below = (cursor.lower_ledger < m.ledger_id) | (
        (cursor.lower_ledger == m.ledger_id) & (cursor.lower_entry < m.entry_id))
    rows = np.flatnonzero(below)
    return [(Position(int(cursor.lower_ledger[i]), int(cursor.lower_entry[i])),
             Position(int(cursor.upper_ledger[i]), int(cursor.upper_entry[i]))) for i in rows.tolist()]
