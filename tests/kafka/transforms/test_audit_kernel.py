"""The vectorized partition state (replicas.assemble + batch_state.replica_rows, no Spark) against a naive oracle
written from the rules' words, on random partitions: replicas with divergent tails, retention, compaction,
epochs outside the cache, broken checkpoints, producer sequence gaps, legacy batches; with and without metadata."""
from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from audit.systems.kafka.domain.epochs import EpochEntry, LeaderEpochCache
from audit.systems.kafka.domain.partition import PartitionMetadata, differing, reference_broker
from audit.systems.kafka.transforms.batch_state import BATCH_COLUMNS, replica_rows
from audit.systems.kafka.transforms.replicas import assemble, states
from audit.systems.kafka.transforms.state import METADATA_COLUMNS, REPLICA_COLUMNS


def random_partition(rng: random.Random, pkey: int):
    """(replica rows, epoch rows, metadata row or None, batch rows) of one partition."""
    brokers = rng.sample(range(1, 8), rng.randint(1, 4))
    common, epoch = _common_log(rng)
    replicas, epochs, batches = [], [], []
    for b in brokers:
        log = _replica_log(rng, common, epoch)
        leo = log[-1][1] + 1 if log else 0
        lso = rng.choice((0, 0, log[len(log) // 2][0] if log else 0))
        cache = _epoch_cache(rng, log)
        rkey = pkey * 16 + b
        hw = rng.choice((None, leo, max(0, leo - rng.randint(0, 6)), leo + 2))
        cleaner = rng.choice((None, None, None, rng.randint(0, max(leo, 1))))
        epoch_file = rng.random() > 0.05
        replicas.append({"pkey": pkey, "rkey": rkey, "cluster": "c", "topic": f"t{pkey}", "partition": 0,
                         "broker": b, "dir": "dir0", "high_watermark": hw, "log_start_offset": lso,
                         "cleaner_offset": cleaner, "log_end_offset": leo,
                         "first_batch_offset": log[0][0] if log else None, "epoch_checkpoint": epoch_file,
                         "epoch_checkpoint_error": None, "index_complete": True, "index_problem": None,
                         "read_started_at_ms": 1, "read_finished_at_ms": 9, "checkpoints_read_at_ms": 2,
                         "listed_at_ms": 3})
        if epoch_file:
            epochs += [{"rkey": rkey, "entry_index": i, "epoch": e, "start_offset": s} for i, (e, s) in
                       enumerate(cache)]
        batches += _batch_rows(rng, pkey, rkey, log)
    return replicas, epochs, _metadata_row(rng, pkey, brokers, epoch), batches


def _common_log(rng: random.Random) -> tuple[list[list[int]], int]:
    """(the batches every replica starts from: [base, last, epoch, crc, magic, producer id, producer epoch,
    base sequence], the last leader epoch)."""
    n = rng.randint(0, 25)
    common = []
    offset, epoch = 0, 0
    for i in range(n):
        if rng.random() < 0.15:
            epoch += rng.randint(1, 2)
        size = rng.randint(1, 5)
        common.append([offset, offset + size - 1, epoch, rng.randrange(1 << 32), 2, 7, 0, offset])
        offset += size
    return common, epoch


def _replica_log(rng: random.Random, common: list[list[int]], epoch: int) -> list[list[int]]:
    """One replica's batches: a prefix of the common log, maybe with a divergent tail, a legacy message, or a batch
    in an epoch no cache gives."""
    n = len(common)
    log = [list(x) for x in common[:rng.randint(max(0, n - 4), n)]]
    if log and rng.random() < 0.4:            # a divergent tail of other batches
        log = _with_divergent_tail(rng, log, epoch)
    if log and rng.random() < 0.1:
        log[0][4] = rng.choice((0, 1))           # a legacy message
    if log and rng.random() < 0.1:
        log[rng.randrange(len(log))][2] = epoch + 3   # an epoch no cache gives
    return log


def _with_divergent_tail(rng: random.Random, log: list[list[int]], epoch: int) -> list[list[int]]:
    cut = rng.randint(0, len(log) - 1)
    start = log[cut][0]
    log = log[:cut]
    for _ in range(rng.randint(1, 4)):
        size = rng.randint(1, 4)
        log.append([start, start + size - 1, rng.randint(0, epoch + 1), rng.randrange(1 << 32), 2,
                    rng.choice((7, 8)), 0, start + rng.choice((0, 0, 3))])
        start += size
    return log


def _epoch_cache(rng: random.Random, log: list[list[int]]) -> list[tuple[int, int]]:
    """The replica's leader epoch checkpoint: (epoch, start offset) per epoch of its log, maybe truncated from the
    start or out of order."""
    cache = sorted({(x[2], min(y[0] for y in log if y[2] == x[2])) for x in log if x[2] >= 0})
    if log and rng.random() < 0.2:            # took the leader's log start: cache truncated from the start
        moved = LeaderEpochCache(cache)
        moved.truncate_from_start(rng.randint(log[0][0], log[-1][1]))
        cache = list(moved.entries)
    if rng.random() < 0.1 and len(cache) > 1:
        cache[0], cache[1] = cache[1], cache[0]   # not increasing: the broker drops entries on load
    return cache


def _batch_rows(rng: random.Random, pkey: int, rkey: int, log: list[list[int]]) -> list[dict]:
    batches = []
    for base, last, ple, crc, magic, pid, pep, seq in log:
        batches.append({"pkey": pkey, "rkey": rkey, "base_offset": base, "last_offset": last,
                        "partition_leader_epoch": ple if magic >= 2 else -1, "magic": magic, "crc": crc,
                        "producer_id": pid if magic >= 2 and rng.random() > 0.1 else -1,
                        "producer_epoch": pep, "base_sequence": seq,
                        "base_timestamp": 100 + base, "max_timestamp": 100 + last,
                        "crc_valid": rng.choice((None, True, True, False))})
    return batches


def _metadata_row(rng: random.Random, pkey: int, brokers: list[int], epoch: int) -> dict | None:
    if rng.random() >= 0.7:
        return None
    leader = rng.choice(brokers + [99])
    return {"pkey": pkey, "origin": "admin", "broker": None, "leader": leader, "leader_epoch": epoch,
            "replicas": brokers, "isr": brokers, "error_code": 0, "high_watermark": None,
            "offsets_error_code": None, "metadata_offset": None, "read_started_at_ms": 1,
            "read_finished_at_ms": 2, "offsets_read_finished_at_ms": None}


def table(rows: list[dict], names, types: dict) -> pa.Table:
    return pa.table({n: pa.array([r.get(n) for r in rows], type=types.get(n, pa.int64())) for n in names})


TYPES = {"cluster": pa.string(), "topic": pa.string(), "dir": pa.string(), "epoch_checkpoint": pa.bool_(),
         "epoch_checkpoint_error": pa.string(), "index_complete": pa.bool_(), "index_problem": pa.string(),
         "origin": pa.string(), "replicas": pa.list_(pa.int64()), "isr": pa.list_(pa.int64()),
         "crc_valid": pa.bool_()}


def oracle(replicas, epochs, md, batches):
    """{broker: (mismatch ranges, epoch violations, sequence gaps, producers in Δ)} by the rules' words."""
    caches, logs, reps = {}, {}, {r["broker"]: r for r in replicas}
    for r in replicas:
        entries = [EpochEntry(e["epoch"], e["start_offset"]) for e in sorted(epochs, key=lambda e: e["entry_index"])
                   if e["rkey"] == r["rkey"]]
        caches[r["broker"]] = LeaderEpochCache(e for e in entries if e.epoch >= 0 and e.start_offset >= 0)
        logs[r["broker"]] = sorted((b for b in batches if b["rkey"] == r["rkey"]), key=lambda b: b["base_offset"])
    metadata = None if md is None else PartitionMetadata(md["leader"], md["leader_epoch"], tuple(md["replicas"]),
                                                         tuple(md["isr"]), 2)
    ref, _ = reference_broker(metadata, ((b, caches[b].latest_epoch, reps[b]["log_end_offset"]) for b in reps))
    out = {}
    for b, r in reps.items():
        lso = _oracle_log_start(r)
        hw = r["high_watermark"]
        exposed = lso if hw is None else max(lso, min(hw, r["log_end_offset"]))
        committed = [x for x in logs[b] if x["magic"] >= 2 and x["base_offset"] >= lso and x["last_offset"] < exposed]
        # below the cache's first entry nothing is judged (the cache says nothing there)
        violations = [] if not r["epoch_checkpoint"] else [
            x for x in committed if caches[b].epoch_for_offset(x["base_offset"]) not in (
                None, x["partition_leader_epoch"])]
        gaps = _oracle_sequence_gaps(committed)
        ranges, producers, span = [], set(), []
        if ref is not None and b != ref:
            ranges, producers, span = _oracle_delta(r, reps[ref], logs[b], logs[ref], lso, exposed)
        out[b] = (ranges, len(violations), sorted(gaps), sorted(producers),
                  (min(span), max(span)) if span else (None, None))
    return ref, out


def _oracle_log_start(r: dict) -> int:
    return max(r["log_start_offset"] or 0, r["first_batch_offset"] if r["first_batch_offset"] is not None
               else r["log_end_offset"])


def _oracle_sequence_gaps(committed: list[dict]) -> list[int]:
    """Base offsets of committed batches whose sequence does not follow the previous batch of the same producer
    id and epoch."""
    gaps, last_of = [], {}
    for x in committed:
        if x["producer_id"] < 0 or x["base_sequence"] < 0:
            continue
        key = (x["producer_id"], x["producer_epoch"])
        if key in last_of:
            p = last_of[key]
            if x["base_sequence"] != (p["base_sequence"] + p["last_offset"] - p["base_offset"] + 1) % (1 << 31):
                gaps.append(x["base_offset"])
        last_of[key] = x
    return gaps


def _oracle_delta(r: dict, rr: dict, log: list[dict], ref_log: list[dict], lso: int, exposed: int):
    """(Δ's ranges within the window both replicas describe, producer ids of Δ's exposed batches, their
    timestamps) of replica r against the reference rr."""
    rlso = _oracle_log_start(rr)
    lo = max(lso, rlso, r["cleaner_offset"] if r["cleaner_offset"] is not None else -1,
             rr["cleaner_offset"] if rr["cleaner_offset"] is not None else -1)
    hi = min(r["log_end_offset"], rr["log_end_offset"])
    have = {(x["base_offset"], x["last_offset"], x["crc"]) for x in ref_log}
    ranges, producers, span = [], set(), []
    differ = set()
    for i, x in enumerate(log):
        # a batch reaching into the window counts from the window's start on
        if x["last_offset"] >= lo and x["base_offset"] < hi and \
                (x["base_offset"], x["last_offset"], x["crc"]) not in have:
            differ.add(i)
            start = max(x["base_offset"], lo)
            if ranges and ranges[-1][1] >= start:
                ranges[-1] = (ranges[-1][0], x["last_offset"] + 1)
            else:
                ranges.append((start, x["last_offset"] + 1))
    for i, x in enumerate(log):
        in_delta = i in differ or x["last_offset"] >= rr["log_end_offset"]
        if in_delta and x["last_offset"] >= lso and x["base_offset"] < exposed:
            span += [x["base_timestamp"], x["max_timestamp"]]
            if x["producer_id"] >= 0:
                producers.add(x["producer_id"])
    return ranges, producers, span


@pytest.mark.parametrize("seed", range(25))
def test_kernel_equals_the_oracle(seed):
    rng = random.Random(seed)
    parts = [random_partition(rng, pkey) for pkey in range(1, 30)]
    replicas = [r for p in parts for r in p[0]]
    epochs = [e for p in parts for e in p[1]]
    mds = [p[2] for p in parts if p[2] is not None]
    batches = [b for p in parts for b in p[3]]
    assembled = assemble(table(replicas, ("pkey", "rkey", *REPLICA_COLUMNS), TYPES),
                         table(epochs, ("rkey", "entry_index", "epoch", "start_offset"), TYPES),
                         table(mds, ("pkey", *METADATA_COLUMNS), TYPES))
    chunk = table(batches, BATCH_COLUMNS, TYPES)
    order = list(range(chunk.num_rows))
    rng.shuffle(order)                                # the kernel must not rely on the input order
    kernel = replica_rows(assembled.params, chunk.take(pa.array(order, pa.int64())))
    partition_states, _ = states(assembled, kernel)
    for p, st, part in zip(assembled.partitions, partition_states, sorted(parts, key=lambda x: x[0][0]["pkey"])):
        ref, want = oracle(*part)
        assert p.reference == ref
        for r in st.replicas:
            ranges, violations, gaps, producers, span = want[r.broker]
            assert list(r.mismatch_ranges) == ranges, (seed, st.topic, r.broker)
            assert r.batch_epoch_violations == violations, (seed, st.topic, r.broker)
            assert r.sequence_gaps == len(gaps) and (r.sequence_gap_first_offset == (gaps[0] if gaps else None))
            assert sorted(r.unmatched_producer_ids) == producers, (seed, st.topic, r.broker)
            assert (r.unmatched_first_timestamp_ms, r.unmatched_last_timestamp_ms) == span, (seed, st.topic)
            if ref is not None and r.broker != ref:
                leader = next(x for x in st.replicas if x.broker == ref)
                assert differing(r, leader.log_end_offset) is not None


def test_an_empty_chunk_and_unknown_replicas():
    assembled = assemble(table([], ("pkey", "rkey", *REPLICA_COLUMNS), TYPES),
                         table([], ("rkey", "entry_index", "epoch", "start_offset"), TYPES),
                         table([], ("pkey", *METADATA_COLUMNS), TYPES))
    assert replica_rows(assembled.params, table([], BATCH_COLUMNS, TYPES)).num_rows == 0
    stray = [{"pkey": 1, "rkey": 5, "base_offset": 0, "last_offset": 0, "magic": 2}]
    assert replica_rows(assembled.params, table(stray, BATCH_COLUMNS, TYPES)).num_rows == 0


def test_offsets_too_large_for_the_packed_keys():
    """Offsets near 2^63 are compressed to ranks: same results."""
    rng = random.Random(7)
    big = 1 << 61
    replicas, epochs, md, batches = random_partition(rng, 1)
    for b in batches:
        b["base_offset"] += big
        b["last_offset"] += big
    for r in replicas:
        r["log_end_offset"] += big
        r["first_batch_offset"] = None if r["first_batch_offset"] is None else r["first_batch_offset"] + big
        r["high_watermark"] = None if r["high_watermark"] is None else r["high_watermark"] + big
        r["log_start_offset"] = (r["log_start_offset"] or 0) + big
        r["cleaner_offset"] = None
    for e in epochs:
        e["start_offset"] += big
    assembled = assemble(table(replicas, ("pkey", "rkey", *REPLICA_COLUMNS), TYPES),
                         table(epochs, ("rkey", "entry_index", "epoch", "start_offset"), TYPES),
                         table([md] if md else [], ("pkey", *METADATA_COLUMNS), TYPES))
    kernel = replica_rows(assembled.params, table(batches, BATCH_COLUMNS, TYPES))
    (st,), _ = states(assembled, kernel)
    _, want = oracle(replicas, epochs, md, batches)
    for r in st.replicas:
        assert list(r.mismatch_ranges) == want[r.broker][0]
        assert r.batch_epoch_violations == want[r.broker][1]
    assert np.all(assembled.params.log_start >= big)


def test_batches_below_the_first_cache_entry_are_not_judged():
    """A follower took the leader's log start 30: its cache was truncated from the start to (1, 30) while its
    segments from 0 and its log-start checkpoint (0) stay until retention runs and the checkpoint is written.
    Batches 0..29 carry epochs 0 and 1 the cache no longer describes: not judged; from 30 on they are."""
    replica = {"pkey": 1, "rkey": 17, "cluster": "c", "topic": "t", "partition": 0, "broker": 1, "dir": "dir0",
               "high_watermark": 60, "log_start_offset": 0, "cleaner_offset": None, "log_end_offset": 60,
               "first_batch_offset": 0, "epoch_checkpoint": True, "epoch_checkpoint_error": None,
               "index_complete": True, "index_problem": None, "read_started_at_ms": 1, "read_finished_at_ms": 9,
               "checkpoints_read_at_ms": 2, "listed_at_ms": 3}
    epochs = [{"rkey": 17, "entry_index": 0, "epoch": 1, "start_offset": 30}]
    plain = {"pkey": 1, "rkey": 17, "magic": 2, "crc": 5, "producer_id": -1, "producer_epoch": -1,
             "base_sequence": -1, "base_timestamp": 0, "max_timestamp": 0, "crc_valid": None}
    batches = [{**plain, "base_offset": base, "last_offset": base + 9, "partition_leader_epoch": epoch}
               for base, epoch in ((0, 0), (10, 0), (20, 1), (30, 1), (40, 0), (50, 1))]
    assembled = assemble(table([replica], ("pkey", "rkey", *REPLICA_COLUMNS), TYPES),
                         table(epochs, ("rkey", "entry_index", "epoch", "start_offset"), TYPES),
                         table([], ("pkey", *METADATA_COLUMNS), TYPES))
    (row,) = replica_rows(assembled.params, table(batches, BATCH_COLUMNS, TYPES)).to_pylist()
    assert (row["batch_epoch_violations"], row["batch_epoch_violation_first_offset"],
            row["batch_epoch_violation_last_offset"], row["batch_epoch_violation_offsets"]) == (1, 40, 49, 10)


def test_a_batch_straddling_the_reference_log_start_differs_from_there():
    """An unclean leader started its log at 538 in a new epoch; the follower's batch 537..539 of the old leader
    reaches into the window both logs speak for: offsets 538 and 539 differ (537 lies below the leader's log)."""
    base = {"pkey": 1, "cluster": "c", "topic": "t", "partition": 0, "dir": "dir0", "cleaner_offset": None,
            "epoch_checkpoint": True, "epoch_checkpoint_error": None, "index_complete": True,
            "index_problem": None, "read_started_at_ms": 1, "read_finished_at_ms": 9, "checkpoints_read_at_ms": 2,
            "listed_at_ms": 3}
    replicas = [{**base, "rkey": 11, "broker": 1, "high_watermark": 541, "log_start_offset": 0,
                 "log_end_offset": 541, "first_batch_offset": 534},
                {**base, "rkey": 13, "broker": 3, "high_watermark": 541, "log_start_offset": 538,
                 "log_end_offset": 541, "first_batch_offset": 538}]
    epochs = [{"rkey": 11, "entry_index": 0, "epoch": 0, "start_offset": 0},
              {"rkey": 13, "entry_index": 0, "epoch": 1, "start_offset": 538}]
    md = {"pkey": 1, "origin": "admin", "broker": None, "leader": 3, "leader_epoch": 1, "replicas": [1, 3],
          "isr": [3], "error_code": 0, "high_watermark": None, "offsets_error_code": None, "metadata_offset": None,
          "read_started_at_ms": 1, "read_finished_at_ms": 2, "offsets_read_finished_at_ms": None}
    plain = {"pkey": 1, "magic": 2, "producer_id": -1, "producer_epoch": -1, "base_sequence": -1,
             "base_timestamp": 0, "max_timestamp": 0, "crc_valid": None}
    batches = [{**plain, "rkey": 11, "base_offset": b, "last_offset": e, "partition_leader_epoch": 0, "crc": b}
               for b, e in ((534, 536), (537, 539), (540, 540))]
    batches += [{**plain, "rkey": 13, "base_offset": 538, "last_offset": 540, "partition_leader_epoch": 1,
                 "crc": 99}]
    assembled = assemble(table(replicas, ("pkey", "rkey", *REPLICA_COLUMNS), TYPES),
                         table(epochs, ("rkey", "entry_index", "epoch", "start_offset"), TYPES),
                         table([md], ("pkey", *METADATA_COLUMNS), TYPES))
    kernel = replica_rows(assembled.params, table(batches, BATCH_COLUMNS, TYPES))
    (st,), _ = states(assembled, kernel)
    follower = next(r for r in st.replicas if r.broker == 1)
    assert follower.mismatch_ranges == ((538, 541),)
