"""A MirrorMaker 2 flow between two simulated clusters: its scenario topics, producers and consumer groups on the
source, the source task copying records to `<source>.<topic>` on the target and emitting offset syncs to
`mm2-offset-syncs.<target>.internal` on the source, and the checkpoint task translating the source groups'
offsets into checkpoints on `<source>.checkpoints.internal` and into the target groups' committed offsets
(sync.group.offsets.enabled, the target groups being idle). Rules by version: mm2_rules.py.

Connect behaviour followed (connect/runtime WorkerSourceTask, connect/mirror MirrorSourceTask /
MirrorCheckpointTask @1eb7644349c and the tags in mm2_rules.py): records are acknowledged in order (acks=all,
one request in flight per partition); commitRecord feeds the sync writer; the task's source offsets are committed
every offset.flush.interval (the last acknowledged upstream offset); a restarted task resumes at the committed
offset + 1 (loadOffset), so what was copied after the last commit is copied again; the consumer reads below the
high watermark and skips transaction markers (read_uncommitted, as MirrorMaker's consumer). The checkpoint task
emits every emit.checkpoints.interval for every partition the group committed, when translation gives an offset
>= 0 and (from 3.4.1) it is the first, an upstream rewind, or a downstream advance; it syncs a target group's offset
only forward."""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from audit.systems.kafka.formats.mm2 import Checkpoint, OffsetSync, encode_checkpoint, encode_offset_sync
from lab.kafka.clock import stream
from lab.kafka.cluster import Cluster
from lab.kafka.config import MirrorSpec
from lab.kafka.consumers import GroupConsumer
from lab.kafka.encode import data_batch, record_value
from lab.kafka.log import Batch
from lab.kafka.mm2_rules import MAX_OUTSTANDING_OFFSET_SYNCS, SyncStore, SyncWriterState, version_at_least
from lab.kafka.producers import Producer

POLL_MIN_MS, POLL_MAX_MS = 100, 300
MAX_POLL_RECORDS = 500
RESTART_DOWN_MS = 10_000
MM2_RESTART_BEFORE_SCANS_S = 90     # mm2-restart: the process is killed this long before the first scan
# mm2-pre-3.4.1-overshoot: the transactional producer commits and pauses from 150 s to 110 s before the first scan;
# `settlement`, caught up at the end of the last transaction, stops 2 s before it resumes
OVERSHOOT_PAUSE_S = (150, 110)
# scenario -> (topic, partitions, transactional, groups {name: (lag in records, stops this many s before the first
# scan, or None)}): a group that stops keeps its last committed offset while traffic goes on
MM2_TOPICS = {
    "mm2-sparse-syncs": ("orders-mm", 3, False, {"billing": (0, None), "analytics": (400, None),
                                                  "reports": (0, 120)}),
    "mm2-restart": ("payments-mm", 2, False, {"ledger": (0, None), "fraud": (120, None)}),
    "mm2-pre-3.4.1-overshoot": ("ledger-txn", 2, True, {"settlement": (0, OVERSHOOT_PAUSE_S[1] + 2),
                                                       "audit-trail": (60, None)}),
}


@dataclass
class Emitted:
    """An internal record MirrorMaker 2 sent (its content, to answer the reads and the ground truth)."""

    key: bytes
    value: bytes
    timestamp: int
    fields: OffsetSync | Checkpoint


