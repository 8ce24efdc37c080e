"""Geo-replicators: one `pulsar.repl.<remote>` cursor per remote cluster reading the local topic in order
(PersistentReplicator.replicateEntries):

- a replicated-subscription marker whose `replicated_from` is this replicator's remote is handed to the
  topic's PIP-33 controller when the replicator *reads* it (so a backlogged replicator answers late);
- entries with `replicated_from` set are acked and skipped (no ping-pong), so are entries whose
  `replicate_to` excludes the remote and, with a namespace message TTL, entries older than the TTL when read
  (GeoPersistentReplicator.replicateEntries: MessageImpl.isExpired);
- everything else is written on the remote with `replicated_from = <local cluster>`, the same producer name,
  sequence id and publish time, and on recent Pulsar the origin position property.

A replicator has a send rate (entries per second; None = unthrottled), a one-way latency and a connection
state: a disconnected replicator reads nothing, so its backlog grows and its markers wait; reconnected, it goes on
from its readPosition."""
from __future__ import annotations

from audit.systems.pulsar.formats.markers import SNAPSHOT_REQUEST, SNAPSHOT_RESPONSE, UPDATE
from lab.pulsar.model import Cursor, Poller
from lab.pulsar.topic import Topic

TICK_MS = 100
MAX_READ = 500  # entries one read may return (managedLedger read batch)
PROCESSED_MARKERS = (SNAPSHOT_REQUEST, SNAPSHOT_RESPONSE, UPDATE)
RATE_WINDOW_MS = 10_000


class Replicator:
    def __init__(self, local: Topic, remote: Topic, latency_ms: int, rate_per_s: int | None, port: int):
        self.local, self.remote = local, remote
        self.remote_name = remote.cluster_name
        self.latency_ms, self.rate_per_s = latency_ms, rate_per_s
        now = local.clock.now
        self.cursor = Cursor.at_latest(local.ml, f"pulsar.repl.{self.remote_name}", now, local.cluster.ids.new())
        self.connected = True
        self.connected_since = now
        self.disconnected_at: int | None = None
        self.port = port
        self._in_flight = False
        self._tokens = 0.0
        self._tokens_at = now
        self.sent_times: list[int] = []
        self.expired: list[int] = []  # entries acked unsent because their TTL had passed when read
        self.poller: Poller | None = None
        local.replicators[self.remote_name] = self

    def start(self, first_ms: int, until_ms: int) -> None:
        self.poller = Poller(self.local.clock, TICK_MS, self.tick, until_ms)
        self.local.readers.append(self.poller)
        self.poller.wake(first_ms - self.local.clock.now)

    def disconnect(self) -> None:
        if self.connected:
            self.connected = False
            self.disconnected_at = self.local.clock.now

    def reconnect(self) -> None:
        """PersistentReplicator.readEntries on a new producer: rewind to markDeletePosition + 1 (the managed cursor
        skips what was individually acked) and read on."""
        if not self.connected:
            self.connected = True
            self.connected_since = self.local.clock.now
            self.cursor.read_idx = self.cursor.mdp_idx + 1
            self.poller.wake()

    def _quota(self) -> int:
        """Token bucket of the replicator dispatch rate (a one-second burst at most)."""
        if self.rate_per_s is None:
            return MAX_READ
        now = self.local.clock.now
        self._tokens = min(float(max(1, self.rate_per_s)),
                           self._tokens + self.rate_per_s * (now - self._tokens_at) / 1000)
        self._tokens_at = now
        return int(self._tokens)

    def tick(self) -> bool:
        """One read; True while there is more to read or a send in flight."""
        if not self.connected:
            return False
        if self._in_flight:
            return True
        quota = self._quota()
        ml, now = self.local.ml, self.local.clock.now
        end = len(ml.entries)
        idx = self.cursor.read_idx
        sends: list[int] = []
        ttl = self.local.settings.message_ttl_ms
        while idx < end and len(sends) < quota and idx - self.cursor.read_idx < MAX_READ:
            entry = ml.entries[idx]
            if self.cursor.is_acked(idx):
                idx += 1
                continue
            if entry.marker_type in PROCESSED_MARKERS and entry.replicated_from == self.remote_name:
                self.local.ensure_controller().received_marker(entry, idx)
            if entry.replicated_from is not None or (
                    entry.replicate_to is not None and self.remote_name not in entry.replicate_to):
                self.cursor.ack(idx, now)
            elif ttl and now > entry.publish_ms + ttl:
                self.expired.append(idx)
                self.cursor.ack(idx, now)
            else:
                sends.append(idx)
            idx += 1
        self.cursor.read_idx = idx
        if self.rate_per_s is not None:
            self._tokens -= len(sends)
        if sends:
            self._in_flight = True
            self.local.clock.after(self.latency_ms, self._delivered, sends)
        return bool(sends) or idx < len(ml.entries)

    def _delivered(self, sends: list[int]) -> None:
        """The remote persisted the copies (send receipts): write them there, then ack them here."""
        now = self.local.clock.now
        add_position = self.local.settings.recent_pulsar
        for idx in sends:
            original = self.local.ml.entries[idx]
            self.remote.receive_replicated(original, self.local.cluster_name, add_position)
            self.cursor.ack(idx, now)
            self.sent_times.append(now)
        self._in_flight = False
        self.poller.wake()

    # -- stats ----------------------------------------------------------------------------------
    def backlog(self) -> int:
        return self.cursor.backlog()

    def delay_s(self, now: int) -> int:
        """replicationDelayInSeconds: age of the oldest entry still waiting."""
        ml = self.local.ml
        for idx in range(self.cursor.mdp_idx + 1, len(ml.entries)):
            if idx not in self.cursor.acked:
                return max(0, (now - ml.entries[idx].publish_ms) // 1000)
        return 0

    def rate_out(self, now: int) -> float:
        recent = sum(1 for t in self.sent_times[-2000:] if now - t <= RATE_WINDOW_MS)
        return recent * 1000.0 / RATE_WINDOW_MS
