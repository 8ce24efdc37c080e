"""The BookKeeper replication protocol, simulated: bookies that store entries, and ledger writers that stripe
entries over the current ensemble, count acks, advance LAC and change ensembles on write failures
(docs/formats/bookkeeper.md §1.6: LedgerHandle.ensembleChangeLoop, RoundRobinDistributionSchedule).

Time is explicit (ms). A bookie's state at time t comes from its timeline (down intervals, read-only since),
so ledgers can be written one after another and still see the same cluster a concurrent run would."""
from __future__ import annotations

import functools
import itertools
import random
from dataclasses import dataclass, field
from typing import Iterable

from audit.systems.bookkeeper.domain.model import CLOSED, INVALID_ENTRY_ID, OPEN


class LabError(Exception):
    """The simulation cannot do what was asked (e.g. not enough writable bookies for an ensemble)."""


@dataclass
class BookieTimeline:
    down: list[tuple[int, int | None]] = field(default_factory=list)  # [start, end) ; end None = never back
    readonly_since: int | None = None

    def up(self, t: int) -> bool:
        if not self.down:
            return True
        return not any(start <= t and (end is None or t < end) for start, end in self.down)

    def writable(self, t: int) -> bool:
        if not self.down and self.readonly_since is None:
            return True
        return self.up(t) and (self.readonly_since is None or t < self.readonly_since)


