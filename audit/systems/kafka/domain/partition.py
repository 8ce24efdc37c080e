"""Per-partition verdicts: the state Spark computes for one partition -> findings and "not judged" items.

Rules (docs/formats/kafka.md §11; checks.py has the ids):
- The reference replica is the metadata's leader when its log was collected. Without metadata (log dirs only),
  without a leader (offline partition) or when a collected replica holds a newer leader epoch than the metadata
  (a leader elected after the metadata was read) it is the replica with the highest latest epoch, ties by the
  larger log end offset, then the smaller broker id (`reference_broker`). A leader whose log was not collected: only the
  per-replica checks run, and a coverage item says so.
- For a follower R of the reference L: Δ = the offsets R holds that L does not hold identically (R's mismatch
  ranges, and R's offsets at or past L's log end); T = where R's truncation rule cuts it (truncation.py, the
  cluster's policy). Δ below T is kept though it differs from L: divergent logs. Δ from T up to R's high watermark
  was exposed as committed and the rule removes it: committed data lost. Δ above R's high watermark is an in-flight
  tail, normal.
- Epoch caches are compared only where both logs hold the same committed batches (above both log starts and both
  caches' first entries, below min(Δ), T and both high watermarks): compaction, retention and epochs that never got
  a record never count. Offsets below a cache's first entry are never judged by epoch (here or in the batch
  epochs Spark counts): a follower taking the leader's log start truncates its cache from the start at once,
  while its segments below stay on disk until the next retention check and log-start-offset-checkpoint is written
  every log.flush.start.offset.checkpoint.interval.ms (60 s) (docs/formats/kafka.md §11.1).
- A replica whose leader-epoch-checkpoint is unknown (absent from the evidence or undecodable: `epochs` None) gets
  one "not judged" item instead of any epoch rule; where a truncation offset needs its cache (every policy but
  "high-watermark", on either side), what that offset would decide is not judged either.

Snapshots apart: each replica is read at its own instant. A replica's high watermark claim is judged only when it
was read no later than its log (`high_watermark_read_at_ms <= read_at_ms`: else the log may already have been cut
and fetched again). Offsets R exposed beyond L's log end are lost only if L's log was read after R's high
watermark, or if R holds them in an epoch older than L's latest epoch (L, leader since that epoch began below them,
can never get them); R's offsets in L's own latest epoch are L's appends after L was read. A value that traffic
between the two reads explains (a log end read before a high watermark, a follower read before its leader) is no
item at all; what the order leaves open otherwise becomes an item with check "coverage" (not judged).

Offsets in findings: `offset_from` and `offset_to` are the first and last offsets concerned (inclusive);
`entry_count` counts offsets (an upper bound of records on compacted topics)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from audit.systems.kafka.domain.checks import CHECKS, COVERAGE
from audit.systems.kafka.domain.epochs import checkpoint_problem_entries, epoch_differences
from audit.systems.kafka.domain.replica import (PartitionMetadata, PartitionState, Range, ReplicaState, Settings, clip,
                                                merge, not_after, size)
from audit.systems.kafka.domain.truncation import Truncation, truncation_offset

__all__ = ["PartitionMetadata", "PartitionState", "ReplicaState", "Settings", "clip", "merge", "reference_broker",
           "differing", "divergence_start", "follower_view", "judge", "verdicts", "evaluate", "metrics",
           "UNKNOWN_CACHE", "NEWER_EPOCH"]

def reference_broker(metadata: PartitionMetadata | None,
                     replicas: Iterable[tuple[int, int | None, int]]) -> tuple[int | None, str]:
    """(broker, how) of the replica the others are compared with, from (broker, latest epoch or None, log end
    offset) per collected replica; Spark calls it before computing mismatch_ranges."""
    collected = list(replicas)
    if metadata is not None and metadata.leader is not None and not _metadata_stale(metadata, collected):
        if any(b == metadata.leader for b, _, _ in collected):
            return metadata.leader, "leader"
        return None, "leader-not-collected"
    if not collected:
        return None, "no-replica"
    best = max(collected, key=lambda r: (-1 if r[1] is None else r[1], r[2], -r[0]))
    return best[0], "highest-epoch" if metadata is None or metadata.leader is None else NEWER_EPOCH


NEWER_EPOCH = "newer-epoch-than-metadata"


def _metadata_stale(metadata: PartitionMetadata, collected: list[tuple[int, int | None, int]]) -> bool:
    """A replica holds a leader epoch newer than the metadata's (or, when the metadata gives none, than its leader's
    log): a leader was elected after the metadata was read, and the metadata's leader is no longer the one whose log
    the others follow (docs/formats/kafka.md §11.6)."""
    known = metadata.leader_epoch
    if known is None:
        known = next((e for b, e, _ in collected if b == metadata.leader), None)
    return known is not None and any(e is not None and e > known for _, e, _ in collected)


def divergence_start(log_end_offset: int, first_mismatch_offset: int | None, reference_log_end_offset: int) -> int:
    """min(Δ) from the first mismatch alone (>= the replica's log end: it holds nothing the reference lacks)."""
    first = log_end_offset if first_mismatch_offset is None else first_mismatch_offset
    return min(first, reference_log_end_offset)


def differing(r: ReplicaState, reference_log_end_offset: int) -> list[Range]:
    """Δ: R's offsets the reference does not hold identically: its mismatch ranges (without them, everything from
    first_mismatch_offset to the end of the common window is taken as differing), and its offsets at or past the
    reference's log end."""
    ranges = list(r.mismatch_ranges)
    if not ranges and r.first_mismatch_offset is not None:
        ranges = [(r.first_mismatch_offset, min(r.log_end_offset, reference_log_end_offset))]
    return merge(clip(ranges, r.log_start_offset, r.log_end_offset)
                 + [(max(reference_log_end_offset, r.log_start_offset), r.log_end_offset)])


def item(state: PartitionState, check: str, broker: int | None, first: int | None, end: int | None, count: int,
         message: str, detail: dict) -> dict:
    row = {"check": check, "severity": CHECKS[check].severity if check in CHECKS else None,
           "cluster": state.cluster, "topic": state.topic, "partition": state.partition, "broker": broker,
           "offset_from": first, "offset_to": None if end is None else end - 1, "entry_count": count,
           "message": message, "detail": detail}
    if check == COVERAGE:
        row["what"] = message
    return row


def _coverage(state: PartitionState, broker: int | None, what: str, rng: Range | None, detail: dict) -> dict:
    first, end = rng if rng else (None, None)
    return item(state, COVERAGE, broker, first, end, 0 if rng is None else end - first, what, detail)


UNKNOWN_CACHE = "leader-epoch-checkpoint absent or undecodable: epoch rules not judged"


def _replica_checks(state: PartitionState, r: ReplicaState) -> list[dict]:
    if not r.epochs_known:
        if r.log_start_offset >= r.log_end_offset:
            return []
        return [_coverage(state, r.broker, UNKNOWN_CACHE, (r.log_start_offset, r.log_end_offset),
                          {"problems": list(r.checkpoint_problems)})]
    out = []
    bad = checkpoint_problem_entries(r.epochs)
    if bad or r.checkpoint_problems:
        starts = [e.start_offset for _, e, _ in bad]
        out.append(item(state, "kafka.epoch_checkpoint_invalid", r.broker, min(starts, default=None),
                       max(starts) + 1 if starts else None, len({i for i, _, _ in bad}) or len(r.checkpoint_problems),
                       "leader-epoch-checkpoint breaks its invariants",
                       {"problems": [f"entry {i} ({e.epoch} {e.start_offset}): {why}" for i, e, why in bad]
                        + list(r.checkpoint_problems), "entries": [list(e) for e in r.epochs]}))
    if r.batch_epoch_violations:
        last = r.batch_epoch_violation_last_offset
        out.append(item(state, "kafka.batch_epoch_outside_cache", r.broker, r.batch_epoch_violation_first_offset,
                       None if last is None else last + 1, r.batch_epoch_violation_offsets,
                       f"{r.batch_epoch_violations} committed batches carry an epoch the leader-epoch cache does "
                       "not give their offsets", {"batches": r.batch_epoch_violations,
                                                  "entries": [list(e) for e in r.cache().entries]}))
    if r.high_watermark is not None and r.high_watermark > r.log_end_offset:
        rng = (r.log_end_offset, r.high_watermark)
        detail = {"high_watermark": r.high_watermark, "log_end_offset": r.log_end_offset,
                  "high_watermark_read_at_ms": r.hw_read_at_ms, "read_at_ms": r.read_at_ms}
        if r.own_order_ok():   # else the HW was read after the log: appends in between explain it
            out.append(item(state, "kafka.high_watermark_above_log_end", r.broker, *rng, rng[1] - rng[0],
                           f"high watermark {r.high_watermark} above log end offset {r.log_end_offset}", detail))
    return out


@dataclass(frozen=True)
class FollowerView:
    """One follower against the reference: what the verdicts and the metrics need."""

    broker: int
    truncation: Truncation
    divergence_start: int | None   # min(Δ); None: R holds nothing the reference lacks
    kept_divergent: list           # ranges
    lost: list                     # (range, proof)
    not_judged: list               # (range, why)
    lineage: tuple | None          # ((from, to), offsets whose epoch differs)
    lag_bounds: tuple
    truncates: bool = False        # its rule cuts below its log end (not only appends the leader made after its read)


def _missing_on_leader(leader: ReplicaState, r: ReplicaState, rng: Range) -> tuple[list, list]:
    """Offsets R exposed at or past the leader's log end: (lost [(range, proof)], not judged [(range, why)])."""
    if not_after(r.hw_read_at_ms, leader.read_at_ms):
        return [(rng, "leader read after the high watermark")], []
    leader_epoch = leader.cache().latest_epoch
    if leader_epoch is None or not r.epochs_known:
        return [], [(rng, "leader read before the high watermark, no epochs to decide")]
    entries = r.cache().entries
    # below R's first entry its cache says nothing: R took a log start there (its segments below wait for the
    # retention check, its log-start checkpoint for the next flush), so those offsets were appended after the
    # leader's read and deleted since (module doc)
    first = rng[1] if r.epochs_from is None else max(rng[0], r.epochs_from)
    older_end = min(rng[1], next((e.start_offset for e in entries if e.epoch >= leader_epoch), rng[1]))
    newer_start = max(rng[0], next((e.start_offset for e in entries if e.epoch > leader_epoch), rng[1]))
    lost = [((first, older_end), f"held in an epoch below the leader's {leader_epoch}")] if first < older_end else []
    later = [((newer_start, rng[1]), f"held in an epoch above the leader's {leader_epoch}")] \
        if newer_start < rng[1] else []
    return lost, later


def follower_view(leader: ReplicaState, r: ReplicaState, policy: str) -> FollowerView:
    cut = truncation_offset(leader.log(), r.log(), policy, leader.cache(), r.cache())
    delta = differing(r, leader.log_end_offset)
    t, exposed = min(cut.offset, r.log_end_offset), r.exposed_end()
    kept, lost, not_judged = clip(delta, r.log_start_offset, t), [], []
    removed = clip(delta, t, exposed)
    if policy != "high-watermark" and not (leader.epochs_known and r.epochs_known):
        # the cut comes from a cache the evidence does not give: whether Δ stays (divergent) or goes (lost) is open
        not_judged += [(rng, "epoch cache unknown: where the truncation cuts is not known")
                       for rng in clip(delta, r.log_start_offset, exposed)]
        kept = removed = []
    if removed and not r.own_order_ok():
        not_judged += [(rng, "high watermark read after the log") for rng in removed]
    elif removed:
        lost += [(rng, "a different batch on the leader") for rng in clip(removed, 0, leader.log_end_offset)]
        for rng in clip(removed, leader.log_end_offset, exposed):
            more_lost, more_not_judged = _missing_on_leader(leader, r, rng)
            lost, not_judged = lost + more_lost, not_judged + more_not_judged
    if kept and not r.own_order_ok():
        not_judged += [(rng, "high watermark read after the log") for rng in kept]
        kept = []
    # only offsets both caches describe: below a cache's first entry its replica says nothing (module doc)
    low = max(leader.log_start_offset, r.log_start_offset, leader.epochs_from or 0, r.epochs_from or 0)
    high = min(delta[0][0] if delta else r.log_end_offset, t, leader.log_end_offset, leader.exposed_end(), exposed)
    lineage = None
    if low < high and leader.own_order_ok() and r.own_order_ok() and leader.epochs_known and r.epochs_known:
        lineage = ((low, high), epoch_differences(leader.cache(), r.cache(), low, high))
    truncates = t < r.log_end_offset and (t < leader.log_end_offset or not_after(r.read_at_ms, leader.read_at_ms))
    return FollowerView(r.broker, cut, delta[0][0] if delta else None, kept, lost, not_judged, lineage,
                        _lag_bounds(leader, r), truncates)


def _lag_bounds(leader: ReplicaState, r: ReplicaState) -> tuple[int | None, int | None]:
    """(lower, upper) bound of the follower's lag behind the leader's log end at the leader's read instant: a log
    end only grows, so a follower read later gives a lower bound, read earlier an upper bound."""
    gap = max(0, leader.log_end_offset - r.log_end_offset)
    if leader.read_at_ms is None or r.read_at_ms is None:
        return None, None
    if r.read_at_ms == leader.read_at_ms:
        return gap, gap
    return (gap, None) if r.read_at_ms > leader.read_at_ms else (None, gap)


def _leader_high_watermark(state: PartitionState, leader: ReplicaState) -> tuple[int | None, int | None]:
    if state.leader_high_watermark is not None:
        return state.leader_high_watermark, state.leader_high_watermark_read_at_ms
    return leader.high_watermark, leader.hw_read_at_ms


def _isr_check(state: PartitionState, leader: ReplicaState, r: ReplicaState) -> list[dict]:
    """An ISR member's log end below the leader's high watermark (capped at the leader's own log end: beyond it
    the leader's loss is reported). Judged when the high watermark, the ISR and the member were read in that order;
    a member read before the high watermark is explained by the traffic in between."""
    md = state.metadata
    hw, hw_at = _leader_high_watermark(state, leader)
    if md is None or md.isr is None or r.broker not in md.isr or hw is None:
        return []
    hw = min(hw, leader.log_end_offset)
    if r.log_end_offset >= hw or not not_after(hw_at, r.read_at_ms):
        return []
    rng = (r.log_end_offset, hw)
    detail = {"leader": leader.broker, "leader_high_watermark": hw, "log_end_offset": r.log_end_offset,
              "isr": list(md.isr), "high_watermark_read_at_ms": hw_at, "metadata_read_at_ms": md.read_at_ms,
              "read_at_ms": r.read_at_ms}
    if not_after(hw_at, md.read_at_ms) and not_after(md.read_at_ms, r.read_at_ms):
        return [item(state, "kafka.isr_missing_committed", r.broker, *rng, rng[1] - rng[0],
                    f"in-sync replica ends at {r.log_end_offset}, below the leader's high watermark {hw}", detail)]
    return [_coverage(state, r.broker, "in-sync replica below the leader's high watermark, the ISR was not read "
                                       "between the two", rng, detail)]


def _follower_findings(state: PartitionState, settings: Settings, leader: ReplicaState, r: ReplicaState,
                       v: FollowerView) -> list[dict]:
    out = []
    base = {"leader": leader.broker, "policy": settings.truncation_policy, "truncation_offset": v.truncation.offset,
            "truncation_rule": v.truncation.rule, "truncation_rounds": v.truncation.rounds,
            "divergence_start": v.divergence_start, "high_watermark": r.high_watermark,
            "leader_high_watermark": leader.high_watermark}
    if v.kept_divergent:
        ranges, below = v.kept_divergent, min(r.exposed_end(), leader.exposed_end())
        count = size(ranges)
        out.append(item(state, "kafka.divergent_logs", r.broker, ranges[0][0], ranges[-1][1], count,
                       f"{count} offsets differ from the leader's and the truncation rule keeps them",
                       {**base, "ranges": [{"from": a, "to": b - 1} for a, b in ranges],
                        "below_both_high_watermarks": ranges[-1][1] <= below}))
    for rng, why in v.not_judged:
        out.append(_coverage(state, r.broker, f"exposed offsets not on the leader: {why}", rng, base))
    if v.lineage and v.lineage[1]:
        (low, high), differing = v.lineage
        out.append(item(state, "kafka.epoch_lineage_mismatch", r.broker, low, high, differing,
                       f"epoch caches disagree on {differing} committed offsets both logs hold",
                       {**base, "entries": [list(e) for e in r.cache().entries_in_range(low, high)],
                        "leader_entries": [list(e) for e in leader.cache().entries_in_range(low, high)]}))
    if settings.follower_lag_max is not None:
        lower = v.lag_bounds[0]   # read before the leader: only an upper bound, the traffic in between explains it
        if lower is not None and lower > settings.follower_lag_max:
            out.append(item(state, "kafka.follower_lagging", r.broker, r.log_end_offset, leader.log_end_offset,
                           lower, f"at least {lower} offsets behind the leader", {**base, "lag_max":
                                                                                 settings.follower_lag_max}))
    return out + _isr_check(state, leader, r)


def _lost_finding(state: PartitionState, leader: ReplicaState, lost: list) -> list[dict]:
    """One finding for the partition: the union of what every replica exposed and the leader lacks."""
    if not lost:
        return []
    ranges = merge([rng for _, rng, _ in lost])
    exposed_by = {}
    for r, rng, proof in lost:
        entry = exposed_by.setdefault(r.broker, {"broker": r.broker, "ranges": [], "producer_ids":
                                                 sorted(r.unmatched_producer_ids), "first_timestamp_ms":
                                                 r.unmatched_first_timestamp_ms, "last_timestamp_ms":
                                                 r.unmatched_last_timestamp_ms, "high_watermark": r.high_watermark})
        entry["ranges"].append({"from": rng[0], "to": rng[1] - 1, "proof": proof})
    count = size(ranges)
    return [item(state, "kafka.committed_data_lost", leader.broker, ranges[0][0], ranges[-1][1], count,
                f"{count} committed offsets are not on the leader", {
                    "leader": leader.broker, "ranges": [{"from": a, "to": b - 1} for a, b in ranges],
                    "exposed_by": [exposed_by[b] for b in sorted(exposed_by)]})]


def judge(state: PartitionState, settings: Settings = Settings()) -> tuple[list[dict], list[FollowerView], int | None,
                                                                         str]:
    """(findings and coverage items, follower views, reference broker, how it was chosen)."""
    out = []
    for r in state.replicas:
        out += _replica_checks(state, r)
    ref, how = reference_broker(state.metadata, ((r.broker, r.cache().latest_epoch, r.log_end_offset)
                                                  for r in state.replicas))
    if ref is None:
        if how == "leader-not-collected":
            out.append(_coverage(state, state.metadata.leader, "leader's log not collected: replicas not compared",
                                 None, {"collected": [r.broker for r in state.replicas]}))
        return out, [], None, how
    leader = next(r for r in state.replicas if r.broker == ref)
    lost = []
    if leader.high_watermark is not None and leader.high_watermark > leader.log_end_offset and leader.own_order_ok():
        lost.append((leader, (leader.log_end_offset, leader.high_watermark), "the leader's own log ends below"))
    views = []
    for r in state.replicas:
        if r.broker == ref:
            continue
        v = follower_view(leader, r, settings.truncation_policy)
        views.append(v)
        lost += [(r, rng, proof) for rng, proof in v.lost]
        out += _follower_findings(state, settings, leader, r, v)
    out += _lost_finding(state, leader, lost)
    if leader.sequence_gaps and not state.compacted:
        first, last = leader.sequence_gap_first_offset, leader.sequence_gap_last_offset
        out.append(item(state, "kafka.producer_sequence_gap", leader.broker, first,
                       None if last is None else last + 1, leader.sequence_gaps,
                       f"{leader.sequence_gaps} producer sequence gaps among committed batches", {}))
    return out, views, ref, how


def verdicts(state: PartitionState, settings: Settings = Settings()) -> list[dict]:
    """Findings (check in CHECKS) and "not judged" items (check == "coverage", with `what`) of one partition."""
    return judge(state, settings)[0]


def evaluate(state: PartitionState, settings: Settings = Settings()) -> tuple[list[dict], dict]:
    """(verdicts, metrics) in one pass."""
    rows, views, ref, how = judge(state, settings)
    return rows, _metrics(state, views, ref, how)


def metrics(state: PartitionState, settings: Settings = Settings()) -> dict:
    """Per-partition numbers for the metrics table (JSON-able): the follower divergence offsets (where each
    follower's rule cuts it; `truncates` when that is below its log end, beyond what the leader may have appended
    after its read), lag bounds, under-replication. `min_divergence_offset` is the lowest cut of a truncating
    follower (None: no follower loses anything), `truncating_followers` how many there are."""
    return evaluate(state, settings)[1]


def _metrics(state: PartitionState, views: list[FollowerView], ref: int | None, how: str) -> dict:
    md = state.metadata
    isr = None if md is None else md.isr   # None: no ISR (the KRaft metadata partition: voters)
    leader = next((r for r in state.replicas if r.broker == ref), None)
    followers = [{"broker": v.broker, "divergence_offset": v.truncation.offset, "truncation_rule": v.truncation.rule,
                  "truncation_rounds": v.truncation.rounds, "divergence_start": v.divergence_start,
                  "lag_lower_bound": v.lag_bounds[0], "lag_upper_bound": v.lag_bounds[1],
                  "in_isr": None if isr is None else v.broker in isr, "truncates": v.truncates} for v in views]
    lags = [f["lag_upper_bound"] if f["lag_upper_bound"] is not None else f["lag_lower_bound"] for f in followers]
    return {"cluster": state.cluster, "topic": state.topic, "partition": state.partition, "reference_broker": ref,
            "reference_rule": how, "leader": None if md is None else md.leader,
            "leader_epoch": None if md is None else md.leader_epoch,
            "replica_count": len(md.replicas) if md else len(state.replicas), "collected_replicas": len(state.replicas),
            "isr_size": None if isr is None else len(isr),
            "under_replicated": None if isr is None else len(set(isr)) < len(set(md.replicas)),
            "offline": None if md is None else md.leader is None,
            "log_start_offset": None if leader is None else leader.log_start_offset,
            "log_end_offset": None if leader is None else leader.log_end_offset,
            "high_watermark": None if leader is None else _leader_high_watermark(state, leader)[0],
            "latest_epoch": None if leader is None else leader.cache().latest_epoch,
            "min_divergence_offset": min((f["divergence_offset"] for f in followers if f["truncates"]), default=None),
            "truncating_followers": sum(f["truncates"] for f in followers),
            "max_lag": max((lag for lag in lags if lag is not None), default=None),
            "followers": followers}
