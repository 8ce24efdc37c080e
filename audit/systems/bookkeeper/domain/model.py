"""BookKeeper ledger metadata and entry-availability as plain values (docs/formats/bookkeeper.md §1.1, §1.7)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

OPEN, IN_RECOVERY, CLOSED = "OPEN", "IN_RECOVERY", "CLOSED"
INVALID_ENTRY_ID = -1


@dataclass(frozen=True)
class Segment:
    """One ensemble, keyed by the first entry it stores (the TreeMap key in LedgerMetadataImpl)."""

    first_entry_id: int
    ensemble: tuple[str, ...]


@dataclass(frozen=True)
class LedgerMetadata:
    """Decoded ledger metadata. The ledger password is deliberately not a field: it is dropped at decode."""

    ledger_id: int | None
    format_version: int
    ensemble_size: int
    write_quorum_size: int
    ack_quorum_size: int
    state: str
    last_entry_id: int
    length: int
    segments: tuple[Segment, ...]
    digest_type: str | None = None
    has_password: bool = False
    ctime: int | None = None
    ctoken: int | None = None
    custom_metadata: Mapping[str, bytes] = field(default_factory=dict)

    @property
    def is_closed(self) -> bool:
        return self.state == CLOSED

    def segment_bounds(self) -> list[tuple[Segment, int, int]]:
        """(segment, first, last) per segment, last = next.first - 1, or lastEntryId for the final one.

        A segment whose last < first is empty and expects no entries (AuditorReplicasCheckTask)."""
        out = []
        for i, seg in enumerate(self.segments):
            if i + 1 < len(self.segments):
                last = self.segments[i + 1].first_entry_id - 1
            else:
                last = self.last_entry_id
            out.append((seg, seg.first_entry_id, last))
        return out


@dataclass(frozen=True)
class SequenceGroup:
    """Runs of `sequence_size` consecutive entries starting every `sequence_period` entries, from
    first_sequence_start up to last_sequence_start (AvailabilityOfEntriesOfLedger.SequenceGroup)."""

    first_sequence_start: int
    last_sequence_start: int
    sequence_size: int
    sequence_period: int
