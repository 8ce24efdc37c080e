"""Ground truth of one lab cluster's collection, from the simulation's own bookkeeping: which batch (the very
object the leader appended, shared by every replica that fetched it) each scanned replica holds at each offset,
what its checkpoint files said, where its own truncation rule (truncation.py, the cluster's policy) would cut it
under the current leader, and, for MirrorMaker 2, which upstream record every downstream offset copies
(mm2_read.py, counted by mm2_oracle.py). Never by calling the audit.

It claims only what the collected evidence shows, judged at the instants each file was read (docs/kafka/lab.md
"Ground truth"): the reference replica is the leader the admin metadata named (without one, the replica with the
highest latest epoch, then the longest log, then the smallest broker id); per partition and follower R:
- Δ(R) = R's offsets where the reference does not hold the same batch (within the reference's log), and R's offsets
  at or past the reference's log end;
- offsets of Δ below where R's rule cuts it are kept though they differ: `kafka.divergent_logs` (broker R);
- offsets of Δ from that cut up to R's checkpointed high watermark were exposed as committed and the rule removes
  them: lost; past the reference's log end only when the reference was read after R's checkpoint (or R holds them
  in an epoch below the reference's latest); with the reference's own checkpointed HW above its log end, the
  union is one `kafka.committed_data_lost` (broker = the reference);
- `kafka.high_watermark_above_log_end`, `kafka.epoch_lineage_mismatch` (both replicas' caches over the offsets
  both hold identically and committed), `kafka.batch_epoch_outside_cache`, `kafka.producer_sequence_gap` (the
  reference's committed batches), `kafka.isr_missing_committed` and `kafka.follower_lagging` when the read order
  proves them.
`offset_from` / `offset_to` are inclusive; `entry_count` counts offsets."""
from __future__ import annotations

from dataclasses import dataclass

from audit.systems.kafka.domain.epochs import LeaderEpochCache
from lab.kafka.collection import Collection, PartitionView
from lab.kafka.disk import ReplicaSnap
from lab.kafka.truncation import truncation_offset

Range = tuple[int, int]


@dataclass(frozen=True)
class ReadAt:
    """When a replica's files were read: its dir's checkpoints, then its partition dir (listing and segments)."""

    hw: int
    log: int


def merge(ranges) -> list[Range]:
    out: list[list[int]] = []
    for a, b in sorted(r for r in ranges if r[0] < r[1]):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def clip(ranges, low: int, high: int) -> list[Range]:
    return [(max(a, low), min(b, high)) for a, b in ranges if max(a, low) < min(b, high)]


def size(ranges) -> int:
    return sum(b - a for a, b in ranges)


def exposed_end(r: ReplicaSnap) -> int:
    return r.log_start if r.hw_ckpt is None else max(r.log_start, min(r.hw_ckpt, r.leo))


def effective_hw(r: ReplicaSnap) -> int:
    return min(max(r.hw_ckpt or 0, r.log_start), r.leo)


def _same(b) -> tuple[int, int, int]:
    """A batch's identity as the evidence shows it: its offsets and its CRC (which covers the records and the
    producer fields, not the leader epoch): a retried batch re-appended at the same offsets is the same data."""
    return (b.base, b.last, b.crc)


def differing(r: ReplicaSnap, ref: ReplicaSnap) -> list[Range]:
    """Δ(R): offsets of R's batches the reference does not hold identically, within the reference's log, and
    R's offsets at or past the reference's log end."""
    held = {_same(b) for b in ref.batches}
    out = [(max(b.base, ref.log_start), min(b.last + 1, ref.leo)) for b in r.batches if _same(b) not in held]
    out.append((max(ref.leo, r.log_start), r.leo))
    return merge(clip(out, r.log_start, r.leo))


def epoch_at(entries, offset: int) -> int | None:
    found = None
    for epoch, start in entries:
        if start > offset:
            break
        found = epoch
    return found


def epoch_differences(a, b, low: int, high: int) -> int:
    """Offsets in [low, high) the two caches give different epochs."""
    cuts = sorted({low, high, *(s for _, s in a if low < s < high), *(s for _, s in b if low < s < high)})
    return sum(hi - lo for lo, hi in zip(cuts, cuts[1:]) if epoch_at(a, lo) != epoch_at(b, lo))


