"""The driver's side of the partition audit: the collected replica, epoch and metadata rows -> the kernel's
`Replicas` parameters (batch_state.py) and, with the kernel's per-replica rows, the domain's PartitionStates.
Columnar (numpy over Arrow) up to the domain objects, which are built once per replica.

Read instants (docs/kafka/contracts.md "Snapshots apart"): a replica's high watermark was read by
`checkpoints_read_at_ms` (the log dir's checkpoint files), its log end offset fixed at `listed_at_ms` (segment sizes
listed); without those steps only the scan's [started, finished] is known, so the high watermark counts as read at
the end and the log at the start (the domain then proves nothing from their order). Admin metadata counts as read
when its request finished, a ListOffsets high watermark likewise; a KRaft replay when its log dir scan started.

The log start offset is what the broker loads (docs/formats/kafka.md §11.2: max of log-start-offset-checkpoint and the
first segment's base offset; the checkpoint is written every minute, segments go at once). The leader-epoch cache is the
checkpoint's entries as LeaderEpochFileCache loads them (conflicting entries dropped). The reference replica is the
domain's (partition.reference_broker), computed here for all partitions at once; tests compare the two."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from audit.systems.kafka.domain.assignment import is_stray, stray_replica
from audit.systems.kafka.domain.epochs import EpochEntry, LeaderEpochCache
from audit.systems.kafka.domain.partition import PartitionMetadata, PartitionState, ReplicaState
from audit.systems.kafka.transforms.batch_state import FOLLOWER, IGNORED, NONE, REFERENCE, Replicas

ADMIN = "admin"
USABLE_METADATA_ERRORS = (0, 5, 9)   # none, LEADER_NOT_AVAILABLE, REPLICA_NOT_AVAILABLE: leader/ISR still valid


def ints(t: pa.Table, name: str, null: int = NONE) -> np.ndarray:
    """An integer column as int64, nulls as `null`."""
    return pc.fill_null(t.column(name).cast(pa.int64()), null).to_numpy()


def _opt(v: int) -> int | None:
    return None if v == NONE else int(v)


@dataclass
class Partition:
    cluster: str
    topic: str
    partition: int
    first: int                            # its replicas: rows [first, stop) of Assembled.kept
    stop: int
    metadata: PartitionMetadata | None
    leader_high_watermark: int | None
    leader_high_watermark_read_at_ms: int | None
    compacted: bool
    reference: int | None                 # broker


@dataclass
class Assembled:
    partitions: list[Partition]
    kept: pa.Table                        # the judged replica rows, sorted by (pkey, broker)
    cols: dict[str, np.ndarray]           # int64 columns of `kept`, plus latest_epoch, role, written/loaded CSR
    params: Replicas                      # the same replicas in rkey order (the kernel's)
    coverage: list[dict]
    scanned: dict[str, set[int]] = field(default_factory=dict)   # cluster -> brokers whose log dirs were read
    metadata: MetadataRows | None = None  # the metadata row of every partition the metadata knows
    found: pa.Table | None = None         # (pkey, cluster, broker) of every replica folder found, indexed or not
    log_dirs: list[dict] = field(default_factory=list)             # state.log_dir_reads
    findings: list[dict] = field(default_factory=list)             # the domain's stray-replica findings
    stray_rkeys: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))   # their replicas, left out


def loaded_cache(entries: list[EpochEntry]) -> tuple[EpochEntry, ...]:
    """The cache the broker holds after loading the file (ReplicaState.cache())."""
    return LeaderEpochCache(e for e in entries if e.epoch >= 0 and e.start_offset >= 0).entries


def _coverage(cluster, topic, partition, broker, what: str, detail: dict, count: int = 0) -> dict:
    return {"cluster": cluster, "topic": topic, "partition": partition, "broker": broker, "what": what,
            "offset_from": None, "offset_to": None, "entry_count": count, "detail": detail}


def _select_replicas(replicas: pa.Table) -> tuple[pa.Table, list[dict]]:
    """The rows judged: with a batch index, and one copy per broker and partition (the longer log; then the first
    dir by name). The others become coverage items."""
    coverage = []
    no_index = replicas.filter(pc.is_null(replicas.column("log_end_offset")))
    for r in no_index.to_pylist():
        coverage.append(_coverage(r["cluster"], r["topic"], r["partition"], r["broker"],
                                  "replica without a batch index: not judged",
                                  {"dir": r["dir"], "index_problem": r["index_problem"]}))
    t = replicas.filter(pc.is_valid(replicas.column("log_end_offset")))
    t = t.sort_by([("pkey", "ascending"), ("broker", "ascending"), ("log_end_offset", "descending"),
                   ("dir", "ascending")])
    pkey, broker = ints(t, "pkey"), ints(t, "broker")
    dup = np.zeros(t.num_rows, dtype=bool)
    dup[1:] = (pkey[1:] == pkey[:-1]) & (broker[1:] == broker[:-1])
    for r in t.filter(pa.array(dup)).to_pylist():
        coverage.append(_coverage(r["cluster"], r["topic"], r["partition"], r["broker"],
                                  "a second copy of the partition on the broker: not judged", {"dir": r["dir"]}))
    t = t.filter(pa.array(~dup))
    for r in t.filter(pc.invert(pc.fill_null(t.column("index_complete"), False))).to_pylist():
        coverage.append(_coverage(r["cluster"], r["topic"], r["partition"], r["broker"],
                                  "batch index incomplete (judged as read)",
                                  {"dir": r["dir"], "index_problem": r["index_problem"]}))
    return t, coverage


def _check_keys(t: pa.Table, key: str, names: list[str]) -> None:
    """xxhash64 keys stand for names: two different names with one key would be judged as one."""
    distinct = t.group_by(names).aggregate([]).num_rows
    if distinct != np.unique(ints(t, key)).size:
        raise ValueError(f"{key} collision: {distinct} distinct {'/'.join(names)} for fewer keys")


def _epochs(epochs: pa.Table, rkey: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The checkpoint lines of each replica (`rkey` in kept order), in file order: CSR (offsets, epochs, starts)."""
    e_rkey, idx = ints(epochs, "rkey"), ints(epochs, "entry_index", 0)
    order_kept = np.argsort(rkey, kind="stable")
    pos = np.searchsorted(rkey[order_kept], e_rkey)
    pos_c = np.minimum(pos, max(rkey.size - 1, 0))
    known = (pos < rkey.size) & (rkey[order_kept][pos_c] == e_rkey) if rkey.size else np.zeros(e_rkey.size, bool)
    owner = order_kept[pos_c[known]]
    ep, st, idx = ints(epochs, "epoch")[known], ints(epochs, "start_offset")[known], idx[known]
    order = np.lexsort((idx, owner))
    owner, ep, st = owner[order], ep[order], st[order]
    offsets = np.concatenate(([0], np.cumsum(np.bincount(owner, minlength=rkey.size)))).astype(np.int64)
    return offsets, ep, st


