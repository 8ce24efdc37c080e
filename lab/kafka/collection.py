"""When each cluster of the world is read, and what each read saw (captured at its own instant while the
simulation runs on):

- the admin documents at the collection's start (`admin_at_ms`): the cluster as every live broker would answer
  Metadata, DescribeLogDirs, ListOffsets and OffsetForLeaderEpoch then (admin_server.ServedCluster);
- MirrorMaker 2 flows into the cluster half a second later (mm2.py captures the topics and groups);
- broker after broker (by id), `collection_gap_s` apart, starting a second after the admin read: each broker's log
  dirs as its disk held them (disk.py).

Every cluster's collection ends before as_of: it starts `scan_span_s` (the widest cluster's brokers times the gap,
plus 5 s) before it."""
from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from lab.kafka.admin_server import ServedBroker, ServedCluster, ServedPartition, ServedReplica
from lab.kafka.cluster import Cluster
from lab.kafka.disk import BrokerImage, capture, log_dir_path
from lab.kafka.mm2_read import FlowRead, read_flow

MM2_READ_DELAY_MS = 500
FIRST_SCAN_DELAY_MS = 1_000


@dataclass(frozen=True)
class PartitionView:
    """The controller's view of a partition when the admin documents were read."""

    leader: int | None
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader_hw: int | None          # the leader's in-memory high watermark (ListOffsets LATEST)


@dataclass
class Collection:
    cluster: str
    admin_at_ms: int
    mm2_at_ms: int
    scan_at_ms: dict[int, int]
    images: dict[int, BrokerImage] = field(default_factory=dict)
    served: ServedCluster | None = None
    partitions: dict[tuple[str, int], PartitionView] = field(default_factory=dict)
    mm2: dict[str, FlowRead] = field(default_factory=dict)  # source alias -> what the MM2 reader saw


def schedule_collection(cluster: Cluster, as_of_ms: int, mirrors) -> Collection:
    """Plan (on the cluster's clock) every read of its collection; `mirrors`: the world's MirrorMaker 2 flows."""
    start = as_of_ms - cluster.config.scan_span_s() * 1000
    gap = cluster.config.collection_gap_s * 1000
    col = Collection(cluster.name, start, start + MM2_READ_DELAY_MS,
                     {b: start + FIRST_SCAN_DELAY_MS + i * gap for i, b in enumerate(sorted(cluster.brokers))})
    clock = cluster.clock
    clock.at(col.admin_at_ms, _read_admin, cluster, col)
    for flow in mirrors:
        if flow.target is cluster:
            clock.at(col.mm2_at_ms, lambda flow=flow: col.mm2.__setitem__(flow.alias, read_flow(flow)))
    for broker, at in col.scan_at_ms.items():
        clock.at(at, lambda broker=broker: col.images.__setitem__(broker, capture(cluster, broker)))
    return col


def _read_admin(cluster: Cluster, col: Collection) -> None:
    col.served = served_state(cluster)
    for key, pm in cluster.partitions.items():
        log = cluster.leader_log(pm)
        col.partitions[key] = PartitionView(pm.leader, pm.leader_epoch, pm.replicas, tuple(sorted(pm.isr)),
                                            None if log is None else log.hw)


def served_state(cluster: Cluster) -> ServedCluster:
    """The cluster as its live brokers answer the admin protocol now (a dead broker is not in Metadata and
    answers nothing; its replicas are offline)."""
    live = sorted(b for b, broker in cluster.brokers.items() if broker.alive and broker.registered)
    brokers = {b: ServedBroker(b, [log_dir_path(d) for d in range(cluster.brokers[b].dirs)]) for b in live}
    state = ServedCluster(cluster_id=cluster.cluster_id, controller=live[0] if live else -1, brokers=brokers)
    for name, topic in cluster.topics.items():
        state.topic_ids[name] = uuid.UUID(bytes=_uuid_bytes(topic.topic_id))
    for key, pm in cluster.partitions.items():
        state.partitions[key] = ServedPartition(
            pm.topic, pm.partition, pm.leader if pm.leader is not None else -1, pm.leader_epoch, list(pm.replicas),
            sorted(pm.isr), offline=[r for r in pm.replicas if r not in brokers])
        for b in pm.replicas:
            if b not in brokers:
                continue
            broker = cluster.brokers[b]
            log = broker.logs[key]
            size = sum(seg.size for seg in log.segments)
            state.replicas[(b, pm.topic, pm.partition)] = ServedReplica(
                log_dir_path(log.log_dir), log.log_start, log.leo, log.hw, [tuple(e) for e in log.cache.entries],
                size=size, offset_lag=max(log.hw - log.leo, 0),
                leader_epoch=broker.known_epoch.get(key, pm.leader_epoch))
    return state


def _uuid_bytes(topic_id: str) -> bytes:
    return base64.urlsafe_b64decode(topic_id + "==")