def _finding(cluster: str, check: str, topic: str, partition: int, broker: int | None, ranges: list[Range],
             count: int | None = None, **detail) -> dict:
    return {"check": check, "cluster": cluster, "topic": topic, "partition": partition, "broker": broker,
            "offset_from": ranges[0][0], "offset_to": ranges[-1][1] - 1,
            "entry_count": size(ranges) if count is None else count, "detail": detail}


def reference(view: PartitionView, snaps: dict[int, ReplicaSnap]) -> int | None:
    if view.leader is not None:
        return view.leader if view.leader in snaps else None
    if not snaps:
        return None
    return max(snaps.values(), key=lambda r: (-1 if not r.epochs else r.epochs[-1][0], r.leo, -r.broker)).broker


def partition_truth(cluster: str, hw_policy: bool, key: tuple[str, int], view: PartitionView,
                    snaps: dict[int, ReplicaSnap], read: dict[int, ReadAt], *, md_read_ms: int | None,
                    hw_read_ms: int | None, lag_max: int | None) -> list[dict]:
    topic, partition = key
    out: list[dict] = []
    for r in snaps.values():
        out += _replica_checks(cluster, topic, partition, r)
    ref_id = reference(view, snaps)
    if ref_id is None:
        return out
    ref, ref_read = snaps[ref_id], read[ref_id]
    lost: list[Range] = []
    if ref.hw_ckpt is not None and ref.hw_ckpt > ref.leo:
        lost.append((ref.leo, ref.hw_ckpt))
    ref_cache = LeaderEpochCache(ref.epochs)
    for r in snaps.values():
        if r.broker == ref_id:
            continue
        delta = differing(r, ref)
        cut = truncation_offset(hw_policy, ref_cache, ref.leo, r.epochs, r.leo, effective_hw(r))
        t = min(cut, r.leo)
        kept = clip(delta, r.log_start, t)
        if kept:
            out.append(_finding(cluster, "kafka.divergent_logs", topic, partition, r.broker, kept,
                                truncation_offset=t, leader=ref_id))
        exposed = exposed_end(r)
        removed = clip(delta, t, exposed)
        lost += clip(removed, 0, ref.leo)
        lost += _lost_past_reference_end(clip(removed, ref.leo, exposed), r, ref, read, ref_read)
        out += _epoch_lineage_mismatch(cluster, topic, partition, ref, r, delta, t, exposed)
        out += _isr_and_lag(cluster, topic, partition, view, ref, r, read, md_read_ms, hw_read_ms, lag_max)
    lost = merge(lost)
    if lost:
        out.append(_finding(cluster, "kafka.committed_data_lost", topic, partition, ref_id, lost, leader=ref_id))
    gaps = _sequence_gaps(ref)
    if gaps:
        out.append(_finding(cluster, "kafka.producer_sequence_gap", topic, partition, ref_id,
                            [(gaps[0], gaps[-1] + 1)], len(gaps)))
    return out


def _lost_past_reference_end(removed: list[Range], r: ReplicaSnap, ref: ReplicaSnap, read: dict[int, ReadAt],
                             ref_read: ReadAt) -> list[Range]:
    """Of the offsets R exposed as committed past the reference's log end, which the rule removes: all of them
    when the reference was read after R's checkpoint, else those R holds in an epoch below the reference's latest."""
    lost: list[Range] = []
    for a, b in removed:
        if read[r.broker].hw <= ref_read.log:
            lost.append((a, b))
            continue
        latest = ref.epochs[-1][0] if ref.epochs else None
        if latest is None:
            continue
        # R's cache says nothing below its first entry (a log start taken after the reference's read)
        first = max(a, r.epochs[0][1]) if r.epochs else b
        older_end = min(b, next((s for e, s in r.epochs if e >= latest), b))
        if first < older_end:
            lost.append((first, older_end))
    return lost


def _epoch_lineage_mismatch(cluster: str, topic: str, partition: int, ref: ReplicaSnap, r: ReplicaSnap,
                            delta: list[Range], t: int, exposed: int) -> list[dict]:
    """`kafka.epoch_lineage_mismatch`: offsets both replicas hold identically and committed, below R's cut, that
    the two leader epoch caches give different epochs."""
    # only offsets both caches describe (a cache truncated from the start ahead of the log-start checkpoint
    # says nothing below its first entry)
    low = max(ref.log_start, r.log_start, ref.epochs[0][1] if ref.epochs else 0, r.epochs[0][1] if r.epochs else 0)
    high = min(delta[0][0] if delta else r.leo, t, ref.leo, exposed_end(ref), exposed)
    if low < high:
        n = epoch_differences(ref.epochs, r.epochs, low, high)
        if n:
            return [_finding(cluster, "kafka.epoch_lineage_mismatch", topic, partition, r.broker, [(low, high)], n)]
    return []


