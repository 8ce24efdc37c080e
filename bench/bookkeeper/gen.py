"""Vectorized generator of BookKeeper ledger_state rows for the benchmark (numpy + pyarrow, no per-entry
Python): CLOSED ledgers, ~3 segments each, every bookie holding exactly its stripe encoded as merged
SequenceGroups (at most 3 groups per bookie and segment), plus injected holes."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


@dataclass(frozen=True)
class Hole:
    ledger_id: int
    segment: int
    index: int
    first: int
    last: int


def _stripe_groups(idx, lo, hi, E, Qw):
    """Vectorized audit.systems.bookkeeper.domain.striping.stripe_groups: 3 candidate groups per piece with masks."""
    s = (idx - Qw + 1) % E
    rel = (idx - lo) % E
    f = lo + np.where(rel < Qw, 0, rel - Qw + 1)
    run0 = f + (s - f) % E
    nonempty = f <= hi
    g1 = nonempty & (run0 != f)
    g1_end = np.minimum(run0 - E + Qw - 1, hi)
    has_mid = nonempty & (run0 + Qw - 1 <= hi)
    k = np.where(has_mid, (hi - Qw + 1 - run0) // E, 0)
    tail = np.where(has_mid, run0 + (k + 1) * E, run0)
    g3 = nonempty & (tail <= hi)
    first = np.stack([f, run0, tail], axis=1)
    last = np.stack([f, run0 + k * E, tail], axis=1)
    size = np.stack([g1_end - f + 1, np.full_like(f, Qw), hi - tail + 1], axis=1)
    period = np.stack([np.zeros_like(f), np.where(k > 0, E, 0), np.zeros_like(f)], axis=1)
    valid = np.stack([g1, has_mid, g3], axis=1)
    return first, last, size, period, valid


def generate(n_ledgers: int, entries: int, *, E: int = 5, Qw: int = 3, Qa: int = 2, n_segments: int = 3,
             n_bookies: int = 20, n_holes: int = 50, hole_len: int = 500, seed: int = 7):
    """(pyarrow.Table of ledger_state rows, list of injected holes)."""
    rng = np.random.default_rng(seed)
    L, S = n_ledgers, n_segments
    ledger_ids = np.arange(1, L + 1, dtype=np.int64)
    last_entry = np.full(L, entries - 1, dtype=np.int64)
    # segment starts: 0, then sorted cut points spread over the ledger
    cuts = np.sort(rng.integers(entries // 10, entries - entries // 10, size=(L, S - 1)), axis=1)
    starts = np.concatenate([np.zeros((L, 1), dtype=np.int64), cuts], axis=1)
    ends = np.concatenate([starts[:, 1:] - 1, last_entry[:, None]], axis=1)
    ens = np.argsort(rng.random((L, S, n_bookies)), axis=2)[:, :, :E]           # distinct bookies per segment
    pool = np.array([f"bk{j:02d}.bench:3181" for j in range(n_bookies)], dtype=object)

    # one piece per (ledger, segment, index); holes split a piece in two
    li, si, xi = np.meshgrid(np.arange(L), np.arange(S), np.arange(E), indexing="ij")
    li, si, xi = li.ravel(), si.ravel(), xi.ravel()
    lo, hi = starts[li, si], ends[li, si]
    holes: list[Hole] = []
    if n_holes:
        pick = rng.choice(L, size=min(n_holes, L), replace=False)
        for k, l in enumerate(sorted(pick)):
            seg, idx = k % S, k % E
            a, b = int(starts[l, seg]), int(ends[l, seg])
            h0 = int(rng.integers(a, max(a + 1, b - hole_len)))
            holes.append(Hole(int(ledger_ids[l]), seg, idx, h0, min(h0 + hole_len - 1, b)))
    if holes:
        flat = {(int(h.ledger_id) - 1, h.segment, h.index): h for h in holes}
        pos = np.array([(l * S + s) * E + x for (l, s, x) in flat])
        hs = list(flat.values())
        extra_l, extra_s, extra_x = li[pos], si[pos], xi[pos]
        hi_before = hi.copy()
        hi[pos] = np.array([h.first - 1 for h in hs])                     # piece before the hole
        li = np.concatenate([li, extra_l])
        si = np.concatenate([si, extra_s])
        xi = np.concatenate([xi, extra_x])
        lo = np.concatenate([lo, np.array([h.last + 1 for h in hs])])      # piece after the hole
        hi = np.concatenate([hi, hi_before[pos]])
    bookie = ens[li, si, xi]
    first, last, size, period, valid = _stripe_groups(xi.astype(np.int64), lo, hi, E, Qw)
    rows = np.repeat(np.arange(li.size), 3)
    keep = valid.ravel() & (np.repeat(lo, 3) <= np.repeat(hi, 3))
    rows = rows[keep]
    g_ledger, g_bookie = li[rows], bookie[rows]
    g_first, g_last = first.ravel()[keep], last.ravel()[keep]
    g_size, g_period = size.ravel()[keep], period.ravel()[keep]
    order = np.lexsort((g_first, g_bookie, g_ledger))
    g_ledger, g_bookie, g_first, g_last, g_size, g_period = (a[order] for a in (g_ledger, g_bookie, g_first, g_last,
                                                                               g_size, g_period))
    # answers: one per (ledger, bookie) of any ensemble, even when all its entries were cut out
    pair = g_ledger * n_bookies + g_bookie
    pairs = np.unique(li * n_bookies + bookie)
    a_ledger, a_bookie = pairs // n_bookies, pairs % n_bookies
    group_offsets = np.searchsorted(pair, np.concatenate([pairs, [pairs[-1] + 1]])).astype(np.int32)
    ledger_answer_offsets = np.searchsorted(a_ledger, np.arange(L + 1)).astype(np.int32)

    groups_struct = pa.StructArray.from_arrays(
        [pa.array(g_first), pa.array(g_last), pa.array(g_size.astype(np.int32)), pa.array(g_period.astype(np.int32))],
        names=["first_sequence_start", "last_sequence_start", "sequence_size", "sequence_period"])
    n_ans = a_ledger.size
    answers_struct = pa.StructArray.from_arrays(
        [pa.array(pool[a_bookie]), pa.array(np.full(n_ans, "ok", dtype=object)), pa.nulls(n_ans, pa.string()),
         pa.ListArray.from_arrays(pa.array(group_offsets), groups_struct)],
        names=["bookie", "status", "error", "groups"])
    ens_members = pa.array(pool[ens.reshape(-1)])
    ens_lists = pa.ListArray.from_arrays(pa.array(np.arange(0, L * S * E + 1, E, dtype=np.int32)), ens_members)
    seg_struct = pa.StructArray.from_arrays([pa.array(starts.reshape(-1)), ens_lists],
                                            names=["first_entry_id", "ensemble"])
    table = pa.table({
        "cluster": pa.array(np.full(L, "bench", dtype=object)),
        "ledger_id": pa.array(ledger_ids),
        "format_version": pa.array(np.full(L, 3, dtype=np.int32)),
        "state": pa.array(np.full(L, "CLOSED", dtype=object)),
        "ensemble_size": pa.array(np.full(L, E, dtype=np.int32)),
        "write_quorum": pa.array(np.full(L, Qw, dtype=np.int32)),
        "ack_quorum": pa.array(np.full(L, Qa, dtype=np.int32)),
        "last_entry_id": pa.array(last_entry),
        "length": pa.array(last_entry * 100),
        "ctime": pa.nulls(L, pa.int64()),
        "ctoken": pa.nulls(L, pa.int64()),
        "digest_type": pa.array(np.full(L, "CRC32C", dtype=object)),
        "has_password": pa.array(np.ones(L, dtype=bool)),
        "segments": pa.ListArray.from_arrays(pa.array(np.arange(0, L * S + 1, S, dtype=np.int32)), seg_struct),
        "answers": pa.ListArray.from_arrays(pa.array(ledger_answer_offsets), answers_struct),
    })
    return table, holes


def write(table: pa.Table, path: str, rows_per_file: int = 25_000) -> None:
    import os

    os.makedirs(path, exist_ok=True)
    for k, start in enumerate(range(0, table.num_rows, rows_per_file)):
        pq.write_table(table.slice(start, rows_per_file), os.path.join(path, f"part-{k:05d}.parquet"))
