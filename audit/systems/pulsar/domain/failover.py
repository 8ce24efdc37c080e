"""What a failover of one subscription from source cluster X to target cluster Y would do
(docs/pulsar/contracts.md "Failover semantics"):
  redelivered = on both, acked on X, not acked on Y;  skipped = on both, acked on Y, not acked on X;
  lost = skipped and at or after X's readPosition (X never dispatched it).

"On both" covers more than the messages found in both dump windows. Each window starts at the smallest
markDeletePosition of the cluster's replicated subscriptions and replicator cursors, so a message that is on
a cluster but older than its window has been acked there by every such cursor. A message missing from one
window is on that cluster (below the window) when it was published there before the window's start, or when the
other side's replicator to it has acked it and it precedes every message that replicator delivered into the
window; it is then acked on that cluster (_placed). One published there after the window was read is not on it
as far as the audit knows (after_source_window). Otherwise (not replicated yet, or from a third cluster)
it is on one side only and counts in only_on_source / only_on_target. The two clusters' cursors were read at
different instants: X's read before Y's counts redeliveries, X's read after it skips (`failover`).

Ranges are inclusive runs of TARGET positions over the target's message sequence (markers between two
flagged messages do not split a run: they are not messages); a skipped message below the target window has
no known target position and is counted but not in a range.

The exact target markDeletePosition: should_be_acked(m) = acked on X when m is on X, else acked on Y. It is the
highest position P such that every target message <= P should be acked: just before the first target
message that should not be (L:E-1; L:-1 when E = 0), or the end of the target window when every message
should be. A cursor at a position with no target message between it and P behaves exactly like one at P, so
when the current target markDeletePosition is such a position it is kept (only markers lie between them). When
that first message lies below the target window (a skip the window cannot place), P is not knowable from the
dump: `fallback` (the replicated-subscription expectation, where every message is acked on X) is used, else the window
start, and `exact_known` is False. After the reset, the target messages after P that should be acked are acknowledged
individually (`to_acknowledge`)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from audit.systems.pulsar.domain.acked import CursorAcks, acked_mask
from audit.systems.pulsar.domain.identity import Match, match
from audit.systems.pulsar.domain.positions import Position
from audit.systems.pulsar.domain.window import NONE, Window, runs

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
    redelivered_runs: np.ndarray             # (n, 2) target window rows: first and last of each range
    skipped_runs: np.ndarray
    exact_target_mdp: Position
    exact_known: bool                        # False: the reset point lies below the target window
    to_acknowledge_rows: np.ndarray          # target window rows, the first MAX_ACKNOWLEDGE, in position order
    to_acknowledge_count: int
    target_moves_backward: bool              # the reset moves the target cursor back (it acked too much)
    target: Window = field(repr=False, compare=False)
    lag: int = 0                             # redelivered at or below `reach` (newest UPDATE applied): not by design
    lag_oldest_ms: int | None = None         # the oldest of those: its publish time (None: none, or unknown)
    unsettled: int = 0                       # X acked them between its reads around Y's: verdict depends on when
    after_source_window: int = 0             # Y's copies of messages X published after its window was read

    @property
    def redelivered_ranges(self) -> Ranges:
        return self._ranges(self.redelivered_runs)

    @property
    def skipped_ranges(self) -> Ranges:
        return self._ranges(self.skipped_runs)

    def _ranges(self, rows: np.ndarray) -> Ranges:
        return tuple((self.target.position(int(a)), self.target.position(int(b))) for a, b in rows)

    @property
    def to_acknowledge(self) -> tuple[Position, ...]:
        return tuple(self.target.position(int(i)) for i in self.to_acknowledge_rows)


def _runs(messages: np.ndarray, flags: np.ndarray) -> np.ndarray:
    """Runs of flagged messages as (first row, last row) pairs of the window."""
    return messages[runs(flags[messages])]


def _messages_between(target: Window, a: Position, b: Position) -> int:
    """Target messages in (min(a,b), max(a,b)]."""
    lo, hi = sorted((target.index.count_at_or_below(a), target.index.count_at_or_below(b)))
    return int(target.messages_up_to[hi] - target.messages_up_to[lo])


def _at_or_below(ledger: np.ndarray, entry: np.ndarray, p: Position) -> np.ndarray:
    return (ledger < p.ledger_id) | ((ledger == p.ledger_id) & (entry <= p.entry_id))


@dataclass(frozen=True)
class Bounds:
    """What the other cluster's window speaks for: its start (exclusive) and end (inclusive) when known, and
    whether it was read at or after this window (None: the instants are unknown)."""

    start: Position | None = None
    end: Position | None = None
    read_after_this: bool | None = None


def _placed(w: Window, paired: np.ndarray, ambiguous: np.ndarray, other_code: int, sent: np.ndarray | None,
            other: Bounds) -> tuple[np.ndarray, np.ndarray]:
    """(below, after): messages of window `w` missing from the other cluster's window that are on that cluster
    below its window (acked there), and those published there after its window was read (not on it as far as
    the audit knows: never compared).

    Published on the other cluster: its position there (the source-position property) places it against the
    other window's bounds; without the property, the other cluster's messages arrive here in its order, so one
    before the first of them the other window holds is below it and one after the last is after it (with none
    held, nothing can be placed: after). Published here and sent by this cluster's replicator to the other
    (`sent`: acked by the replicator and not dropped unsent, window.never_sent): on it below its window when it
    precedes the first one whose copy the other window holds (after that it is missing: a replication loss, not a
    failover question); with none held, only when the other window was read after this one (what the replicator
    had sent by then had arrived). Trimmed ledgers leave no trace, so the other window's start is all it speaks
    for."""
    unmatched = ~paired & ~ambiguous & ~w.marker
    theirs = w.origin == other_code
    below = np.zeros(len(w), dtype=bool)
    after = np.zeros(len(w), dtype=bool)
    located = theirs & (w.source_ledger != NONE)
    if other.start is not None and other.end is not None:
        below |= located & _at_or_below(w.source_ledger, w.source_entry, other.start)
        after |= located & ~_at_or_below(w.source_ledger, w.source_entry, other.end)
    else:
        below |= located   # no bounds known (an old import): everything the other cluster published is older
    unplaced = theirs & ~located
    held = np.flatnonzero(theirs & paired)
    if held.size:
        rows = np.arange(len(w))
        below |= unplaced & (rows < held[0])
        after |= unplaced & (rows > held[-1])
    else:
        after |= unplaced
    if sent is not None:
        own = (w.origin == w.cluster_code) & ~w.marker
        seen = np.flatnonzero(own & paired)
        limit = int(seen[0]) if seen.size else (len(w) if other.read_after_this is not False else 0)
        below[:limit] |= (own & sent)[:limit]
    return below & unmatched, after & unmatched


@dataclass(frozen=True, eq=False)
class Comparison:
    """Everything about an ordered pair of windows that does not depend on a subscription's cursors."""

    source: Window
    target: Window
    match: Match
    matched: np.ndarray           # target rows with a copy in the source window
    matched_rows: np.ndarray      # their row numbers ...
    matched_source: np.ndarray    # ... and their source rows
    y_below_x: np.ndarray         # target rows on X below X's window (acked there)
    x_below_y: np.ndarray         # source rows on Y below Y's window (acked there)
    known: np.ndarray             # target rows known to be on X
    messages: np.ndarray          # target rows that are messages
    y_after_x: int = 0            # target copies of messages X published after its window was read


