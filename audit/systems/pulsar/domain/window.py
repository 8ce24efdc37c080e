"""One cluster's dumped entries of one topic (the dump window), as position-sorted numpy columns.

Positions are compared through *window-relative keys* (PositionIndex): key = rank(ledger) << shift | (entry + 1)
where rank is the ledger's rank among the window's distinct ledgers and shift is wide enough for the window's
largest entry id. Packing raw ids (ledger << 20 | entry) is not safe: entry ids are longs and ledger ids are
cluster-global. Ranks keep the key exact for any ids: a window holds at most a few million entries, so rank
bits + entry bits stay far below 63 (checked). A position outside the window (a markDeletePosition, a range
bound) gets the key of its place between window entries, so comparisons against window entries are exact;
two such outside positions with no window entry between them may share a key, which is the right answer
for everything asked of a window (which entries are <= / inside it)."""
from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from audit.systems.pulsar.domain.positions import Position

NONE = -1  # "null" in the integer columns (no property, no producer, no sequence id, no publish time)


class PositionIndex:
    """Order-preserving int64 keys for positions, relative to the sorted positions of one window."""

    __slots__ = ("ledgers", "shift", "cap", "keys", "_ledger_list")

    def __init__(self, ledger: np.ndarray, entry: np.ndarray):
        ledger = np.asarray(ledger, dtype=np.int64)
        entry = np.asarray(entry, dtype=np.int64)
        self.ledgers = np.unique(ledger)
        top = int(entry.max()) if entry.size else 0
        self.shift = max(1, (top + 2).bit_length())
        if int(self.ledgers.size + 1).bit_length() + self.shift > 62:
            raise ValueError(f"window too wide for int64 keys: {self.ledgers.size} ledgers, entry ids up to {top}")
        self.cap = (1 << self.shift) - 1
        self._ledger_list = self.ledgers.tolist()
        self.keys = self.encode(ledger, entry)
        if self.keys.size > 1 and not bool(np.all(self.keys[1:] > self.keys[:-1])):
            raise ValueError("window positions must be strictly increasing")

    def encode(self, ledger, entry) -> np.ndarray:
        """Keys of arbitrary positions (scalars or arrays): the entry slot 0 of a ledger's rank means
        "after every window entry of lower ledgers, before every entry of this one" (L:-1, or a ledger
        the window does not hold)."""
        ledger = np.asarray(ledger, dtype=np.int64)
        entry = np.asarray(entry, dtype=np.int64)
        rank = np.searchsorted(self.ledgers, ledger)
        present = np.zeros(rank.shape, dtype=bool)
        if self.ledgers.size:
            present = self.ledgers[np.minimum(rank, self.ledgers.size - 1)] == ledger
        slot = np.where(present, np.clip(entry + 1, 0, self.cap), 0)
        return (rank.astype(np.int64) << self.shift) | slot

    def key(self, position: Position) -> int:
        """encode() of one position, in plain Python (called per cursor and per bound: numpy's per-call
        overhead would dominate)."""
        ledgers, ledger = self._ledger_list, position.ledger_id
        rank = bisect.bisect_left(ledgers, ledger)
        present = rank < len(ledgers) and ledgers[rank] == ledger
        return (rank << self.shift) | (min(max(position.entry_id + 1, 0), self.cap) if present else 0)

    def count_at_or_below(self, position: Position) -> int:
        """Number of window entries <= position (= index of the first entry > position)."""
        return int(self.keys.searchsorted(self.key(position), side="right"))

    def count_below(self, position: Position) -> int:
        """Number of window entries < position (= index of the first entry >= position)."""
        return int(self.keys.searchsorted(self.key(position), side="left"))


@dataclass(eq=False)
class Marker:
    """A marker entry (docs/formats/pulsar.md §2.5) of the window, with its decoded payload."""

    marker_type: int
    position: Position
    publish_time_ms: int | None = None
    replicated_from: str | None = None
    snapshot_id: str | None = None
    source_cluster: str | None = None           # request
    local: Position | None = None               # snapshot local_message_id
    subscription: str | None = None             # update
    clusters: dict[str, Position] = field(default_factory=dict)   # response / snapshot / update


