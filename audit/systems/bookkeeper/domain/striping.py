"""Round-robin striping arithmetic over entry ranges (docs/formats/bookkeeper.md §1.6), in closed form.

Ensemble index i is expected to hold entry e iff (i - e) mod E < Qw: the write set of e is
{(e + w) mod E : w < Qw} with e the *absolute* entry id (RoundRobinDistributionSchedule).
Every function here costs O(E) at most, whatever the length of the range.

Holdings: what one bookie stores, derived from its SequenceGroups with BookKeeper's lookup rule
(only the group with the greatest firstSequenceStart <= e is consulted), merged so that equally
sized runs at an equal stride become one periodic Holding -- today's bookies emit one group per
run, and merging makes later work follow the number of *changes* in a bookie's holdings."""
from __future__ import annotations

import bisect
import math
from typing import Iterable, NamedTuple, Sequence

from audit.systems.bookkeeper.domain.model import SequenceGroup


def write_set(entry_id: int, ensemble_size: int, write_quorum: int) -> tuple[int, ...]:
    return tuple((entry_id + w) % ensemble_size for w in range(write_quorum))


def is_expected(index: int, entry_id: int, ensemble_size: int, write_quorum: int) -> bool:
    return (index - entry_id) % ensemble_size < write_quorum


def _residue_prefix(index: int, r: int, ensemble_size: int, write_quorum: int) -> int:
    """#residues t in [0, r) with (index - t) mod E < Qw; those residues form the cyclic interval
    [index - Qw + 1, index] (mod E)."""
    if write_quorum >= ensemble_size:
        return r
    s = (index - write_quorum + 1) % ensemble_size
    end = s + write_quorum  # exclusive, may pass E and wrap
    if end <= ensemble_size:
        return min(max(r - s, 0), write_quorum)
    return min(max(r - s, 0), ensemble_size - s) + min(r, end - ensemble_size)


def _expected_below(index: int, n: int, ensemble_size: int, write_quorum: int) -> int:
    """#entries e in [0, n) expected on index (n >= 0)."""
    q, r = divmod(n, ensemble_size)
    return q * min(write_quorum, ensemble_size) + _residue_prefix(index, r, ensemble_size, write_quorum)


def count_expected(index: int, first: int, last: int, ensemble_size: int, write_quorum: int) -> int:
    """#entries in [first, last] (entry ids >= 0) that ensemble index `index` must hold."""
    if last < first:
        return 0
    return (_expected_below(index, last + 1, ensemble_size, write_quorum)
            - _expected_below(index, first, ensemble_size, write_quorum))


def first_expected_at_or_after(index: int, entry_id: int, ensemble_size: int, write_quorum: int) -> int:
    # The expected residues form one cyclic interval, so the answer is at most E - Qw away.
    for d in range(ensemble_size):
        if (index - entry_id - d) % ensemble_size < write_quorum:
            return entry_id + d
    raise ValueError(f"index {index} holds nothing with E={ensemble_size}, Qw={write_quorum}")


def last_expected_at_or_before(index: int, entry_id: int, ensemble_size: int, write_quorum: int) -> int:
    for d in range(ensemble_size):
        if (index - entry_id + d) % ensemble_size < write_quorum:
            return entry_id - d
    raise ValueError(f"index {index} holds nothing with E={ensemble_size}, Qw={write_quorum}")


# ---------------------------------------------------------------------------------- holdings
class Holding(NamedTuple):
    """Entries e in [lo, hi] with (e - start) mod period < size; period 0 means every entry of [lo, hi].
    (A NamedTuple: a ledger's audit builds many of these, and tuples are cheap to make.)"""

    lo: int
    hi: int
    start: int = 0
    size: int = 1
    period: int = 0

    @property
    def is_full(self) -> bool:
        return self.period == 0

    def contains(self, e: int) -> bool:
        return self.lo <= e <= self.hi and (self.period == 0 or (e - self.start) % self.period < self.size)

    def count(self, first: int, last: int) -> int:
        """#held entries in [first, last]."""
        lo, hi = max(first, self.lo), min(last, self.hi)
        if hi < lo:
            return 0
        if self.period == 0:
            return hi - lo + 1
        return self._below(hi + 1) - self._below(lo)

    def _below(self, n: int) -> int:
        # held entries in [start, n) of the unbounded pattern (n >= start)
        q, r = divmod(n - self.start, self.period)
        return q * self.size + min(r, self.size)

    def first_at_or_after(self, e: int) -> int | None:
        e = max(e, self.lo)
        if e > self.hi:
            return None
        if self.period:
            off = (e - self.start) % self.period
            if off >= self.size:
                e += self.period - off
        return e if e <= self.hi else None

    def last_at_or_before(self, e: int) -> int | None:
        e = min(e, self.hi)
        if e < self.lo:
            return None
        if self.period:
            off = (e - self.start) % self.period
            if off >= self.size:
                e -= off - self.size + 1
        return e if e >= self.lo else None


def _run_end(g: SequenceGroup) -> int:
    return g.last_sequence_start + g.sequence_size - 1


def holdings_from_groups(groups: Sequence[SequenceGroup]) -> list[Holding]:
    """Disjoint holdings sorted by lo, equal as a set to what BookKeeper's isEntryAvailable accepts.

    `groups` must be sorted by firstSequenceStart (as decoded). A group is cut at the next group's
    start because lookups only consult the floor group."""
    raw: list[Holding] = []
    for k, g in enumerate(groups):
        hi = _run_end(g)
        if k + 1 < len(groups):
            hi = min(hi, groups[k + 1].first_sequence_start - 1)
        if hi < g.first_sequence_start:
            continue
        single = g.last_sequence_start == g.first_sequence_start or g.sequence_period == 0
        if single or g.sequence_size >= g.sequence_period:
            hi = min(hi, g.first_sequence_start + g.sequence_size - 1) if single else hi
            raw.append(Holding(g.first_sequence_start, hi))
        else:
            raw.append(Holding(g.first_sequence_start, hi, g.first_sequence_start, g.sequence_size,
                               g.sequence_period))
    return merge_holdings(raw)


