"""A simulated Kafka cluster: brokers with their log dirs and replica logs, topics and the controller's view of
each partition (leader, leader epoch, ISR), and the brokers' periodic work (checkpoint files, page cache
writeback, retention, ISR expiration).

Broker lifecycle (upstream: core/.../server/ReplicaManager.scala, core/.../cluster/Partition.scala,
core/.../log/LogManager.scala @1eb7644349c; the controller in ZooKeeper mode: core/.../controller/
KafkaController.scala and PartitionStateMachine; KRaft: metadata/.../PartitionChangeBuilder.java):
- a broker that dies stops at once; the controller notices after the session timeout (a quick restart within it
  goes unnoticed, as the seed's scenario 1 needs), removes it from every ISR it is in (never emptying an ISR:
  the last member stays) and elects a new leader among the live ISR members in replica order; ZooKeeper mode
  bumps the leader epoch on every controller change of leader or ISR, KRaft only on a leader change;
- with no live ISR member a partition is offline; unclean.leader.election.enable lets the controller elect
  any live replica (ISR = that replica);
- a restarting broker loads its logs (after a power loss only what reached the disk: Kafka's flushes and the
  page cache writeback), takes its high watermark from replication-offset-checkpoint (capped by the log end)
  and becomes leader or follower of each partition as the controller says."""
from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from typing import Any

from lab.kafka.clock import Clock, stream
from lab.kafka.config import HIGH_WATERMARK, ZOOKEEPER, ClusterSpec, KafkaLabConfig
from lab.kafka.log import ReplicaLog

WRITEBACK_TICK_MS = 5_000       # vm.dirty_writeback_centisecs = 500


def java_uuid(rng) -> str:
    """A random Uuid as Kafka prints it: url-safe base64 of 16 bytes without padding (never the zero uuid)."""
    raw = uuid.UUID(int=rng.getrandbits(128) | 1).bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@dataclass
class TopicConfig:
    name: str
    partitions: int
    assignments: tuple[tuple[int, ...], ...]
    min_isr: int
    unclean: bool
    topic_id: str
    internal: bool = False
    segment_bytes: int | None = None     # the topic's segment.bytes (None: the cluster's)


