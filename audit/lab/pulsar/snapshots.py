"""The PIP-33 data the controller (pip33.py) and the subscriptions' dispatchers (consumers.py) share: the
simulation's view of a marker payload, and the dispatcher's cache of the SNAPSHOT markers it has read."""
from __future__ import annotations

from dataclasses import dataclass

from audit.lab.pulsar.model import Pos


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
    """Old ReplicatedSubscriptionSnapshotCache: a TreeMap by local position, evicting the oldest beyond max."""

    def __init__(self, max_size: int):
        self.max_size = max_size
        self._by_pos: dict[Pos, MarkerInfo] = {}

    def add(self, snapshot: MarkerInfo) -> None:
        self._by_pos[snapshot.local] = snapshot
        while len(self._by_pos) > self.max_size:
            del self._by_pos[min(self._by_pos)]

    def advanced_mark_delete(self, mdp: Pos) -> MarkerInfo | None:
        popped = None
        for pos in sorted(self._by_pos):
            if pos > mdp:
                break
            popped = self._by_pos.pop(pos)
        return popped

    def __len__(self) -> int:
        return len(self._by_pos)
