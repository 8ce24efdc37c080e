"""The Pulsar lab's storage model: a virtual clock, managed ledgers (a topic's ledgers and entries on one
cluster) and managed cursors (markDeletePosition, individually-deleted set, readPosition).

Positions are (ledgerId, entryId) tuples. Inside the model an entry is addressed by its index in the topic's
entry list, which keeps "the previous entry" (docs/formats/pulsar.md §2.3: the last entry of the previous
non-empty ledger) and cursor arithmetic trivial while ledger ids stay cluster-global and non-contiguous."""
from __future__ import annotations

import bisect
import heapq
import random
from dataclasses import dataclass, field
from typing import Any, Callable

Pos = tuple[int, int]
MARKER_PRODUCER = "pulsar.marker"


class Clock:
    """Discrete-event scheduler over virtual milliseconds. Ties run in scheduling order (deterministic)."""

    def __init__(self, start_ms: int):
        self.now = start_ms
        self._heap: list[tuple[int, int, Callable, tuple]] = []
        self._seq = 0

    def at(self, when_ms: int, fn: Callable, *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (max(when_ms, self.now), self._seq, fn, args))

    def after(self, delay_ms: int, fn: Callable, *args: Any) -> None:
        self.at(self.now + delay_ms, fn, *args)

    def every(self, first_ms: int, period_ms: int, fn: Callable[[], None], until_ms: int) -> None:
        def tick() -> None:
            fn()
            if self.now + period_ms <= until_ms:
                self.after(period_ms, tick)
        self.at(first_ms, tick)

    def run_until(self, end_ms: int) -> None:
        while self._heap and self._heap[0][0] <= end_ms:
            when, _, fn, args = heapq.heappop(self._heap)
            self.now = when
            fn(*args)
        self.now = end_ms


class Poller:
    """Calls `fn` every `period_ms` while it returns True (more to do), then parks until `wake()` — the way a
    managed cursor waits for new entries instead of polling an idle topic."""

    def __init__(self, clock: Clock, period_ms: int, fn: Callable[[], bool], until_ms: int):
        self.clock, self.period_ms, self.fn, self.until_ms = clock, period_ms, fn, until_ms
        self.parked = True

    def wake(self, delay_ms: int = 1) -> None:
        if self.parked and self.clock.now + delay_ms <= self.until_ms:
            self.parked = False
            self.clock.after(delay_ms, self._run)

    def _run(self) -> None:
        self.parked = True
        if self.fn():
            self.wake(self.period_ms)


@dataclass(eq=False, slots=True)
class Entry:
    ledger_id: int
    entry_id: int
    producer_name: str
    sequence_id: int
    publish_ms: int
    payload: bytes
    properties: tuple[tuple[str, str], ...] = ()
    replicated_from: str | None = None
    replicate_to: tuple[str, ...] | None = None  # None: replicate everywhere
    marker_type: int | None = None
    marker: Any = None  # the simulation's view of a marker payload (snapshots.MarkerInfo)
    deliver_at_ms: int | None = None
    ident: tuple[str, int, int] | None = None  # data messages: (origin cluster, origin ledger, origin entry)

    @property
    def position(self) -> Pos:
        return (self.ledger_id, self.entry_id)

    @property
    def is_marker(self) -> bool:
        return self.marker_type is not None


@dataclass(slots=True)
class Ledger:
    ledger_id: int
    created_ms: int
    first_idx: int
    max_entries: int
    count: int = 0
    size: int = 0
    deleted: bool = False


class ClusterLedgerIds:
    """Ledger ids are cluster-global and increasing: every topic, cursor and schema of the cluster draws from
    one sequence, so one topic's ledgers are never contiguous."""

    def __init__(self, rng: random.Random):
        self._rng = rng
        self._next = rng.randrange(1_000, 900_000)

    def new(self) -> int:
        self._next += self._rng.randint(1, 7)
        return self._next


