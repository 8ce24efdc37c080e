"""One topic on one cluster of the Pulsar lab: its managed ledger, subscriptions, replicators and PIP-33
controller, and the three ways an entry gets written (a local producer, a replicator, a marker).

The topic is the hub the other parts hang off: consumers.py (subscriptions), replication.py (replicators) and
pip33.py (the controller) import this module, never the reverse. The topic knows them only by the roles below,
and is handed the controller's constructor (`new_controller`, pip33.Controller) to start one on demand."""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from audit.systems.pulsar.formats.entry import REPL_SOURCE_POSITION
from lab.pulsar.model import MARKER_PRODUCER, Clock, ClusterLedgerIds, Cursor, Entry, ManagedLedger, Poller

METADATA_OVERHEAD = 42  # bytes of MessageMetadata before the payload (size accounting only)


class SubscriptionRole(Protocol):
    """A subscription of the topic (consumers.Subscription), as the topic reads it."""
    name: str
    replicated: bool
    cursor: Cursor


class ReplicatorRole(Protocol):
    """A replicator of the topic to one remote (replication.Replicator), as the topic reads it."""
    connected: bool
    cursor: Cursor


class SnapshotController(Protocol):
    """The topic's PIP-33 controller (pip33.Controller): what the world, the replicators and the subscriptions
    call on the one `Topic.ensure_controller()` returns."""

    def start(self, first_ms: int, until_ms: int) -> None: ...

    def received_marker(self, entry: Entry, idx: int) -> None: ...

    def local_subscription_updated(self, subscription: str, snapshot: Any) -> None: ...


@dataclass
class ClusterState:
    name: str
    ids: ClusterLedgerIds
    broker_ip: str
    topics: dict[str, "Topic"] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicSettings:
    recent_pulsar: bool = True  # replicators add __MSG_PROP_REPL_SOURCE_POSITION (apache/pulsar #23697)
    guava_ranges: bool = False  # individuallyDeletedMessages spelled "(a..b], (c..d]" (Guava TreeRangeSet)
    snapshot_frequency_ms: int = 1000
    snapshot_timeout_ms: int = 30_000
    snapshot_cache_size: int = 10
    message_ttl_ms: int = 0  # the namespace's messageTTLInSeconds (0: none): a replicator drops expired entries
    # (cluster, snapshot cache rule of its broker version: "newest" | "spread"); config.py derives it
    snapshot_cache_models: tuple[tuple[str, str], ...] = ()
    # (cluster, where its broker version creates a subscription an UPDATE names but the topic lacks:
    # "earliest" | "latest", pip33.update_creates_at_earliest); unlisted clusters: "earliest" (the default 3.0.12)
    missing_subscription_at: tuple[tuple[str, str], ...] = ()


class Topic:
    def __init__(self, clock: Clock, cluster: ClusterState, name: str, settings: TopicSettings,
                 rng: random.Random, max_entries: int, new_controller: Callable[[Topic], SnapshotController]):
        self.clock, self.cluster, self.name, self.settings, self.rng = clock, cluster, name, settings, rng
        self._new_controller = new_controller
        self.ml = ManagedLedger(cluster.ids, rng, clock.now, max_entries)
        self.created_ms = clock.now
        self.subscriptions: dict[str, SubscriptionRole] = {}
        self.replicators: dict[str, ReplicatorRole] = {}
        self.controller: SnapshotController | None = None
        self.last_data_ms: int | None = None  # last non-marker entry added (local or replicated)
        self.msg_in = 0
        self.bytes_in = 0
        self.in_times: list[int] = []
        self.remote_in: dict[str, int] = {}
        self.readers: list[Poller] = []  # replicators and dispatchers waiting for new entries
        self.until_ms: int | None = None  # the end of the simulation (timers started later run until then)
        cluster.topics[name] = self

    @property
    def cluster_name(self) -> str:
        return self.cluster.name

    def _added(self, entry: Entry, size: int) -> None:
        if not entry.is_marker:
            self.last_data_ms = self.clock.now
        self.msg_in += 1
        self.bytes_in += size
        self.in_times.append(self.clock.now)
        for reader in self.readers:
            reader.wake()

    def publish(self, producer: str, sequence_id: int, payload: bytes, properties: tuple[tuple[str, str], ...],
                deliver_at_ms: int | None = None, replicate_to: tuple[str, ...] | None = None) -> Entry:
        """A message from a producer connected to this cluster (`replicate_to`: the message's replication clusters,
        MessageBuilder.setReplicationClusters; None: every cluster the topic replicates to)."""
        size = len(payload) + METADATA_OVERHEAD
        entry = self.ml.append(self.clock.now, size, producer_name=producer, sequence_id=sequence_id,
                               publish_ms=self.clock.now, payload=payload, properties=properties,
                               deliver_at_ms=deliver_at_ms, replicate_to=replicate_to)
        entry.ident = (self.cluster_name, entry.ledger_id, entry.entry_id)
        self._added(entry, size)
        return entry

    def receive_replicated(self, original: Entry, from_cluster: str, add_source_position: bool) -> Entry:
        """The copy a remote replicator's producer writes here: same producer, sequence id, publish time and
        payload, `replicated_from` set, and on recent Pulsar the origin position as a property."""
        props = original.properties
        if add_source_position:
            props = props + ((REPL_SOURCE_POSITION, f"{original.ledger_id}:{original.entry_id}"),)
        size = len(original.payload) + METADATA_OVERHEAD
        entry = self.ml.append(self.clock.now, size, producer_name=original.producer_name,
                               sequence_id=original.sequence_id, publish_ms=original.publish_ms,
                               payload=original.payload, properties=props, replicated_from=from_cluster,
                               replicate_to=original.replicate_to, marker_type=original.marker_type,
                               marker=original.marker, deliver_at_ms=original.deliver_at_ms)
        entry.ident = original.ident
        self.remote_in[from_cluster] = self.remote_in.get(from_cluster, 0) + 1
        self._added(entry, size)
        return entry

    def write_marker(self, marker_type: int, payload: bytes, info: Any,
                     replicate_to: tuple[str, ...] | None) -> Entry:
        size = len(payload) + METADATA_OVERHEAD
        entry = self.ml.append(self.clock.now, size, producer_name=MARKER_PRODUCER, sequence_id=0,
                               publish_ms=self.clock.now, payload=payload, replicate_to=replicate_to,
                               marker_type=marker_type, marker=info)
        self._added(entry, size)
        return entry

    def ensure_controller(self) -> SnapshotController:
        """Receiving a replicated-subscription marker force-starts the controller (PersistentTopic)."""
        if self.controller is None:
            self.controller = self._new_controller(self)
        return self.controller

    def has_replicated_subscription(self) -> bool:
        return any(s.replicated for s in self.subscriptions.values())

    def replicated_cursor_floor(self) -> int:
        """The dump window's lower bound as an index: the smallest markDeletePosition of any replicated
        subscription or replicator cursor."""
        idxs = [s.cursor.mdp_idx for s in self.subscriptions.values() if s.replicated]
        idxs += [r.cursor.mdp_idx for r in self.replicators.values()]
        return min(idxs) if idxs else len(self.ml.entries) - 1