class Cluster:
    """Bookies, their racks and what each one stores: {bookie: {ledger id: set of entry ids}}."""

    def __init__(self, bookies: list[str], racks: dict[str, str], storage: dict[str, str] | None = None):
        self.bookies = list(bookies)
        self.racks = dict(racks)
        self.storage = dict(storage or {})  # bookie -> ledger storage class name (lab/bookkeeper/config.py)
        self.evidence: dict[str, str] = {}  # bookie -> how the audit learns its entries (config.evidence_of)
        self.timeline = {b: BookieTimeline() for b in bookies}
        self.store: dict[str, dict[int, set[int]]] = {b: {} for b in bookies}
        self.unreachable_at_snapshot: set[str] = set()

    # ---- bookie state
    def writable(self, bookie: str, t: int) -> bool:
        return self.timeline[bookie].writable(t)

    def crash(self, bookie: str, at: int, back_at: int | None = None) -> None:
        self.timeline[bookie].down.append((at, back_at))

    def set_readonly(self, bookie: str, at: int) -> None:
        self.timeline[bookie].readonly_since = at

    def registration(self, bookie: str, at: int) -> str:
        """'available', 'readonly' or 'gone' (no ephemeral znode: the bookie process is down)."""
        tl = self.timeline[bookie]
        if not tl.up(at):
            return "gone"
        return "readonly" if tl.readonly_since is not None and at >= tl.readonly_since else "available"

    def answers(self, bookie: str, at: int) -> bool:
        """Whether the bookie answers requests at snapshot time `at`."""
        return self.timeline[bookie].up(at) and bookie not in self.unreachable_at_snapshot

    # ---- storage
    def add_entry(self, bookie: str, ledger_id: int, entry_id: int) -> None:
        self.ledger_set(bookie, ledger_id).add(entry_id)

    def ledger_set(self, bookie: str, ledger_id: int) -> set[int]:
        """The bookie's entry set for the ledger, created on first write (the bookie now knows the ledger)."""
        return self.store[bookie].setdefault(ledger_id, set())

    def drop_ledger(self, bookie: str, ledger_id: int) -> bool:
        return self.store[bookie].pop(ledger_id, None) is not None

    def entries(self, bookie: str, ledger_id: int) -> set[int] | None:
        return self.store[bookie].get(ledger_id)

    # ---- placement
    def rack_names(self) -> list[str]:
        return sorted(set(self.racks.values()))

    def spread_ok(self, ensemble: list[str], write_quorum: int) -> bool:
        """Every write set spans min(Qw, #racks) racks: the lab's rack-aware policy is strict so that healthy
        ledgers pass any min-racks-per-write-quorum rule up to that."""
        need = min(write_quorum, len(self.rack_names()))
        size = len(ensemble)
        for i in range(size):
            racks = {self.racks[ensemble[(i + w) % size]] for w in range(write_quorum)}
            if len(racks) < need:
                return False
        return True

    def feasible(self, size: int, write_quorum: int) -> bool:
        """Whether some rack pattern lets every write set span min(Qw, #racks) racks (with 2 racks an odd
        ensemble and Qw 2 cannot: the write sets form an odd cycle)."""
        return _pattern_exists(size, write_quorum, len(self.rack_names()))

    def choose_ensemble(self, rng: random.Random, size: int, write_quorum: int, t: int,
                        include: Iterable[str] = (), exclude: Iterable[str] = ()) -> list[str]:
        """A rack-aware ensemble of writable bookies (BKNotEnoughBookiesException -> LabError).
        Backtracking over positions, candidates in a seeded random order."""
        include, exclude = list(dict.fromkeys(include)), set(exclude)
        for b in include:
            if not self.writable(b, t):
                raise LabError(f"bookie {b} must be in an ensemble at t={t} but is not writable then")
        pool = sorted(b for b in self.bookies if self.writable(b, t) and b not in exclude)
        if len(pool) < size or len(include) > size:
            raise LabError(f"not enough writable bookies at t={t}: need {size}, have {len(pool)}")
        need = min(write_quorum, len(self.rack_names()))
        rng.shuffle(pool)
        # Pinned bookies first so the search meets them early; a final rotation keeps every write set's racks.
        pool = include + [b for b in pool if b not in include]
        pick: list[str] = []

        def window_ok(start: int) -> bool:
            return len({self.racks[pick[(start + w) % size]] for w in range(write_quorum)}) >= need

        def place() -> bool:
            p = len(pick)
            if p == size:
                return all(b in pick for b in include) and self.spread_ok(pick, write_quorum)
            if size - p < sum(1 for b in include if b not in pick):
                return False
            for b in pool:
                if b in pick:
                    continue
                pick.append(b)
                if (p + 1 < write_quorum or window_ok(p + 1 - write_quorum)) and place():
                    return True
                pick.pop()
            return False

        if not place():
            raise LabError(f"no rack-aware ensemble of {size} (Qw {write_quorum}) from {len(pool)} bookies at t={t}")
        turn = rng.randrange(size)
        return pick[turn:] + pick[:turn]

    def choose_one_rack(self, rng: random.Random, size: int, t: int, exclude: Iterable[str] = ()) -> list[str]:
        """An ensemble inside one rack: what a placement policy falling back to random can produce."""
        exclude = set(exclude)
        for rack in rng.sample(self.rack_names(), len(self.rack_names())):
            pool = sorted(b for b in self.bookies if self.racks[b] == rack and self.writable(b, t) and b not in exclude)
            if len(pool) >= size:
                return rng.sample(pool, size)
        raise LabError(f"no rack has {size} writable bookies at t={t}")

    def replacement(self, rng: random.Random, ensemble: list[str], index: int, write_quorum: int, t: int,
                    unusable: set[str], avoid: set[str] = frozenset()) -> str:
        """A writable bookie for ensemble[index], keeping the rack spread; same rack preferred, `avoid`
        only when nothing else fits."""
        old = ensemble[index]
        candidates = sorted(b for b in self.bookies
                            if b not in ensemble and b not in unusable and self.writable(b, t))
        fits = [b for b in candidates
                if self.spread_ok(ensemble[:index] + [b] + ensemble[index + 1:], write_quorum)]
        preferred = [b for b in fits if b not in avoid] or fits
        same_rack = [b for b in preferred if self.racks[b] == self.racks[old]]
        pool = same_rack or preferred
        if not pool:
            raise LabError(f"no replacement for {old} at t={t}: {len(candidates)} writable candidates, none rack-aware")
        return rng.choice(pool)


@functools.lru_cache(maxsize=None)
def _pattern_exists(size: int, write_quorum: int, racks: int) -> bool:
    if racks >= size:
        return True
    need = min(write_quorum, racks)
    return any(all(len({pattern[(i + w) % size] for w in range(write_quorum)}) >= need for i in range(size))
               for pattern in itertools.product(range(racks), repeat=size))


def entry_size(ledger_id: int, entry_id: int) -> int:
    """Payload bytes of an entry: deterministic, varied, cheap."""
    return 80 + (ledger_id * 31 + entry_id * 2654435761) % 1200


