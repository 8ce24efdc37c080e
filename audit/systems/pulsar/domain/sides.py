"""What one cluster holds of a topic (its window, cursors, reads and replication), and the audit's settings."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from audit.systems.pulsar.domain import checks, snapshot_cache
from audit.systems.pulsar.domain.acked import CursorAcks
from audit.systems.pulsar.domain.failover import MAX_ACKNOWLEDGE
from audit.systems.pulsar.domain.positions import Position
from audit.systems.pulsar.domain.reads import PRIMARY, CursorRead
from audit.systems.pulsar.domain.window import Window

SUBSCRIPTION, REPLICATOR = "subscription", "replicator"


@dataclass(frozen=True)
class Cursor:
    name: str
    kind: str                       # subscription | replicator | dedup | compaction
    acks: CursorAcks
    remote_cluster: str | None = None
    replicated: bool = False


@dataclass
class ClusterSide:
    """What one cluster holds of the topic."""

    cluster: str
    window: Window
    dump_from: Position | None = None        # exclusive
    dump_to: Position | None = None          # inclusive
    complete: bool = False                   # dump complete and no unread entry
    cursors: Mapping[str, Cursor] = field(default_factory=dict)
    # remote -> (connected, backlog) from the stats' replication section
    replication: Mapping[str, tuple[bool | None, int | None]] = field(default_factory=dict)
    replicated_subscriptions: frozenset[str] = frozenset()
    # every read of the cursors: the collection's own (PRIMARY, the instants of stats-internal.json: `cursors` and
    # the window) and the rereads; empty: the collection's read only, instant unknown
    reads: tuple[CursorRead, ...] = ()
    # what this cluster's broker said of the topic's TTL (None: not collected): GET ...?applied=true, or the
    # namespace's own setting from a broker without that GET (ttl.py applied_ttl_s)
    message_ttl_s: int | None = None
    namespace_message_ttl_s: int | None = None

    @property
    def primary(self) -> CursorRead:
        for r in self.reads:
            if r.number == PRIMARY:
                return r
        return CursorRead(PRIMARY, None, None, self.cursors)

    def now_ms(self, as_of_ms: int | None) -> int | None:
        """The instant this cluster's window speaks for: when it was read, else the run's reference time (a
        request pending then, or data unsnapshotted then, is judged at that instant, not minutes later)."""
        answered = self.primary.answered_ms
        return answered if answered is not None else as_of_ms

    def all_reads(self) -> tuple[CursorRead, ...]:
        return self.reads if any(r.number == PRIMARY for r in self.reads) else (self.primary, *self.reads)

    def replicates_to(self, remote: str) -> bool:
        return remote in self.replication or self.replicator(remote) is not None

    def replicator(self, remote: str) -> Cursor | None:
        for c in self.cursors.values():
            if c.kind == REPLICATOR and c.remote_cluster == remote:
                return c
        return None

    def subscriptions(self) -> dict[str, Cursor]:
        return {n: c for n, c in self.cursors.items() if c.kind == SUBSCRIPTION}

    def is_replicated(self, subscription: str) -> bool:
        c = self.cursors.get(subscription)
        return subscription in self.replicated_subscriptions or bool(c and c.replicated)


@dataclass(frozen=True)
class Settings:
    run_id: str = ""
    as_of_ms: int | None = None
    thresholds: checks.Thresholds = checks.Thresholds()
    max_acknowledge: int = MAX_ACKNOWLEDGE
    # cluster -> its brokers' version (estate-declared, else admin-reported): picks the snapshot cache rule
    broker_versions: Mapping[str, str] = field(default_factory=dict)
    snapshot_cache_size: int = snapshot_cache.DEFAULT_SIZE

    def cache_model(self, cluster: str) -> tuple[snapshot_cache.CacheModel, str | None]:
        """The cache rule of `cluster`'s brokers, and a coverage note when it had to be assumed."""
        version = self.broker_versions.get(cluster)
        model = snapshot_cache.broker_cache_model(version, self.snapshot_cache_size)
        if model is not None:
            return model, None
        why = "broker version unknown" if version is None else f"broker version {version!r} does not say"
        return snapshot_cache.CacheModel(snapshot_cache.SPREAD, self.snapshot_cache_size), \
            f"{why}: PIP-33 expectation assumes the apache/pulsar#25044 snapshot cache"




def read_after(a: ClusterSide, b: ClusterSide) -> bool | None:
    """Was a's window read at or after b's (None: an instant is unknown)."""
    ta, tb = a.primary.answered_ms, b.primary.answered_ms
    return None if ta is None or tb is None else ta >= tb
