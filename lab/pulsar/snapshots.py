"""The PIP-33 data the controller (pip33.py) and the subscriptions' dispatchers (consumers.py) share: the
simulation's view of a marker payload, and the dispatcher's cache of the SNAPSHOT markers it has read."""
from __future__ import annotations

import bisect
from dataclasses import dataclass

from audit.systems.pulsar.domain.snapshot_cache import NEWEST, CacheModel
from audit.systems.pulsar.domain.snapshot_cache import SnapshotCache as DomainCache
from lab.pulsar.model import Pos


@dataclass(frozen=True)
class MarkerInfo:
    """The simulation's view of a marker payload (the bytes are the protobuf encoding of the same)."""
    kind: int
    snapshot_id: str | None = None
    source_cluster: str | None = None
    subscription: str | None = None
    clusters: tuple[tuple[str, Pos], ...] = ()
    local: Pos | None = None


class SnapshotCache:
    """A replicated subscription's ReplicatedSubscriptionSnapshotCache under the cache rule of its cluster's broker
    version (the TreeMap before apache/pulsar#25044, the distance-spread list after; the rules themselves are
    the domain's audit/systems/pulsar/domain/snapshot_cache.py, where upstream's behaviour is described). The distance
    is the topic's entries strictly between two snapshot positions."""

    def __init__(self, max_size: int, kind: str = NEWEST, positions: list[Pos] | None = None):
        self._positions = positions if positions is not None else []
        self._cache = DomainCache(CacheModel(kind, max_size), self._between)

    @classmethod
    def for_topic(cls, topic) -> "SnapshotCache":
        kind = dict(topic.settings.snapshot_cache_models).get(topic.cluster_name, NEWEST)
        return cls(topic.settings.snapshot_cache_size, kind, topic.ml.positions)

    def _between(self, a: Pos, b: Pos) -> int:
        return max(0, bisect.bisect_left(self._positions, b) - bisect.bisect_right(self._positions, a))

    def add(self, snapshot: MarkerInfo) -> None:
        self._cache.add(snapshot.local, snapshot)

    def advanced_mark_delete(self, mdp: Pos) -> MarkerInfo | None:
        return self._cache.advanced_mark_delete(mdp)

    def __len__(self) -> int:
        return len(self._cache)
