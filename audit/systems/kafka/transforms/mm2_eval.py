"""MirrorMaker 2 translation and failover bounds for many consumer groups at once (driver, numpy).

The groups of one upstream partition share its sync records, so the store
(audit.systems.kafka.domain.mm2.OffsetSyncStore, the variant the declared version runs) is replayed once per partition
and every group's offset is looked up in its final slots with numpy; the bounds, the checkpoint check and the failover
counts are the domain's formulas (downstream_bounds, checkpoint_justified, failover with the target's log start and the
restarts the syncs show) applied to arrays. tests/kafka/transforms/test_audit_mm2_eval.py checks them against the
domain's per-group functions. Group-partitions whose numbers call for a finding are then judged by the domain itself
(evaluate_group), so findings and coverage items come from the rules, not from here."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from audit.systems.kafka.domain.failover import Restart, generations, restarts
from audit.systems.kafka.domain.mm2 import (Checkpoint, GroupPartition, Mm2Settings, OffsetSyncStore, evaluate_group,
                                    rule_for_version, store_variant_for)

NULL = np.iinfo(np.int64).min      # "no value" in the int64 result columns


@dataclass(frozen=True)
class Groups:
    """The group-partitions of ONE upstream partition: int64 arrays, NULL where absent."""

    upstream: np.ndarray          # the group's committed offset on the source
    target: np.ndarray            # its committed offset on the remote topic
    cp_upstream: np.ndarray       # the last checkpoint of the group for the partition
    cp_downstream: np.ndarray
    target_log_start: np.ndarray | None = None   # the remote partition's log start offset; None: not read

    def __post_init__(self):
        if self.target_log_start is None:   # an array like the others (callers index every field)
            object.__setattr__(self, "target_log_start", np.full(self.upstream.size, NULL, np.int64))


def translations(syncs: list[tuple[int, int]], version: str, upstream: np.ndarray) -> np.ndarray:
    """translate() for every offset: NULL = no translation (no sync), -1 = suppressed."""
    out = np.full(upstream.size, NULL, dtype=np.int64)
    if not syncs:
        return out
    store = OffsetSyncStore(store_variant_for(version))
    store.load(syncs)
    slots_u = np.array([s.upstream_offset for s in store.syncs], dtype=np.int64)
    slots_d = np.array([s.downstream_offset for s in store.syncs], dtype=np.int64)
    has = upstream != NULL
    u = upstream[has]
    if store.variant == "3.4.0":
        res = np.where(slots_u[0] > u, -1, slots_d[0] + (u - slots_u[0]))
    else:
        at_or_below = slots_u[None, :] <= u[:, None]
        first = np.where(at_or_below.any(axis=1), at_or_below.argmax(axis=1), slots_u.size - 1)
        fu, fd = slots_u[first], slots_d[first]
        res = np.where(fu > u, -1, fd + (u != fu))
    out[has] = res
    return out


def bounds(syncs: list[tuple[int, int]], upstream: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """downstream_bounds() for every offset: (low, high), NULL where unknown."""
    low = np.full(upstream.size, NULL, dtype=np.int64)
    high = np.full(upstream.size, NULL, dtype=np.int64)
    if not syncs:
        return low, high
    gen = np.array(generations(syncs)[-1], dtype=np.int64)
    gen = gen[np.lexsort((gen[:, 1], gen[:, 0]))]
    gu, gd = gen[:, 0], gen[:, 1]
    has = np.flatnonzero(upstream != NULL)
    u = upstream[has]
    idx = np.searchsorted(gu, u, side="right")
    below = idx > 0
    bu = gu[np.maximum(idx - 1, 0)]
    bd = gd[np.maximum(idx - 1, 0)]
    exact = below & (bu == u)
    lo = np.where(below, np.where(exact, bd, bd + 1), NULL)
    hi = np.where(below, np.where(exact, bd, bd + (u - bu)), NULL)
    above = (idx < gu.size) & ~exact
    ad = gd[np.minimum(idx, gu.size - 1)]
    hi = np.where(above, np.where(hi == NULL, ad, np.minimum(hi, ad)), hi)
    low[has], high[has] = lo, hi
    return low, high


def justified(syncs: list[tuple[int, int]], rule: str, cp_u: np.ndarray, cp_d: np.ndarray) -> np.ndarray:
    """checkpoint_justified() for every checkpoint (rows without one: True)."""
    out = np.ones(cp_u.size, dtype=bool)
    has = np.flatnonzero((cp_u != NULL) & (cp_d != NULL))
    if not has.size:
        return out
    if not syncs:
        out[has] = False
        return out
    s = np.array(syncs, dtype=np.int64)
    su, sd = s[:, 0], s[:, 1]
    u, d = cp_u[has], cp_d[has]
    if rule == "pre-3.4.1":
        key, want = sd - su, d - u        # d_s + (U - u_s) == D  <=>  d_s - u_s == D - U, with u_s <= U
    else:
        key, want = sd + 1, d             # u_s < U and d_s + 1 == D (u_s == U needs d_s == D: below)
    order = np.lexsort((su, key))
    keys, first = np.unique(key[order], return_index=True)
    min_u = su[order][first]
    pos = np.minimum(np.searchsorted(keys, want), max(keys.size - 1, 0))
    found = keys[pos] == want
    ok = found & ((min_u[pos] <= u) if rule == "pre-3.4.1" else (min_u[pos] < u))
    if rule != "pre-3.4.1":
        pairs = set(zip(su.tolist(), sd.tolist()))
        ok |= np.array([p in pairs for p in zip(u.tolist(), d.tolist())], dtype=bool)
    out[has] = ok
    return out


def failover_counts(low: np.ndarray, high: np.ndarray, target: np.ndarray, upstream: np.ndarray | None = None,
                    log_start: np.ndarray | None = None, restarted: list[Restart] = ()) -> dict[str, np.ndarray]:
    """failover(): redelivered/skipped min and max per row, NULL where unknown (the same sums per restart)."""
    n = low.size
    u = np.full(n, -1, np.int64) if upstream is None else np.where(upstream == NULL, -1, upstream)
    kept = np.zeros(n, np.int64) if log_start is None else np.where(log_start == NULL, 0, log_start)
    t_ok = target != NULL
    start = np.maximum(target, kept)
    has_low, has_high = t_ok & (low != NULL), t_ok & (high != NULL)
    earlier, later, doubtful, older = (np.zeros(n, np.int64) for _ in range(4))
    first = np.maximum(high, kept)
    span = np.maximum(0, target - first)
    for r in restarted:
        da, (ub, db) = r.before[1], r.after
        below_x = db <= low
        earlier += np.where(below_x, np.maximum(0, np.minimum(r.last_copied - u + 1, db - start)), 0)
        later += np.where(u < ub, np.minimum(np.clip(u - r.lowest_resume, 0, r.excess), np.maximum(0, db - start)),
                          0)
        window = np.maximum(0, np.minimum(db, target) - np.maximum(da + 1, first))
        doubtful += np.where(r.last_copied >= u, np.minimum(span, r.excess + window), 0)
        older += np.where(below_x, np.maximum(0, np.minimum(r.last_copied - u + 1, np.minimum(db, target) - kept)),
                          0)

    def where(ok, value):
        return np.where(ok, value, NULL)

    return {"redelivered_min": where(has_low, np.maximum(0, low - start - earlier)),
            "redelivered_max": where(has_high, np.maximum(0, high - start) + later),
            "skipped_min": where(has_high, np.maximum(0, span - doubtful)),
            "skipped_max": where(has_low, np.maximum(0, target - np.maximum(low, kept)) + older)}


def evaluate(syncs: list[tuple[int, int]], version: str, g: Groups) -> dict[str, np.ndarray]:
    """Per row: translated, bounds_low/high, exact, checkpoint_justified and the failover counts."""
    rule = rule_for_version(version)
    low, high = bounds(syncs, g.upstream)
    counts = failover_counts(low, high, g.target, g.upstream, g.target_log_start, restarts(syncs))
    exact = (low != NULL) & (low == high) & (counts["redelivered_min"] == counts["redelivered_max"]) & \
        (counts["skipped_min"] == counts["skipped_max"])
    return {"translated": translations(syncs, version, g.upstream), "bounds_low": low, "bounds_high": high,
            "exact": exact, "checkpoint_justified": justified(syncs, rule, g.cp_upstream, g.cp_downstream),
            **counts}


def needs_rules(result: dict[str, np.ndarray], tolerance: int) -> np.ndarray:
    """Rows the domain must judge: a checkpoint no sync explains, a skip, or a redelivery above the tolerance."""
    skipped = result["skipped_min"]
    redelivered = result["redelivered_min"]
    return (~result["checkpoint_justified"]) | ((skipped != NULL) & (skipped > 0)) | (
        (redelivered != NULL) & (redelivered > tolerance))


def judged(base: GroupPartition, g: Groups, rows: np.ndarray, source_read: np.ndarray, target_read: np.ndarray,
           settings: Mm2Settings) -> list[dict]:
    """evaluate_group's findings and coverage items for the flagged `rows` (base carries the partition's fields)."""
    out = []

    def val(a, i):
        return None if a[i] == NULL else int(a[i])

    log_start = g.target_log_start
    for i in rows.tolist():
        cp = None if g.cp_upstream[i] == NULL or g.cp_downstream[i] == NULL else \
            Checkpoint(int(g.cp_upstream[i]), int(g.cp_downstream[i]))
        gp = base._replace(checkpoint=cp, upstream_committed=val(g.upstream, i), source_read_at_ms=val(source_read, i),
                           target_committed=val(g.target, i), target_read_at_ms=val(target_read, i),
                           target_log_start=val(log_start, i))
        out += [dict(f, _row=i) for f in evaluate_group(gp, settings)[0]]
    return out