def compare(source: Window, target: Window, m: Match | None = None, *, source_sent: np.ndarray | None = None,
            target_sent: np.ndarray | None = None, source_vouches: bool = True,
            target_vouches: bool = True, source_bounds: Bounds = Bounds(),
            target_bounds: Bounds = Bounds()) -> Comparison:
    """`m` = identity.match(source, target) (computed when None). `source_sent` / `target_sent` = what X's
    replicator to Y sent over X's window and Y's replicator to X over Y's window (None: no such replicator).
    `source_bounds` = X's window as Y's side sees it (its start, end, and whether X was read after Y), and
    `target_bounds` the reverse (_placed).
    Messages whose pairing is ambiguous (identity.Match) are on neither side: not compared, not inferred.
    `*_vouches` False: that window was not read (its entries could not be judged, e.g. an old broker's dump):
    nothing of the other window is inferred to lie below it."""
    m = match(source, target) if m is None else m
    matched = m.target_source != NONE
    rows = np.flatnonzero(matched)
    y_below_x, y_after_x = _placed(target, matched, m.target_ambiguous, source.cluster_code, target_sent,
                                   source_bounds)
    x_below_y, _ = _placed(source, m.source_on_target, m.source_ambiguous, target.cluster_code, source_sent,
                           target_bounds)
    if not source_vouches:
        y_below_x[:] = False
    if not target_vouches:
        x_below_y[:] = False
    return Comparison(source, target, m, matched, rows, m.target_source[rows], y_below_x, x_below_y,
                      matched | y_below_x, np.flatnonzero(~target.marker), int(np.count_nonzero(y_after_x)))


