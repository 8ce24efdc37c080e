"""One replica's log on one broker: segments of record batches, log end offset, high watermark, log start and
recovery point, the leader-epoch cache (audit.systems.kafka.domain.epochs, LeaderEpochFileCache's exact rules) and the
producer state the broker keeps for idempotent producers.

Upstream behaviour followed (apache/kafka @1eb7644349c): storage/.../log/LocalLog.java and core/.../log/UnifiedLog
(append assigns each batch's epoch at its base offset; truncateTo drops every batch ending at or above the
target and the epoch entries from it; truncateFullyAndStartAt; roll on a full segment, whose flush moves the
recovery point to the new segment's base; retention deletes whole non-active segments whose largest timestamp is
older than retention.ms and whose end is at or below the high watermark, then moves the log start and truncates
the epoch cache from the start), ProducerStateManager / ProducerAppendInfo (sequence checks, the last five
batches kept per producer for duplicates)."""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import NamedTuple

from audit.systems.kafka.domain.epochs import LeaderEpochCache

PRODUCER_BATCHES_KEPT = 5   # ProducerStateEntry.NUM_BATCHES_TO_RETAIN


@dataclass(eq=False, slots=True)
class Batch:
    """A record batch as the leader wrote it; followers copy the same bytes (the same object)."""

    base: int
    last: int
    epoch: int                  # partitionLeaderEpoch
    producer: str               # the simulated producer's name (the messages' identity)
    first_seq_no: int           # the producer's message numbers first_seq_no .. + records - 1
    records: int
    max_ts: int
    created_ms: int
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    control: bool = False       # a transaction marker (one control record)
    transactional: bool = False
    upstream: tuple[int, ...] = ()   # MirrorMaker 2 copies: the upstream offset of each record
    data: bytes = b""           # encoded with audit.systems.kafka.formats.batch.encode_batch (set by the writer)
    crc: int = 0

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def messages(self) -> range:
        return range(self.first_seq_no, self.first_seq_no + self.records)


@dataclass(eq=False, slots=True)
class Segment:
    base: int
    batches: list[Batch] = field(default_factory=list)
    bases: list[int] = field(default_factory=list)
    size: int = 0
    max_ts: int = -1


class ProducerEntry(NamedTuple):
    epoch: int
    last_seq: int
    recent: tuple[tuple[int, int, int], ...]   # (first seq, last seq, base offset) of the last batches


