"""Broker positions `ledgerId:entryId` (docs/formats/pulsar.md §2.2)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from audit.errors import PayloadError

BEFORE_FIRST_ENTRY = -1  # entry -1 of L: "before entry 0 of L", e.g. a fresh cursor's markDeletePosition

# Ledger ids are non-negative; the entry id is non-negative or the -1 sentinel.
POSITION_PATTERN = r"\d+:(?:-1|\d+)"
_POSITION = re.compile(POSITION_PATTERN)


@dataclass(frozen=True, order=True)
class Position:
    """A broker position, ordered by (ledger_id, entry_id). Ledger ids are not contiguous per topic, so
    no arithmetic across ledgers is offered."""

    ledger_id: int
    entry_id: int

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"


def parse_position(text: str, source: str, field: str = "position") -> Position:
    """Parse "L:E" (PositionImpl.toString); E may be -1. Client MessageId forms with a partition or batch
    index (`L:E:P[:B]`) are rejected: they are not broker positions."""
    if not isinstance(text, str) or _POSITION.fullmatch(text) is None:
        raise PayloadError(source, field, "a position 'ledgerId:entryId' (entryId >= -1)", text)
    ledger, entry = text.split(":")
    return Position(int(ledger), int(entry))
