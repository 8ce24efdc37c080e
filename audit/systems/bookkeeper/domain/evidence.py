"""What a bookie's evidence other than a GetListOfEntriesOfLedger answer says it holds (issue 8, real estates).

DbLedgerStorage bookies do not answer GetListOfEntriesOfLedger (docs/formats/bookkeeper.md §1.7), so two other
kinds of evidence stand in for it (docs/bookkeeper/contracts.md):

location_index  the entries the bookie's `locations` RocksDB index holds, in the list answer's own shape. A
                *complete* inventory also says which ledgers the bookie holds nothing of: an ensemble member
                without a file for the ledger is taken as NoSuchLedger (what ENOLEDGER says).
read_probe      v3 ReadRequests for a share of the entries the metadata places on the bookie. The bookie is
                taken to hold every such entry except the ones it answered it does not have (ENOENTRY,
                ENOLEDGER): unprobed entries are not judged, so counts are probe-confirmed, never extrapolated.
                Entries held outside the ensemble cannot be seen by probes.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from audit.systems.bookkeeper.domain.model import LedgerMetadata
from audit.systems.bookkeeper.domain.striping import Holding, merge_holdings

ENTRIES_OF_LEDGER, LOCATION_INDEX, READ_PROBE = "entries_of_ledger", "location_index", "read_probe"


def _stripe_residues(indices: Iterable[int], ensemble_size: int, write_quorum: int) -> list[tuple[int, int]]:
    """Maximal cyclic runs (start residue, length) of the residues e mod E that the ensemble indices hold:
    index i holds e iff (i - e) mod E < Qw, i.e. the residues [i - Qw + 1, i] (mod E)."""
    E = ensemble_size
    held = [False] * E
    for i in indices:
        for w in range(min(write_quorum, E)):
            held[(i - w) % E] = True
    if all(held):
        return [(0, E)]
    runs = []
    for r in range(E):
        if held[r] and not held[(r - 1) % E]:   # a run starts where the previous residue is not held
            n = 0
            while held[(r + n) % E]:
                n += 1
            runs.append((r, n))
    return runs


def expected_holdings(md: LedgerMetadata, bookie: str) -> list[Holding] | None:
    """The entries the metadata places on `bookie`, as disjoint holdings sorted by lo: per segment one periodic
    holding (period E, runs of Qw) or one full holding when Qw == E. None when a segment lists the bookie at
    indices whose stripes do not form one run of residues (a bookie listed twice: metadata BookKeeper refuses,
    reported as bk.metadata_invariant) -- such holdings are not one pattern per segment."""
    E, Qw = md.ensemble_size, md.write_quorum_size
    out: list[Holding] = []
    if E < 1 or Qw < 1:
        return out
    for seg, first, last in md.segment_bounds():
        first = max(first, 0)
        if last < first:
            continue
        idx = [i for i, b in enumerate(seg.ensemble) if b == bookie and i < E]
        if not idx:
            continue
        runs = _stripe_residues(idx, E, Qw)
        if len(runs) != 1:
            return None
        start, size = runs[0]
        if size >= E:
            out.append(Holding(first, last))
        else:
            out.append(Holding(first, last, first - (first - start) % E, size, E))   # run start <= first
    return merge_holdings(out)


def without(holdings: Sequence[Holding], entries: Iterable[int]) -> list[Holding]:
    """`holdings` (disjoint, sorted by lo) minus `entries`: a holding containing an entry is split around it
    (same pattern, narrower bounds), so the cost follows #holdings + #entries, never the holdings' length."""
    ids = sorted(set(entries))
    out: list[Holding] = []
    j = 0
    for h in holdings:
        while j < len(ids) and ids[j] < h.lo:
            j += 1
        cur = h
        while j < len(ids) and ids[j] <= h.hi:
            e = ids[j]
            j += 1
            if cur.contains(e):
                left = Holding(cur.lo, e - 1, cur.start, cur.size, cur.period)
                if left.count(left.lo, left.hi):
                    out.append(left)
                cur = Holding(e + 1, cur.hi, cur.start, cur.size, cur.period)
        if cur.count(cur.lo, cur.hi):
            out.append(cur)
    return out


def probe_holdings(md: LedgerMetadata, bookie: str, absent: Iterable[int]) -> list[Holding] | None:
    """A read-probed bookie's holdings: every entry the metadata places on it except the probed-absent ones
    (None: see expected_holdings)."""
    expected = expected_holdings(md, bookie)
    return None if expected is None else without(expected, absent)


def settled_in_index(md: LedgerMetadata, znode_mtime_ms: int | None, read_at_ms: int | None,
                     settle_ms: int) -> bool:
    """Whether a bookie's location index, read at `read_at_ms`, can speak for every entry of the ledger.

    DbLedgerStorage adds an entry's key to the index only when its write cache is flushed (every flushInterval,
    or sooner when the cache fills); until then the entry is only in the journal and the cache. An index read
    within `settle_ms` of the ledger's last metadata write (the znode's mtime: created, ensemble changed,
    closed), or before it, may lack entries the bookie holds. Without an mtime the effective ctime bounds the
    ledger's start; without either (and without a read instant) the index is taken as it is."""
    if read_at_ms is None or read_at_ms <= 0:
        return True
    last = max((t for t in (znode_mtime_ms, md.ctime) if t is not None and t > 0), default=None)
    return last is None or last + settle_ms <= read_at_ms


def complete_inventory_misses(md: LedgerMetadata, answered: Iterable[str],
                              inventories: Mapping[str, frozenset[int] | None]) -> list[str]:
    """Ensemble members of `md` with a complete location-index inventory and no answer for the ledger: they hold
    nothing of it. `inventories`: {bookie: ledger ids the inventory was asked for, or None for all ledgers}."""
    have = set(answered)
    out = []
    for b in dict.fromkeys(b for seg in md.segments for b in seg.ensemble):
        if b in have or b not in inventories:
            continue
        asked = inventories[b]
        if asked is None or md.ledger_id in asked:
            out.append(b)
    return out
