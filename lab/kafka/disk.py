"""What a simulated broker's log dirs hold at one instant, in the real on-disk formats (written only through
audit/systems/kafka/formats: encode_meta_properties, encode_offsets_checkpoint, encode_leader_epoch_checkpoint,
encode_partition_metadata; segments are the batches' own bytes from encode_batch).

Per log dir (core/.../log/LogManager.scala, core/.../server/ReplicaManager.scala @1eb7644349c): meta.properties
(version 0 with broker.id in ZooKeeper mode, version 1 with node.id and directory.id in KRaft), the four offset
checkpoints as the broker last wrote them (the high watermark every replica.high.watermark.checkpoint.interval.ms,
recovery points and log starts every log.flush.offset.checkpoint.interval.ms; log-start-offset-checkpoint only
lists logs whose start is above their first segment's base; cleaner-offset-checkpoint is the empty file the log
cleaner creates, no topic being compacted), and per partition `<topic>-<p>/` its leader-epoch-checkpoint (written
on every change), partition.metadata and its segments `<base offset, 20 digits>.log` (the active one last, possibly
empty). Index files are left out (the scanner does not read them).

A down broker's disk is what it held when it stopped (after a power loss: what had reached the disk)."""
from __future__ import annotations

import random
from dataclasses import dataclass

from audit.systems.kafka.formats.checkpoint import encode_leader_epoch_checkpoint, encode_offsets_checkpoint
from audit.systems.kafka.formats.properties import encode_meta_properties, encode_partition_metadata
from lab.kafka.cluster import Cluster
from lab.kafka.log import Batch, ReplicaLog

LOG_DIR_ROOT = "/var/lib/kafka"


def log_dir_path(index: int) -> str:
    """The simulated broker's log.dirs entry (what scan.json names as the original path)."""
    return f"{LOG_DIR_ROOT}/data" if index == 0 else f"{LOG_DIR_ROOT}/data-{index}"


@dataclass(frozen=True)
class ReplicaSnap:
    """One replica as its disk held it at the scan: the ground truth compares these."""

    topic: str
    partition: int
    broker: int
    log_dir: int
    batches: tuple[Batch, ...]
    log_start: int                # as the files show it (evidence_log_start)
    leo: int
    hw: int                       # the broker's in-memory high watermark (not on disk)
    hw_ckpt: int | None           # replication-offset-checkpoint
    epochs: tuple[tuple[int, int], ...]

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)


@dataclass(frozen=True)
class BrokerImage:
    broker: int
    at_ms: int
    alive: bool
    dirs: tuple[dict[str, bytes], ...]       # per log dir: relative path -> bytes
    replicas: dict[tuple[str, int], ReplicaSnap]


def _offsets(entries: list[tuple[str, int, int]], rng: random.Random) -> bytes:
    rng.shuffle(entries)   # the broker writes them in its map's order, not sorted
    return encode_offsets_checkpoint(entries)


def capture(cluster: Cluster, broker_id: int) -> BrokerImage:
    b = cluster.brokers[broker_id]
    now = cluster.clock.now
    rng = random.Random(f"{cluster.name}:{broker_id}:{now}")
    dirs: list[dict[str, bytes]] = []
    for d in range(b.dirs):
        if cluster.zookeeper:
            meta = encode_meta_properties(version=0, cluster_id=cluster.cluster_id, broker_id=broker_id,
                                          written_at_ms=cluster.start_ms)
        else:
            meta = encode_meta_properties(version=1, cluster_id=cluster.cluster_id, node_id=broker_id,
                                          directory_id=b.directory_ids[d], written_at_ms=cluster.start_ms)
        logs = sorted((log for log in b.logs.values() if log.log_dir == d), key=lambda x: (x.topic, x.partition))
        files = {"meta.properties": meta,
                 "replication-offset-checkpoint": _offsets(
                     [(x.topic, x.partition, x.hw_ckpt) for x in logs if x.hw_ckpt is not None], rng),
                 "recovery-point-offset-checkpoint": _offsets(
                     [(x.topic, x.partition, x.rp_ckpt) for x in logs if x.rp_ckpt is not None], rng),
                 "log-start-offset-checkpoint": _offsets(
                     [(x.topic, x.partition, x.ls_ckpt) for x in logs if x.ls_ckpt is not None], rng),
                 "cleaner-offset-checkpoint": b""}
        for log in logs:
            files.update(_partition_files(cluster, log))
        dirs.append(files)
    replicas = {key: ReplicaSnap(log.topic, log.partition, broker_id, log.log_dir, tuple(log.batches()),
                                 evidence_log_start(log), log.leo, log.hw, log.hw_ckpt, tuple(log.cache.entries))
                for key, log in b.logs.items()}
    return BrokerImage(broker_id, now, b.alive, tuple(dirs), replicas)


def evidence_log_start(log: ReplicaLog) -> int:
    """The log start the files show: log-start-offset-checkpoint when it lists the log (it is written every
    minute, so it may trail the broker's), else the first segment's base offset."""
    return max(log.segments[0].base, log.ls_ckpt if log.ls_ckpt is not None else 0)


def _partition_files(cluster: Cluster, log: ReplicaLog) -> dict[str, bytes]:
    pdir = f"{log.topic}-{log.partition}"
    out = {f"{pdir}/leader-epoch-checkpoint": encode_leader_epoch_checkpoint(log.cache.entries),
           f"{pdir}/partition.metadata": encode_partition_metadata(cluster.topics[log.topic].topic_id)}
    for seg in log.segments:
        out[f"{pdir}/{seg.base:020d}.log"] = b"".join(batch.data for batch in seg.batches)
    return out