@dataclass(eq=False)
class PartitionMeta:
    """The controller's view of a partition, plus the leader's bookkeeping of its followers (Replica.scala):
    reset whenever a broker becomes leader of a new leader epoch."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    min_isr: int
    unclean: bool
    leader: int | None = None
    leader_epoch: int = 0
    isr: set[int] = field(default_factory=set)
    acting_leader: int | None = None          # the broker that ran makeLeader for leader_epoch
    epoch_start: int | None = None            # leaderEpochStartOffsetOpt
    follower_leo: dict[int, int] = field(default_factory=dict)
    last_caught_up: dict[int, int] = field(default_factory=dict)
    last_fetch_ms: dict[int, int] = field(default_factory=dict)
    last_fetch_leader_leo: dict[int, int] = field(default_factory=dict)
    waiting: list[tuple] = field(default_factory=list)   # (last offset, done(ok, batch), batch)
    elections: list[dict] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)


class Broker:
    def __init__(self, broker_id: int, dirs: int):
        self.id = broker_id
        self.dirs = dirs
        self.alive = True
        self.registered = True        # the controller's view: alive until it notices the death
        self.died_at: int | None = None
        self.logs: dict[tuple[str, int], ReplicaLog] = {}
        self.known_epoch: dict[tuple[str, int], int] = {}
        self.fetching: dict[tuple[str, int], str] = {}   # follower partitions: "truncating" | "fetching"
        self.written_back_ms = 0     # data appended before this instant is on disk (page cache writeback)
        self.directory_ids: list[str] = []
        self.quick_restart = False


class Cluster:
    def __init__(self, spec: ClusterSpec, config: KafkaLabConfig, clock: Clock, start_ms: int):
        self.spec, self.config, self.clock, self.start_ms = spec, config, clock, start_ms
        self.name = spec.name
        self.policy = spec.policy
        self.zookeeper = spec.mode == ZOOKEEPER
        rng = stream(config.seed, spec.name, "ids")
        self.cluster_id = java_uuid(rng)
        self.brokers = {b: Broker(b, spec.dirs_of(b)) for b in spec.broker_ids}
        for b in self.brokers.values():
            b.directory_ids = [java_uuid(rng) for _ in range(b.dirs)]
        self.id_rng = rng
        self.topics: dict[str, TopicConfig] = {}
        self.partitions: dict[tuple[str, int], PartitionMeta] = {}
        self.groups: dict[str, dict[tuple[str, int], int]] = {}    # committed consumer group offsets
        self.events: list[dict] = []                                # what happened, for the ground truth
        self.replication: Any = None       # replication.Replication, set by whoever builds the cluster
        self.broker_version = spec.version

    # --- topics --------------------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int, *, rf: int = 3, min_isr: int = 2, unclean: bool = False,
                     first_broker: int = 0, internal: bool = False, segment_bytes: int | None = None,
                     assignments: tuple[tuple[int, ...], ...] | None = None) -> TopicConfig:
        ids = list(self.brokers)
        if assignments is None:
            assignments = tuple(tuple(ids[(first_broker + p + r) % len(ids)] for r in range(rf))
                                for p in range(partitions))
        topic = TopicConfig(name, partitions, assignments, min_isr, unclean, java_uuid(self.id_rng), internal,
                            segment_bytes)
        self.topics[name] = topic
        for p, replicas in enumerate(assignments):
            pm = PartitionMeta(name, p, tuple(replicas), min_isr, unclean, leader=replicas[0],
                               isr=set(replicas))
            self.partitions[(name, p)] = pm
            for b in replicas:
                broker = self.brokers[b]
                placed = sum(1 for log in broker.logs.values()) % broker.dirs
                broker.logs[(name, p)] = ReplicaLog(name, p, b, placed, segment_bytes or self.config.segment_bytes,
                                                    self.clock.now)
            self.replication.become_leader(pm, replicas[0])
            for b in replicas[1:]:
                self.replication.become_follower(pm, b)
        return topic

    def log(self, broker: int, key: tuple[str, int]) -> ReplicaLog:
        return self.brokers[broker].logs[key]

    def leader_log(self, pm: PartitionMeta) -> ReplicaLog | None:
        if pm.acting_leader is None or not self.brokers[pm.acting_leader].alive:
            return None
        return self.brokers[pm.acting_leader].logs[pm.key]

    def note(self, kind: str, **fields) -> None:
        self.events.append({"at_ms": self.clock.now, "kind": kind, **fields})

    # --- periodic broker work ------------------------------------------------------------------------------
    def start_background(self, until_ms: int) -> None:
        rng = stream(self.config.seed, self.name, "phases")
        c = self.config
        for b in self.brokers.values():
            self.clock.every(self.clock.now + rng.randrange(c.hw_checkpoint_ms), c.hw_checkpoint_ms,
                             lambda b=b: self._checkpoint_hw(b), until_ms)
            self.clock.every(self.clock.now + rng.randrange(c.offset_checkpoint_ms), c.offset_checkpoint_ms,
                             lambda b=b: self._checkpoint_offsets(b), until_ms)
            self.clock.every(self.clock.now + rng.randrange(WRITEBACK_TICK_MS), WRITEBACK_TICK_MS,
                             lambda b=b: self._writeback(b), until_ms)
            self.clock.every(self.clock.now + rng.randrange(c.retention_check_s * 1000), c.retention_check_s * 1000,
                             lambda b=b: self._retention(b), until_ms)
            half = c.replica_lag_time_max_ms // 2   # ReplicaManager schedules isr-expiration at half the lag time
            self.clock.every(self.clock.now + rng.randrange(half), half, lambda b=b: self._isr_expiration(b),
                             until_ms)
        for b in self.brokers.values():   # the files exist from the broker's first start
            self._checkpoint_hw(b)
            self._checkpoint_offsets(b)

    def _checkpoint_hw(self, b: Broker) -> None:
        if b.alive:
            for log in b.logs.values():
                log.hw_ckpt = log.hw

    def _checkpoint_offsets(self, b: Broker) -> None:
        if b.alive:
            for log in b.logs.values():
                log.rp_ckpt = log.recovery_point
                # LogManager.checkpointLogStartOffsetsInDir: only logs whose start is above their first segment
                log.ls_ckpt = log.log_start if log.log_start > log.segments[0].base else None

    def _writeback(self, b: Broker) -> None:
        if b.alive:
            b.written_back_ms = self.clock.now - self.config.writeback_s * 1000

    def _retention(self, b: Broker) -> None:
        if b.alive:
            for log in b.logs.values():
                log.delete_retained(self.clock.now, self.config.retention_s * 1000)

    def _isr_expiration(self, b: Broker) -> None:
        if b.alive:
            for pm in self.partitions.values():
                if pm.acting_leader == b.id and pm.leader == b.id:
                    self.replication.maybe_shrink_isr(pm)

    # --- lifecycle -----------------------------------------------------------------------------------------
    def crash(self, broker: int, *, power_loss: bool = False, noticed: bool = True) -> None:
        """The broker process stops (kill -9, or the host loses power). `noticed`: the controller sees it after
        the session timeout (False: it restarts before the session expires)."""
        b = self.brokers[broker]
        if not b.alive:
            return
        b.alive = False
        b.died_at = self.clock.now
        b.quick_restart = not noticed
        self.note("power_loss" if power_loss else "crash", broker=broker)
        if power_loss:   # what the disk holds from now on
            for log in b.logs.values():
                log.lose_unflushed(log.durable_offset(b.written_back_ms))
        self.replication.broker_stopped(broker)
        if noticed:
            self.clock.after(self.config.session_timeout_ms, self._noticed_dead, broker, b.died_at)

    def crash_together(self, brokers: list[int], *, power_loss: bool) -> None:
        for broker in brokers:
            self.crash(broker, power_loss=power_loss)

    def _noticed_dead(self, broker: int, died_at: int) -> None:
        b = self.brokers[broker]
        if b.alive or b.died_at != died_at or not b.registered:
            return
        b.registered = False
        self.note("fenced", broker=broker)
        for pm in self.partitions.values():
            if broker in pm.replicas:
                self.controller_remove(pm, broker)

    def controlled_shutdown(self, broker: int) -> None:
        """Leadership moves away first (ControlledShutdown), then the broker stops and leaves every ISR."""
        b = self.brokers[broker]
        self.note("controlled_shutdown", broker=broker)
        b.registered = False
        for pm in self.partitions.values():
            if broker in pm.replicas:
                self.controller_remove(pm, broker)
        b.alive = False
        b.died_at = self.clock.now
        self.replication.broker_stopped(broker)

    def restart(self, broker: int) -> None:
        b = self.brokers[broker]
        if b.alive:
            return
        b.alive = True
        self.note("restart", broker=broker)
        for log in b.logs.values():
            log.reload()
        quick = b.registered     # the controller never noticed: its metadata still holds this broker
        b.registered = True
        b.known_epoch = {}
        for pm in self.partitions.values():
            if broker not in pm.replicas:
                continue
            if pm.leader == broker and quick:
                self.replication.become_leader(pm, broker)
            elif pm.leader is None and broker in pm.isr:
                self.elect(pm, "restart")
            elif pm.leader is None and pm.unclean:
                self.elect(pm, "unclean", unclean=True)
            elif pm.leader != broker:
                self.replication.become_follower(pm, broker)

    # --- controller ----------------------------------------------------------------------------------------
    def controller_remove(self, pm: PartitionMeta, broker: int) -> None:
        """The controller takes a dead (or shut down) broker out of the partition's ISR and leadership."""
        changed = False
        if broker in pm.isr and len(pm.isr) > 1:
            pm.isr.discard(broker)
            changed = True
        if pm.leader == broker:
            self.elect(pm, "leader-died")
        elif changed:
            if self.zookeeper:
                self._bump(pm, pm.leader)
            self.note("isr_shrink", topic=pm.topic, partition=pm.partition, broker=broker, by="controller")

    def live(self, broker: int) -> bool:
        return self.brokers[broker].registered

    def elect(self, pm: PartitionMeta, why: str, *, unclean: bool = False) -> None:
        candidates = [r for r in pm.replicas if r in pm.isr and self.live(r) and r != pm.leader]
        if not candidates and (unclean or pm.unclean):
            candidates = [r for r in pm.replicas if self.live(r) and r != pm.leader]
            unclean = bool(candidates)
        else:
            unclean = False
        old = pm.leader
        new = candidates[0] if candidates else None
        if new is None and old is None:
            return
        if unclean:
            pm.isr = {new}
        self._bump(pm, new)
        pm.elections.append({"at_ms": self.clock.now, "leader": new, "previous": old, "epoch": pm.leader_epoch,
                             "why": why, "unclean": unclean})
        self.note("election", topic=pm.topic, partition=pm.partition, leader=new, previous=old,
                  epoch=pm.leader_epoch, unclean=unclean)

    def _bump(self, pm: PartitionMeta, leader: int | None) -> None:
        """A new partition state with leader epoch + 1, sent to every live replica (LeaderAndIsr / metadata)."""
        pm.leader = leader
        pm.leader_epoch += 1
        if leader is not None and self.brokers[leader].alive:
            self.replication.become_leader(pm, leader)
        elif pm.acting_leader is not None:
            self.replication.leader_gone(pm)
        for r in pm.replicas:
            if r != leader and self.brokers[r].alive:
                self.replication.become_follower(pm, r)

    def alter_isr(self, pm: PartitionMeta, isr: set[int]) -> None:
        """AlterPartition from the leader (ISR shrink or expand): the leader epoch does not change."""
        pm.isr = set(isr)

    def policy_truncates_to_hw(self) -> bool:
        return self.policy == HIGH_WATERMARK
