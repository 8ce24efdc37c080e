"""Normalized Kafka tables (audit/systems/kafka/transforms/tables.py) for the benchmarks, generated straight into
Parquet.

Partitions (`generate_partitions`): one cluster of six brokers scanned one after another (a minute apart, each
log dir's checkpoints read just before its segments are listed), `partitions` partitions in topics of 100, three
replicas each (leader = the first, all in the ISR), about `batches` batch headers in all (10 records per batch,
one idempotent producer per partition with contiguous sequences, epoch 0 from offset 0 and, one partition in
three, epoch 2 from the middle). Every `fault_every`-th partition has a follower whose last two batches were
written in epoch 4 by a leader that lost them: the current leader wrote epoch 5 over them and the follower's
high watermark covers them, so under the leader-epoch rule its cut removes 20 committed offsets: one
kafka.committed_data_lost finding of 20 offsets per such partition, nothing anywhere else.

MirrorMaker 2 (`generate_mm2`): one flow source -> target, `partitions` upstream partitions with a sync every
~1,000 offsets (downstream = upstream + 5, one upstream gap of 3 offsets per partition), `groups` consumer groups
committed on every partition (keeping up: past the latest sync), their last checkpoint as the 3.4.1+ rule gives it
for a slightly older offset, and the target group committed at that checkpoint: a failover redelivers what the
group consumed since, within the syncs' bounds, and skips nothing; except one group-partition in `ahead_every`,
whose target group is AHEAD messages past its checkpoint. The groups are read in the reader's order, each read
with its own instants: the target groups, the source groups, the target groups again (`target_after`, the same
offsets: nothing synced in between), so the skips are proven (kafka.mm2_target_group_ahead findings from the
first target read, judged by the domain); a redelivery above the tolerance would be judged from the second."""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.pandas.types import to_arrow_schema

from audit.systems.kafka.transforms.tables import SCHEMAS

T0 = 1_760_000_000_000
CLUSTER = "bench"
BROKERS = 6
PER_TOPIC = 100
RECORDS = 10                    # records per batch
FAULT_EPOCHS = (4, 5)           # the lost leader's epoch, the current leader's
AHEAD = 50                      # MirrorMaker 2: how far an "ahead" target group is past its checkpoint


@dataclass(frozen=True)
class Spec:
    partitions: int = 100_000
    batches: int = 10_000_000     # batch headers over all replicas
    fault_every: int = 1_000
    files: int = 8
    seed: int = 11


def _schema(name: str) -> pa.Schema:
    return to_arrow_schema(SCHEMAS[name])


def _strings(codes: np.ndarray, values: list[str]) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(codes.astype(np.int32), pa.array(values))


def _table(name: str, cols: dict) -> pa.Table:
    """Columns in the table's order; absent ones null; dictionary-encoded strings kept as such (Parquet stores
    strings either way)."""
    schema = _schema(name)
    n = len(next(iter(cols.values())))
    arrays, fields = [], []
    for f in schema:
        a = cols.get(f.name)
        if a is None:
            a = pa.nulls(n, f.type)
        elif not isinstance(a, (pa.Array, pa.ChunkedArray)):
            a = pa.array(a).cast(f.type)
        fields.append(pa.field(f.name, a.type))
        arrays.append(a)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def layout(spec: Spec) -> dict:
    """Per partition: batches per replica, replicas, whether it has the middle epoch, whether it is faulty."""
    p = np.arange(spec.partitions)
    per = spec.batches // (3 * spec.partitions)
    extra = (spec.batches - 3 * per * spec.partitions) // 3
    n = np.full(spec.partitions, per, dtype=np.int64) + (p < extra)
    replicas = np.stack([(p + k) % BROKERS + 1 for k in range(3)], axis=1)
    faulty = (p % spec.fault_every) == spec.fault_every // 2
    return {"n": n, "replicas": replicas, "mid_epoch": p % 3 == 0, "faulty": faulty}