@dataclass(eq=False)
class MirrorFlow:
    spec: MirrorSpec
    source: Cluster
    target: Cluster
    topics: tuple[str, ...]
    groups: dict[str, str]                       # group -> upstream topic
    version: tuple[int, ...]
    syncs_topic: str
    checkpoints_topic: str
    generation: int = 0
    running: bool = False
    restarts: list[int] = field(default_factory=list)
    positions: dict[tuple[str, int], int] = field(default_factory=dict)
    writer: dict[tuple[str, int], SyncWriterState] = field(default_factory=dict)
    pending: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    delayed: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    outstanding: int = 0
    last_acked: dict[tuple[str, int], int] = field(default_factory=dict)
    committed: dict[tuple[str, int], int] = field(default_factory=dict)
    stores: dict[tuple[str, int], SyncStore] = field(default_factory=dict)
    store_position: int = 0
    last_checkpoints: dict[str, dict[tuple[str, int], Checkpoint]] = field(default_factory=dict)
    emitted: dict[int, Emitted] = field(default_factory=dict)       # record number -> content
    start_ms: int = 0
    as_of_ms: int = 0
    producers: list[Producer] = field(default_factory=list)       # the scenario topics' producers on the source
    consumers: list[GroupConsumer] = field(default_factory=list)  # the source groups
    copiers: dict[str, Producer] = field(default_factory=dict)
    sync_producer: Producer | None = None
    checkpoint_producer: Producer | None = None
    numbers: int = 0
    dropped_syncs: int = 0

    @property
    def alias(self) -> str:
        return self.spec.source

    def remote(self, topic: str) -> str:
        return f"{self.alias}.{topic}"


def setup_mirror(spec: MirrorSpec, src: Cluster, tgt: Cluster, start_ms: int, as_of_ms: int) -> MirrorFlow:
    cfg = src.config
    topics, groups, producers, consumers_made = [], {}, [], []
    for scenario in spec.scenarios:
        topic, partitions, transactional, consumers = MM2_TOPICS[scenario]
        if topic not in src.topics:
            src.create_topic(topic, partitions, min_isr=2)
            p = Producer(f"{topic}-writer", src, topic, True, stream(cfg.seed, src.name, "producer", topic),
                         cfg.batches_per_s * partitions, cfg.records_per_batch, cfg.record_bytes,
                         idempotent=not transactional, transactional=transactional)
            p.start(start_ms, as_of_ms)
            producers.append(p)
            if scenario == "mm2-pre-3.4.1-overshoot":
                p.pause = tuple(as_of_ms - (cfg.scan_span_s() + s) * 1000 for s in OVERSHOOT_PAUSE_S)
            for group, (lag, stop_s) in consumers.items():
                gc = GroupConsumer(group, src, topic, stream(cfg.seed, src.name, "group", group), lag_records=lag,
                                   stop_ms=None if stop_s is None else as_of_ms - (cfg.scan_span_s() + stop_s) * 1000)
                gc.start(start_ms, as_of_ms)
                consumers_made.append(gc)
        topics.append(topic)
        groups.update({g: topic for g in consumers})
    flow = MirrorFlow(spec, src, tgt, tuple(topics), groups, spec.version_tuple,
                      f"mm2-offset-syncs.{spec.target}.internal", f"{spec.source}.checkpoints.internal",
                      start_ms=start_ms, as_of_ms=as_of_ms, producers=producers, consumers=consumers_made)
    for topic in topics:
        tgt.create_topic(flow.remote(topic), src.topics[topic].partitions, min_isr=2)
    src.create_topic(flow.syncs_topic, 1, min_isr=2, internal=True)
    tgt.create_topic(flow.checkpoints_topic, 1, min_isr=2, internal=True)
    clock = src.clock
    clock.at(start_ms + 1_000, _start, flow)
    if "mm2-restart" in spec.scenarios:
        clock.at(as_of_ms - (cfg.scan_span_s() + MM2_RESTART_BEFORE_SCANS_S) * 1000, _restart, flow)
    return flow


