"""Rack-aware placement rule: every write set should span at least `min_racks_per_write_quorum` racks
(RackawareEnsemblePlacementPolicy's minNumRacksPerWriteQuorum), capped at Qw since a write set of Qw
bookies cannot span more racks than that."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from audit.systems.bookkeeper.domain.model import CLOSED, LedgerMetadata
from audit.systems.bookkeeper.domain.striping import write_set


@dataclass(frozen=True)
class PlacementViolation:
    segment_first_entry_id: int
    write_set_index: int              # the write set of entries e with e mod E == write_set_index
    bookies: tuple[str, ...]
    racks: tuple[str, ...]
    required_racks: int


def placement_violations(md: LedgerMetadata, racks: Mapping[str, str],
                         min_racks_per_write_quorum: int = 2) -> list[PlacementViolation]:
    """Write sets spanning too few racks. A write set with a bookie of unknown rack is not judged.
    For a CLOSED ledger only write sets some entry of the segment uses are considered; empty
    segments are skipped."""
    E, Qw = md.ensemble_size, md.write_quorum_size
    required = min(min_racks_per_write_quorum, Qw)
    if E < 1 or Qw < 1 or required < 2:
        return []
    out: list[PlacementViolation] = []
    for seg, first, last in md.segment_bounds():
        if len(seg.ensemble) != E:
            continue  # reported by invariants; index arithmetic is meaningless here
        if md.state == CLOSED:
            if last < first:
                continue
            used = sorted({e % E for e in range(first, min(last, first + E - 1) + 1)})
        else:
            used = range(E)
        for r in used:
            bookies = tuple(seg.ensemble[i] for i in write_set(r, E, Qw))
            if any(b not in racks for b in bookies):
                continue
            rack_list = tuple(racks[b] for b in bookies)
            if len(set(rack_list)) < required:
                out.append(PlacementViolation(seg.first_entry_id, r, bookies, rack_list, required))
    return out