def _last_run_start(h: Holding) -> int:
    return h.start + (h.hi - h.start) // h.period * h.period


def merge_holdings(holdings: Iterable[Holding]) -> list[Holding]:
    """Merge adjacent full runs into longer runs, and equal runs at an equal stride into periodic
    holdings. Input sorted and disjoint; O(#holdings)."""
    out: list[Holding] = []
    for h in holdings:
        if out:
            cur = out[-1]
            if cur.is_full and h.is_full and h.lo == cur.hi + 1:
                out[-1] = Holding(cur.lo, h.hi)
                continue
            if h.is_full:
                size = h.hi - h.lo + 1
                if cur.is_full and cur.hi - cur.lo + 1 == size and h.lo - cur.lo > size:
                    out[-1] = Holding(cur.lo, h.hi, cur.lo, size, h.lo - cur.lo)
                    continue
                if (not cur.is_full and cur.size == size and _last_run_start(cur) + cur.size - 1 == cur.hi
                        and h.lo - _last_run_start(cur) == cur.period):
                    out[-1] = Holding(cur.lo, h.hi, cur.start, cur.size, cur.period)
                    continue
        out.append(h)
    return out


class HeldSet:
    """A bookie's holdings with O(log n) range queries."""

    def __init__(self, holdings: Sequence[Holding]):
        self.holdings = list(holdings)
        self._los = [h.lo for h in self.holdings]
        self.lo = self.holdings[0].lo if self.holdings else 0
        self.hi = max((h.hi for h in self.holdings), default=-1)

    def _span(self, first: int, last: int) -> range:
        i = max(bisect.bisect_right(self._los, first) - 1, 0)
        j = bisect.bisect_right(self._los, last)
        return range(i, j)

    def count(self, first: int, last: int) -> int:
        """O(log n + #holdings overlapping [first, last])."""
        if last < first or last < self.lo or first > self.hi:
            return 0
        return sum(self.holdings[k].count(first, last) for k in self._span(first, last))

    def overlapping(self, first: int, last: int) -> list[Holding]:
        if last < self.lo or first > self.hi:
            return []
        return [h for h in (self.holdings[k] for k in self._span(first, last)) if h.lo <= last and h.hi >= first]


# ------------------------------------------------------------------- group x stripe intersection
def count_holding_expected(h: Holding, index: int, first: int, last: int, ensemble_size: int,
                           write_quorum: int) -> int:
    """#entries in [first, last] held by `h` and expected on ensemble index `index`, in O(E)."""
    lo, hi = max(first, h.lo), min(last, h.hi)
    if hi < lo:
        return 0
    E, Qw = ensemble_size, write_quorum
    if h.period == 0:
        return count_expected(index, lo, hi, E, Qw)
    p, size = h.period, h.size
    k0 = (lo - h.start) // p          # run containing or preceding lo
    k1 = (hi - h.start) // p

    def run(k: int) -> int:
        s = h.start + k * p
        return count_expected(index, max(s, lo), min(s + size - 1, hi), E, Qw)

    if k1 - k0 <= 1:
        return run(k0) + (run(k1) if k1 != k0 else 0)
    # Middle runs are whole; their count depends only on (start + k p) mod E, periodic in k.
    cycle = E // math.gcd(p, E)
    n_mid = k1 - k0 - 1
    full, rem = divmod(n_mid, cycle)
    base = k0 + 1
    cycle_counts = [count_expected(index, h.start + (base + t) * p, h.start + (base + t) * p + size - 1, E, Qw)
                    for t in range(min(cycle, n_mid))]
    total = run(k0) + run(k1) + full * sum(cycle_counts) + sum(cycle_counts[:rem])
    return total


def count_group_expected(group: SequenceGroup, index: int, first: int, last: int, ensemble_size: int,
                         write_quorum: int) -> int:
    """#entries of one SequenceGroup (on its own, no floor-group cut) in [first, last] that are expected
    on ensemble index `index`."""
    return sum(count_holding_expected(h, index, first, last, ensemble_size, write_quorum)
               for h in holdings_from_groups([group]))


def stripe_groups(index: int, first: int, last: int, ensemble_size: int, write_quorum: int) -> list[SequenceGroup]:
    """SequenceGroups of a bookie at ensemble index `index` holding exactly its stripe of [first, last],
    with equal runs merged into one periodic group (at most three groups, whatever the length)."""
    E, Qw = ensemble_size, write_quorum
    if last < first:
        return []
    if Qw >= E:
        return [SequenceGroup(first, first, last - first + 1, 0)]
    s = (index - Qw + 1) % E                       # residue where each run of Qw entries starts
    out: list[SequenceGroup] = []
    f = first_expected_at_or_after(index, first, E, Qw)
    if f > last:
        return []
    run0 = f + (s - f) % E                          # first run starting at or after f
    if run0 != f:                                   # f lies inside a run that began before `first`
        end = min(run0 - E + Qw - 1, last)
        out.append(SequenceGroup(f, f, end - f + 1, 0))
    if run0 + Qw - 1 <= last:
        k = (last - Qw + 1 - run0) // E             # whole runs after run0
        out.append(SequenceGroup(run0, run0 + k * E, Qw, E if k else 0))
        tail = run0 + (k + 1) * E
    else:
        tail = run0
    if tail <= last:
        out.append(SequenceGroup(tail, tail, last - tail + 1, 0))
    return out
