"""MirrorMaker 2 offset translation, sync and checkpoint emission, and the verdicts per consumer group and partition
(what a failover to the target would do: failover.py).

What MirrorMaker 2 does, release by release (docs/formats/kafka.md §12 names the sources, releases and tickets):
- OffsetSyncStore: up to 3.4.0 the latest sync only (`downstream + (group - upstream)`); from 3.4.1, 64
  exponentially spaced syncs, one demoted "oldValue" (3.4.1 translates and emits exactly as 3.5.0: the "3.5.0"
  variant runs from 3.4.1); from 3.5.2 replacements taken from the original array; from 3.7.1, while reading to the
  end at start, the store keeps every sync unless the checkpoints topic could not be read;
- the sync writer's PartitionState.update, the sync emission rule; from 3.7.0 the syncs not sent at once are sent
  at the next offset commit;
- MirrorCheckpointTask: checkpointsForGroup / checkpointIsMoreRecent;
- MirrorClient.remoteConsumerOffsets: the last checkpoint per partition wins.

A store replays the sync records of one upstream partition in topic order, as a MirrorCheckpointTask that starts
now would: `load(existing)` is the start (records read before the read-to-end), `sync(...)` a record after it."""
from __future__ import annotations

from typing import Iterable, NamedTuple, Sequence

from audit.systems.kafka.domain.checks import CHECKS, COVERAGE
from audit.systems.kafka.domain.failover import (Bounds, Failover, Restart, downstream_bounds, failover, generations,
                                         readable_from, restarts)

__all__ = ["Bounds", "Failover", "Restart", "downstream_bounds", "failover", "generations", "restarts",
           "OffsetSyncStore", "SyncWriterPartition", "Checkpoint", "GroupPartition", "Mm2Settings", "evaluate_group",
           "checkpoint_justified", "checkpoint_emitted", "last_checkpoints", "rule_for_version", "store_variant_for",
           "sync_emitted", "translate", "translate_pre_35"]

SYNCS_PER_PARTITION = 64
RULES = ("pre-3.4.1", "3.4.1+")
STORE_VARIANTS = ("3.4.0", "3.5.0", "3.5.2", "3.7.1")


def _version(version: str) -> tuple[int, int, int]:
    parts = version.strip().split("-")[0].split(".")
    try:
        numbers = [int(p) for p in parts[:3]]
    except ValueError:
        raise ValueError(f"MirrorMaker 2 version {version!r}: expected e.g. '3.6.1'") from None
    if len(numbers) < 2:
        raise ValueError(f"MirrorMaker 2 version {version!r}: expected major.minor[.patch]")
    return tuple(numbers + [0] * (3 - len(numbers)))


def rule_for_version(version: str) -> str:
    """"pre-3.4.1" (latest sync only) or "3.4.1+" (the 64-sync store) for a declared Kafka / MirrorMaker 2 version
    (docs/formats/kafka.md §12)."""
    return "pre-3.4.1" if _version(version) < (3, 4, 1) else "3.4.1+"


def store_variant_for(version: str) -> str:
    """Which OffsetSyncStore implementation a version runs (see the module doc)."""
    v = _version(version)
    if v < (3, 4, 1):
        return "3.4.0"
    if v < (3, 5, 2):
        return "3.5.0"
    if v < (3, 7, 1):
        return "3.5.2"
    return "3.7.1"


class OffsetSync:
    """One sync record. Compared by identity, as the Java store compares its array slots (`==`)."""

    __slots__ = ("upstream_offset", "downstream_offset")

    def __init__(self, upstream_offset: int, downstream_offset: int):
        self.upstream_offset = upstream_offset
        self.downstream_offset = downstream_offset

    def __repr__(self) -> str:
        return f"OffsetSync({self.upstream_offset}, {self.downstream_offset})"


