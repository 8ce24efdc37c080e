"""Message identity across clusters (docs/pulsar/contracts.md "Failover semantics").

A message published on cluster C at position p is (C, p). Its copies carry replicated_from = C and, on
recent Pulsar, __MSG_PROP_REPL_SOURCE_POSITION = p; the original has no property (its own position is the
identity). Without the property a copy is matched by (C, producer_name, sequence_id). Markers are never
messages. Matching windows X and Y covers messages that originate on X, on Y, or on a third cluster Z
(both copies name Z; each may or may not carry Z's position).

Two passes, each a sort-merge over integer key columns (np.lexsort, no per-message Python):
  1. (origin, origin ledger, origin entry) wherever the origin position is known;
  2. (origin, producer, sequence id) for the target messages pass 1 left unmatched, where at least one of
     the two sides lacks the origin position.
Duplicates: every target copy of an identity is matched to its first (lowest) source copy; extra source
copies count as present on the target (not only-on-source) but are not compared themselves."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from audit.domain.pulsar.window import NONE, Window


@dataclass(frozen=True, eq=False)
class Match:
    """Matching of a source window onto a target window."""

    target_source: np.ndarray     # per target entry: index of its source copy, NONE if none (markers: NONE)
    source_on_target: np.ndarray  # per source entry: True when some target entry is a copy of it
    compared: int                 # target messages with a source copy
    only_on_source: int           # source messages without any target copy
    only_on_target: int           # target messages without a source copy


def _position_key(w: Window) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(rows, origin, ledger, entry) of the messages whose origin position is known."""
    own = w.origin == w.cluster_code
    ledger = np.where(own, w.ledger, w.source_ledger)
    entry = np.where(own, w.entry, w.source_entry)
    rows = np.flatnonzero(~w.marker & (own | (w.source_ledger != NONE)))
    return rows, w.origin[rows], ledger[rows], entry[rows]


def _producer_key(w: Window, rows: np.ndarray) -> tuple[np.ndarray, ...]:
    rows = rows[(w.producer[rows] != NONE) & (w.sequence[rows] != NONE)]
    return rows, w.origin[rows], w.producer[rows], w.sequence[rows]


def _join(src: tuple[np.ndarray, ...], tgt: tuple[np.ndarray, ...], src_taken: np.ndarray | None = None
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sort-merge on equal key columns. src/tgt = (rows, key columns...). Each target row is matched to the
    first source row of its key, preferring source rows not `src_taken` (matched by an earlier pass).
    Returns (matched target rows, their source rows, every source row whose key has a target row)."""
    n_s, empty = src[0].size, np.zeros(0, np.int64)
    if n_s == 0 or tgt[0].size == 0:
        return empty, empty, empty
    cols = [np.concatenate((a, b)) for a, b in zip(src[1:], tgt[1:])]
    side = np.concatenate((np.zeros(n_s, np.int8), np.ones(tgt[0].size, np.int8)))
    rows = np.concatenate((src[0], tgt[0]))
    taken = np.zeros(rows.size, np.int8)
    if src_taken is not None:
        taken[:n_s] = src_taken[src[0]]
    order = np.lexsort((rows, taken, side, *cols[::-1]))   # key columns, source first, untaken first, position
    changed = np.zeros(order.size, dtype=bool)
    changed[0] = True
    for c in cols:
        s = c[order]
        changed[1:] |= s[1:] != s[:-1]
    starts = np.flatnonzero(changed)
    group = np.cumsum(changed) - 1
    first, last = order[starts], order[np.append(starts[1:] - 1, order.size - 1)]
    group_source = np.where(side[first] == 0, rows[first], NONE)
    sides = side[order]
    t_rows, t_src = rows[order][sides == 1], group_source[group[sides == 1]]
    hit = t_src != NONE
    s_seen = rows[order][(sides == 0) & (side[last][group] == 1)]
    return t_rows[hit], t_src[hit], s_seen


def match(source: Window, target: Window) -> Match:
    target_source = np.full(len(target), NONE, dtype=np.int64)
    source_on_target = np.zeros(len(source), dtype=bool)
    s1, t1 = _position_key(source), _position_key(target)
    t_rows, s_rows, s_seen = _join(s1, t1)
    target_source[t_rows] = s_rows
    source_on_target[s_seen] = True
    # Pass 2 by (origin, producer, sequence id) for the target messages pass 1 left unmatched, never between
    # two messages whose origin positions are both known (they differ, or pass 1 would have matched them).
    # A second copy without the property still belongs to its message, so matched source messages stay
    # candidates, after the unmatched ones.
    positioned_s = np.zeros(len(source), dtype=bool)
    positioned_s[s1[0]] = True
    positioned_t = np.zeros(len(target), dtype=bool)
    positioned_t[t1[0]] = True
    left = ~target.marker & (target_source == NONE)
    passes = ((left & ~positioned_t, ~source.marker), (left & positioned_t, ~source.marker & ~positioned_s))
    for t_sel, s_sel in passes:
        t_rows, s_rows, s_seen = _join(_producer_key(source, np.flatnonzero(s_sel)),
                                       _producer_key(target, np.flatnonzero(t_sel)), source_on_target.astype(np.int8))
        target_source[t_rows] = s_rows
        source_on_target[s_seen] = True
    compared = int(np.count_nonzero(target_source != NONE))
    only_on_target = int(np.count_nonzero(~target.marker)) - compared
    only_on_source = int(np.count_nonzero(~source.marker & ~source_on_target))
    return Match(target_source, source_on_target, compared, only_on_source, only_on_target)

