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
Duplicates by position: every target copy of an identity is matched to its first (lowest) source copy; extra
source copies count as present on the target (not only-on-source) but are not compared themselves.
A (origin, producer, sequence id) key held by both windows that repeats in either is never used to pair: the
target messages left for pass 2 under it, and the unpaired source messages under it, are `*_ambiguous`
(neither compared nor only-on-one-side; the audit reports them as not judged)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from audit.systems.pulsar.domain.window import NONE, Window


@dataclass(frozen=True, eq=False)
class Match:
    """Matching of a source window onto a target window."""

    target_source: np.ndarray     # per target entry: index of its source copy, NONE if none (markers: NONE)
    source_on_target: np.ndarray  # per source entry: True when some target entry is a copy of it
    compared: int                 # target messages with a source copy
    only_on_source: int           # source messages without any target copy (ambiguous ones excluded)
    only_on_target: int           # target messages without a source copy (ambiguous ones excluded)
    target_ambiguous: np.ndarray  # per target entry: left unpaired, its pass-2 key repeats (see `_ambiguous`)
    source_ambiguous: np.ndarray  # per source entry: likewise

    @property
    def ambiguous(self) -> int:
        """Messages (both windows) that could only be paired by a key that repeats."""
        return int(np.count_nonzero(self.target_ambiguous) + np.count_nonzero(self.source_ambiguous))


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
    changed = _key_changes(cols, order)
    starts = np.flatnonzero(changed)
    group = np.cumsum(changed) - 1
    first, last = order[starts], order[np.append(starts[1:] - 1, order.size - 1)]
    group_source = np.where(side[first] == 0, rows[first], NONE)
    sides = side[order]
    t_rows, t_src = rows[order][sides == 1], group_source[group[sides == 1]]
    hit = t_src != NONE
    s_seen = rows[order][(sides == 0) & (side[last][group] == 1)]
    return t_rows[hit], t_src[hit], s_seen


def _key_changes(cols: list[np.ndarray], order: np.ndarray) -> np.ndarray:
    """Per position of `order` (rows sorted by the key columns): whether a new key starts there."""
    changed = np.zeros(order.size, dtype=bool)
    changed[0] = True
    for c in cols:
        o = c[order]
        changed[1:] |= o[1:] != o[:-1]
    return changed


def _ambiguous(src: tuple[np.ndarray, ...], tgt: tuple[np.ndarray, ...], n_s: int, n_t: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """Per source / target row: its (origin, producer, sequence id) is held by messages of both windows and
    repeats in at least one of them. Such a key names no single message: a producer without deduplication
    restarts its sequence ids (and older brokers give copies no source position: docs/formats/pulsar.md §2.7)."""
    amb_s, amb_t = np.zeros(n_s, dtype=bool), np.zeros(n_t, dtype=bool)
    if src[0].size == 0 or tgt[0].size == 0:
        return amb_s, amb_t
    cols = [np.concatenate((a, b)) for a, b in zip(src[1:], tgt[1:])]
    side = np.concatenate((np.zeros(src[0].size, np.int8), np.ones(tgt[0].size, np.int8)))
    rows = np.concatenate((src[0], tgt[0]))
    order = np.lexsort(cols[::-1])
    changed = _key_changes(cols, order)
    starts = np.flatnonzero(changed)
    on_t = np.add.reduceat(side[order].astype(np.int64), starts)
    on_s = np.diff(np.append(starts, order.size)) - on_t
    bad = (on_s > 0) & (on_t > 0) & ((on_s > 1) | (on_t > 1))
    flagged = bad[np.cumsum(changed) - 1]
    s_rows, t_rows = rows[order][flagged & (side[order] == 0)], rows[order][flagged & (side[order] == 1)]
    amb_s[s_rows], amb_t[t_rows] = True, True
    return amb_s, amb_t


def match(source: Window, target: Window) -> Match:
    target_source = np.full(len(target), NONE, dtype=np.int64)
    source_on_target = np.zeros(len(source), dtype=bool)
    s1, t1 = _position_key(source), _position_key(target)
    t_rows, s_rows, s_seen = _join(s1, t1)
    target_source[t_rows] = s_rows
    source_on_target[s_seen] = True
    # Pass 2 by (origin, producer, sequence id) for the target messages pass 1 left unmatched, never between
    # two messages whose origin positions are both known (they differ, or pass 1 would have matched them), and
    # never by a key that repeats in either window (the pairing would be a guess). A second copy without the
    # property still belongs to its message, so matched source messages stay candidates, after the unmatched.
    positioned_s = np.zeros(len(source), dtype=bool)
    positioned_s[s1[0]] = True
    positioned_t = np.zeros(len(target), dtype=bool)
    positioned_t[t1[0]] = True
    left = ~target.marker & (target_source == NONE)
    amb_s = np.zeros(len(source), dtype=bool)
    amb_t = np.zeros(len(target), dtype=bool)
    if left.any():
        amb_s, amb_t = _ambiguous(_producer_key(source, np.flatnonzero(~source.marker)),
                                  _producer_key(target, np.flatnonzero(~target.marker)), len(source), len(target))
    passes = ((left & ~positioned_t & ~amb_t, ~source.marker & ~amb_s),
              (left & positioned_t & ~amb_t, ~source.marker & ~positioned_s & ~amb_s))
    for t_sel, s_sel in passes:
        t_rows, s_rows, s_seen = _join(_producer_key(source, np.flatnonzero(s_sel)),
                                       _producer_key(target, np.flatnonzero(t_sel)), source_on_target.astype(np.int8))
        target_source[t_rows] = s_rows
        source_on_target[s_seen] = True
    # Only what a pairing was attempted for is ambiguous: target messages pass 1 left, and the source messages
    # they could be copies of (a source message already paired by position is not in doubt).
    target_ambiguous = left & amb_t
    source_ambiguous = amb_s & ~source_on_target if target_ambiguous.any() else np.zeros(len(source), dtype=bool)
    compared = int(np.count_nonzero(target_source != NONE))
    only_on_target = int(np.count_nonzero(~target.marker)) - compared - int(np.count_nonzero(target_ambiguous))
    only_on_source = int(np.count_nonzero(~source.marker & ~source_on_target & ~source_ambiguous))
    return Match(target_source, source_on_target, compared, only_on_source, only_on_target, target_ambiguous,
                 source_ambiguous)