def _invariant_b(i_sync: OffsetSync, j_sync: OffsetSync, i: int, j: int) -> bool:
    bound = j_sync.upstream_offset + (1 << j) - (1 << i)
    return i_sync is j_sync or bound < 0 or i_sync.upstream_offset <= bound


def _invariant_c(i_sync: OffsetSync, j_sync: OffsetSync, i: int) -> bool:
    bound = j_sync.upstream_offset + (1 << max(i - 2, 0))
    return i_sync is j_sync or (bound >= 0 and i_sync.upstream_offset >= bound)


class OffsetSyncStore:
    """The syncs of ONE upstream partition as OffsetSyncStore keeps them, for one store variant."""

    def __init__(self, variant: str = "3.7.1"):
        if variant not in STORE_VARIANTS:
            raise ValueError(f"store variant {variant!r}: expected one of {', '.join(STORE_VARIANTS)}")
        self.variant = variant
        self.syncs: list[OffsetSync] | None = None
        self.read_to_end = variant == "3.4.0"     # 3.4 translates from whatever it has read
        self.initialization_must_read_to_end = True

    def load(self, existing: Iterable[tuple[int, int]], initialization_must_read_to_end: bool = True) -> None:
        """start(): read the records already in the topic, then translation becomes available. From 3.7.1 the
        flag is `not checkpointsReadOk` (MirrorCheckpointTask.start)."""
        self.initialization_must_read_to_end = initialization_must_read_to_end
        self.read_to_end = self.variant == "3.4.0"
        for upstream, downstream in existing:
            self.sync(upstream, downstream)
        self.read_to_end = True

    def sync(self, upstream_offset: int, downstream_offset: int) -> None:
        """handleRecord: one sync record of this partition."""
        new = OffsetSync(upstream_offset, downstream_offset)
        if self.syncs is None or self.variant == "3.4.0":
            self.syncs = [new] * SYNCS_PER_PARTITION
            return
        syncs = list(self.syncs)
        if self.variant == "3.7.1":
            clear = (not self.read_to_end and self.initialization_must_read_to_end) \
                or upstream_offset < syncs[0].upstream_offset
        else:
            clear = not self.read_to_end or syncs[0].upstream_offset > upstream_offset
        if clear:
            self.syncs = [new] * SYNCS_PER_PARTITION
            return
        if self.variant == "3.5.0":
            _update_keeping_one_demoted(syncs, new)
        else:
            _update_from_original_array(syncs, self.syncs, new)
        self.syncs = syncs

    def sync_for(self, index: int) -> OffsetSync:
        if self.syncs is None:
            raise ValueError("no syncs present")
        return self.syncs[index]

    def translate_downstream(self, upstream_offset: int) -> int | None:
        """OptionalLong of translateDownstream: None = empty (not read to the end yet, or no sync: no checkpoint),
        -1 = the oldest usable sync is ahead of the group (checkpoint suppressed)."""
        if not self.read_to_end or self.syncs is None:
            return None
        if self.variant == "3.4.0":
            return translate_pre_35(self.syncs[0], upstream_offset)
        found = next((s for s in self.syncs if s.upstream_offset <= upstream_offset), self.syncs[-1])
        if found.upstream_offset > upstream_offset:
            return -1
        return found.downstream_offset + (0 if upstream_offset == found.upstream_offset else 1)


def _update_keeping_one_demoted(syncs: list[OffsetSync], new: OffsetSync) -> None:
    """updateSyncArray from 3.4.1 to 3.5.1: the most recently discarded sync may move one slot down
    (docs/formats/kafka.md §12, "Store variants")."""
    replacement = new
    old_value = syncs[0]
    syncs[0] = replacement
    for current in range(1, SYNCS_PER_PARTITION):
        previous = current - 1
        is_recent = _invariant_b(syncs[previous], old_value, previous, current)
        separated_previous = _invariant_c(syncs[previous], old_value, previous)
        nxt = current + 1
        separated_next = nxt >= SYNCS_PER_PARTITION or _invariant_c(old_value, syncs[nxt], current)
        if is_recent and separated_previous and separated_next:
            replacement = old_value
        if _invariant_b(syncs[previous], syncs[current], previous, current):
            break
        old_value = syncs[current]
        syncs[current] = replacement


