"""What a failover of one subscription from source cluster X to target cluster Y would do
(docs/pulsar-contracts.md "Failover semantics"), over the messages present on both windows:
  redelivered = acked on X, not acked on Y;  skipped = acked on Y, not acked on X;
  lost = skipped and at or after X's readPosition (X never dispatched it).
Ranges are inclusive runs of TARGET positions over the target's message sequence (markers between two
flagged messages do not split a run: they are not messages).

The exact target markDeletePosition: should_be_acked(m) = acked on X when m has a copy on X, else acked
on Y. It is the highest position P such that every target message <= P should be acked: just before the
first target message that should not be (L:E-1; L:-1 when E = 0), or the end of the target window when
every message should be. A cursor at a position with no target message between it and P behaves exactly
like one at P, so when the current target markDeletePosition is such a position it is kept (only markers lie
between them): a reset is planned only when it changes what the consumer receives. After the reset, the
target messages after P that should be acked are acknowledged individually (`to_acknowledge`)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from audit.domain.pulsar.acked import CursorAcks, acked_mask
from audit.domain.pulsar.identity import Match
from audit.domain.pulsar.positions import Position
from audit.domain.pulsar.window import NONE, Window, runs

MAX_ACKNOWLEDGE = 10_000
Ranges = tuple[tuple[Position, Position], ...]


@dataclass(frozen=True)
class Failover:
    compared: int
    only_on_source: int
    only_on_target: int
    redelivered: int
    skipped: int
    lost: int
    redelivered_ranges: Ranges
    skipped_ranges: Ranges
    exact_target_mdp: Position
    to_acknowledge: tuple[Position, ...]     # the first MAX_ACKNOWLEDGE, in position order
    to_acknowledge_count: int
    target_moves_backward: bool              # the reset moves the target cursor back (it acked too much)


def _ranges(target: Window, messages: np.ndarray, flags: np.ndarray) -> Ranges:
    return tuple((target.position(int(messages[a])), target.position(int(messages[b])))
                 for a, b in runs(flags[messages]))


def _messages_between(target: Window, msg_cum: np.ndarray, a: Position, b: Position) -> int:
    """Target messages in (min(a,b), max(a,b)]."""
    lo, hi = sorted((target.index.count_at_or_below(a), target.index.count_at_or_below(b)))
    at = lambda n: int(msg_cum[n - 1]) if n else 0  # noqa: E731
    return at(hi) - at(lo)


def failover(source: Window, target: Window, m: Match, source_cursor: CursorAcks, target_cursor: CursorAcks, *,
             target_end: Position | None = None, source_acked: np.ndarray | None = None,
             target_acked: np.ndarray | None = None, max_acknowledge: int = MAX_ACKNOWLEDGE) -> Failover:
    """`m` = identity.match(source, target). `target_end` = the last position of the target window (its dump
    `to`); the acked masks may be passed in when already computed for the same cursors."""
    a_x = acked_mask(source.index, source_cursor) if source_acked is None else source_acked
    a_y = acked_mask(target.index, target_cursor) if target_acked is None else target_acked
    src = m.target_source
    matched = src != NONE
    on_x = np.zeros(len(target), dtype=bool)
    on_x[matched] = a_x[src[matched]]
    red = matched & on_x & ~a_y
    skip = matched & a_y & ~on_x
    lost = 0
    if source_cursor.read_position is not None:
        dispatched = source.index.count_below(source_cursor.read_position)   # source rows < readPosition
        lost = int(np.count_nonzero(skip & (src >= dispatched)))
    msg = ~target.marker
    messages = np.flatnonzero(msg)
    should = np.where(matched, on_x, a_y) & msg
    bad = msg & ~should
    if bad.any():
        first = int(np.argmax(bad))
        exact = Position(int(target.ledger[first]), int(target.entry[first]) - 1)
    elif target_end is not None:
        exact = target_end
    elif len(target):
        exact = target.position(len(target) - 1)
    else:
        exact = target_cursor.mark_delete
    current = target_cursor.mark_delete
    if exact != current and _messages_between(target, np.cumsum(msg), exact, current) == 0:
        exact = current
    after = target.index.count_at_or_below(exact)
    acks = np.flatnonzero(should[after:]) + after
    return Failover(
        compared=m.compared, only_on_source=m.only_on_source, only_on_target=m.only_on_target,
        redelivered=int(np.count_nonzero(red)), skipped=int(np.count_nonzero(skip)), lost=lost,
        redelivered_ranges=_ranges(target, messages, red), skipped_ranges=_ranges(target, messages, skip),
        exact_target_mdp=exact, to_acknowledge=tuple(target.position(int(i)) for i in acks[:max_acknowledge]),
        to_acknowledge_count=int(acks.size), target_moves_backward=exact < current)