# --- the source task -------------------------------------------------------------------------------------------
def _start(flow: MirrorFlow) -> None:
    cfg = flow.source.config
    flow.generation += 1
    gen = flow.generation
    flow.running = True
    rng = stream(cfg.seed, flow.spec.source, flow.spec.target, "mm2", gen)
    for topic in flow.topics:
        for p in range(flow.source.topics[topic].partitions):
            key = (topic, p)
            if key in flow.committed:
                flow.positions[key] = flow.committed[key] + 1     # loadOffset: committed + 1
            else:
                leader = flow.source.leader_log(flow.source.partitions[key])
                flow.positions[key] = leader.log_start if leader is not None else 0
    flow.writer, flow.pending, flow.delayed, flow.outstanding = {}, {}, {}, 0
    flow.copiers = {}
    for topic in flow.topics:
        pr = Producer(f"mm2-{gen}-{topic}", flow.target, flow.remote(topic), True, rng, 0, 1, 1, max_in_flight=1)
        pr.on_ack = lambda p, proto, offset, topic=topic, gen=gen: _copied(flow, gen, topic, p, proto, offset)
        pr.start(flow.start_ms, flow.as_of_ms)
        flow.copiers[topic] = pr
    flow.sync_producer = Producer(f"mm2-{gen}-syncs", flow.source, flow.syncs_topic, True, rng, 0, 1, 1)
    flow.sync_producer.on_ack = lambda p, proto, offset, gen=gen: _sync_acked(flow, gen)
    flow.sync_producer.start(flow.start_ms, flow.as_of_ms)
    flow.checkpoint_producer = Producer(f"mm2-{gen}-checkpoints", flow.target, flow.checkpoints_topic, True, rng,
                                        0, 1, 1)
    flow.checkpoint_producer.start(flow.start_ms, flow.as_of_ms)
    _start_checkpoint_task(flow)
    clock = flow.source.clock
    clock.after(rng.randint(POLL_MIN_MS, POLL_MAX_MS), _poll, flow, gen, rng)
    clock.after(cfg.offset_flush_s * 1000, _commit, flow, gen, cfg.offset_flush_s * 1000)
    clock.after(cfg.emit_checkpoints_s * 1000, _emit_checkpoints, flow, gen, cfg.emit_checkpoints_s * 1000)
    clock.after(cfg.sync_group_offsets_s * 1000, _sync_groups, flow, gen, cfg.sync_group_offsets_s * 1000)


def _restart(flow: MirrorFlow) -> None:
    """The MirrorMaker 2 process is killed: nothing more is acknowledged to it, nothing committed; it starts
    again RESTART_DOWN_MS later."""
    flow.running = False
    flow.restarts.append(flow.source.clock.now)
    for pr in [*flow.copiers.values(), flow.sync_producer, flow.checkpoint_producer]:
        if pr is not None:
            pr.stopped = True
    flow.source.note("mm2_restart", flow=f"{flow.spec.source}->{flow.spec.target}")
    flow.source.clock.after(RESTART_DOWN_MS, _start, flow)


def _poll(flow: MirrorFlow, gen: int, rng) -> None:
    """One poll of the task's consumer: the records below each partition's high watermark from its position
    (at most MAX_POLL_RECORDS in all), transaction markers skipped, sent as one batch per partition (the
    producer's accumulator: they are all ready at once)."""
    if not flow.running or flow.generation != gen:
        return
    budget = MAX_POLL_RECORDS
    size = flow.source.config.record_bytes
    for (topic, p), pos in sorted(flow.positions.items()):
        log = flow.source.leader_log(flow.source.partitions[(topic, p)])
        if log is None:
            continue
        pos = max(pos, log.log_start)
        records: list[tuple[str, int, int, int]] = []     # (producer, message number, timestamp, upstream offset)
        for b in log.batches_from(pos, 200):
            if b.last >= log.hw or budget <= 0:
                break
            if not b.control:
                for i in range(max(0, pos - b.base), b.records):
                    records.append((b.producer, b.first_seq_no + i, b.max_ts - (b.records - 1 - i), b.base + i))
                budget -= b.records
            pos = b.last + 1
        flow.positions[(topic, p)] = pos
        if records:
            first = flow.numbers
            flow.numbers += len(records)
            copy = data_batch(0, -1, f"mm2-copy:{flow.spec.source}->{flow.spec.target}", first, len(records),
                              [r[2] for r in records], size, upstream=tuple(r[3] for r in records),
                              created_ms=flow.source.clock.now,
                              payload_of=lambda i, records=records: _payload(records[i], size))
            flow.copiers[topic].send_proto(p, copy)
    flow.source.clock.after(rng.randint(POLL_MIN_MS, POLL_MAX_MS), _poll, flow, gen, rng)