def _update_from_original_array(syncs: list[OffsetSync], original: list[OffsetSync], new: OffsetSync) -> None:
    """updateSyncArray from 3.5.2: replacements are taken from the original array in order (docs/formats/kafka.md
    §12, "Store variants")."""
    replacement = new
    replacement_index = 0
    syncs[0] = replacement
    for current in range(1, SYNCS_PER_PARTITION):
        previous = current - 1
        while True:
            old_value = original[replacement_index]
            is_recent = _invariant_b(syncs[previous], old_value, previous, current)
            separated_previous = _invariant_c(syncs[previous], old_value, previous)
            nxt = current + 1
            separated_next = nxt >= SYNCS_PER_PARTITION or _invariant_c(old_value, syncs[nxt], current)
            next_replacement = replacement_index + 1
            duplicate = next_replacement < SYNCS_PER_PARTITION and old_value is original[next_replacement]
            promote = is_recent and separated_previous and separated_next
            if promote:
                replacement = old_value
            skip = duplicate or not separated_previous
            if promote or skip:
                replacement_index += 1
            if not (replacement_index < current and skip):
                break
        if _invariant_b(syncs[previous], syncs[current], previous, current):
            break
        syncs[current] = replacement


def translate_pre_35(latest_sync: OffsetSync | tuple[int, int] | None, group_offset: int) -> int | None:
    """The translation as shipped up to 3.4: the latest sync only, dead-reckoned forward (overshoots across
    upstream gaps, skipped records: docs/formats/kafka.md §12)."""
    if latest_sync is None:
        return None
    upstream, downstream = (latest_sync.upstream_offset, latest_sync.downstream_offset) \
        if isinstance(latest_sync, OffsetSync) else latest_sync
    if upstream > group_offset:
        return -1
    return downstream + (group_offset - upstream)


def translate(syncs: Sequence[tuple[int, int]], group_offset: int, version: str,
              initialization_must_read_to_end: bool = True) -> int | None:
    """The translation a MirrorCheckpointTask of `version` starting now gives `group_offset`, from this partition's
    sync records in topic order."""
    store = OffsetSyncStore(store_variant_for(version))
    store.load(syncs, initialization_must_read_to_end)
    return store.translate_downstream(group_offset)


class SyncWriterPartition:
    """PartitionState of the sync writer for one upstream partition, for one task lifetime."""

    def __init__(self, max_offset_lag: int = 100, version: str = "3.7.1"):
        self.max_offset_lag = max_offset_lag
        self.pre_35 = rule_for_version(version) == "pre-3.4.1"
        self.previous_upstream = self.previous_downstream = -1
        self.last_sync_upstream = self.last_sync_downstream = -1

    def update(self, upstream_offset: int, downstream_offset: int) -> bool:
        """True when this replicated record triggers an immediate sync."""
        if self.pre_35:
            target = self.last_sync_downstream + (upstream_offset - self.last_sync_upstream)
            stale = downstream_offset - target >= self.max_offset_lag
        else:   # translation gives at most one past the last sync
            stale = downstream_offset - (self.last_sync_downstream + 1) >= self.max_offset_lag
        emit = (self.last_sync_downstream == -1 or stale or upstream_offset - self.previous_upstream != 1
                or downstream_offset < self.previous_downstream)
        if emit:
            self.last_sync_upstream, self.last_sync_downstream = upstream_offset, downstream_offset
        self.previous_upstream, self.previous_downstream = upstream_offset, downstream_offset
        return emit


