"""Which reads of two clusters to compare, when their cursors were read at different instants
(docs/pulsar/audit.md "Snapshots minutes apart").

Every cluster is read once by its collection (the window and its cursors, instant t_c) and again by the rereads
after every cluster is collected (two passes, all clusters of a topic close together). Cursors only move forward
(acks are added, the markDeletePosition only advances) while traffic keeps flowing, so a target read r_Y bracketed
by two source reads -- one answered before r_Y was asked, one asked after r_Y was answered -- bounds what the
source had acknowledged at r_Y from both sides: what the earlier read acks, the source had acked; what the later
read does not ack, the source had not. Between the two lies progress, never a fault."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

PRIMARY = 0   # the collection's own read; rereads are numbered from 1


@dataclass(frozen=True)
class CursorRead:
    """One read of a cluster's cursors of a topic: `cursors` maps cursor name -> topic.Cursor. Instants are
    milliseconds on the collecting machine's clock, None when not recorded (a hand-taken dump)."""

    number: int
    requested_ms: int | None
    answered_ms: int | None
    cursors: Mapping[str, object] = field(default_factory=dict)

    @property
    def timed(self) -> bool:
        return self.requested_ms is not None and self.answered_ms is not None


@dataclass(frozen=True)
class Bracket:
    """The target read compared, and the source reads on either side of it (None: no such read)."""

    target: CursorRead
    before: CursorRead | None
    after: CursorRead | None
    untimed: bool = False   # no read says when it happened: judged as one snapshot per cluster, and said to be

    @property
    def complete(self) -> bool:
        return self.before is not None and self.after is not None


def _before(source: Sequence[CursorRead], r: CursorRead) -> CursorRead | None:
    found = [s for s in source if s.timed and r.timed and s.answered_ms <= r.requested_ms]
    return max(found, key=lambda s: (s.answered_ms, s.number)) if found else None


def _after(source: Sequence[CursorRead], r: CursorRead) -> CursorRead | None:
    found = [s for s in source if s.timed and r.timed and s.requested_ms >= r.answered_ms]
    return min(found, key=lambda s: (s.requested_ms, s.number)) if found else None


def bracket(source: Sequence[CursorRead], target: Sequence[CursorRead]) -> Bracket | None:
    """The latest target read with a source read on both sides; else the latest with one after (skips can then be
    judged); else the latest with one before; else (instants unknown) the target's and the source's collection
    reads taken as simultaneous, `untimed`. None: no reads."""
    if not target or not source:
        return None
    if not any(r.timed for r in target) or not any(s.timed for s in source):
        first = min(source, key=lambda s: s.number)
        return Bracket(min(target, key=lambda r: r.number), first, first, untimed=True)
    latest_first = sorted(target, key=lambda r: (r.answered_ms is not None, r.answered_ms or 0, r.number),
                          reverse=True)
    options = [Bracket(r, _before(source, r), _after(source, r)) for r in latest_first]
    for wanted in (lambda b: b.complete, lambda b: b.after is not None, lambda b: b.before is not None):
        for b in options:
            if wanted(b):
                return b
    return Bracket(latest_first[0], None, None)   # instants that overlap: nothing bounds the source
