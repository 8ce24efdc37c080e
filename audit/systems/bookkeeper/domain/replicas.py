"""The Auditor's ReplicasCheck (docs/formats/bookkeeper.md §1.7) computed over entry ranges, never entry by entry.

Per segment the range [first, last] is cut at every bound of every ensemble bookie's holdings. Inside
one such piece each bookie holds nothing, everything or a periodic pattern, so the number of missing
replicas m(e) is periodic with L = lcm(E, periods): one window of L entries is evaluated and
multiplied, plus the remainder. Only a pathological L falls back to evaluating the piece in chunks.
A piece where every bookie holds exactly its stripe is skipped without any evaluation.

Entries a bookie holds outside the ensemble the metadata assigns are counted as information. Only where such an entry is
also lacked by a write-set bookie the metadata lists (m(e) > 0: the wrong-ensemble shape of docs/formats/bookkeeper.md
§1.6 step 4) is it a finding; bookies outside the segment's ensemble join the windows for that, and only in segments
where some bookie does not hold exactly its stripe."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from audit.systems.bookkeeper.domain.evidence import ENTRIES_OF_LEDGER, LOCATION_INDEX, READ_PROBE, probe_holdings
from audit.systems.bookkeeper.domain.model import CLOSED, LedgerMetadata, SequenceGroup
from audit.systems.bookkeeper.domain.striping import (HeldSet, Holding, count_expected, count_holding_expected,
                                              holdings_from_groups)

OK, NO_SUCH_LEDGER, UNAVAILABLE = "ok", "no_such_ledger", "unavailable"
NO_ANSWER = "no answer collected"
UNMAPPABLE_PROBES = "read probes of a bookie listed twice in one ensemble: holdings not judged"
DEFAULT_MAX_RANGES = 1000
WINDOW_MAX = 1 << 16  # entries evaluated at once; bounds memory when L is huge


@dataclass(frozen=True)
class BookieAnswer:
    """What one bookie's evidence says of one ledger: a GetListOfEntriesOfLedger answer, its location index
    (same shape: groups), or read probes (`absent`: the probed entries it answered it does not have; it is
    taken to hold every other entry the metadata places on it -- audit.systems.bookkeeper.domain.evidence)."""

    status: str
    groups: tuple[SequenceGroup, ...] = ()
    error: str | None = None
    evidence: str = ENTRIES_OF_LEDGER
    share_percent: int | None = None          # read probes only
    probed: int | None = None                 # read probes only
    absent: tuple[int, ...] = ()              # read probes only

    @classmethod
    def ok(cls, groups: Sequence[SequenceGroup], evidence: str = ENTRIES_OF_LEDGER) -> "BookieAnswer":
        return cls(OK, tuple(groups), evidence=evidence)

    @classmethod
    def read_probes(cls, share_percent: int, probed: int, absent: Sequence[int] = ()) -> "BookieAnswer":
        return cls(OK, (), None, READ_PROBE, share_percent, probed, tuple(sorted(set(absent))))

    @classmethod
    def no_such_ledger(cls, evidence: str = ENTRIES_OF_LEDGER) -> "BookieAnswer":
        return cls(NO_SUCH_LEDGER, evidence=evidence)

    @classmethod
    def unavailable(cls, error: str, evidence: str = ENTRIES_OF_LEDGER) -> "BookieAnswer":
        return cls(UNAVAILABLE, (), error, evidence)

    @property
    def is_probe(self) -> bool:
        return self.evidence == READ_PROBE and self.status == OK


# When one bookie has several answers for a ledger (a list answer and its location index, say), a decisive one
# wins over a gap, and the most direct evidence over a sampled one.
_EVIDENCE_RANK = {LOCATION_INDEX: 0, ENTRIES_OF_LEDGER: 1, READ_PROBE: 2}


def better_answer(a: BookieAnswer, b: BookieAnswer) -> BookieAnswer:
    def rank(x: BookieAnswer) -> tuple[int, int]:
        return (x.status not in (OK, NO_SUCH_LEDGER), _EVIDENCE_RANK.get(x.evidence, 3))
    return b if rank(b) < rank(a) else a


Ranges = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class MissingFragment:
    """Entries of one segment that ensemble index `bookie_index` must hold but its bookie does not."""

    segment_first_entry_id: int
    segment_last_entry_id: int
    ensemble: tuple[str, ...]
    bookie: str
    bookie_index: int
    missing_count: int
    missing_ranges: Ranges
    ranges_truncated: bool = False


@dataclass(frozen=True)
class OutsideEnsemble:
    """Entries of one segment that a bookie holds although the metadata does not place them on it.

    In `LedgerVerdict.outside_ensemble` that is information: normal after an ensemble change (a slow bookie
    persisted an add the client re-sent elsewhere) and after re-replication (a bookie comes back). In
    `LedgerVerdict.wrong_ensemble` only the entries a write-set bookie the metadata lists LACKS: the shape of an
    overwritten ensemble, where the metadata names the wrong ensemble (docs/formats/bookkeeper.md §1.6 step 4)."""

    segment_first_entry_id: int
    segment_last_entry_id: int
    ensemble: tuple[str, ...]
    bookie: str
    entry_count: int
    ranges: Ranges
    ranges_truncated: bool = False


@dataclass(frozen=True)
class LedgerVerdict:
    ledger_id: int | None
    state: str
    audited: bool
    reason: str | None = None                 # why not audited
    entries: int = 0                          # lastEntryId + 1 when audited
    least_replicas: int | None = None
    entries_lost: int = 0                     # 0 replicas left
    entries_below_ack_quorum: int = 0         # fewer than Qa replicas
    entries_below_write_quorum: int = 0       # fewer than Qw replicas
    unavailable_bookies: tuple[tuple[str, str], ...] = ()   # (bookie, error): a coverage gap
    fragments: tuple[MissingFragment, ...] = ()
    outside_ensemble: tuple[OutsideEnsemble, ...] = ()
    wrong_ensemble: tuple[OutsideEnsemble, ...] = ()
    wrong_ensemble_entries: int = 0           # entries lacked by a listed write-set bookie, held by another


def _not_audited(md: LedgerMetadata, reason: str) -> LedgerVerdict:
    return LedgerVerdict(md.ledger_id, md.state, False, reason)


def _blocking_problem(md: LedgerMetadata) -> str | None:
    E, Qw, Qa = md.ensemble_size, md.write_quorum_size, md.ack_quorum_size
    if not md.segments:
        return "metadata has no segments"
    if not (1 <= Qa <= Qw <= E):
        return f"quorums not 1 <= Qa <= Qw <= E (E={E}, Qw={Qw}, Qa={Qa})"
    for s in md.segments:
        if len(s.ensemble) != E:
            return f"segment at {s.first_entry_id} has {len(s.ensemble)} bookies, ensembleSize is {E}"
    if any(b.first_entry_id < a.first_entry_id for a, b in zip(md.segments, md.segments[1:])):
        return "segment first entry ids decrease"
    return None


def audit_ledger(md: LedgerMetadata, availability: Mapping[str, BookieAnswer],
                 max_ranges: int = DEFAULT_MAX_RANGES) -> LedgerVerdict:
    """ReplicasCheck of one ledger. Bookies missing from `availability` count as unavailable."""
    reason = _why_not_audited(md)
    if reason:
        return _not_audited(md, reason)

    if _all_exact(md, availability):
        return LedgerVerdict(md.ledger_id, md.state, True, None, md.last_entry_id + 1, md.write_quorum_size)
    held, unavailable = _holdings_by_bookie(md, availability)
    acc = _LedgerAcc()
    for seg, first, last in md.segment_bounds():
        first = max(first, 0)
        if last < first:
            continue  # empty segment expects nothing
        _note_unanswered_bookies(seg.ensemble, held, availability, unavailable)
        _SegmentAudit(md, seg.ensemble, first, last, held, acc, max_ranges).run()
    return LedgerVerdict(
        md.ledger_id, md.state, True, None, md.last_entry_id + 1,
        md.write_quorum_size - acc.max_missing, acc.lost, acc.below_ack, acc.below_write,
        tuple(sorted(unavailable.items())), tuple(acc.fragments), tuple(acc.outside), tuple(acc.wrong),
        acc.wrong_entries)


def _why_not_audited(md: LedgerMetadata) -> str | None:
    """Why ReplicasCheck skips the ledger: not CLOSED, no entries, or metadata it cannot place entries by."""
    if md.state != CLOSED:
        return f"state {md.state}: only CLOSED ledgers are checked"
    if md.last_entry_id < 0:
        return f"CLOSED with lastEntryId {md.last_entry_id}: no entries"
    return _blocking_problem(md)


def _holdings_by_bookie(md: LedgerMetadata, availability: Mapping[str, BookieAnswer]
                        ) -> tuple[dict[str, HeldSet], dict[str, str]]:
    """(bookie -> the entries it holds of the ledger, bookie -> why its holdings are unknown) from the answers."""
    held: dict[str, HeldSet] = {}
    unavailable: dict[str, str] = {}
    for bookie, answer in availability.items():
        if answer.is_probe:
            holdings = probe_holdings(md, bookie, answer.absent)
            if holdings is None:
                unavailable[bookie] = UNMAPPABLE_PROBES
            else:
                held[bookie] = HeldSet(holdings)
        elif answer.status == OK:
            held[bookie] = HeldSet(holdings_from_groups(answer.groups))
        elif answer.status == NO_SUCH_LEDGER:
            held[bookie] = HeldSet([])  # the bookie has no trace of the ledger: it holds nothing
    return held, unavailable


def _note_unanswered_bookies(ensemble: Sequence[str], held: Mapping[str, HeldSet],
                             availability: Mapping[str, BookieAnswer], unavailable: dict[str, str]) -> None:
    """Ensemble bookies whose holdings are unknown, with their error (the first one noted is kept)."""
    for b in ensemble:
        if b not in held:
            answer = availability.get(b)
            unavailable.setdefault(b, (answer.error or answer.status) if answer else NO_ANSWER)


def _all_exact(md: LedgerMetadata, availability: Mapping[str, BookieAnswer]) -> bool:
    """Fast path: does every bookie hold exactly the entries the metadata places on it, and nothing else?

    Checked on the groups themselves with O(1) arithmetic per group: each group must lie inside one
    segment and inside the stripe of the bookie's index there, groups must not overlap, and the
    bookie's total must equal its expected total -- then holdings == expected set. Anything unusual
    (an unavailable bookie, a repeated bookie, another stride, strays) returns False and takes the
    general path, which gives the same answer for the cases accepted here."""
    E, Qw = md.ensemble_size, md.write_quorum_size
    stripes = _stripe_zones(md)
    if stripes is None:
        return False
    zones, want = stripes
    for b in zones:
        answer = availability.get(b)
        if answer is None or answer.status != OK:
            return False
    for b, answer in availability.items():
        if answer.status != OK:
            continue
        if not _holds_exactly_its_stripes(answer, zones.get(b, ()), want.get(b, 0), E, Qw):
            return False
    return True


def _stripe_zones(md: LedgerMetadata) -> tuple[dict[str, list[tuple[int, int, int]]], dict[str, int]] | None:
    """(bookie -> [(segment first, segment last, stripe start mod E)], bookie -> expected entry count), or None
    when a segment lists a bookie twice."""
    E, Qw = md.ensemble_size, md.write_quorum_size
    zones: dict[str, list[tuple[int, int, int]]] = {}
    want: dict[str, int] = {}
    for seg, first, last in md.segment_bounds():
        first = max(first, 0)
        if last < first:
            continue
        if len(set(seg.ensemble)) != E:
            return None
        for i, b in enumerate(seg.ensemble):
            zones.setdefault(b, []).append((first, last, (i - Qw + 1) % E))
            want[b] = want.get(b, 0) + count_expected(i, first, last, E, Qw)
    return zones, want


def _holds_exactly_its_stripes(answer: BookieAnswer, zs: Sequence[tuple[int, int, int]], want: int, E: int,
                               Qw: int) -> bool:
    """One answering bookie: disjoint groups, each inside one of its stripe zones, adding up to `want`."""
    if answer.is_probe:
        # holds every expected entry, and probes never see entries outside its stripe
        return not answer.absent
    have, prev_end = 0, -1
    for g in answer.groups:
        f, size, period = g.first_sequence_start, g.sequence_size, g.sequence_period
        single = g.last_sequence_start == f or period == 0
        end = f + size - 1 if single else g.last_sequence_start + size - 1
        if f <= prev_end or size < 1 or (not single and (period != E or size >= period)):
            return False
        if not _group_inside_a_stripe(f, end, size, zs, E, Qw):
            return False
        have += size if single else ((g.last_sequence_start - f) // period + 1) * size
        prev_end = end
    return have == want


def _group_inside_a_stripe(f: int, end: int, size: int, zs: Sequence[tuple[int, int, int]], E: int,
                           Qw: int) -> bool:
    """Do the runs [f + kE, f + kE + size - 1] up to `end` lie in one segment, inside the bookie's stripe there?"""
    for lo, hi, s in zs:
        if lo <= f and end <= hi:
            break
    else:
        return False
    return not (Qw < E and (f - s) % E + size > Qw)


