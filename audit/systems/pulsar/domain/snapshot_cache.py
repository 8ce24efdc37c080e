"""A replicated subscription's snapshot cache (ReplicatedSubscriptionSnapshotCache), as each broker line ships it.

The dispatcher of a replicated subscription adds every SNAPSHOT marker it reads (keyed by the snapshot's
`local_message_id`); when the markDeletePosition advances, the cached snapshots at or below it are popped and
the last one popped becomes the UPDATE marker. Which snapshots are still cached when the MDP moves decides what
the target is told, and two eviction rules exist (docs/formats/pulsar.md §2.6):

- NEWEST (brokers before 4.0.9 / 4.1.3): a TreeMap by position; after each add, while more than
  `replicatedSubscriptionsSnapshotMaxCachedPerSubscription` (default 10) are cached, the lowest position is
  evicted. The newest N survive; a subscription whose MDP moves rarely finds only snapshots above it.
- SPREAD (4.0.9, 4.1.3 and later; §2.6 step 4): a list in read order. A snapshot at or below the newest cached one
  means the subscription was reset: the cache is cleared first. Past the limit (at least 3), one entry that
  is neither the head nor the tail is evicted: the one whose distance to its previous entry plus its next
  entry's distance to it is smallest (ties: the lower position); its next entry inherits the sum of both
  distances. The distance is the number of the topic's entries strictly between two snapshot positions.
  Head and tail always survive, so an old snapshot stays usable however long the MDP lags.

`broker_cache_model(version)` picks the rule from a broker version; the caller says where the version came from."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Generic, Sequence, TypeVar

from audit.systems.pulsar.domain.positions import Position

NEWEST, SPREAD = "newest", "spread"
DEFAULT_SIZE = 10   # replicatedSubscriptionsSnapshotMaxCachedPerSubscription (ServiceConfiguration)
# The first release of each line whose cache evicts by distance (docs/formats/pulsar.md §2.6); lines after 4.1 all do.
SPREAD_SINCE = {(4, 0): 9, (4, 1): 3}
SPREAD_LINE = (4, 2)
_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+|x)(?:[.\-+].*)?$")

T = TypeVar("T")


@dataclass(frozen=True)
class CacheModel:
    kind: str = SPREAD
    size: int = DEFAULT_SIZE

    def __post_init__(self):
        if self.kind not in (NEWEST, SPREAD):
            raise ValueError(f"cache model: expected {NEWEST!r} or {SPREAD!r}, got {self.kind!r}")
        if self.size < (3 if self.kind == SPREAD else 1):
            raise ValueError(f"cache model {self.kind}: size {self.size} is below the broker's minimum")


def parse_version(text: str) -> tuple[int, int, int | None] | None:
    """`3.0.4`, `4.0.9-SNAPSHOT`, `3.0.x` -> (major, minor, patch or None for x); None when not a version."""
    m = _VERSION.match(text.strip()) if isinstance(text, str) else None
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2)), None if m.group(3) == "x" else int(m.group(3))


def version_tuple(text: str) -> tuple[int, int, int] | None:
    """parse_version with an `x` patch as 0, for comparing with a release (`(2, 8, 0)`); None when not a version."""
    parsed = parse_version(text)
    return None if parsed is None else (parsed[0], parsed[1], parsed[2] or 0)


def broker_cache_model(version: str | None, size: int = DEFAULT_SIZE) -> CacheModel | None:
    """The cache rule of a broker version; None when the version does not say (unparseable, or `4.0.x` /
    `4.1.x`, lines that changed the rule at a patch release)."""
    parsed = parse_version(version) if version is not None else None
    if parsed is None:
        return None
    major, minor, patch = parsed
    line = (major, minor)
    if line >= SPREAD_LINE:
        return CacheModel(SPREAD, size)
    if line not in SPREAD_SINCE:
        return CacheModel(NEWEST, size)
    if patch is None:
        return None
    return CacheModel(SPREAD if patch >= SPREAD_SINCE[line] else NEWEST, size)


class SnapshotCache(Generic[T]):
    """One subscription's cache: `add` in read order, `advanced_mark_delete` when the MDP moves.
    `distance(a, b)`: the topic's entries strictly between positions a < b (SPREAD only)."""

    def __init__(self, model: CacheModel, distance: Callable[[Position, Position], int] | None = None):
        self.model = model
        self._distance = distance or (lambda a, b: 0)
        self._items: list[list] = []    # [position, distance to the previous entry, item], in position order

    def __len__(self) -> int:
        return len(self._items)

    def positions(self) -> list[Position]:
        return [p for p, _, _ in self._items]

    def add(self, position: Position, item: T) -> None:
        if self.model.kind == NEWEST:
            self._items = [e for e in self._items if e[0] != position]     # a TreeMap put replaces
            self._items.append([position, 0, item])
            self._items.sort(key=lambda e: e[0])
            del self._items[:max(0, len(self._items) - self.model.size)]
            return
        if self._items and position <= self._items[-1][0]:
            self._items.clear()                                             # the subscription was reset
        dist = self._distance(self._items[-1][0], position) if self._items else 0
        self._items.append([position, dist, item])
        if len(self._items) > self.model.size:
            self._evict_closest()

    def _evict_closest(self) -> None:
        items = self._items
        best = min(range(1, len(items) - 1), key=lambda i: (items[i][1] + items[i + 1][1], items[i][0]))
        items[best + 1][1] += items[best][1]
        del items[best]

    def advanced_mark_delete(self, mark_delete: Position) -> T | None:
        """Pops every snapshot at or below the new markDeletePosition; the last one popped (the UPDATE) or None."""
        popped = None
        while self._items and self._items[0][0] <= mark_delete:
            popped = self._items.pop(0)[2]
        if self._items:
            self._items[0][1] = 0
        return popped


def surviving(model: CacheModel, snapshots: Sequence[tuple[Position, T]],
              distance: Callable[[Position, Position], int] | None = None) -> list[T]:
    """The items still cached after adding `snapshots` (position, item) in order, oldest first."""
    cache: SnapshotCache[T] = SnapshotCache(model, distance)
    for position, item in snapshots:
        cache.add(position, item)
    return [e[2] for e in cache._items]
