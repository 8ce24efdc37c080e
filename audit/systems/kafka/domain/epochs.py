"""The leader-epoch cache of one replica: (leader epoch -> epoch start offset), exactly as the broker keeps it.

Follows the broker's leader-epoch file cache (docs/formats/kafka.md §11, "The cache"). The broker loads its
`leader-epoch-checkpoint` through `assign`, so a cache built from checkpoint entries here is the cache the broker would
hold after reading that file; the raw file's own invariants are `checkpoint_problems`."""
from __future__ import annotations

import bisect
from typing import Iterable, NamedTuple

UNDEFINED_EPOCH = -1          # OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH
UNDEFINED_EPOCH_OFFSET = -1   # OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH_OFFSET


class EpochEntry(NamedTuple):
    """One line of a leader-epoch-checkpoint: the epoch and the offset of its first message."""

    epoch: int
    start_offset: int


class LeaderEpochCache:
    """Entries kept sorted by epoch (the broker's TreeMap), and, by construction, by start offset too."""

    def __init__(self, entries: Iterable[EpochEntry | tuple[int, int]] = ()):
        given = [e if type(e) is EpochEntry else EpochEntry(*e) for e in entries]
        previous_epoch = previous_start = -1
        for epoch, start in given:
            if epoch <= previous_epoch or start <= previous_start:
                break
            previous_epoch, previous_start = epoch, start
        else:   # valid and strictly increasing (the usual file): assign would keep every entry
            self._entries = given
            return
        self._entries = []
        for epoch, start in given:
            self.assign(epoch, start)

    def copy(self) -> "LeaderEpochCache":
        out = LeaderEpochCache.__new__(LeaderEpochCache)
        out._entries = list(self._entries)
        return out

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def __repr__(self) -> str:
        return f"LeaderEpochCache({list(self._entries)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LeaderEpochCache) and self._entries == other._entries

    def assign(self, epoch: int, start_offset: int) -> tuple[EpochEntry, ...]:
        """Record that `epoch` starts at `start_offset`; returns the entries it removed.

        A no-op when `epoch` is the latest epoch and `start_offset` is not smaller (an epoch, once assigned, keeps
        its start). Otherwise every entry from the end with `epoch >= new.epoch or start >= new.start` is removed
        first (the broker warns "caused truncation of conflicting entries" unless the only one removed started at
        the same offset: an epoch that never got a record), then the entry is appended."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"Received invalid partition leader epoch entry EpochEntry(epoch={epoch}, "
                             f"startOffset={start_offset})")
        latest = self.latest_entry
        if latest is not None and epoch == latest.epoch and start_offset >= latest.start_offset:
            return ()
        removed = []
        while self._entries and (self._entries[-1].epoch >= epoch or self._entries[-1].start_offset >= start_offset):
            removed.append(self._entries.pop())
        self._entries.append(EpochEntry(epoch, start_offset))
        return tuple(removed)

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) answered for `requested_epoch`: the OffsetsForLeaderEpoch answer and the Fetch
        DivergingEpoch. The latest epoch ends at the log end offset; an older one at the start of the first
        higher epoch, paired with the largest known epoch <= requested (or the requested epoch itself when none
        is known below it); undefined requests and epochs above every known one get (-1, -1)."""
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._entries and self._entries[-1].epoch == requested_epoch:
            return requested_epoch, log_end_offset
        epochs = [e.epoch for e in self._entries]
        higher = bisect.bisect_right(epochs, requested_epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._entries[0].start_offset
        return self._entries[higher - 1].epoch, self._entries[higher].start_offset

    def truncate_from_end(self, end_offset: int) -> tuple[EpochEntry, ...]:
        """Remove every entry starting at or after `end_offset` (a log truncated to `end_offset`); a negative
        offset (UNDEFINED) changes nothing. Returns the removed entries, newest first."""
        removed = []
        if end_offset >= 0:
            while self._entries and self._entries[-1].start_offset >= end_offset:
                removed.append(self._entries.pop())
        return tuple(removed)

    def truncate_from_start(self, start_offset: int) -> tuple[EpochEntry, ...]:
        """The log start moved to `start_offset` (retention, DeleteRecords): remove the leading entries starting
        at or before it and put the last of them back with its start moved to `start_offset` (exclusive: an
        entry starting exactly there is kept as it is). Returns the removed entries, oldest first."""
        removed = []
        while self._entries and self._entries[0].start_offset <= start_offset:
            removed.append(self._entries.pop(0))
        if removed:
            self._entries.insert(0, EpochEntry(removed[-1].epoch, start_offset))
        return tuple(removed)

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds `offset` (None below the first entry)."""
        found = None
        for entry in self._entries:
            if entry.start_offset > offset:
                break
            found = entry.epoch
        return found

    def epoch_entry(self, epoch: int) -> EpochEntry | None:
        for entry in self._entries:
            if entry.epoch == epoch:
                return entry
        return None

    def previous_epoch(self, epoch: int | None = None) -> int | None:
        """The epoch just below `epoch` (default: the latest epoch)."""
        if epoch is None:
            epoch = self.latest_epoch
            if epoch is None:
                return None
        below = [e.epoch for e in self._entries if e.epoch < epoch]
        return below[-1] if below else None

    def next_epoch(self, epoch: int) -> int | None:
        above = [e.epoch for e in self._entries if e.epoch > epoch]
        return above[0] if above else None

    def entries_in_range(self, start_offset: int, end_offset: int) -> tuple[EpochEntry, ...]:
        """The entries describing offsets [start_offset, end_offset), as epochEntriesInRange computes them
        (a negative start leaves the head as it is)."""
        copy = self.copy()
        if start_offset >= 0:
            copy.truncate_from_start(start_offset)
        copy.truncate_from_end(end_offset)
        return copy.entries


def checkpoint_problem_entries(entries: Iterable[EpochEntry | tuple[int, int]]) -> list[tuple[int, EpochEntry, str]]:
    """(index, entry, why) for every entry of a leader-epoch-checkpoint, as written, that breaks its invariants:
    a negative epoch or start offset (the broker refuses to load the file), an epoch or start offset not above the
    previous entry's (the broker silently drops the conflicting entries while loading, so the file does not say
    what the log held)."""
    problems = []
    previous = None
    for index, (epoch, start) in enumerate(entries):
        entry = EpochEntry(epoch, start)
        if epoch < 0 or start < 0:
            problems.append((index, entry, "negative epoch or start offset"))
        if previous is not None:
            if epoch <= previous.epoch:
                problems.append((index, entry, f"epoch not above the previous entry's {previous.epoch}"))
            if start <= previous.start_offset:
                problems.append((index, entry, f"start offset not above the previous entry's {previous.start_offset}"))
        previous = entry
    return problems


def checkpoint_problems(entries: Iterable[EpochEntry | tuple[int, int]]) -> list[str]:
    """checkpoint_problem_entries as text, one line per problem."""
    return [f"entry {index} ({entry.epoch} {entry.start_offset}): {why}"
            for index, entry, why in checkpoint_problem_entries(entries)]


def epoch_differences(a: LeaderEpochCache, b: LeaderEpochCache, start_offset: int, end_offset: int) -> int:
    """How many offsets of [start_offset, end_offset) the two caches give different epochs (None below a cache's
    first entry counts as an epoch of its own)."""
    bounds = sorted({start_offset, end_offset} | {e.start_offset for c in (a, b) for e in c.entries
                                                  if start_offset < e.start_offset < end_offset})
    return sum(high - low for low, high in zip(bounds, bounds[1:])
               if a.epoch_for_offset(low) != b.epoch_for_offset(low))
