"""The state Spark computes for one partition, as the verdicts read it (audit/systems/kafka/domain/partition.py): each
collected replica's log, epoch cache, checkpointed offsets, read instants and what its batch headers showed, the
partition's metadata, and the offset-range helpers the rules share. docs/kafka/contracts.md has the meaning of every
field; audit/systems/kafka/transforms/replicas.py fills them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from audit.systems.kafka.domain.epochs import EpochEntry, LeaderEpochCache
from audit.systems.kafka.domain.truncation import ReplicaLog

Range = tuple[int, int]   # [from, to)


@dataclass(frozen=True)
class PartitionMetadata:
    """Leader, ISR and leader epoch as the admin API or the KRaft metadata log gave them, and when."""

    leader: int | None            # None: no leader (offline)
    leader_epoch: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...] | None   # None: the source gives no ISR (KRaft quorum-state: voters only)
    read_at_ms: int | None


@dataclass(frozen=True)
class ReplicaState:
    """One replica as its log dir shows it (Spark fills every field; see docs/kafka/contracts.md)."""

    broker: int
    epochs: tuple[EpochEntry, ...] | None   # the leader-epoch-checkpoint entries as written; None: unknown
    log_start_offset: int
    log_end_offset: int                     # last batch's last offset + 1 (log start when empty)
    high_watermark: int | None              # replication-offset-checkpoint; None: not checkpointed
    read_at_ms: int | None                  # when the partition dir (epoch checkpoint, segments) was read
    high_watermark_read_at_ms: int | None = None   # when the HW checkpoint was read; None: with the log
    first_mismatch_offset: int | None = None       # first base offset differing from the reference's batches
    mismatch_ranges: tuple[Range, ...] = ()        # [from, to) where they differ (exact; see `differing`)
    unmatched_producer_ids: tuple[int, ...] = ()   # producers of its batches in Δ below min(HW, LEO)
    unmatched_first_timestamp_ms: int | None = None
    unmatched_last_timestamp_ms: int | None = None
    batch_epoch_violations: int = 0                # committed batches whose epoch the cache does not give them
    batch_epoch_violation_first_offset: int | None = None
    batch_epoch_violation_last_offset: int | None = None
    batch_epoch_violation_offsets: int = 0         # offsets those batches span
    sequence_gaps: int = 0                         # producer sequence gaps among committed batches
    sequence_gap_first_offset: int | None = None
    sequence_gap_last_offset: int | None = None
    checkpoint_problems: tuple[str, ...] = ()      # decoding problems; with `epochs` None: why it is unknown

    def __post_init__(self):
        # log() and cache() are asked for many times per partition: built once (frozen: set around __setattr__)
        valid = tuple(e for e in self.epochs or () if e.epoch >= 0 and e.start_offset >= 0)
        log = ReplicaLog(valid, self.log_start_offset, self.log_end_offset, self.high_watermark)
        object.__setattr__(self, "_log", log)
        object.__setattr__(self, "_cache", log.cache())   # as the broker loads the file (conflicting entries dropped)

    def log(self) -> ReplicaLog:
        """Its log for truncation.py (an unknown cache counts as empty there: callers check `epochs_known`)."""
        return self._log

    def cache(self) -> LeaderEpochCache:
        """The loaded cache, shared: read it, never change it."""
        return self._cache

    @property
    def epochs_known(self) -> bool:
        return self.epochs is not None

    @property
    def epochs_from(self) -> int | None:
        """The first offset its cache gives an epoch (None: no entry, or unknown)."""
        first = self._cache.earliest_entry
        return None if first is None else first.start_offset

    @property
    def hw_read_at_ms(self) -> int | None:
        return self.read_at_ms if self.high_watermark_read_at_ms is None else self.high_watermark_read_at_ms

    def own_order_ok(self) -> bool:
        """Its high watermark was read no later than its log: offsets below it were committed before."""
        return not_after(self.hw_read_at_ms, self.read_at_ms)

    def exposed_end(self) -> int:
        """The end of what it exposed as committed and still holds."""
        return self.log_start_offset if self.high_watermark is None else \
            max(self.log_start_offset, min(self.high_watermark, self.log_end_offset))


@dataclass(frozen=True)
class PartitionState:
    cluster: str
    topic: str
    partition: int
    replicas: tuple[ReplicaState, ...]
    metadata: PartitionMetadata | None = None
    compacted: bool = False                       # cleanup.policy contains compact
    leader_high_watermark: int | None = None      # ListOffsets LATEST from the leader, when collected
    leader_high_watermark_read_at_ms: int | None = None


@dataclass(frozen=True)
class Settings:
    truncation_policy: str = "leader-epoch"       # truncation.truncation_policy_for(declared version)
    follower_lag_max: int | None = None           # offsets; None: lag is a metric only


def not_after(a: int | None, b: int | None) -> bool:
    """Both instants known and `a` no later than `b`."""
    return a is not None and b is not None and a <= b


def merge(ranges: Iterable[Range]) -> list[Range]:
    """Sorted, non-overlapping [from, to) ranges covering the same offsets."""
    out: list[list[int]] = []
    for low, high in sorted(r for r in ranges if r[0] < r[1]):
        if out and low <= out[-1][1]:
            out[-1][1] = max(out[-1][1], high)
        else:
            out.append([low, high])
    return [(low, high) for low, high in out]


def clip(ranges: Iterable[Range], low: int, high: int) -> list[Range]:
    return [(max(a, low), min(b, high)) for a, b in ranges if max(a, low) < min(b, high)]


def size(ranges: Iterable[Range]) -> int:
    return sum(b - a for a, b in ranges)