class ReplicaLog:
    """`hw_ckpt` / `rp_ckpt` / `ls_ckpt` are the values the broker last wrote to its checkpoint files (None before
    the first write); `appended` holds each batch's append instant (what the page cache writeback persists)."""

    def __init__(self, topic: str, partition: int, broker: int, log_dir: int, segment_bytes: int, created_ms: int):
        self.topic, self.partition, self.broker, self.log_dir = topic, partition, broker, log_dir
        self.segment_bytes = segment_bytes
        self.segments: list[Segment] = [Segment(0)]
        self.appended: dict[int, int] = {}          # batch base offset -> append instant
        self.log_start = 0
        self.leo = 0
        self.hw = 0
        self.recovery_point = 0
        self.cache = LeaderEpochCache()
        self.producers: dict[int, ProducerEntry] = {}
        self.hw_ckpt: int | None = None
        self.rp_ckpt: int | None = None
        self.ls_ckpt: int | None = None
        self.created_ms = created_ms

    # --- reading -------------------------------------------------------------------------------------------
    def batches(self):
        for seg in self.segments:
            yield from seg.batches

    def batches_from(self, offset: int, max_batches: int) -> list[Batch]:
        """The batches a fetch at `offset` returns: from the one holding `offset`, in order."""
        out: list[Batch] = []
        i = max(0, bisect.bisect_right([s.base for s in self.segments], offset) - 1)
        for seg in self.segments[i:]:
            j = max(0, bisect.bisect_right(seg.bases, offset) - 1)
            for b in seg.batches[j:]:
                if b.last >= offset:
                    out.append(b)
                    if len(out) >= max_batches:
                        return out
        return out

    def batch_at(self, offset: int) -> Batch | None:
        got = self.batches_from(offset, 1)
        return got[0] if got and got[0].base <= offset else None

    @property
    def last_batch(self) -> Batch | None:
        for seg in reversed(self.segments):
            if seg.batches:
                return seg.batches[-1]
        return None

    # --- writing -------------------------------------------------------------------------------------------
    def append(self, batch: Batch, now_ms: int) -> None:
        if batch.base != self.leo:
            raise ValueError(f"{self.topic}-{self.partition}@{self.broker}: append at {batch.base}, LEO {self.leo}")
        active = self.segments[-1]
        if active.batches and active.size + batch.size > self.segment_bytes:
            self.segments.append(Segment(batch.base))
            active = self.segments[-1]
            self.recovery_point = max(self.recovery_point, batch.base)   # the rolled segment is flushed
        active.batches.append(batch)
        active.bases.append(batch.base)
        active.size += batch.size
        active.max_ts = max(active.max_ts, batch.max_ts)
        self.appended[batch.base] = now_ms
        self.leo = batch.last + 1
        if batch.epoch >= 0:
            self.cache.assign(batch.epoch, batch.base)
        if batch.producer_id >= 0 and not batch.control:   # a marker ends a transaction, no sequence
            self._track_producer(batch)

    def _track_producer(self, batch: Batch) -> None:
        last_seq = batch.base_sequence + batch.records - 1
        prev = self.producers.get(batch.producer_id)
        recent = prev.recent if prev is not None and prev.epoch == batch.producer_epoch else ()
        recent = (recent + ((batch.base_sequence, last_seq, batch.base),))[-PRODUCER_BATCHES_KEPT:]
        self.producers[batch.producer_id] = ProducerEntry(batch.producer_epoch, last_seq, recent)

    def truncate_to(self, offset: int) -> bool:
        """UnifiedLog.truncateTo: a no-op at or above the LEO; else every batch ending at or after `offset` goes
        (the LEO becomes the base of the first one dropped, a batch boundary)."""
        if offset >= self.leo:
            return False
        if offset < self.segments[0].base:
            self.truncate_fully_and_start_at(offset)
            return True
        while len(self.segments) > 1 and self.segments[-1].base > offset:
            self.segments.pop()
        seg = self.segments[-1]
        keep = bisect.bisect_left([b.last for b in seg.batches], offset)
        del seg.batches[keep:], seg.bases[keep:]
        seg.size = sum(b.size for b in seg.batches)
        seg.max_ts = max((b.max_ts for b in seg.batches), default=-1)
        self.leo = seg.batches[-1].last + 1 if seg.batches else seg.base
        self.appended = {k: v for k, v in self.appended.items() if k < self.leo}
        self.cache.truncate_from_end(self.leo)
        self.hw = min(self.hw, self.leo)
        self.recovery_point = min(self.recovery_point, self.leo)
        self._rebuild_producers()
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.segments = [Segment(offset)]
        self.appended = {}
        self.log_start = self.leo = self.hw = self.recovery_point = offset
        self.cache = LeaderEpochCache()
        self.producers = {}

    def _rebuild_producers(self) -> None:
        self.producers = {}
        for b in self.batches():
            if b.producer_id >= 0 and not b.control:
                self._track_producer(b)

    def delete_retained(self, now_ms: int, retention_ms: int) -> int:
        """UnifiedLog.deleteOldSegments: the non-active segments wholly below the high watermark that are older
        than retention.ms, or wholly below the log start (moved by the leader's); returns how many went."""
        gone = 0
        while len(self.segments) > 1:
            seg, nxt = self.segments[0], self.segments[1]
            breached = nxt.base <= self.log_start
            if not breached and (nxt.base > self.hw or seg.max_ts < 0 or now_ms - seg.max_ts <= retention_ms):
                break
            for b in seg.batches:
                self.appended.pop(b.base, None)
            self.segments.pop(0)
            gone += 1
        if gone:
            self.log_start = max(self.log_start, self.segments[0].base)
            self.cache.truncate_from_start(self.log_start)
        return gone

    # --- durability ---------------------------------------------------------------------------------------
    def durable_offset(self, written_back_before_ms: int) -> int:
        """The offset up to which the log survives a power loss: what Kafka flushed (the recovery point) and
        the batches the page cache had written back (appended before `written_back_before_ms`)."""
        end = max(self.recovery_point, self.log_start)
        for seg in reversed(self.segments):
            for b in reversed(seg.batches):
                if b.last < end:
                    return end
                if self.appended.get(b.base, written_back_before_ms) < written_back_before_ms:
                    return b.last + 1
        return end

    def lose_unflushed(self, durable: int) -> None:
        """Power loss: the tail above `durable` never reached the disk; recovery truncates the epoch cache to the
        recovered log end and the high watermark starts from the checkpoint file, capped by the log end."""
        if durable < self.leo:
            self.truncate_to(durable)
        self.recovery_point = self.leo

    def reload(self) -> None:
        """After a restart (clean or not): the in-memory high watermark comes from the checkpoint file, clamped
        to [log start, LEO] (UnifiedLog.updateHighWatermark)."""
        hw = self.hw_ckpt if self.hw_ckpt is not None else 0
        self.hw = max(self.log_start, min(hw, self.leo))