def failover(c: Comparison, source_cursor: CursorAcks, target_cursor: CursorAcks, *,
             target_end: Position | None = None, target_from: Position | None = None,
             source_acked: np.ndarray | None = None, target_acked: np.ndarray | None = None,
             fallback: Position | None = None, max_acknowledge: int = MAX_ACKNOWLEDGE,
             reach: Position | None = None, source_after: CursorAcks | None = None,
             source_after_acked: np.ndarray | None = None, after_known: bool = True) -> Failover:
    """`target_from` / `target_end` = the target window's bounds (dump `from`, exclusive, and `to`). The acked
    masks of the subscription's cursors may be passed in when already computed. `reach` = the target position
    the replicated subscription told the target to acknowledge up to (the newest UPDATE): redeliveries after it are
    by design (the target follows one snapshot behind, docs/formats/pulsar.md §2.6); those at or below it are `lag`.
    `source_cursor` is X's cursor read before the target's, `source_after` the one read after it (None: the same
    read; reads.py): X acked at least what the first acks and at most what the second acks when Y was read, so
    redeliveries count by the first, skips by the second, and what X acked between the two is `unsettled`.
    `after_known` False: no X read follows Y's, so a message acked on Y and not on X may be X's progress: no skip
    is claimed, they are unsettled."""
    source, target = c.source, c.target
    if source_after is None:
        source_after, source_after_acked = source_cursor, source_acked
    a_x = acked_mask(source.index, source_cursor) if source_acked is None else source_acked
    a_x_after = acked_mask(source.index, source_after) if source_after_acked is None else source_after_acked
    a_y = acked_mask(target.index, target_cursor) if target_acked is None else target_acked
    on_x = c.y_below_x.copy()                             # below X's window: acked there
    on_x[c.matched_rows] = a_x[c.matched_source]
    on_x_after = c.y_below_x.copy()
    on_x_after[c.matched_rows] = a_x_after[c.matched_source]
    red = c.known & on_x & ~a_y
    skip = c.matched & a_y & ~on_x_after
    skip_below = c.x_below_y & ~a_x_after
    unsettled = int(np.count_nonzero(c.known & on_x_after & ~on_x))
    if not after_known:
        unsettled += int(np.count_nonzero(skip)) + int(np.count_nonzero(skip_below))
        skip, skip_below = np.zeros_like(skip), np.zeros_like(skip_below)
    lost = 0
    if source_after.read_position is not None:
        dispatched = source.index.count_below(source_after.read_position)   # source rows < readPosition
        lost = int(np.count_nonzero(skip & (c.match.target_source >= dispatched)))
        lost += int(np.count_nonzero(skip_below[dispatched:]))
    # The repair makes Y acknowledge what X had acknowledged by its latest read that is known
    should = np.where(c.known, on_x_after, a_y)
    should[target.marker] = False
    exact_known = not skip_below.any()
    bad = should[c.messages]
    if not exact_known:
        exact = fallback if fallback is not None else (target_from or target_cursor.mark_delete)
    elif not bad.all():
        first = int(c.messages[np.argmin(bad)])
        exact = Position(int(target.ledger[first]), int(target.entry[first]) - 1)
    elif target_end is not None:
        exact = target_end
    elif len(target):
        exact = target.position(len(target) - 1)
    else:
        exact = target_cursor.mark_delete
    current = target_cursor.mark_delete
    if exact_known and exact != current and _messages_between(target, exact, current) == 0:
        exact = current
    lag_rows = (np.flatnonzero(red[:target.index.count_at_or_below(reach)]) if reach is not None
                else np.zeros(0, dtype=np.int64))
    times = target.publish_time[lag_rows]
    lag_oldest = int(times.min()) if times.size and not (times == NONE).any() else None
    after = target.index.count_at_or_below(exact)
    acks = np.flatnonzero(should[after:]) + after
    n_y_below, n_x_below = int(np.count_nonzero(c.y_below_x)), int(np.count_nonzero(c.x_below_y))
    m = c.match
    return Failover(
        compared=m.compared + n_y_below + n_x_below, only_on_source=m.only_on_source - n_x_below,
        only_on_target=m.only_on_target - n_y_below, redelivered=int(np.count_nonzero(red)),
        skipped=int(np.count_nonzero(skip)) + int(np.count_nonzero(skip_below)), lost=lost,
        redelivered_runs=_runs(c.messages, red), skipped_runs=_runs(c.messages, skip),
        exact_target_mdp=exact, exact_known=exact_known,
        to_acknowledge_rows=acks[:max_acknowledge], to_acknowledge_count=int(acks.size),
        target_moves_backward=exact < current, target=target, lag=int(lag_rows.size), lag_oldest_ms=lag_oldest,
        unsettled=unsettled, after_source_window=c.y_after_x)
