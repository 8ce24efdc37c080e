"""PIP-33 replicated subscriptions, as docs/formats/pulsar.md §2.6 describes them (ReplicatedSubscriptionsController,
ReplicatedSubscriptionsSnapshotBuilder, ReplicatedSubscriptionSnapshotCache as the cluster's broker version has it):

1. every snapshot period the controller of a topic with replicated subscriptions writes a SNAPSHOT_REQUEST,
   unless no data was added since the start of the last completed snapshot or a replicator is disconnected;
2. a remote, when its replicator back to the requester reads the request copy, writes a RESPONSE with its last
   position, replicate_to = [requester];
3. the requester keeps the first response of each remote (putIfAbsent, never cleared: with more than one remote
   a second round only waits for every remote again), then writes SNAPSHOT {local_message_id = local position of
   the last response, clusters = the kept responses}, replicate_to = [itself]; a pending snapshot is dropped
   after the timeout;
4. a replicated subscription's dispatcher caches the SNAPSHOT markers it reads, evicting by the rule of the
   cluster's broker version (lab key `broker_versions`; snapshots.py, shared with consumers.py);
5. when its markDeletePosition advances, the snapshots at or below it are popped and the last one popped
   becomes an UPDATE marker; a remote applies it as a cumulative ack of its own position. A remote without
   the subscription creates it as its broker version does (`update_creates_at_earliest`)."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from audit.systems.pulsar.domain.snapshot_cache import parse_version
from audit.systems.pulsar.formats import markers as mk
from lab.pulsar.consumers import Subscription
from lab.pulsar.model import Entry, Pos
from lab.pulsar.snapshots import MarkerInfo
from lab.pulsar.topic import Topic


WAIT, NEXT_ROUND, COMPLETE = "wait", "next-round", "complete"  # what one response leaves the builder to do
EARLIEST, LATEST = "earliest", "latest"
# apache/pulsar#20767: a missing subscription is created at Earliest and acked at the UPDATE's position (before:
# at Latest, the UPDATE dropped). The first release of each line that has it; lines after 3.0 all do.
EARLIEST_SINCE = {(2, 10): 5, (2, 11): 2, (3, 0): 2}
EARLIEST_LINE = (3, 1)


def update_creates_at_earliest(version: str) -> bool:
    """Whether a broker of `version` creates a missing subscription at Earliest (else at Latest). A line's `x`
    patch stands for its newest release."""
    major, minor, patch = parse_version(version)
    line = (major, minor)
    if line in EARLIEST_SINCE:
        return patch is None or patch >= EARLIEST_SINCE[line]
    return line >= EARLIEST_LINE


@dataclass
class PendingSnapshot:
    """One snapshot attempt as ReplicatedSubscriptionsSnapshotBuilder keeps it: the first response of each
    remote (putIfAbsent; the second round does not clear them, it only waits for every remote again)."""
    snapshot_id: str
    start_ms: int
    remotes: tuple[str, ...]
    two_rounds: bool
    round: int = 1
    responses: dict[str, Pos] = field(default_factory=dict)
    missing: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.missing = set(self.remotes)

    def received(self, cluster: str, position: Pos) -> str:
        """One RESPONSE: WAIT for more, start the NEXT_ROUND, or COMPLETE (write the SNAPSHOT)."""
        self.responses.setdefault(cluster, position)
        self.missing.discard(cluster)
        if self.missing:
            return WAIT
        if self.two_rounds and self.round == 1:
            self.round = 2
            self.missing = set(self.remotes)
            return NEXT_ROUND
        return COMPLETE


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
        self.ticking = False
        s = topic.settings
        self.frequency_ms, self.timeout_ms = s.snapshot_frequency_ms, s.snapshot_timeout_ms

    @property
    def local(self) -> str:
        return self.topic.cluster_name

    def start(self, first_ms: int, until_ms: int) -> None:
        self.ticking = True
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
        step = p.received(cluster, pos)
        if step == WAIT:
            return
        if step == NEXT_ROUND:
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
            earliest = dict(self.topic.settings.missing_subscription_at).get(self.local, EARLIEST) == EARLIEST
            sub = Subscription(self.topic, info.subscription, replicated=True, at_earliest=earliest)
            if not self.ticking and self.topic.until_ms is not None:
                # a replicated subscription now exists: the topic's snapshot timer starts (checkReplicated-
                # SubscriptionControllerState)
                self.start(self.topic.clock.now + self.frequency_ms, self.topic.until_ms)
            if not earliest:
                return  # brokers before #20767 only create it: this UPDATE is not applied
        self.updates_applied.append((info.subscription, from_cluster, mine))
        idx = self.topic.ml.floor_index(mine)
        if sub.cursor.ack_cumulative(idx, self.topic.clock.now):
            sub.mark_delete_advanced()

    def local_subscription_updated(self, subscription: str, snapshot: MarkerInfo) -> None:
        info = MarkerInfo(mk.UPDATE, subscription=subscription, clusters=snapshot.clusters)
        self._marker(mk.UPDATE, mk.encode_update(subscription, dict(snapshot.clusters)), info, None)