class _LedgerAcc:
    def __init__(self) -> None:
        self.max_missing = 0
        self.lost = self.below_ack = self.below_write = 0
        self.fragments: list[MissingFragment] = []
        self.outside: list[OutsideEnsemble] = []
        self.wrong: list[OutsideEnsemble] = []
        self.wrong_entries = 0


class _RangeAcc:
    """Maximal spans of marked entries in the order of a selected set: two spans join when no
    selected entry lies between them (`gap_empty`)."""

    def __init__(self, gap_empty: Callable[[int, int], bool], cap: int):
        self.gap_empty, self.cap = gap_empty, cap
        self.ranges: list[list[int]] = []
        self.count = 0
        self.truncated = False

    def add(self, first: int, last: int) -> bool:
        if self.truncated:
            return False
        if self.ranges and self.gap_empty(self.ranges[-1][1] + 1, first - 1):
            self.ranges[-1][1] = last
            return True
        if len(self.ranges) >= self.cap:
            self.truncated = True
            return False
        self.ranges.append([first, last])
        return True

    def as_tuple(self) -> Ranges:
        return tuple((a, b) for a, b in self.ranges)


class _SegmentAudit:
    def __init__(self, md: LedgerMetadata, ensemble: tuple[str, ...], first: int, last: int,
                 held: Mapping[str, HeldSet], acc: _LedgerAcc, max_ranges: int):
        self.E, self.Qw, self.Qa = md.ensemble_size, md.write_quorum_size, md.ack_quorum_size
        self.ensemble, self.first, self.last = ensemble, first, last
        self.held, self.acc = held, acc
        self.indices: dict[str, list[int]] = {}
        for i, b in enumerate(ensemble):
            self.indices.setdefault(b, []).append(i)
        self.distinct = len(self.indices) == len(ensemble)
        self.answered = [b for b in self.indices if b in held]
        self.max_ranges = max_ranges
        self.missing: dict[int, _RangeAcc] = {}   # made on first use: most segments have nothing to report
        self.strays: dict[str, _RangeAcc] = {}
        self.wrong: dict[str, _RangeAcc] = {}
        # Answering bookies this ensemble does not name that hold entries of the segment: information, and
        # evaluated with the others only where some entry may lack a replica (the wrong-ensemble shape).
        self.foreign = [bk for bk in held if bk not in self.indices and held[bk].count(first, last)]

    def _missing_acc(self, i: int) -> _RangeAcc:
        r = self.missing.get(i)
        if r is None:
            E, Qw = self.E, self.Qw
            r = self.missing[i] = _RangeAcc(lambda lo, hi: count_expected(i, lo, hi, E, Qw) == 0, self.max_ranges)
        return r

    def _stray_acc(self, bookie: str, accs: dict | None = None) -> _RangeAcc:
        accs = self.strays if accs is None else accs
        r = accs.get(bookie)
        if r is None:
            h = self.held[bookie]
            r = accs[bookie] = _RangeAcc(lambda lo, hi: h.count(lo, hi) == 0, self.max_ranges)
        return r

    # -- driver
    def _exact(self, i: int, bookie: str) -> bool:
        """Does the bookie at index i hold exactly its stripe X of the whole segment? Its holdings are
        disjoint, so H == X iff every holding lies inside X and |H| == |X| (all O(E) counts)."""
        a, b, E, Qw = self.first, self.last, self.E, self.Qw
        have = 0
        for h in self.held[bookie].overlapping(a, b):
            n = h.count(a, b)
            if n and not self._inside_stripe(i, h) and count_holding_expected(h, i, a, b, E, Qw) != n:
                return False
            have += n
        return have == count_expected(i, a, b, E, Qw)

    def _inside_stripe(self, i: int, h: Holding) -> bool:
        """Structural shortcut: every run of h within the segment lies inside a run of index i's stripe."""
        E, Qw = self.E, self.Qw
        if Qw >= E:
            return True
        s = (i - Qw + 1) % E                    # stripe runs are [s + kE, s + kE + Qw - 1]
        if h.period == 0:
            lo, hi = max(h.lo, self.first), min(h.hi, self.last)
            return (lo - s) % E + (hi - lo) < Qw
        return h.period == E and (h.start - s) % E + h.size <= Qw

    def run(self) -> None:
        a, b = self.first, self.last
        if self.distinct:
            # Bookies holding exactly their stripe add nothing to m(e) and hold no strays: leave them out.
            self.active_bookies = [bk for bk in self.answered if not self._exact(self.indices[bk][0], bk)]
        else:
            self.active_bookies = list(self.answered)
        if not self.active_bookies:
            self._finish()
            return
        overlapping = {bk: self.held[bk].overlapping(a, b) for bk in self.active_bookies + self.foreign}
        cuts = {a, b + 1}
        for hs in overlapping.values():
            for h in hs:
                cuts.add(max(h.lo, a))
                cuts.add(min(h.hi, b) + 1)
        cuts = sorted(cuts)
        ptr = dict.fromkeys(overlapping, 0)
        for x, nxt in zip(cuts, cuts[1:]):
            active: dict[str, Holding | None] = {}
            for bk, hs in overlapping.items():
                k = ptr[bk]
                while k < len(hs) and hs[k].hi < x:
                    k += 1
                ptr[bk] = k
                active[bk] = hs[k] if k < len(hs) and hs[k].lo <= x else None
            self._piece(x, nxt - 1, active)
        self._finish()

    def _finish(self) -> None:
        acc, seg = self.acc, (self.first, self.last, self.ensemble)
        for i, r in sorted(self.missing.items()):
            if r.count:
                acc.fragments.append(MissingFragment(*seg, self.ensemble[i], i, r.count, r.as_tuple(), r.truncated))
        for bk, r in sorted(self.strays.items(), key=lambda kv: self.answered.index(kv[0])):
            if r.count:
                acc.outside.append(OutsideEnsemble(*seg, bk, r.count, r.as_tuple(), r.truncated))
        order = list(self.held)
        for bk, r in sorted(self.wrong.items(), key=lambda kv: order.index(kv[0])):
            if r.count:
                acc.wrong.append(OutsideEnsemble(*seg, bk, r.count, r.as_tuple(), r.truncated))
        for bk, hs in self.held.items():
            if bk in self.indices:
                continue
            # Not in this ensemble at all: every entry it holds here is outside the ensemble.
            n = hs.count(self.first, self.last)
            if n:
                parts = hs.overlapping(self.first, self.last)
                lo = min(v for h in parts if (v := h.first_at_or_after(self.first)) is not None)
                hi = max(v for h in parts if (v := h.last_at_or_before(self.last)) is not None)
                acc.outside.append(OutsideEnsemble(*seg, bk, n, ((lo, hi),) if self.max_ranges else (),
                                                   not self.max_ranges))

    # -- one piece: every bookie's holding is constant over [x, y]
    def _exact_stripe(self, i: int, h: Holding | None) -> bool:
        if h is None:
            return False
        if self.Qw >= self.E:
            return h.is_full
        return (h.period == self.E and h.size == self.Qw
                and (h.start - (i - self.Qw + 1)) % self.E == 0)

    def _piece(self, x: int, y: int, active: Mapping[str, Holding | None]) -> None:
        if self.distinct and all(b not in active or self._exact_stripe(i, active[b])
                                 for i, b in enumerate(self.ensemble)):
            return  # every answering bookie holds exactly its stripe: m == 0, no strays
        L = self.E
        for h in active.values():
            if h is not None and h.period:
                L = math.lcm(L, h.period)
        n = y - x + 1
        if L <= min(n, WINDOW_MAX):
            reps, rem = divmod(n, L)
            self._window(x, L, reps, rem, active)
        else:
            for cx in range(x, y + 1, WINDOW_MAX):
                self._window(cx, min(WINDOW_MAX, y - cx + 1), 1, 0, active)

    def _window(self, x: int, w: int, reps: int, rem: int, active: Mapping[str, Holding | None]) -> None:
        """Entries [x, x + w) repeat `reps` times, then the first `rem` of them once more."""
        E, Qw = self.E, self.Qw
        e = np.arange(x, x + w, dtype=np.int64)
        rel = e % E
        expected = [((i - rel) % E) < Qw for i in range(E)]
        holds = _holds_in_window(e, w, active)
        m = self._missing_replicas(x, w, reps, rem, expected, holds)
        held_outside = self._held_outside_write_sets(x, w, reps, rem, expected, holds)
        if held_outside:
            self._wrong_ensemble(x, w, reps, rem, m > 0, held_outside)
        acc = self.acc
        acc.max_missing = max(acc.max_missing, int(m.max()))
        acc.lost += _count(m >= Qw, reps, rem)
        acc.below_ack += _count(Qw - m < self.Qa, reps, rem)
        acc.below_write += _count(m > 0, reps, rem)

    def _missing_replicas(self, x: int, w: int, reps: int, rem: int, expected: list[np.ndarray],
                          holds: Mapping[str, np.ndarray]) -> np.ndarray:
        """m(e) over the window: write-set bookies that answered and lack the entry; each one's missing spans."""
        m = np.zeros(w, dtype=np.int64)
        for i, bk in enumerate(self.ensemble):
            if bk not in holds:
                continue  # unavailable bookie: its entries are not counted as missing
            miss = expected[i] & ~holds[bk]
            if miss.any():
                m += miss
                r = self._missing_acc(i)
                r.count += _count(miss, reps, rem)
                _add_ranges(r, x, w, reps, rem, expected[i], miss)
        return m

    def _held_outside_write_sets(self, x: int, w: int, reps: int, rem: int, expected: list[np.ndarray],
                                 holds: Mapping[str, np.ndarray]) -> list:
        """(bookie, holds, entries held outside its write sets) per bookie holding any; the strays of ensemble
        bookies are counted here, a foreign bookie's whole holdings in _finish."""
        held_outside = []
        for bk, hv in holds.items():
            if bk not in self.indices:
                if hv.any():
                    held_outside.append((bk, hv, hv))   # counted whole in _finish
                continue
            exp_union = np.zeros(w, dtype=bool)
            for i in self.indices[bk]:
                exp_union |= expected[i]
            stray = hv & ~exp_union
            if stray.any():
                r = self._stray_acc(bk)
                r.count += _count(stray, reps, rem)
                _add_ranges(r, x, w, reps, rem, hv, stray)
                held_outside.append((bk, hv, stray))
        return held_outside

    def _wrong_ensemble(self, x: int, w: int, reps: int, rem: int, short: np.ndarray, held_outside: list) -> None:
        """The wrong-ensemble shape (docs/formats/bookkeeper.md §1.6 step 4): entries a listed write-set bookie
        lacks (m > 0) while a bookie the metadata does not list for them holds them. Per holder for the evidence,
        each entry once in total."""
        if not short.any():
            return
        anywhere = np.zeros(w, dtype=bool)
        for bk, hv, outside in held_outside:
            wrong = outside & short
            if wrong.any():
                anywhere |= wrong
                r = self._stray_acc(bk, self.wrong)
                r.count += _count(wrong, reps, rem)
                _add_ranges(r, x, w, reps, rem, hv, wrong)
        self.acc.wrong_entries += _count(anywhere, reps, rem)