class ManagedLedger:
    def __init__(self, ids: ClusterLedgerIds, rng: random.Random, created_ms: int, max_entries: int):
        self._ids, self._rng, self._max = ids, rng, max_entries
        self.entries: list[Entry] = []
        self.positions: list[Pos] = []
        self.ledgers: list[Ledger] = []
        self.cursors: dict[str, Cursor] = {}
        self.total_size = 0
        self._live_from = 0   # index in `ledgers` of the first ledger not deleted
        self._open_ledger(created_ms)

    def _open_ledger(self, now: int) -> None:
        # Each ledger gets its own size limit so rollovers do not line up across topics and clusters.
        limit = self._rng.randint(max(2, self._max // 2), self._max)
        self.ledgers.append(Ledger(self._ids.new(), now, len(self.entries), limit))

    @property
    def current(self) -> Ledger:
        return self.ledgers[-1]

    def append(self, now: int, size: int, **fields: Any) -> Entry:
        if self.current.count >= self.current.max_entries:
            self._open_ledger(now)  # rollover happens on the add that finds the ledger full
        led = self.current
        entry = Entry(led.ledger_id, led.count, **fields)
        led.count += 1
        led.size += size
        self.total_size += size
        self.entries.append(entry)
        self.positions.append(entry.position)
        return entry

    def last_position(self) -> Pos:
        led = self.current
        return (led.ledger_id, led.count - 1)

    def position_of(self, idx: int) -> Pos:
        """The position of entry `idx`; idx == len(entries) is the next position to be written."""
        if idx < len(self.entries):
            return self.positions[idx]
        led = self.current
        return (led.ledger_id, led.count)

    def previous_position(self, idx: int) -> Pos:
        return self.positions[idx - 1] if idx > 0 else (self.ledgers[0].ledger_id, -1)

    def floor_index(self, pos: Pos) -> int:
        """Index of the last entry at or before `pos` (-1 if none)."""
        return bisect.bisect_right(self.positions, pos) - 1

    def live_ledgers(self) -> list[Ledger]:
        return [led for led in self.ledgers if not led.deleted]

    def trim(self) -> None:
        """Retention 0: a closed ledger whose entries every cursor has mark-deleted is deleted. Called whenever a
        markDeletePosition moves, as ManagedLedgerImpl trims consumed ledgers in the background while running."""
        if not self.cursors:
            return
        low = min(c.mdp_idx for c in self.cursors.values())
        while self._live_from < len(self.ledgers) - 1:
            led = self.ledgers[self._live_from]
            if led.first_idx + led.count - 1 > low:
                return
            led.deleted = True
            self.total_size -= led.size
            self._live_from += 1

    def first_live_index(self) -> int:
        """Index of the first entry still held (len(entries) when none is)."""
        for led in self.ledgers[self._live_from:]:
            if led.count:
                return led.first_idx
        return len(self.entries)

    def readable(self, idx: int) -> bool:
        return 0 <= idx < len(self.entries) and idx >= self.first_live_index()


@dataclass
class Cursor:
    ml: ManagedLedger
    name: str
    created_ms: int
    cursor_ledger: int
    properties: dict[str, int] = field(default_factory=dict)
    mdp_idx: int = -1
    read_idx: int = 0
    acked: set[int] = field(default_factory=set)
    consumed: int = 0
    mark_deletes: int = 0
    last_advance_ms: int = 0

    @classmethod
    def at_latest(cls, ml: ManagedLedger, name: str, now: int, cursor_ledger: int, **kw: Any) -> "Cursor":
        c = cls(ml, name, now, cursor_ledger, **kw)
        c.mdp_idx = len(ml.entries) - 1
        c.read_idx = c.mdp_idx + 1
        c.last_advance_ms = now
        ml.cursors[name] = c
        return c

    @classmethod
    def at_earliest(cls, ml: ManagedLedger, name: str, now: int, cursor_ledger: int, **kw: Any) -> "Cursor":
        """InitialPosition.Earliest: just before the first entry of the first ledger still held."""
        c = cls.at_latest(ml, name, now, cursor_ledger, **kw)
        c.mdp_idx = ml.first_live_index() - 1
        c.read_idx = c.mdp_idx + 1
        return c

    def is_acked(self, idx: int) -> bool:
        return idx <= self.mdp_idx or idx in self.acked

    def _advance(self, now: int) -> None:
        while self.mdp_idx + 1 in self.acked:
            self.acked.discard(self.mdp_idx + 1)
            self.mdp_idx += 1
        self.read_idx = max(self.read_idx, self.mdp_idx + 1)
        self.mark_deletes += 1
        self.last_advance_ms = now
        self.ml.trim()

    def ack(self, idx: int, now: int) -> bool:
        """Individual ack; True when the markDeletePosition moved."""
        if self.is_acked(idx):
            return False
        self.consumed += 1
        self.acked.add(idx)
        if idx != self.mdp_idx + 1:
            return False
        self._advance(now)
        return True

    def ack_cumulative(self, idx: int, now: int) -> bool:
        if idx <= self.mdp_idx:
            return False  # cumulative acks never move back
        self.consumed += sum(1 for i in range(self.mdp_idx + 1, idx + 1) if i not in self.acked)
        self.acked = {i for i in self.acked if i > idx}
        self.mdp_idx = idx
        self._advance(now)
        return True

    def mark_delete_position(self) -> Pos:
        return self.ml.positions[self.mdp_idx] if self.mdp_idx >= 0 else self.ml.previous_position(0)

    def read_position(self) -> Pos:
        return self.ml.position_of(self.read_idx)

    def ranges(self) -> list[tuple[Pos, Pos]]:
        """individuallyDeletedMessages as open-closed (previous position .. last acked] ranges."""
        out: list[tuple[Pos, Pos]] = []
        run_start = prev = None
        for i in sorted(self.acked):
            if prev is not None and i == prev + 1:
                prev = i
                continue
            if run_start is not None:
                out.append((self.ml.previous_position(run_start), self.ml.positions[prev]))
            run_start = prev = i
        if run_start is not None:
            out.append((self.ml.previous_position(run_start), self.ml.positions[prev]))
        return out

    def backlog(self) -> int:
        """Entries after the markDeletePosition not acked yet (the broker's entries-in-backlog count)."""
        return len(self.ml.entries) - 1 - self.mdp_idx - len(self.acked)