def sync_emitted(records: Iterable[tuple[int, int]], max_offset_lag: int = 100, version: str = "3.7.1"
                 ) -> list[tuple[int, int]]:
    """The (upstream, downstream) pairs of replicated records that trigger an immediate sync in one task lifetime.
    What reaches the topic may differ: a pending sync is replaced by a newer one of the same partition while 10
    are in flight, and from 3.7.0 the latest record not synced is also sent at each offset commit
    (offset.flush.interval.ms)."""
    state = SyncWriterPartition(max_offset_lag, version)
    return [(u, d) for u, d in records if state.update(u, d)]


class Checkpoint(NamedTuple):
    upstream_offset: int
    downstream_offset: int


def checkpoint_emitted(previous: Checkpoint | None, upstream_offset: int, downstream_offset: int | None,
                       version: str = "3.7.1") -> bool:
    """Whether MirrorCheckpointTask emits a checkpoint for a group's partition given the translation: only with
    syncs and a downstream offset >= 0; from 3.4.1 only the first, after an upstream rewind, or when the downstream
    offset advanced (`previous` = the last emitted since the task started, or from 3.7.1 the last in the topic)."""
    if downstream_offset is None or downstream_offset < 0:
        return False
    if rule_for_version(version) == "pre-3.4.1" or previous is None:
        return True
    return upstream_offset < previous.upstream_offset or downstream_offset > previous.downstream_offset


def last_checkpoints(checkpoints: Iterable[tuple[str, str, int, int, int]], group: str) -> dict:
    """MirrorClient.remoteConsumerOffsets: (group, downstream topic, partition, upstream, downstream) records in
    topic order -> {(topic, partition): Checkpoint} of the last one for `group`."""
    out = {}
    for g, topic, partition, upstream, downstream in checkpoints:
        if g == group:
            out[(topic, partition)] = Checkpoint(upstream, downstream)
    return out


def checkpoint_justified(upstream_offset: int, downstream_offset: int, syncs: Sequence[tuple[int, int]],
                         rule: str) -> bool:
    """Whether some sync could have given this checkpoint under `rule`, whatever the store held when it was made
    (restarts and the 64-slot store make the exact sync unknowable): 3.4.1+ needs d_s == D with u_s == U, or
    d_s + 1 == D with u_s < U; pre-3.4.1 needs d_s + (U - u_s) == D with u_s <= U. False is a certain mismatch."""
    if rule not in RULES:
        raise ValueError(f"translation rule {rule!r}: expected one of {', '.join(RULES)}")
    for u, d in syncs:
        if u > upstream_offset:
            continue
        if rule == "pre-3.4.1":
            if d + (upstream_offset - u) == downstream_offset:
                return True
        elif d + (0 if u == upstream_offset else 1) == downstream_offset:
            return True
    return False


class GroupPartition(NamedTuple):
    """One consumer group on one mirrored partition, as Spark assembles it for the target cluster `cluster`."""

    cluster: str                      # the target cluster (where the flow is declared)
    source: str                       # the source cluster alias
    group: str
    topic: str                        # the upstream topic
    partition: int
    version: str                      # declared MirrorMaker 2 version
    syncs: tuple = ()                 # this partition's (upstream, downstream) sync records in topic order
    checkpoint: Checkpoint | None = None         # the last checkpoint of the group for it (remoteConsumerOffsets)
    upstream_committed: int | None = None        # the group's committed offset on the source
    source_read_at_ms: int | None = None
    target_committed: int | None = None          # the group's committed offset on the remote topic
    target_read_at_ms: int | None = None
    target_log_start: int | None = None          # the remote partition's log start offset (None: not read)
    # the sync records go back to the first MirrorMaker wrote (the offset-syncs topic read from offset 0); False:
    # retention deleted earlier ones, which may be what a checkpoint was translated from
    syncs_complete: bool = True


class Mm2Settings(NamedTuple):
    redelivery_tolerance: int = 0                # messages a failover may redeliver beyond the syncs' bounds
    group_tolerances: tuple = ()                 # (group, messages) pairs overriding it