def _partition_names(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return p // PER_TOPIC, p % PER_TOPIC


def generate_partitions(spec: Spec, out: str) -> dict:
    """Write kafka_replicas, kafka_epochs, kafka_batches, kafka_partitions below `out`; returns what the audit
    must find."""
    lay = layout(spec)
    topics = [f"orders-{t}" for t in range((spec.partitions + PER_TOPIC - 1) // PER_TOPIC)]
    for name in ("kafka_replicas", "kafka_epochs", "kafka_batches", "kafka_partitions"):
        os.makedirs(os.path.join(out, name), exist_ok=True)
    chunk = (spec.partitions + spec.files - 1) // spec.files
    total = 0
    for f, lo in enumerate(range(0, spec.partitions, chunk)):
        p = np.arange(lo, min(lo + chunk, spec.partitions))
        total += _write_chunk(spec, lay, p, topics, out, f)
    faulty = int(lay["faulty"].sum())
    return {"partitions": spec.partitions, "replicas": 3 * spec.partitions, "batches": total,
            "lost_findings": faulty, "lost_offsets": faulty * 2 * RECORDS}


def _write_chunk(spec: Spec, lay: dict, p: np.ndarray, topics: list[str], out: str, f: int) -> int:
    n = lay["n"][p]
    t, part = _partition_names(p)
    # replica rows: partition-major, replica k = 0 (leader), 1, 2
    rp = np.repeat(p, 3)
    rk = np.tile(np.arange(3), p.size)
    broker = lay["replicas"][rp, rk]
    rn = n[np.repeat(np.arange(p.size), 3)]
    leo = rn * RECORDS
    fault_rep = lay["faulty"][rp] & (rk == 1)
    read_at = T0 + 60_000 * broker
    rt, rpart = _partition_names(rp)
    dir_codes = broker - 1
    key = {"cluster": _strings(np.zeros(rp.size), [CLUSTER]), "broker": pa.array(broker.astype(np.int32)),
           "dir": _strings(np.zeros(rp.size), ["dir0"]),
           "log_dir": _strings(dir_codes, [f"/var/kafka/b{b}" for b in range(1, BROKERS + 1)]),
           "topic": _strings(rt, topics), "partition": pa.array(rpart.astype(np.int32))}
    last_epoch = np.where(lay["faulty"][rp], np.where(fault_rep, FAULT_EPOCHS[0], FAULT_EPOCHS[1]),
                          np.where(lay["mid_epoch"][rp], 2, 0))
    replicas = _table("kafka_replicas", {
        **key, "high_watermark": leo, "log_start_offset": np.zeros(rp.size, np.int64), "log_end_offset": leo,
        "first_batch_offset": np.zeros(rp.size, np.int64), "last_batch_epoch": last_epoch.astype(np.int32),
        "segments": np.ones(rp.size, np.int32), "batches": rn, "epoch_checkpoint": np.ones(rp.size, bool),
        "index_complete": np.ones(rp.size, bool), "read_started_at_ms": read_at - 100,
        "read_finished_at_ms": read_at + 30_000, "checkpoints_read_at_ms": read_at - 10, "listed_at_ms": read_at})
    pq.write_table(replicas, os.path.join(out, "kafka_replicas", f"part-{f}.parquet"))
    # epochs: (0, 0); (2, middle) one partition in three; faulty partitions: (4 or 5, start of the last 2 batches)
    mid = lay["mid_epoch"][rp]
    faulty = lay["faulty"][rp]
    e_rep = np.concatenate((np.arange(rp.size), np.flatnonzero(mid), np.flatnonzero(faulty)))
    e_epoch = np.concatenate((np.zeros(rp.size), np.full(int(mid.sum()), 2), last_epoch[faulty]))
    e_start = np.concatenate((np.zeros(rp.size), (rn[mid] // 2) * RECORDS, (rn[faulty] - 2) * RECORDS))
    e_index = np.concatenate((np.zeros(rp.size), np.ones(int(mid.sum())), 1 + mid[faulty]))
    order = np.lexsort((e_index, e_rep))
    e_rep, e_epoch, e_start, e_index = e_rep[order], e_epoch[order], e_start[order], e_index[order]
    epochs = _table("kafka_epochs", {**{k: v.take(pa.array(e_rep)) for k, v in key.items()},
                                     "entry_index": e_index.astype(np.int32), "epoch": e_epoch.astype(np.int32),
                                     "start_offset": e_start.astype(np.int64)})
    pq.write_table(epochs, os.path.join(out, "kafka_epochs", f"part-{f}.parquet"))
    # batches
    b_rep = np.repeat(np.arange(rp.size), rn)
    i = np.arange(b_rep.size) - np.repeat(np.cumsum(rn) - rn, rn)
    bp = rp[b_rep]
    base = i * RECORDS
    mid_start = (rn[b_rep] // 2) * RECORDS
    tail = faulty[b_rep] & (i >= rn[b_rep] - 2)
    epoch = np.where(tail, last_epoch[b_rep], np.where(mid[b_rep] & (base >= mid_start), 2, 0))
    crc = (bp * 1_000_003 + i * 7919 + np.where(tail & fault_rep[b_rep], 17, 0)) & 0xFFFFFFFF
    batches = _table("kafka_batches", {
        **{k: v.take(pa.array(b_rep)) for k, v in key.items()}, "segment": np.zeros(b_rep.size, np.int64),
        "base_offset": base, "last_offset": base + RECORDS - 1, "partition_leader_epoch": epoch.astype(np.int32),
        "magic": np.full(b_rep.size, 2, np.int32), "crc": crc, "attributes": np.zeros(b_rep.size, np.int32),
        "transactional": np.zeros(b_rep.size, bool), "control": np.zeros(b_rep.size, bool),
        "base_timestamp": T0 + base, "max_timestamp": T0 + base + RECORDS - 1, "producer_id": 1000 + bp,
        "producer_epoch": np.zeros(b_rep.size, np.int32), "base_sequence": base.astype(np.int32),
        "records_count": np.full(b_rep.size, RECORDS, np.int32), "position": i * 1200,
        "size": np.full(b_rep.size, 1200, np.int64)})
    pq.write_table(batches, os.path.join(out, "kafka_batches", f"part-{f}.parquet"), row_group_size=1 << 20)
    # metadata: leader = the first replica, everyone in sync; the leader epoch = its latest
    reps = lay["replicas"][p].astype(np.int32)
    offs = np.arange(0, 3 * p.size + 1, 3)
    lists = pa.ListArray.from_arrays(pa.array(offs.astype(np.int32)), pa.array(reps.reshape(-1)))
    leader_epoch = np.where(lay["faulty"][p], FAULT_EPOCHS[1], np.where(lay["mid_epoch"][p], 2, 0))
    meta = _table("kafka_partitions", {
        "cluster": _strings(np.zeros(p.size), [CLUSTER]), "topic": _strings(t, topics),
        "partition": pa.array(part.astype(np.int32)), "origin": _strings(np.zeros(p.size), ["admin"]),
        "leader": reps[:, 0], "leader_epoch": leader_epoch.astype(np.int32), "replicas": lists, "isr": lists,
        "error_code": np.zeros(p.size, np.int32), "read_started_at_ms": np.full(p.size, T0 + 400_000),
        "read_finished_at_ms": np.full(p.size, T0 + 401_000)})
    pq.write_table(meta, os.path.join(out, "kafka_partitions", f"part-{f}.parquet"))
    return int(b_rep.size)


@dataclass(frozen=True)
class Mm2Spec:
    partitions: int = 500
    groups: int = 2_000
    log_end: int = 100_000
    sync_every: int = 1_000
    ahead_every: int = 100        # one group-partition in 100: the target group committed AHEAD messages past it
    seed: int = 5


def mm2_syncs(spec: Mm2Spec, rng: np.random.Generator) -> list[tuple[int, int]]:
    """One partition's syncs in topic order: every ~sync_every offsets, one upstream gap of 3 (a transaction
    marker run) that shifts downstream by 3 less from there on."""
    ups = np.cumsum(rng.integers(spec.sync_every // 2, spec.sync_every * 3 // 2, spec.log_end // spec.sync_every))
    ups = ups[ups < spec.log_end]
    gap_at = ups[len(ups) // 2]
    downs = ups + 5 - np.where(ups > gap_at, 3, 0)
    return list(zip(ups.tolist(), downs.tolist()))


def generate_mm2(spec: Mm2Spec, out: str, translate) -> dict:
    """Write kafka_mm2_syncs / _checkpoints / _groups / _offsets; `translate(syncs, upstream)` is the 3.4.1+
    translation used for the checkpoints (the domain's, passed in by the bench)."""
    rng = np.random.default_rng(spec.seed)
    for name in ("kafka_mm2_syncs", "kafka_mm2_checkpoints", "kafka_mm2_groups", "kafka_mm2_offsets"):
        os.makedirs(os.path.join(out, name), exist_ok=True)
    flow = {"cluster": "target", "source_alias": "source"}
    groups = [f"group-{g}" for g in range(spec.groups)]
    s_rows = {k: [] for k in ("topic", "partition", "upstream_offset", "downstream_offset", "record_offset")}
    record = 0
    cp_cols = {k: [] for k in ("group", "topic", "partition", "upstream_offset", "downstream_offset",
                               "record_offset")}
    g_cols = {k: [] for k in ("side", "group", "topic", "partition", "offset")}
    for p in range(spec.partitions):
        topic, part = f"orders-{p // 10}", p % 10
        syncs = mm2_syncs(spec, rng)
        s_rows["topic"] += [topic] * len(syncs)
        s_rows["partition"] += [part] * len(syncs)
        s_rows["upstream_offset"] += [u for u, _ in syncs]
        s_rows["downstream_offset"] += [d for _, d in syncs]
        s_rows["record_offset"] += list(range(record, record + len(syncs)))
        record += len(syncs)
        head = syncs[-1][0]           # consumers keep up: every group past the latest sync
        upstream = rng.integers(head + 1, spec.log_end + 1, spec.groups)
        older = np.maximum(head + 1, upstream - rng.integers(0, 200, spec.groups))
        down = translate(syncs, older)
        ahead = np.arange(spec.groups) % spec.ahead_every == p % spec.ahead_every
        target = np.where(ahead, down + AHEAD, down)
        for side, offsets in (("target", target), ("source", upstream), ("target_after", target)):
            g_cols["side"] += [side] * spec.groups
            g_cols["topic"] += [topic if side == "source" else f"source.{topic}"] * spec.groups
            g_cols["offset"] += offsets.tolist()
        g_cols["group"] += groups * 3
        g_cols["partition"] += [part] * (3 * spec.groups)
        cp_cols["group"] += groups
        cp_cols["topic"] += [f"source.{topic}"] * spec.groups
        cp_cols["partition"] += [part] * spec.groups
        cp_cols["upstream_offset"] += older.tolist()
        cp_cols["downstream_offset"] += down.tolist()
        cp_cols["record_offset"] += list(range(p * spec.groups, (p + 1) * spec.groups))
    n = len(s_rows["topic"])
    read = {"read_started_at_ms": [T0] * n, "read_finished_at_ms": [T0 + 5_000] * n}
    pq.write_table(_table("kafka_mm2_syncs", {**{k: [v] * n for k, v in flow.items()}, **s_rows,
                                              "internal_topic": ["mm2-offset-syncs.target.internal"] * n,
                                              "record_partition": [0] * n, **read}),
                   os.path.join(out, "kafka_mm2_syncs", "part-0.parquet"))
    n = len(cp_cols["group"])
    pq.write_table(_table("kafka_mm2_checkpoints", {
        **{k: [v] * n for k, v in flow.items()}, **cp_cols, "internal_topic": ["source.checkpoints.internal"] * n,
        "record_partition": [0] * n, "read_started_at_ms": [T0 + 6_000] * n, "read_finished_at_ms": [T0 + 9_000] * n}),
        os.path.join(out, "kafka_mm2_checkpoints", "part-0.parquet"), row_group_size=1 << 18)
    n = len(g_cols["group"])
    reads = {"target": (T0 + 10_000, T0 + 14_000), "source": (T0 + 14_000, T0 + 17_000),
             "target_after": (T0 + 17_000, T0 + 20_000)}      # one after the other, as the reader reads
    pq.write_table(_table("kafka_mm2_groups", {**{k: [v] * n for k, v in flow.items()}, **g_cols,
                                               "read_started_at_ms": [reads[s][0] for s in g_cols["side"]],
                                               "read_finished_at_ms": [reads[s][1] for s in g_cols["side"]]}),
                   os.path.join(out, "kafka_mm2_groups", "part-0.parquet"), row_group_size=1 << 18)
    ends = {"side": ["offset-syncs", "checkpoints"], "topic": ["mm2-offset-syncs.target.internal",
                                                              "source.checkpoints.internal"],
            "partition": [0, 0], "end_offset": [record, spec.partitions * spec.groups]}
    pq.write_table(_table("kafka_mm2_offsets", {**{k: [v] * 2 for k, v in flow.items()}, **ends}),
                   os.path.join(out, "kafka_mm2_offsets", "part-0.parquet"))
    ahead = sum(1 for p in range(spec.partitions) for g in range(spec.groups)
                if g % spec.ahead_every == p % spec.ahead_every)
    return {"group_partitions": spec.partitions * spec.groups, "syncs": record, "ahead": ahead}
