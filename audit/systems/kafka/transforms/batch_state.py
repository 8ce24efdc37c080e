"""What the batch headers say about each replica, computed with numpy over whole Arrow chunks (no per-partition
Python call): the kernel state.py runs inside mapInArrow on batch rows hash-partitioned by partition.

Per replica (kafka_batches rows of one broker's copy of a partition):
- mismatch_ranges: [from, to) offset ranges of a follower's batches, inside the window both logs hold, that its
  reference replica does not hold identically (a batch straddling the window's start from the start on). Batches are
  equal when base offset, last offset and CRC are equal
  (the CRC covers attributes..records, not the partition leader epoch: docs/formats/kafka.md §3.1).
  The window is [max(both log starts, both cleaner offsets), min(both log ends)): below a cleaner offset each
  replica compacted on its own schedule (LogCleaner rewrites batches, keeping base and last offset, so CRCs
  differ); at and past the reference's log end the domain counts the follower's offsets itself
  (audit.systems.kafka.domain.partition.differing);
- batch epoch violations: committed batches (magic >= 2, at or above the log start, last offset below the exposed
  end = min(high watermark, log end)) whose partitionLeaderEpoch is not the epoch the replica's leader-epoch cache
  gives their base offset, entries read as intervals [start_i, start_{i+1}) (LeaderEpochFileCache.epochForOffset).
  Batches below the cache's first entry are not judged: a follower truncates its cache from the start the moment
  it takes the leader's log start, before retention deletes those segments and before the log-start checkpoint
  says so (audit/systems/kafka/domain/partition.py's module doc has the upstream calls);
- producer sequence gaps among the same committed batches: per producer id and producer epoch, in offset order, a
  batch whose baseSequence is not the previous batch's lastSequence + 1 (DefaultRecordBatch.incrementSequence wraps
  at Integer.MAX_VALUE to 0; batches without a producer id or sequence, e.g. control markers, are not counted);
- for a follower, the producers and time span of its batches in Δ (mismatched, or at or past the reference's log
  end) below its exposed end: what a repair must name when those offsets are lost.

Replica parameters (sorted by replica key, from the driver) come as a `Replicas` record of numpy arrays."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SEQ_MOD = 1 << 31            # sequences are non-negative int32 values; incrementSequence wraps past MAX_VALUE
REFERENCE, FOLLOWER, IGNORED = 1, 0, -1
NONE = np.iinfo(np.int64).min   # "no value" in int64 columns (mapped to null on output)

# The batch columns the kernel reads (state.py selects them in this order).
BATCH_COLUMNS = ("pkey", "rkey", "base_offset", "last_offset", "partition_leader_epoch", "magic", "crc",
                 "producer_id", "producer_epoch", "base_sequence", "base_timestamp", "max_timestamp", "crc_valid")
RANGES = pa.list_(pa.struct([("from", pa.int64()), ("to", pa.int64())]))   # [from, to)
OUT_FIELDS = (("rkey", pa.int64()), ("batches", pa.int64()), ("v2_batches", pa.int64()),
              ("legacy_batches", pa.int64()), ("crc_invalid", pa.int64()), ("mismatch_ranges", RANGES),
              ("unmatched_producer_ids", pa.list_(pa.int64())), ("unmatched_first_timestamp_ms", pa.int64()),
              ("unmatched_last_timestamp_ms", pa.int64()), ("batch_epoch_violations", pa.int64()),
              ("batch_epoch_violation_first_offset", pa.int64()), ("batch_epoch_violation_last_offset", pa.int64()),
              ("batch_epoch_violation_offsets", pa.int64()), ("sequence_gaps", pa.int64()),
              ("sequence_gap_first_offset", pa.int64()), ("sequence_gap_last_offset", pa.int64()))
OUT_SCHEMA = pa.schema(OUT_FIELDS)


@dataclass(frozen=True)
class Replicas:
    """Every replica of the run, indexed 0..n-1 in `rkey` order. Offsets are int64; -1 where absent.

    role            REFERENCE, FOLLOWER (of the reference `ref`) or IGNORED (no reference: not compared)
    log_start       the log start offset as the broker loads it (max of the checkpoint and the first segment)
    log_end         log end offset
    exposed_end     max(log start, min(high watermark, log end)); log start without a high watermark
    cleaner         cleaner-offset-checkpoint value, -1 when none
    ref             index of the partition's reference replica, -1 when none
    check_epochs    the leader-epoch cache is known (the checkpoint was copied and decoded)
    epoch_offsets   CSR offsets (n + 1) into epoch_epoch / epoch_start: the cache as the broker loads it"""

    rkey: np.ndarray
    role: np.ndarray
    log_start: np.ndarray
    log_end: np.ndarray
    exposed_end: np.ndarray
    cleaner: np.ndarray
    ref: np.ndarray
    check_epochs: np.ndarray
    epoch_offsets: np.ndarray
    epoch_epoch: np.ndarray
    epoch_start: np.ndarray

    def __len__(self) -> int:
        return len(self.rkey)


def _ranges(offsets: np.ndarray, which: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(owner, position) of every CSR element of the rows `which`: owner = index into `which`."""
    counts = offsets[which + 1] - offsets[which]
    owner = np.repeat(np.arange(len(which)), counts)
    starts = np.repeat(offsets[which] - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
    return owner, starts + np.arange(owner.size)


def _first_per(key: np.ndarray, value: np.ndarray, n: int, reduce) -> np.ndarray:
    out = np.full(n, NONE, dtype=np.int64)
    if key.size:
        init = np.iinfo(np.int64).max if reduce is np.minimum else NONE
        acc = np.full(n, init, dtype=np.int64)
        reduce.at(acc, key, value)
        hit = np.zeros(n, dtype=bool)
        hit[key] = True
        out[hit] = acc[hit]
    return out


class _Keys:
    """(replica index, offset) pairs as one sortable int64: replica index in the high bits, the offset (or, when
    offsets do not fit the low bits, its rank among the offsets of the chunk) in the low bits."""

    def __init__(self, n: int, *offsets: np.ndarray):
        self.shift = 62 - max(1, int(n).bit_length())
        every = np.concatenate(offsets) if offsets else np.zeros(0, np.int64)
        self.values = None
        if every.size and (every.max() >= (1 << self.shift) or every.min() < 0):
            self.values = np.unique(every)   # order-preserving compression

    def __call__(self, ri: np.ndarray, offset: np.ndarray) -> np.ndarray:
        low = offset if self.values is None else np.searchsorted(self.values, offset)
        return (ri.astype(np.int64) << self.shift) | low


def _assigned_epochs(rep: Replicas, keys: _Keys, e_ri: np.ndarray, e_pos: np.ndarray, ri: np.ndarray,
                     base: np.ndarray) -> np.ndarray:
    """The epoch each (replica, base offset) gets from that replica's cache (the entry with the largest start at or
    below it); -2 below its first entry."""
    e_key = keys(e_ri, rep.epoch_start[e_pos])          # sorted: CSR order is (replica, start offset)
    at = np.searchsorted(e_key, keys(ri, base), side="right") - 1
    found = (at >= 0) & (e_ri[np.maximum(at, 0)] == ri)
    return np.where(found, rep.epoch_epoch[e_pos[np.maximum(at, 0)]], -2)


def _window_start(rep: Replicas, f: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Where the window both logs speak for starts, per follower `f` and its reference `ref` (replica indexes)."""
    return np.maximum(np.maximum(rep.log_start[f], rep.log_start[ref]), np.maximum(rep.cleaner[f], rep.cleaner[ref]))


def _mismatched(rep: Replicas, c: dict, keys: _Keys) -> np.ndarray:
    """Row indexes of follower batches that reach into the window and that the reference does not hold identically
    (rows sorted by replica and base offset). A batch straddling the window's start counts from there on."""
    ri = c["ri"]
    role = rep.role[ri]
    refs = np.flatnonzero(role == REFERENCE)
    fol = np.flatnonzero((role == FOLLOWER) & (rep.ref[ri] >= 0))
    r_key = keys(ri[refs], c["base"][refs])               # sorted (rows are)
    f_ref = rep.ref[ri[fol]]
    at = np.minimum(np.searchsorted(r_key, keys(f_ref, c["base"][fol])), max(refs.size - 1, 0))
    same = np.zeros(fol.size, dtype=bool)
    if refs.size:
        other = refs[at]
        same = ((ri[other] == f_ref) & (c["base"][other] == c["base"][fol]) & (c["last"][other] == c["last"][fol])
                & (c["crc"][other] == c["crc"][fol]))
    f = ri[fol]
    lo = _window_start(rep, f, f_ref)
    hi = np.minimum(rep.log_end[f], rep.log_end[f_ref])
    return fol[~same & (c["last"][fol] >= lo) & (c["base"][fol] < hi)]


def _joined(ri: np.ndarray, base: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """[from, to) ranges of rows sorted by (replica, base), adjacent batches joined: (replica, from, to)."""
    if not ri.size:
        return ri, base, end
    new = np.ones(ri.size, dtype=bool)
    new[1:] = (ri[1:] != ri[:-1]) | (base[1:] > end[:-1])
    starts = np.flatnonzero(new)
    stops = np.append(starts[1:], ri.size) - 1
    return ri[starts], base[starts], end[stops]


def _sequence_gaps(c: dict, eligible: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(replica index, base offset, last offset) of every committed batch that follows a sequence gap."""
    rows = np.flatnonzero(eligible & (c["pid"] >= 0) & (c["seq"] >= 0))
    pid, pep = c["pid"][rows], c["pep"][rows]
    codes = np.unique(pid, return_inverse=True)[1].astype(np.int64)
    producer = (codes << 16) | (pep & 0xFFFF)
    order = np.lexsort((producer, c["ri"][rows]))       # stable: offset order kept within each producer
    rows = rows[order]
    ri, producer = c["ri"][rows], producer[order]
    base, last, seq = c["base"][rows], c["last"][rows], c["seq"][rows]
    same = (ri[1:] == ri[:-1]) & (producer[1:] == producer[:-1])
    expected = (seq[:-1] + (last[:-1] - base[:-1]) + 1) % SEQ_MOD
    gap = np.flatnonzero(same & (seq[1:] != expected)) + 1
    return ri[gap], base[gap], last[gap]


def _unmatched(rep: Replicas, c: dict, mismatched: np.ndarray, n: int):
    """Per follower, over its batches in Δ (mismatched, or at or past the reference's log end) inside
    [log start, exposed end): producer ids (sorted pairs) and the time span (partition.differing)."""
    ri = c["ri"]
    fol = (rep.role[ri] == FOLLOWER) & (rep.ref[ri] >= 0)
    ref_end = rep.log_end[np.where(fol, rep.ref[ri], 0)]
    in_delta = np.zeros(ri.size, dtype=bool)
    in_delta[mismatched] = True
    in_delta |= fol & (c["last"] >= ref_end)
    rows = np.flatnonzero(in_delta & (c["last"] >= rep.log_start[ri]) & (c["base"] < rep.exposed_end[ri]))
    rri = ri[rows]
    bts, mts = c["bts"][rows], c["mts"][rows]
    first_ts = _first_per(rri[bts >= 0], bts[bts >= 0], n, np.minimum)
    last_ts = _first_per(rri[mts >= 0], mts[mts >= 0], n, np.maximum)
    pid = c["pid"][rows]
    pairs = np.unique(np.stack((rri[pid >= 0], pid[pid >= 0])), axis=1) if rows.size else np.empty((2, 0), np.int64)
    return first_ts, last_ts, pairs


def _lists(owner: np.ndarray, values: pa.Array, present: np.ndarray, n: int) -> pa.Array:
    """One list per present replica from `values` grouped by `owner` (sorted, every owner present)."""
    counts = np.bincount(owner, minlength=n)[present] if owner.size else np.zeros(present.size, np.int64)
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), values)


def _columns(chunk: pa.Table, rep: Replicas) -> tuple[dict, np.ndarray]:
    """The chunk's known rows as int64 arrays sorted by (replica index, base offset), and their crc_valid = false
    flags (null = not verified: only an explicit false counts)."""
    n = len(rep)
    col = {name: pc.fill_null(chunk.column(name), -1).to_numpy().astype(np.int64, copy=False)
           for name in BATCH_COLUMNS if name != "crc_valid"}
    rkey = col["rkey"]
    ri = np.searchsorted(rep.rkey, rkey)
    ri_c = np.minimum(ri, max(n - 1, 0))
    known = (ri < n) & (rep.rkey[ri_c] == rkey) if n else np.zeros(rkey.size, dtype=bool)
    known &= col["base_offset"] >= 0
    keep = np.flatnonzero(known)
    invalid = pc.fill_null(pc.invert(chunk.column("crc_valid")), False).to_numpy(zero_copy_only=False)
    names = {"base": "base_offset", "last": "last_offset", "ple": "partition_leader_epoch", "magic": "magic",
             "crc": "crc", "pid": "producer_id", "pep": "producer_epoch", "seq": "base_sequence",
             "bts": "base_timestamp", "mts": "max_timestamp"}
    c = {k: col[v][keep] for k, v in names.items()}
    c["ri"] = ri_c[keep]
    return c, invalid[keep]


def replica_rows(rep: Replicas, chunk: pa.Table) -> pa.Table:
    """One OUT_SCHEMA row per replica with batches in `chunk`; `chunk` holds every batch row of its partitions."""
    n = len(rep)
    c, invalid = _columns(chunk, rep)
    present = np.unique(c["ri"])
    e_owner, e_pos = _ranges(rep.epoch_offsets, present)
    e_ri = present[e_owner]
    keys = _Keys(n, c["base"], rep.epoch_start[e_pos])
    order = np.argsort(keys(c["ri"], c["base"]), kind="stable")
    c = {k: v[order] for k, v in c.items()}
    invalid = invalid[order]
    ri = c["ri"]
    batches = np.bincount(ri, minlength=n)
    v2 = c["magic"] >= 2
    committed = v2 & (c["base"] >= rep.log_start[ri]) & (c["last"] < rep.exposed_end[ri])

    judged = np.flatnonzero(committed & rep.check_epochs[ri])
    assigned = _assigned_epochs(rep, keys, e_ri, e_pos, ri[judged], c["base"][judged])
    bad = judged[(assigned != -2) & (assigned != c["ple"][judged])]     # -2: below the first entry, not judged
    b_ri, b_base, b_last = ri[bad], c["base"][bad], c["last"][bad]

    g_ri, g_base, g_last = _sequence_gaps(c, committed)
    mismatched = np.sort(_mismatched(rep, c, keys))
    m_start = np.maximum(c["base"][mismatched], _window_start(rep, ri[mismatched], rep.ref[ri[mismatched]]))
    m_ri, m_from, m_to = _joined(ri[mismatched], m_start, c["last"][mismatched] + 1)
    first_ts, last_ts, pairs = _unmatched(rep, c, mismatched, n)

    def pick(a: np.ndarray) -> pa.Array:
        v = a[present]
        return pa.array(v, type=pa.int64(), mask=v == NONE)

    def count(k: np.ndarray, weights=None) -> pa.Array:
        return pa.array(np.bincount(k, weights=weights, minlength=n)[present].astype(np.int64))

    ranges = pa.StructArray.from_arrays([pa.array(m_from, pa.int64()), pa.array(m_to, pa.int64())], ["from", "to"])
    columns = [
        pa.array(rep.rkey[present]), pa.array(batches[present].astype(np.int64)), count(ri[v2]), count(ri[~v2]),
        count(ri[invalid]), _lists(m_ri, ranges, present, n),
        _lists(pairs[0], pa.array(pairs[1], pa.int64()), present, n), pick(first_ts), pick(last_ts),
        count(b_ri), pick(_first_per(b_ri, b_base, n, np.minimum)), pick(_first_per(b_ri, b_last, n, np.maximum)),
        count(b_ri, (b_last - b_base + 1).astype(np.float64)),
        count(g_ri), pick(_first_per(g_ri, g_base, n, np.minimum)), pick(_first_per(g_ri, g_last, n, np.maximum))]
    return pa.Table.from_arrays(columns, schema=OUT_SCHEMA)
