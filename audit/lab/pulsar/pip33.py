"""PIP-33 replicated subscriptions, as docs/formats/pulsar.md §2.6 describes them (ReplicatedSubscriptionsController,
ReplicatedSubscriptionsSnapshotBuilder, ReplicatedSubscriptionSnapshotCache as the cluster's broker version has it):

1. every snapshot period the controller of a topic with replicated subscriptions writes a SNAPSHOT_REQUEST,
   unless no data was added since the start of the last completed snapshot or a replicator is disconnected;
2. a remote, when its replicator back to the requester reads the request copy, writes a RESPONSE with its last
   position, replicate_to = [requester];
3. the requester collects one response per remote (a second round with more than one remote), then writes
   SNAPSHOT {local_message_id = local position of the last response, clusters = responses}, replicate_to =
   [itself]; a pending snapshot is dropped after the timeout;
4. a replicated subscription's dispatcher caches the SNAPSHOT markers it reads, evicting by the rule of the
   cluster's broker version (lab key `broker_versions`; snapshots.py, shared with consumers.py);
5. when its markDeletePosition advances, the snapshots at or below it are popped and the last one popped
   becomes an UPDATE marker; a remote applies it as a cumulative ack of its own position."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from audit.formats.pulsar import markers as mk
from audit.lab.pulsar.consumers import Subscription
from audit.lab.pulsar.model import Entry, Pos
from audit.lab.pulsar.snapshots import MarkerInfo
from audit.lab.pulsar.topic import Topic


@dataclass
class PendingSnapshot:
    snapshot_id: str
    start_ms: int
    remotes: tuple[str, ...]
    two_rounds: bool
    round: int = 1
    responses: dict[str, Pos] = field(default_factory=dict)


@dataclass
class SnapshotRecord:
    """What the ground truth needs to know about each snapshot this controller started."""
    snapshot_id: str
    start_ms: int
    request_positions: list[Pos] = field(default_factory=list)
    completed_ms: int | None = None
    timed_out_ms: int | None = None


class Controller:
    def __init__(self, topic: Topic):
        self.topic = topic
        self.pending: dict[str, PendingSnapshot] = {}
        self.records: dict[str, SnapshotRecord] = {}
        self.last_completed_start_ms: int | None = None
        self.updates_applied: list[tuple[str, str, Pos]] = []  # (subscription, from cluster, position)
        s = topic.settings
        self.frequency_ms, self.timeout_ms = s.snapshot_frequency_ms, s.snapshot_timeout_ms

    @property
    def local(self) -> str:
        return self.topic.cluster_name

    def start(self, first_ms: int, until_ms: int) -> None:
        self.topic.clock.every(first_ms, self.frequency_ms, self.tick, until_ms)

    def _marker(self, kind: int, payload: bytes, info: MarkerInfo, replicate_to: tuple[str, ...] | None) -> Entry:
        return self.topic.write_marker(kind, payload, info, replicate_to)

    def tick(self) -> None:
        now = self.topic.clock.now
        for sid, p in list(self.pending.items()):
            if now - p.start_ms > self.timeout_ms:
                del self.pending[sid]
                self.records[sid].timed_out_ms = now
        if not self.topic.has_replicated_subscription() or not self.topic.replicators:
            return
        last_data = self.topic.last_data_ms
        if self.last_completed_start_ms is not None and (last_data is None or last_data < self.last_completed_start_ms):
            return  # nothing new since the last complete snapshot
        if any(not r.connected for r in self.topic.replicators.values()):
            return
        sid = str(uuid.UUID(int=self.topic.rng.getrandbits(128), version=4))
        remotes = tuple(sorted(self.topic.replicators))
        self.pending[sid] = PendingSnapshot(sid, now, remotes, two_rounds=len(remotes) > 1)
        self.records[sid] = SnapshotRecord(sid, now)
        self._request(sid)

    def _request(self, sid: str) -> None:
        entry = self._marker(mk.SNAPSHOT_REQUEST, mk.encode_snapshot_request(sid, self.local),
                             MarkerInfo(mk.SNAPSHOT_REQUEST, sid, source_cluster=self.local), None)
        self.records[sid].request_positions.append(entry.position)

    def received_marker(self, entry: Entry, idx: int) -> None:
        """A marker from a remote, as this topic's replicator back to that remote reads it."""
        info: MarkerInfo = entry.marker
        if info.kind == mk.SNAPSHOT_REQUEST:
            last = self.topic.ml.last_position()
            self._marker(mk.SNAPSHOT_RESPONSE, mk.encode_snapshot_response(info.snapshot_id, self.local, *last),
                         MarkerInfo(mk.SNAPSHOT_RESPONSE, info.snapshot_id, clusters=((self.local, last),)),
                         (info.source_cluster,))
        elif info.kind == mk.SNAPSHOT_RESPONSE:
            self._response(info, entry.position)
        elif info.kind == mk.UPDATE:
            self._update(info, entry.replicated_from)

    def _response(self, info: MarkerInfo, position: Pos) -> None:
        p = self.pending.get(info.snapshot_id)
        if p is None:
            return  # timed out (or not ours)
        (cluster, pos), = info.clusters
        p.responses.setdefault(cluster, pos)
        if len(p.responses) < len(p.remotes):
            return
        if p.two_rounds and p.round == 1:
            p.round = 2
            p.responses.clear()
            self._request(p.snapshot_id)
            return
        clusters = tuple(sorted(p.responses.items()))
        self._marker(mk.SNAPSHOT, mk.encode_snapshot(p.snapshot_id, position, dict(clusters)),
                     MarkerInfo(mk.SNAPSHOT, p.snapshot_id, clusters=clusters, local=position), (self.local,))
        del self.pending[p.snapshot_id]
        self.records[p.snapshot_id].completed_ms = self.topic.clock.now
        self.last_completed_start_ms = p.start_ms

    def _update(self, info: MarkerInfo, from_cluster: str) -> None:
        mine = dict(info.clusters).get(self.local)
        if mine is None:
            return
        sub = self.topic.subscriptions.get(info.subscription)
        if sub is None:
            sub = Subscription(self.topic, info.subscription, replicated=True)  # created at Latest
        self.updates_applied.append((info.subscription, from_cluster, mine))
        idx = self.topic.ml.floor_index(mine)
        if sub.cursor.ack_cumulative(idx, self.topic.clock.now):
            sub.mark_delete_advanced()

    def local_subscription_updated(self, subscription: str, snapshot: MarkerInfo) -> None:
        info = MarkerInfo(mk.UPDATE, subscription=subscription, clusters=snapshot.clusters)
        self._marker(mk.UPDATE, mk.encode_update(subscription, dict(snapshot.clusters)), info, None)