def _loaded(offsets: np.ndarray, ep: np.ndarray, st: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The loaded caches: the lines themselves where they are valid and strictly increasing (checked with numpy),
    LeaderEpochCache's replay for the others."""
    n = offsets.size - 1
    owner = np.repeat(np.arange(n), np.diff(offsets))
    bad = (ep < 0) | (st < 0)
    same = np.zeros(ep.size, dtype=bool)
    same[1:] = owner[1:] == owner[:-1]
    bad[1:] |= same[1:] & ((ep[1:] <= ep[:-1]) | (st[1:] <= st[:-1]))
    irregular = np.unique(owner[bad])
    if not irregular.size:
        return offsets, ep, st
    entries = [list(zip(ep[a:b].tolist(), st[a:b].tolist())) for a, b in zip(offsets[:-1], offsets[1:])]
    for i in irregular.tolist():
        entries[i] = list(loaded_cache([EpochEntry(*e) for e in entries[i]]))
    counts = np.array([len(e) for e in entries], dtype=np.int64)
    flat = [e for es in entries for e in es]
    return (np.concatenate(([0], np.cumsum(counts))).astype(np.int64),
            np.array([e[0] for e in flat], dtype=np.int64), np.array([e[1] for e in flat], dtype=np.int64))


def _past_log_end_cut(offsets: np.ndarray, ep: np.ndarray, st: np.ndarray,
                      leo: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The loaded caches less entries starting past their replica's log end (truncation.ReplicaLog.cache: an epoch
    bumped after the log was listed)."""
    owner = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    keep = st <= leo[owner] if owner.size else np.zeros(0, bool)
    if keep.all():
        return offsets, ep, st
    counts = np.bincount(owner[keep], minlength=offsets.size - 1)
    return np.concatenate(([0], np.cumsum(counts))).astype(np.int64), ep[keep], st[keep]


class MetadataRows(NamedTuple):
    """The metadata row each partition is judged by, chosen once per audit: `keys` (pkeys, sorted unique) and their
    `rows` (METADATA_COLUMNS with pkey, cluster, topic, partition)."""

    keys: np.ndarray
    rows: list[dict]

    def of(self, pkeys: np.ndarray) -> list[dict | None]:
        """The row of each of `pkeys`, None for a partition without one."""
        at = np.searchsorted(self.keys, pkeys)
        found = (at < self.keys.size) & (self.keys[np.minimum(at, max(self.keys.size - 1, 0))] == pkeys) \
            if self.keys.size else np.zeros(pkeys.size, bool)
        return [self.rows[a] if f else None for a, f in zip(at.tolist(), found.tolist())]


def metadata_rows(metadata: pa.Table) -> MetadataRows:
    """Per partition the metadata row, the admin API's when present, else the KRaft replay of the broker whose
    metadata log was furthest along (then the smaller broker id); rows with an unusable error code never count."""
    code = ints(metadata, "error_code", 0)
    m = metadata.filter(pa.array(np.isin(code, USABLE_METADATA_ERRORS)))
    key = ints(m, "pkey")
    admin = pc.fill_null(pc.equal(m.column("origin"), ADMIN), False).to_numpy(zero_copy_only=False)
    order = np.lexsort((ints(m, "broker", -1), -ints(m, "metadata_offset", -1), ~admin, key))
    first = np.ones(order.size, dtype=bool)
    first[1:] = key[order][1:] != key[order][:-1]
    chosen = order[first]
    return MetadataRows(key[chosen], m.take(pa.array(chosen)).to_pylist())


def _leaders(rows: list[dict | None]) -> tuple[np.ndarray, np.ndarray]:
    """(leader, leader epoch) of each row, NONE where the row or the value is absent (a negative leader: none)."""
    leader = [NONE if r is None or r["leader"] is None or r["leader"] < 0 else r["leader"] for r in rows]
    epoch = [NONE if r is None or r["leader_epoch"] is None else r["leader_epoch"] for r in rows]
    return np.array(leader, dtype=np.int64), np.array(epoch, dtype=np.int64)


def _partition_metadata(r: dict) -> PartitionMetadata:
    leader = r["leader"] if r["leader"] is not None and r["leader"] >= 0 else None
    read_at = r["read_finished_at_ms"] if r["origin"] == ADMIN else r["read_started_at_ms"]
    return PartitionMetadata(leader=leader, leader_epoch=r["leader_epoch"], replicas=tuple(r["replicas"] or ()),
                             isr=None if r["isr"] is None else tuple(r["isr"]), read_at_ms=read_at)


def references(part: np.ndarray, starts: np.ndarray, broker: np.ndarray, latest: np.ndarray, leo: np.ndarray,
               leader: np.ndarray, has_leader_md: np.ndarray, leader_epoch: np.ndarray | None = None) -> np.ndarray:
    """Index of each partition's reference replica (-1: none), partition.reference_broker for all partitions at
    once: the metadata's leader when collected (none when not collected); without a leader, or when a replica holds
    a newer epoch than the metadata's `leader_epoch` (NONE: than the leader's latest epoch), the highest latest
    epoch, then the larger log end offset, then the smaller broker id. `part` = each replica's partition index,
    replicas grouped by partition (`starts` = first row of each)."""
    ref = np.full(starts.size, -1, dtype=np.int64)
    is_leader = has_leader_md[part] & (broker == leader[part])
    ref[part[is_leader]] = np.flatnonzero(is_leader)
    epoch = np.where(latest == NONE, -1, latest)
    order = np.lexsort((-broker, leo, epoch, part))
    last = np.ones(order.size, dtype=bool)
    last[:-1] = part[order][1:] != part[order][:-1]
    best = order[last]
    known = np.full(starts.size, NONE, dtype=np.int64) if leader_epoch is None else leader_epoch.copy()
    unknown = (known == NONE) & (ref >= 0)
    known[unknown] = latest[ref[unknown]]
    stale = has_leader_md & (known != NONE) & (epoch[best] > known) if starts.size else np.zeros(0, bool)
    free = ~has_leader_md | stale
    ref[free] = best[free]
    return ref


def assemble(replicas: pa.Table, epochs: pa.Table, metadata: pa.Table) -> Assembled:
    """Partitions and kernel parameters from the collected rows (replicas and metadata carry `pkey`, replicas and
    epochs `rkey`; see state.py)."""
    chosen = metadata_rows(metadata)
    replicas, strays = _without_strays(replicas, chosen)
    kept, coverage = _select_replicas(replicas)
    _check_keys(replicas, "pkey", ["cluster", "topic", "partition"])
    _check_keys(replicas, "rkey", ["cluster", "topic", "partition", "broker", "dir"])
    c = {k: ints(kept, k) for k in ("pkey", "rkey", "broker", "high_watermark", "log_end_offset", "cleaner_offset",
                                    "partition")}
    leo = c["log_end_offset"]
    first = np.where(ints(kept, "first_batch_offset") == NONE, leo, ints(kept, "first_batch_offset"))
    c["log_start"] = np.maximum(ints(kept, "log_start_offset", 0), first)
    hw = c["high_watermark"]
    c["exposed_end"] = np.where(hw == NONE, c["log_start"], np.maximum(c["log_start"], np.minimum(hw, leo)))
    # below it each replica compacts on its own schedule: the checkpointed first dirty offset, or while a pass was
    # seen in progress, the active segment's base (docs/formats/kafka.md §11.5)
    c["cleaner"] = np.maximum(np.where(c["cleaner_offset"] == NONE, -1, c["cleaner_offset"]),
                              ints(kept, "cleaning_below", -1))
    hw_at = ints(kept, "checkpoints_read_at_ms")
    c["hw_read_at"] = np.where(hw_at == NONE, ints(kept, "read_finished_at_ms"), hw_at)
    read_at = ints(kept, "listed_at_ms")
    c["read_at"] = np.where(read_at == NONE, ints(kept, "read_started_at_ms"), read_at)
    c["check_epochs"] = (pc.fill_null(kept.column("epoch_checkpoint"), False).to_numpy(zero_copy_only=False)
                         & pc.is_null(kept.column("epoch_checkpoint_error")).to_numpy(zero_copy_only=False))
    c["w_off"], c["w_epoch"], c["w_start"] = _epochs(epochs, c["rkey"])
    c["l_off"], c["l_epoch"], c["l_start"] = _past_log_end_cut(*_loaded(c["w_off"], c["w_epoch"], c["w_start"]), leo)
    counts = np.diff(c["l_off"])
    c["latest_epoch"] = np.where(counts > 0, c["l_epoch"][np.maximum(c["l_off"][1:] - 1, 0)], NONE)

    n = kept.num_rows
    new = np.ones(n, dtype=bool)
    new[1:] = c["pkey"][1:] != c["pkey"][:-1]
    starts = np.flatnonzero(new)
    part = np.cumsum(new) - 1
    md_rows = chosen.of(c["pkey"][starts])
    leader, leader_epoch = _leaders(md_rows)
    has_leader = leader != NONE
    ref = references(part, starts, c["broker"], c["latest_epoch"], leo, leader, has_leader, leader_epoch)
    c["role"] = np.where(ref[part] < 0, IGNORED, np.where(ref[part] == np.arange(n), REFERENCE, FOLLOWER))
    c["ref_row"] = np.where(ref[part] < 0, -1, ref[part])
    compacted = np.maximum.reduceat(c["cleaner"] != -1, starts) if n else np.zeros(0, bool)

    names = kept.select(["cluster", "topic"]).take(pa.array(starts)).to_pydict() if n else {"cluster": [],
                                                                                           "topic": []}
    partitions = []
    stops = np.append(starts[1:], n)
    for i, (a, b) in enumerate(zip(starts.tolist(), stops.tolist())):
        md = md_rows[i]
        hw_ok = md is not None and md["origin"] == ADMIN and md["high_watermark"] is not None and \
            md["offsets_error_code"] in (None, 0)
        partitions.append(Partition(names["cluster"][i], names["topic"][i], int(c["partition"][a]), a, b,
                                    None if md is None else _partition_metadata(md),
                                    md["high_watermark"] if hw_ok else None,
                                    md["offsets_read_finished_at_ms"] if hw_ok else None, bool(compacted[i]),
                                    None if ref[i] < 0 else int(c["broker"][ref[i]])))
    return Assembled(partitions, kept, c, _params(c), coverage, metadata=chosen, findings=[s for s, _ in strays],
                     stray_rkeys=np.array([k for _, k in strays], dtype=np.int64))


def _without_strays(replicas: pa.Table, chosen: MetadataRows) -> tuple[pa.Table, list[tuple[dict, int]]]:
    """The replica rows less stray copies (domain/assignment.is_stray against the partition's metadata row), and a
    finding with its rkey for each stray."""
    if not replicas.num_rows or "topic_id" not in replicas.column_names:
        return replicas, []
    pkeys = ints(replicas, "pkey")
    unique = np.unique(pkeys)
    rows = chosen.of(unique)
    meta_ids = {int(k): r["topic_id"] for k, r in zip(unique.tolist(), rows) if r is not None and r["topic_id"]}
    ids = replicas.column("topic_id").to_pylist()
    stray = np.array([is_stray(t, meta_ids.get(k)) for k, t in zip(pkeys.tolist(), ids)], dtype=bool)
    if not stray.any():
        return replicas, []
    found = [(stray_replica(r["cluster"], r["topic"], r["partition"], r["broker"], r["topic_id"],
                            meta_ids[r["pkey"]], r["dir"]), r["rkey"])
             for r in replicas.filter(pa.array(stray)).to_pylist()]
    return replicas.filter(pa.array(~stray)), found


def _params(c: dict) -> Replicas:
    """The kernel's parameters: the kept replicas in rkey order, references as indexes in that order."""
    order = np.argsort(c["rkey"], kind="stable")
    position = np.empty_like(order)
    position[order] = np.arange(order.size)
    ref = np.where(c["ref_row"] < 0, -1, position[np.maximum(c["ref_row"], 0)])[order]
    role = c["role"][order].astype(np.int8)
    counts = np.diff(c["l_off"])[order]
    src = np.repeat(c["l_off"][:-1][order], counts) + (np.arange(counts.sum()) - np.repeat(
        np.cumsum(counts) - counts, counts))
    return Replicas(
        rkey=c["rkey"][order], role=role, log_start=c["log_start"][order], log_end=c["log_end_offset"][order],
        exposed_end=c["exposed_end"][order], cleaner=c["cleaner"][order], ref=ref,
        check_epochs=c["check_epochs"][order], epoch_offsets=np.concatenate(([0], np.cumsum(counts))).astype(np.int64),
        epoch_epoch=c["l_epoch"][src], epoch_start=c["l_start"][src])


def aligned(assembled: Assembled, kernel: pa.Table) -> dict[str, np.ndarray]:
    """The kernel's numeric columns in kept order (0 / NONE for replicas without batches), plus `row`: the kernel
    row of each replica (-1: none)."""
    rk = assembled.cols["rkey"]
    k_rkey = ints(kernel, "rkey")
    order = np.argsort(k_rkey)
    at = np.minimum(np.searchsorted(k_rkey[order], rk), max(k_rkey.size - 1, 0))
    found = (k_rkey[order][at] == rk) if k_rkey.size else np.zeros(rk.size, bool)
    row = np.where(found, order[at] if k_rkey.size else 0, -1)
    out = {"row": row}
    for f in kernel.schema:
        if pa.types.is_integer(f.type) and f.name != "rkey":
            v = ints(kernel, f.name)
            default = NONE if f.name.endswith(("_offset", "_ms")) else 0   # else a count
            out[f.name] = np.where(row >= 0, v[np.maximum(row, 0)] if v.size else default, default)
    first = np.full(kernel.num_rows, NONE, dtype=np.int64)
    size = np.zeros(kernel.num_rows, dtype=np.int64)
    if kernel.num_rows:
        ranges = kernel.column("mismatch_ranges").combine_chunks()
        offs = ranges.offsets.to_numpy()
        lo, hi = (pc.fill_null(ranges.values.field(f), 0).to_numpy() for f in ("from", "to"))
        sums = np.concatenate(([0], np.cumsum(hi - lo)))
        size = sums[offs[1:]] - sums[offs[:-1]]
        nonempty = offs[1:] > offs[:-1]
        first[nonempty] = lo[offs[:-1][nonempty]]    # the kernel's ranges are sorted
    out["first_mismatch_offset"] = np.where(row >= 0, first[np.maximum(row, 0)] if first.size else NONE, NONE)
    out["mismatch_offsets"] = np.where(row >= 0, size[np.maximum(row, 0)] if size.size else 0, 0)
    return out


def _list_of(kernel: pa.Table, name: str, row: int) -> list:
    return kernel.column(name)[row].as_py() or []


def states(assembled: Assembled, kernel: pa.Table) -> tuple[list[PartitionState], dict[str, np.ndarray]]:
    """(PartitionStates in partition order, the kernel's columns aligned with the kept replicas)."""
    c = assembled.cols
    k = aligned(assembled, kernel)
    lists = (pc.list_value_length(kernel.column("mismatch_ranges")).to_numpy(zero_copy_only=False) > 0) | \
        (pc.list_value_length(kernel.column("unmatched_producer_ids")).to_numpy(zero_copy_only=False) > 0) \
        if kernel.num_rows else np.zeros(0, bool)
    has_lists = np.where(k["row"] >= 0, lists[np.maximum(k["row"], 0)] if lists.size else False, False)
    errors = assembled.kept.column("epoch_checkpoint_error").to_pylist()
    known = c["check_epochs"].tolist()
    cols = {name: c[name].tolist() for name in ("broker", "log_start", "log_end_offset", "high_watermark",
                                                "read_at", "hw_read_at")}
    kcols = {name: k[name].tolist() for name in (
        "batch_epoch_violations", "batch_epoch_violation_first_offset", "batch_epoch_violation_last_offset",
        "batch_epoch_violation_offsets", "sequence_gaps", "sequence_gap_first_offset", "sequence_gap_last_offset",
        "unmatched_first_timestamp_ms", "unmatched_last_timestamp_ms")}
    w_off, w_ep, w_st = c["w_off"].tolist(), c["w_epoch"].tolist(), c["w_start"].tolist()
    reps = []
    for i in range(len(cols["broker"])):
        extra = {}
        if (kcols["batch_epoch_violations"][i] or kcols["sequence_gaps"][i] or has_lists[i]
                or kcols["unmatched_first_timestamp_ms"][i] != NONE or kcols["unmatched_last_timestamp_ms"][i] != NONE):
            extra = {f: _opt(v[i]) for f, v in kcols.items()}
            row = int(k["row"][i])
            extra["mismatch_ranges"] = tuple((m["from"], m["to"]) for m in _list_of(kernel, "mismatch_ranges", row))
            extra["unmatched_producer_ids"] = tuple(_list_of(kernel, "unmatched_producer_ids", row))
        # an absent or undecodable checkpoint: the cache is unknown (never an empty one)
        epochs = tuple(EpochEntry(e, s) for e, s in zip(w_ep[w_off[i]:w_off[i + 1]], w_st[w_off[i]:w_off[i + 1]])) \
            if known[i] else None
        reps.append(ReplicaState(
            broker=cols["broker"][i], epochs=epochs,
            log_start_offset=cols["log_start"][i], log_end_offset=cols["log_end_offset"][i],
            high_watermark=_opt(cols["high_watermark"][i]), read_at_ms=_opt(cols["read_at"][i]),
            high_watermark_read_at_ms=_opt(cols["hw_read_at"][i]),
            checkpoint_problems=(errors[i] or "no leader-epoch-checkpoint in the evidence",) if not known[i] else (),
            **extra))
    out = [PartitionState(cluster=p.cluster, topic=p.topic, partition=p.partition, replicas=tuple(reps[p.first:p.stop]),
                          metadata=p.metadata, compacted=p.compacted, leader_high_watermark=p.leader_high_watermark,
                          leader_high_watermark_read_at_ms=p.leader_high_watermark_read_at_ms)
           for p in assembled.partitions]
    return out, k