def _holds_in_window(e: np.ndarray, w: int, active: Mapping[str, Holding | None]) -> dict[str, np.ndarray]:
    """bookie -> which entries of the window `e` its constant holding covers."""
    holds: dict[str, np.ndarray] = {}
    for bk, h in active.items():
        if h is None:
            holds[bk] = np.zeros(w, dtype=bool)
        elif h.is_full:
            holds[bk] = np.ones(w, dtype=bool)
        else:
            holds[bk] = ((e - h.start) % h.period) < h.size
    return holds


def _count(flags: np.ndarray, reps: int, rem: int) -> int:
    return reps * int(np.count_nonzero(flags)) + (int(np.count_nonzero(flags[:rem])) if rem else 0)


def _add_ranges(acc: _RangeAcc, x: int, w: int, reps: int, rem: int, sel: np.ndarray, mark: np.ndarray) -> None:
    """Spans of marked entries, in `sel` order, over [x, x + reps*w + rem) where the window repeats."""
    sel_pos = np.flatnonzero(sel)
    mk = mark[sel_pos]
    if mk.all():  # one span from the first to the last selected entry
        tail = sel_pos[sel_pos < rem] if rem else sel_pos[:0]
        last = x + reps * w + int(tail[-1]) if tail.size else x + (reps - 1) * w + int(sel_pos[-1])
        acc.add(x + int(sel_pos[0]), last)
        return
    step = np.diff(mk.astype(np.int8))
    starts = np.flatnonzero(step == 1) + 1
    ends = np.flatnonzero(step == -1)
    if mk[0]:
        starts = np.concatenate(([0], starts))
    if mk[-1]:
        ends = np.concatenate((ends, [mk.size - 1]))
    runs = [(int(sel_pos[s]), int(sel_pos[t])) for s, t in zip(starts, ends)]
    for k in range(reps):
        base = x + k * w
        for f, l in runs:
            if not acc.add(base + f, base + l):
                return
    if rem:
        base = x + reps * w
        for f, l in runs:
            if f >= rem:
                break
            if l >= rem:
                l = int(sel_pos[sel_pos < rem][-1])
            if not acc.add(base + f, base + l):
                return