def _replica_checks(cluster: str, topic: str, partition: int, r: ReplicaSnap) -> list[dict]:
    out = []
    if r.hw_ckpt is not None and r.hw_ckpt > r.leo:
        out.append(_finding(cluster, "kafka.high_watermark_above_log_end", topic, partition, r.broker,
                            [(r.leo, r.hw_ckpt)]))
    bad = [i for i in range(1, len(r.epochs)) if r.epochs[i][0] <= r.epochs[i - 1][0]
           or r.epochs[i][1] <= r.epochs[i - 1][1]]
    if bad:
        starts = [r.epochs[i][1] for i in bad]
        out.append(_finding(cluster, "kafka.epoch_checkpoint_invalid", topic, partition, r.broker,
                            [(min(starts), max(starts) + 1)], len(bad)))
    committed = exposed_end(r)
    # batches below the cache's first entry lie below the log start the broker moved its cache to (a follower
    # takes the leader's log start before its own retention deletes the segment): not judged
    first = r.epochs[0][1] if r.epochs else None
    wrong = [b for b in r.batches if b.last < committed and first is not None and b.base >= first
             and epoch_at(r.epochs, b.base) != b.epoch]
    if wrong:
        out.append(_finding(cluster, "kafka.batch_epoch_outside_cache", topic, partition, r.broker,
                            [(wrong[0].base, wrong[-1].last + 1)], sum(b.last - b.base + 1 for b in wrong)))
    return out


def _isr_and_lag(cluster, topic, partition, view: PartitionView, ref: ReplicaSnap, r: ReplicaSnap,
                 read: dict[int, ReadAt], md_read_ms, hw_read_ms, lag_max) -> list[dict]:
    out = []
    hw = view.leader_hw
    if r.broker in view.isr and hw is not None and r.leo < hw and hw_read_ms is not None and \
            md_read_ms is not None and hw_read_ms <= md_read_ms <= read[r.broker].log:
        out.append(_finding(cluster, "kafka.isr_missing_committed", topic, partition, r.broker, [(r.leo, hw)]))
    if lag_max is not None and read[r.broker].log >= read[ref.broker].log:
        lag = max(0, ref.leo - r.leo)
        if lag > lag_max:
            out.append(_finding(cluster, "kafka.follower_lagging", topic, partition, r.broker, [(r.leo, ref.leo)],
                                lag))
    return out


def _sequence_gaps(ref: ReplicaSnap) -> list[int]:
    """Base offsets of the reference's committed batches whose sequence does not follow the previous batch of
    the same producer id and epoch."""
    committed = exposed_end(ref)
    last: dict[tuple[int, int], int] = {}
    out = []
    for b in ref.batches:
        if b.last >= committed:
            break
        if b.producer_id < 0 or b.control or b.base_sequence < 0:
            continue
        k = (b.producer_id, b.producer_epoch)
        if k in last and b.base_sequence != last[k] + 1:
            out.append(b.base)
        last[k] = b.base_sequence + b.records - 1
    return out


def cluster_truth(cluster, col: Collection, reads: dict[int, dict[int, ReadAt]], *, md_read_ms: int | None,
                  hw_read_ms: int | None, lag_max: int | None) -> list[dict]:
    """Every finding of one cluster's collection. `reads[broker][log dir]`: the read instants of the scans."""
    out = []
    hw_policy = cluster.policy_truncates_to_hw()
    for key, view in sorted(col.partitions.items()):
        snaps, read = {}, {}
        for b in view.replicas:
            image = col.images.get(b)
            if image is None or key not in image.replicas:
                continue
            snaps[b] = image.replicas[key]
            read[b] = reads[b][snaps[b].log_dir]
        out += partition_truth(cluster.name, hw_policy, key, view, snaps, read, md_read_ms=md_read_ms,
                               hw_read_ms=hw_read_ms, lag_max=lag_max)
    return out