def _payload(record: tuple[str, int, int, int], size: int) -> tuple[bytes, bytes]:
    """The upstream record's key and value, copied as they are."""
    producer, n = record[0], record[1]
    return struct.pack(">i", n % 997), record_value(producer, n, size)


def _copied(flow: MirrorFlow, gen: int, topic: str, p: int, proto: Batch, offset: int) -> None:
    """commitRecord for each record of an acknowledged copy: the sync writer sees (upstream, downstream)."""
    if gen != flow.generation or not flow.running:
        return
    key = (topic, p)
    state = flow.writer.setdefault(key, SyncWriterState(flow.version, flow.spec.offset_lag_max))
    for i, upstream in enumerate(proto.upstream):
        downstream = offset + i
        flow.last_acked[key] = upstream
        if state.update(upstream, downstream):
            if state.old:
                _send_sync_old(flow, key, upstream, downstream)
            else:
                flow.delayed.pop(key, None)
                flow.pending[key] = (upstream, downstream)   # LinkedHashMap.put: an existing key keeps its place
                state.reset()
        elif not state.old and version_at_least(flow.version, 3, 7, 0):
            flow.delayed[key] = (upstream, downstream)
    if not version_at_least(flow.version, 3, 4, 1):
        return
    _fire_pending(flow)


def _send_sync_old(flow: MirrorFlow, key: tuple[str, int], upstream: int, downstream: int) -> None:
    if flow.outstanding >= MAX_OUTSTANDING_OFFSET_SYNCS:
        flow.dropped_syncs += 1     # 3.4: "Too many outstanding offset syncs": this one is never sent
        return
    _send_sync(flow, key, upstream, downstream)


def _fire_pending(flow: MirrorFlow) -> None:
    while flow.pending and flow.outstanding < MAX_OUTSTANDING_OFFSET_SYNCS:
        key = next(iter(flow.pending))
        upstream, downstream = flow.pending.pop(key)
        _send_sync(flow, key, upstream, downstream)


def _send_sync(flow: MirrorFlow, key: tuple[str, int], upstream: int, downstream: int) -> None:
    flow.outstanding += 1
    sync = OffsetSync(key[0], key[1], upstream, downstream)
    _send_internal(flow, flow.sync_producer, sync, encode_offset_sync(sync))


def _send_internal(flow: MirrorFlow, producer: Producer, fields, key_value: tuple[bytes, bytes]) -> None:
    now = flow.source.clock.now
    n = flow.numbers
    flow.numbers += 1
    flow.emitted[n] = Emitted(key_value[0], key_value[1], now, fields)
    batch = data_batch(0, -1, f"mm2:{flow.spec.source}->{flow.spec.target}", n, 1, [now], 0, created_ms=now,
                       payload_of=lambda i: key_value)
    producer.send_proto(0, batch)


def _sync_acked(flow: MirrorFlow, gen: int) -> None:
    if gen != flow.generation:
        return
    flow.outstanding -= 1
    if version_at_least(flow.version, 3, 4, 1):
        _fire_pending(flow)


def _commit(flow: MirrorFlow, gen: int, period: int) -> None:
    if not flow.running or flow.generation != gen:
        return
    flow.committed.update(flow.last_acked)
    if version_at_least(flow.version, 3, 7, 0):
        for key, value in flow.delayed.items():      # pendingOffsetSyncs.putAll(delayedOffsetSyncs)
            flow.pending[key] = value
        flow.delayed.clear()
    if version_at_least(flow.version, 3, 4, 1):
        _fire_pending(flow)
    flow.source.clock.after(period, _commit, flow, gen, period)