@dataclass(eq=False)
class Window:
    """Entries of one topic dumped on one cluster, sorted by position. Integer columns use NONE for null.
    `origin` and `producer` are codes shared by every window of the topic (equal code = equal name):
    origin = the replicated_from cluster, or this cluster for a message published here."""

    cluster: str
    cluster_code: int
    ledger: np.ndarray
    entry: np.ndarray
    marker: np.ndarray                      # bool: marker_type is set (never a message)
    origin: np.ndarray
    source_ledger: np.ndarray               # __MSG_PROP_REPL_SOURCE_POSITION, NONE when absent
    source_entry: np.ndarray
    producer: np.ndarray
    sequence: np.ndarray
    publish_time: np.ndarray
    markers: Sequence[Marker] = ()
    replicate_to: Mapping[int, tuple[str, ...]] = field(default_factory=dict)   # row -> replicate_to, when set
    index: PositionIndex = field(init=False)
    _message_counts: np.ndarray | None = field(init=False, default=None, repr=False)

    def __post_init__(self):
        self.index = PositionIndex(self.ledger, self.entry)

    def __len__(self) -> int:
        return int(self.ledger.size)

    def position(self, i: int) -> Position:
        return Position(int(self.ledger[i]), int(self.entry[i]))

    def texts(self, rows: np.ndarray) -> list[str]:
        """"L:E" of many rows at once."""
        return [f"{a}:{b}" for a, b in zip(self.ledger[rows].tolist(), self.entry[rows].tolist())]

    def positions_json(self, rows: np.ndarray) -> str:
        """JSON list of "L:E" (digits, ':' and '-' need no escaping: joined directly, the bulk of the output)."""
        return '["' + '","'.join(self.texts(rows)) + '"]' if rows.size else "[]"

    def ranges_json(self, runs: np.ndarray) -> str:
        """[["L:E","L:E"], ...] of (first, last) row pairs."""
        first, last = self.texts(runs[:, 0]), self.texts(runs[:, 1])
        return json.dumps([list(p) for p in zip(first, last)])

    @property
    def newest_publish_ms(self) -> int | None:
        times = self.publish_time[self.publish_time != NONE]
        return int(times.max()) if times.size else None

    @property
    def messages_up_to(self) -> np.ndarray:
        """messages_up_to[i] = number of messages (non-markers) among rows 0..i-1 (length len+1)."""
        if self._message_counts is None:
            self._message_counts = np.concatenate(([0], np.cumsum(~self.marker)))
        return self._message_counts


def empty_window(cluster: str, cluster_code: int) -> Window:
    z = np.zeros(0, dtype=np.int64)
    return Window(cluster, cluster_code, z, z, np.zeros(0, dtype=bool), z, z, z, z, z, z)


def never_sent(w: Window, remote: str, ttl_ms: int = 0, now_ms: int | None = None) -> np.ndarray:
    """Messages published on w's cluster that its replicator to `remote` acknowledges without sending
    (GeoPersistentReplicator.replicateEntries): `replicate_to` set and not naming `remote`, or expired by the
    namespace's message TTL (MessageImpl.isExpired) when the replicator read them. The read instant is not
    recorded, only bounded by the collection: a message younger than the TTL at `now_ms` cannot have expired;
    an older one (or one without a publish time) may have, so it is never judged missing. ttl_ms 0 = no TTL
    (the broker's default), now_ms None = the newest publish time in the window."""
    own = (w.origin == w.cluster_code) & ~w.marker
    out = np.zeros(len(w), dtype=bool)
    for row, to in w.replicate_to.items():
        out[row] = remote not in to
    if ttl_ms > 0 and len(w):
        now = now_ms if now_ms is not None else w.newest_publish_ms
        if now is None:
            out[:] = True
        else:
            out |= (w.publish_time == NONE) | (now - w.publish_time > ttl_ms)
    return own & out


def runs(flags: np.ndarray) -> np.ndarray:
    """Inclusive (first, last) index runs of consecutive True values, as an (n, 2) array."""
    edges = np.diff(np.concatenate(([0], flags.astype(np.int8), [0])))
    return np.stack((np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1), axis=1)
