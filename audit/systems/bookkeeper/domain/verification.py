"""Which entries a fragment verification reads from one bookie, as the Auditor's LedgerChecker chooses them
(docs/formats/bookkeeper.md §1.10). Pure: no I/O.

A *fragment* is one segment of a ledger seen from one ensemble index (LedgerChecker.checkLedger builds one
LedgerFragment per segment and verifies every bookie index of it). For that index:
- firstStored / lastStored are the first and last entry of [segment first, segment last] the index stores
  under round-robin striping (LedgerFragment.getFirstStoredEntryId / getLastStoredEntryId); none when the
  index stores nothing there (an empty segment, or a segment shorter than the stripe).
- firstStored == lastStored: that one entry is read.
- Else, with length = lastStored - firstStored + 1 (counting entries the index does not store) and
  n = int(length * (percent / 100.0)) (Java's cast of a double, percent =
  auditorLedgerVerificationPercentage, 0 by default):
  - n < length: firstStored and lastStored, plus, when n > 0, one random candidate in each bucket of
    length // n entries: buckets start at firstStored, firstStored + bucket, ... while the start is
    < lastStored - bucket - 1, and a candidate is read only if the index stores it (so fewer than n entries
    may be read, and the last bucket or two are never sampled -- upstream's loop bound, kept as is).
  - n >= length (100 %): every entry of [firstStored, lastStored] the index stores.

Upstream draws candidates from ThreadLocalRandom; here the draw comes from a `random.Random` seeded with
(cluster, ledger, bookie, segment first entry, index), so a rerun over the same metadata probes the same
entries (reproducible evidence) while different fragments still get independent draws.
"""
from __future__ import annotations

import heapq
import random
from typing import Iterator, NamedTuple

from audit.systems.bookkeeper.domain.model import LedgerMetadata
from audit.systems.bookkeeper.domain.striping import first_expected_at_or_after, is_expected, last_expected_at_or_before

FULL_SHARE = 100


class Fragment(NamedTuple):
    """One segment of a ledger at one ensemble index: entries [first, last] (last < first: empty)."""

    ledger_id: int
    first: int
    last: int
    index: int
    bookie: str
    ensemble_size: int
    write_quorum: int

    def stored_bounds(self) -> tuple[int, int] | None:
        """(firstStored, lastStored) of this index, or None when it stores nothing in the fragment."""
        if self.last < self.first:
            return None
        lo = first_expected_at_or_after(self.index, self.first, self.ensemble_size, self.write_quorum)
        if lo > self.last:
            return None
        hi = last_expected_at_or_before(self.index, self.last, self.ensemble_size, self.write_quorum)
        return lo, hi

    def stores(self, entry_id: int) -> bool:
        return is_expected(self.index, entry_id, self.ensemble_size, self.write_quorum)


def fragments_of(md: LedgerMetadata, bookie: str) -> list[Fragment]:
    """The fragments of `md` in which `bookie` is an ensemble member, in entry order. Uses md.last_entry_id
    as the end of the last segment: meaningful for CLOSED ledgers (callers decide about the others)."""
    ledger_id = md.ledger_id if md.ledger_id is not None else -1
    return [Fragment(ledger_id, first, last, i, bookie, md.ensemble_size, md.write_quorum_size)
            for seg, first, last in md.segment_bounds()
            for i, member in enumerate(seg.ensemble) if member == bookie]


def fragment_seed(cluster: str, fragment: Fragment) -> str:
    """The seed of one fragment's random draw (str seeds hash the same in every Python process)."""
    return f"replaudit-read-probe:{cluster}:{fragment.ledger_id}:{fragment.bookie}:{fragment.first}:{fragment.index}"


def entries_to_verify(fragment: Fragment, percent: int, rng: random.Random) -> list[int]:
    """The entries LedgerChecker.verifyLedgerFragment reads for this fragment, ascending.
    (For the full share use iter_entries_to_verify: this list holds every stored entry.)"""
    return list(iter_entries_to_verify(fragment, percent, rng))


def iter_entries_to_verify(fragment: Fragment, percent: int, rng: random.Random) -> Iterator[int]:
    """Like entries_to_verify, lazily (a full-share fragment may hold millions of entries)."""
    if not 0 <= percent <= FULL_SHARE:
        raise ValueError(f"percent must be 0..{FULL_SHARE}, got {percent}")
    bounds = fragment.stored_bounds()
    if bounds is None:
        return
    first, last = bounds
    if first == last:
        yield first
        return
    length = last - first + 1
    n = int(length * (percent / 100.0))
    if n >= length:
        yield from (e for e in range(first, last + 1) if fragment.stores(e))
        return
    picked = {first, last}
    if n > 0:
        bucket = length // n
        for start in range(first, last - bucket - 1, bucket):
            candidate = rng.randrange(bucket) + start
            if fragment.stores(candidate):
                picked.add(candidate)
    yield from sorted(picked)


def iter_ledger_probes(md: LedgerMetadata, bookie: str, percent: int, cluster: str = "") -> Iterator[int]:
    """Every entry of the ledger a verification at `percent` reads from `bookie`, ascending, each once.
    Fragments of different segments are disjoint; merging also covers metadata naming a bookie twice in one
    ensemble (invalid, but then each index is verified, as upstream does)."""
    previous = None
    for entry_id in heapq.merge(*(iter_entries_to_verify(f, percent, random.Random(fragment_seed(cluster, f)))
                                  for f in fragments_of(md, bookie))):
        if entry_id != previous:
            yield entry_id
            previous = entry_id