# --- the checkpoint task ---------------------------------------------------------------------------------------
def sync_records(flow: MirrorFlow) -> list[tuple[int, Emitted]]:
    """(offset, record) of the offset-syncs topic below its high watermark (what a consumer reads)."""
    log = flow.source.leader_log(flow.source.partitions[(flow.syncs_topic, 0)])
    return [] if log is None else _records(flow, log)


def checkpoint_records(flow: MirrorFlow) -> list[tuple[int, Emitted]]:
    log = flow.target.leader_log(flow.target.partitions[(flow.checkpoints_topic, 0)])
    return [] if log is None else _records(flow, log)


def _records(flow: MirrorFlow, log) -> list[tuple[int, Emitted]]:
    out = []
    for b in log.batches():
        if b.last >= log.hw:
            break
        out.append((b.base, flow.emitted[b.first_seq_no]))
    return out


def _start_checkpoint_task(flow: MirrorFlow) -> None:
    """OffsetSyncStore.start(): every sync already in the topic, then translation is available. From 3.7.1 the
    last checkpoints come from the checkpoints topic (CheckpointStore) and decide whether the start keeps every
    sync; before, the task starts with no memory of earlier checkpoints."""
    flow.stores = {}
    flow.last_checkpoints = {}
    loaded = version_at_least(flow.version, 3, 7, 1)
    if loaded:
        for _, rec in checkpoint_records(flow):
            cp = rec.fields
            flow.last_checkpoints.setdefault(cp.group, {})[(cp.topic, cp.partition)] = cp
    for topic in flow.topics:
        for p in range(flow.source.topics[topic].partitions):
            store = SyncStore(flow.version)
            store.must_read_to_end = not loaded
            flow.stores[(topic, p)] = store
    flow.store_position = 0
    _read_syncs(flow)
    for store in flow.stores.values():
        store.started()


def _read_syncs(flow: MirrorFlow) -> None:
    for offset, rec in sync_records(flow):
        if offset < flow.store_position:
            continue
        sync = rec.fields
        store = flow.stores.get((sync.topic, sync.partition))
        if store is not None:
            store.handle(sync.upstream_offset, sync.downstream_offset)
        flow.store_position = offset + 1


def _emit_checkpoints(flow: MirrorFlow, gen: int, period: int) -> None:
    if not flow.running or flow.generation != gen:
        return
    _read_syncs(flow)
    monotonic = version_at_least(flow.version, 3, 4, 1)
    offsets = flow.source.groups
    for group in sorted(flow.groups):
        fresh = {}
        for (topic, p), upstream in sorted(offsets.get(group, {}).items()):
            store = flow.stores.get((topic, p))
            downstream = None if store is None else store.translate(upstream)
            if downstream is None or downstream < 0:
                continue
            cp = Checkpoint(group, flow.remote(topic), p, upstream, downstream, "")
            last = flow.last_checkpoints.get(group, {}).get((cp.topic, p))
            if monotonic and last is not None and not (upstream < last.upstream_offset
                                                       or downstream > last.downstream_offset):
                continue
            fresh[(cp.topic, p)] = cp
        if monotonic:
            flow.last_checkpoints.setdefault(group, {}).update(fresh)
        else:
            flow.last_checkpoints[group] = fresh
        for cp in fresh.values():
            _send_internal(flow, flow.checkpoint_producer, cp, encode_checkpoint(cp))
    flow.source.clock.after(period, _emit_checkpoints, flow, gen, period)


def _sync_groups(flow: MirrorFlow, gen: int, period: int) -> None:
    """syncGroupOffset: the target groups (idle) move to the translated offsets, never backwards."""
    if not flow.running or flow.generation != gen:
        return
    for group, checkpoints in sorted(flow.last_checkpoints.items()):
        target = flow.target.groups.setdefault(group, {})
        for key, cp in sorted(checkpoints.items()):
            if key not in target or target[key] < cp.downstream_offset:
                target[key] = cp.downstream_offset
    flow.source.clock.after(period, _sync_groups, flow, gen, period)