def _row(g: GroupPartition, check: str, rng: tuple[int, int], count: int, message: str, detail: dict) -> dict:
    row = {"check": check, "severity": CHECKS[check].severity if check in CHECKS else None, "cluster": g.cluster,
           "source": g.source, "group": g.group, "topic": g.topic, "partition": g.partition, "offset_from": rng[0],
           "offset_to": rng[1], "entry_count": count, "message": message, "detail": detail}
    if check == COVERAGE:
        row["what"] = message
    return row


def _ordered(first: int | None, then: int | None) -> bool:
    return first is not None and then is not None and first <= then


def evaluate_group(g: GroupPartition, settings: Mm2Settings = Mm2Settings()) -> tuple[list[dict], dict]:
    """(findings and "coverage" items, metrics) of one group and partition. offset_from / offset_to are target
    offsets (inclusive). A skip is judged when the target group was read no later than the source group (a target
    offset read later may come from a newer source offset), a redelivery when it was read no earlier."""
    rule = rule_for_version(g.version)
    out = []
    if g.checkpoint is not None and not checkpoint_justified(*g.checkpoint, g.syncs, rule):
        low, high = downstream_bounds(g.syncs, g.checkpoint.upstream_offset)
        d = g.checkpoint.downstream_offset
        off = max(0, 0 if low is None else low - d, 0 if high is None else d - high)
        if g.syncs_complete:
            out.append(_row(g, "kafka.mm2_checkpoint_mismatch", (d, d), off, f"checkpoint "
                            f"{g.checkpoint.upstream_offset}->{d} is not what the {rule} translation gives from any "
                            "sync", {"rule": rule, "bounds": [low, high]}))
        else:
            out.append(_row(g, COVERAGE, (d, d), off, "checkpoint not explained by the syncs retention left: "
                                                       "the one it came from may be deleted",
                            {"rule": rule, "bounds": [low, high]}))
    u = g.upstream_committed
    bounds = Bounds(None, None) if u is None else downstream_bounds(g.syncs, u)
    f = failover(u, bounds, g.target_committed, g.target_log_start, restarts(g.syncs))
    detail = {"rule": rule, "translated": None if u is None else translate(g.syncs, u, g.version),
              "bounds": list(bounds), "upstream_committed": u, "target_committed": g.target_committed,
              "target_log_start": g.target_log_start, "source_read_at_ms": g.source_read_at_ms,
              "target_read_at_ms": g.target_read_at_ms}
    start = None if g.target_committed is None else readable_from(g.target_committed, g.target_log_start)
    if f.skipped_min:
        rng = (max(bounds.high, g.target_log_start or 0), g.target_committed - 1)
        if _ordered(g.target_read_at_ms, g.source_read_at_ms):
            out.append(_row(g, "kafka.mm2_target_group_ahead", rng, f.skipped_min,
                            f"a failover skips at least {f.skipped_min} messages", detail))
        else:
            out.append(_row(g, COVERAGE, rng, f.skipped_min, "target group ahead of the syncs' bound, read order "
                                                             "does not prove it", detail))
    tolerance = dict(settings.group_tolerances).get(g.group, settings.redelivery_tolerance)
    if f.redelivered_min is not None and f.redelivered_min > tolerance:
        rng, more = (start, bounds.low - 1), {**detail, "tolerance": tolerance}
        if _ordered(g.source_read_at_ms, g.target_read_at_ms):
            out.append(_row(g, "kafka.mm2_failover_redelivery", rng, f.redelivered_min,
                            f"a failover redelivers at least {f.redelivered_min} messages", more))
        else:
            out.append(_row(g, COVERAGE, rng, f.redelivered_min, "redelivery above the tolerance, read order does "
                                                                 "not prove it", more))
    return out, {**detail, "cluster": g.cluster, "source": g.source, "group": g.group, "topic": g.topic,
                 "partition": g.partition, "exact": f.exact, **f._asdict(), "bounds": list(bounds)}
