"""The MirrorMaker 2 rules the simulated connectors run, by version: the lab's own implementation of the system it
simulates (mm2.py), written from the upstream sources below, not imported from the audit
(audit/systems/kafka/domain/mm2.py). Only the simulator uses it: the ground truth of a failover counts records over
the simulated history (mm2_oracle.py) and translates nothing.

Upstream (apache/kafka connect/mirror/src/main/java/org/apache/kafka/connect/mirror/):
- sync emission, MirrorSourceTask.PartitionState.update: 3.4.0 emits on the first record of a task lifetime, a
  downstream drift of offset.lag.max from the linear extrapolation of the last sync, an upstream gap or a
  downstream truncation, and drops the sync when ten are outstanding; 3.4.1/3.5.0 (KAFKA-14666) emit when the
  downstream offset is offset.lag.max past the last sync + 1, queues it (pendingOffsetSyncs, the latest per
  partition) until fewer than ten are outstanding; 3.7.0 (KAFKA-15906, OffsetSyncWriter) also queues every
  other record's sync as "delayed" and sends those at each offset commit;
- translation, OffsetSyncStore: 3.4.0 the latest sync only, `downstream + (group - upstream)`, -1 when the sync
  is ahead of the group; 3.4.1/3.5.0 64 syncs per partition kept by updateSyncArray (oldValue demotion), 3.5.2/3.6.0
  (KAFKA-15202) the replacement taken from the original array, 3.7.1 (KAFKA-15905) the start keeps every sync
  read when the checkpoints topic was read; from 3.4.1 `downstream + (group == upstream ? 0 : 1)`, nothing before
  the first read to the end."""
from __future__ import annotations

SYNCS_PER_PARTITION = 64
MAX_OUTSTANDING_OFFSET_SYNCS = 10


def version_at_least(version: tuple[int, ...], *wanted: int) -> bool:
    return tuple(version) + (0,) * (3 - len(version)) >= wanted


class SyncWriterState:
    """PartitionState of one upstream partition for one task lifetime."""

    def __init__(self, version: tuple[int, ...], max_offset_lag: int):
        self.old = not version_at_least(version, 3, 4, 1)
        self.max_offset_lag = max_offset_lag
        self.previous_upstream = self.previous_downstream = -1
        self.last_sync_upstream = self.last_sync_downstream = -1
        self.should_sync = False

    def update(self, upstream: int, downstream: int) -> bool:
        if self.old:
            target = self.last_sync_downstream + (upstream - self.last_sync_upstream)
            emit = (self.last_sync_downstream == -1 or downstream - target >= self.max_offset_lag
                    or upstream - self.previous_upstream != 1 or downstream < self.previous_downstream)
            if emit:
                self.last_sync_upstream, self.last_sync_downstream = upstream, downstream
            self.previous_upstream, self.previous_downstream = upstream, downstream
            return emit
        if (self.last_sync_downstream == -1 or downstream - (self.last_sync_downstream + 1) >= self.max_offset_lag
                or upstream - self.previous_upstream != 1 or downstream < self.previous_downstream):
            self.last_sync_downstream = downstream
            self.should_sync = True
        self.previous_upstream, self.previous_downstream = upstream, downstream
        return self.should_sync

    def reset(self) -> None:
        self.should_sync = False


class _Sync:
    """Compared by identity, like the Java array slots."""

    __slots__ = ("upstream", "downstream")

    def __init__(self, upstream: int, downstream: int):
        self.upstream, self.downstream = upstream, downstream


def _inv_b(i_sync: _Sync, j_sync: _Sync, i: int, j: int) -> bool:
    bound = j_sync.upstream + (1 << j) - (1 << i)
    return i_sync is j_sync or bound < 0 or i_sync.upstream <= bound


def _inv_c(i_sync: _Sync, j_sync: _Sync, i: int) -> bool:
    bound = j_sync.upstream + (1 << max(i - 2, 0))
    return i_sync is j_sync or (bound >= 0 and i_sync.upstream >= bound)


class SyncStore:
    """The syncs of one upstream partition as the checkpoint task's OffsetSyncStore holds them."""

    def __init__(self, version: tuple[int, ...]):
        self.latest_only = not version_at_least(version, 3, 4, 1)
        self.original_array = version_at_least(version, 3, 5, 2)
        self.keep_on_start = version_at_least(version, 3, 7, 1)
        self.syncs: list[_Sync] | None = None
        self.read_to_end = self.latest_only
        self.must_read_to_end = True

    def started(self) -> None:
        self.read_to_end = True

    def handle(self, upstream: int, downstream: int) -> None:
        new = _Sync(upstream, downstream)
        if self.syncs is None or self.latest_only:
            self.syncs = [new] * SYNCS_PER_PARTITION
            return
        clear_on_start = not self.read_to_end and (self.must_read_to_end or not self.keep_on_start)
        if clear_on_start or upstream < self.syncs[0].upstream:
            self.syncs = [new] * SYNCS_PER_PARTITION
            return
        original, syncs = self.syncs, list(self.syncs)
        if self.original_array:
            _update_from_original(syncs, original, new)
        else:
            _update_demoting(syncs, new)
        self.syncs = syncs

    def translate(self, upstream: int) -> int | None:
        """None: no checkpoint (not read to the end, or no sync); -1: the oldest sync is ahead of the group."""
        if not self.read_to_end or self.syncs is None:
            return None
        if self.latest_only:
            s = self.syncs[0]
            return -1 if s.upstream > upstream else s.downstream + (upstream - s.upstream)
        found = next((s for s in self.syncs if s.upstream <= upstream), self.syncs[-1])
        if found.upstream > upstream:
            return -1
        return found.downstream + (0 if upstream == found.upstream else 1)


def _update_demoting(syncs: list[_Sync], new: _Sync) -> None:
    """updateSyncArray at 3.5.0."""
    replacement, old_value = new, syncs[0]
    syncs[0] = replacement
    for current in range(1, SYNCS_PER_PARTITION):
        previous = current - 1
        is_recent = _inv_b(syncs[previous], old_value, previous, current)
        separated_prev = _inv_c(syncs[previous], old_value, previous)
        nxt = current + 1
        separated_next = nxt >= SYNCS_PER_PARTITION or _inv_c(old_value, syncs[nxt], current)
        if is_recent and separated_prev and separated_next:
            replacement = old_value
        if _inv_b(syncs[previous], syncs[current], previous, current):
            break
        old_value = syncs[current]
        syncs[current] = replacement


def _update_from_original(syncs: list[_Sync], original: list[_Sync], new: _Sync) -> None:
    """updateSyncArray from 3.5.2 / 3.6.0 on (KAFKA-15202)."""
    replacement, index = new, 0
    syncs[0] = replacement
    for current in range(1, SYNCS_PER_PARTITION):
        previous = current - 1
        while True:
            old_value = original[index]
            is_recent = _inv_b(syncs[previous], old_value, previous, current)
            separated_prev = _inv_c(syncs[previous], old_value, previous)
            nxt = current + 1
            separated_next = nxt >= SYNCS_PER_PARTITION or _inv_c(old_value, syncs[nxt], current)
            duplicate = index + 1 < SYNCS_PER_PARTITION and old_value is original[index + 1]
            promote = is_recent and separated_prev and separated_next
            if promote:
                replacement = old_value
            skip = duplicate or not separated_prev
            if promote or skip:
                index += 1
            if not (index < current and skip):
                break
        if _inv_b(syncs[previous], syncs[current], previous, current):
            break
        syncs[current] = replacement