class LedgerWriter:
    """One client writing one ledger. Entries go to the write set of the CURRENT (last) segment; a write
    that fails triggers an ensemble change keyed at LAC + 1, which replaces the last segment when its key
    equals that (replaceEnsembleEntry) and appends one otherwise; pending adds are then re-sent to the
    replacement bookies. Acks count per entry; LAC advances over the contiguous prefix with >= Qa acks."""

    def __init__(self, cluster: Cluster, ledger_id: int, ensemble: list[str], write_quorum: int,
                 ack_quorum: int, rng: random.Random):
        if not ack_quorum <= write_quorum <= len(ensemble):
            raise LabError(f"ledger {ledger_id}: need Qa <= Qw <= E, got {ack_quorum}, {write_quorum}, {len(ensemble)}")
        self.cluster, self.ledger_id, self.rng = cluster, ledger_id, rng
        self.ensemble_size, self.write_quorum, self.ack_quorum = len(ensemble), write_quorum, ack_quorum
        self.segments: list[tuple[int, list[str]]] = [(0, list(ensemble))]
        self.lap = INVALID_ENTRY_ID   # last add pushed
        self.lac = INVALID_ENTRY_ID   # last add confirmed
        self.pending: dict[int, int] = {}   # entry id -> acks received
        self.unwritable: set[str] = set()   # bookies whose channel from this client fails (per-client fault)
        self.slow: set[str] = set()         # bookies that persist an add but answer after the client's timeout
        self.avoid: set[str] = set()        # replacements of last resort (keeps a scenario's bookies apart)
        self.state = OPEN
        self.ensemble_changes = 0
        self.replaced_segments = 0

    @property
    def ensemble(self) -> list[str]:
        return self.segments[-1][1]

    def _can_write(self, bookie: str, t: int) -> bool:
        return bookie not in self.unwritable and self.cluster.writable(bookie, t)

    def send(self, entry_id: int, t: int, only_indexes: set[int] | None = None) -> list[int]:
        """Push `entry_id` to its write set (or the given indexes of it). Bookies that accept store it at once;
        the ack is counted in `pending` but only takes effect in deliver_acks. -> failed indexes."""
        ensemble, failed = self.ensemble, []
        acks = self.pending.get(entry_id, 0)
        for w in range(self.write_quorum):
            i = (entry_id + w) % self.ensemble_size
            if only_indexes is not None and i not in only_indexes:
                continue
            if ensemble[i] in self.slow and self._can_write(ensemble[i], t):
                # The add times out at the client (an ensemble change follows) yet the bookie persists it.
                self.cluster.ledger_set(ensemble[i], self.ledger_id).add(entry_id)
                failed.append(i)
            elif self._can_write(ensemble[i], t):
                self.cluster.ledger_set(ensemble[i], self.ledger_id).add(entry_id)
                acks += 1
            else:
                failed.append(i)
        self.pending[entry_id] = acks
        self.lap = max(self.lap, entry_id)
        return failed

    def change_ensemble(self, failed_indexes: list[int], t: int) -> set[int]:
        """Replace the failed bookies; the new segment starts at LAC + 1. -> replaced indexes."""
        new = list(self.ensemble)
        unusable = self.unwritable | self.slow | {new[i] for i in failed_indexes}
        for i in sorted(set(failed_indexes)):
            new[i] = self.cluster.replacement(self.rng, new, i, self.write_quorum, t, unusable, self.avoid)
        key = self.lac + 1
        if self.segments[-1][0] == key:
            self.segments[-1] = (key, new)   # replaceEnsembleEntry: the key already exists
            self.replaced_segments += 1
        else:
            self.segments.append((key, new))
        self.ensemble_changes += 1
        return set(failed_indexes)

    def resend_pending(self, indexes: set[int], t: int) -> list[int]:
        """unsetSuccessAndSendWriteRequest: re-send every still-pending add to the replaced indexes."""
        failed: set[int] = set()
        for entry_id in sorted(self.pending):
            failed.update(self.send(entry_id, t, only_indexes=indexes))
        return sorted(failed)

    def deliver_acks(self) -> None:
        while self.lac + 1 in self.pending and self.pending[self.lac + 1] >= self.ack_quorum:
            del self.pending[self.lac + 1]
            self.lac += 1

    def add(self, entry_id: int, t: int, deliver: bool = True) -> None:
        """One add. A write failure is handled before the other bookies' acks arrive, so the entry is re-sent
        to the replacement and ends fully replicated (the usual outcome of an ensemble change)."""
        failed = self.send(entry_id, t)
        while failed:
            replaced = self.change_ensemble(failed, t)
            failed = self.resend_pending(replaced, t)
        if deliver:
            self.deliver_acks()

    def close(self) -> None:
        if self.pending:
            raise LabError(f"ledger {self.ledger_id}: close with adds still pending {sorted(self.pending)[:5]}")
        self.state = CLOSED

    def length(self) -> int:
        return sum(entry_size(self.ledger_id, e) for e in range(self.lac + 1))
