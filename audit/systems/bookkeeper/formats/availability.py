"""AvailabilityOfEntriesOfLedger bytes: which entries of a ledger one bookie stores (docs/formats/bookkeeper.md §1.7).

Layout (big-endian): 64-byte header = int32 version (0), int32 number of groups, zero padding;
then 24 bytes per SequenceGroup = int64 firstSequenceStart, int64 lastSequenceStart,
int32 sequenceSize, int32 sequencePeriod. A group holds runs of `sequenceSize` consecutive entries
starting at firstSequenceStart, firstSequenceStart + period, ... up to lastSequenceStart.

Lookups follow BookKeeper's isEntryAvailable: only the group with the greatest
firstSequenceStart <= entry is consulted (a TreeMap floorEntry), even if groups overlap."""
from __future__ import annotations

import bisect
import struct
from typing import Iterable, Iterator, Sequence

from audit.systems.bookkeeper.domain.model import SequenceGroup
from audit.errors import PayloadError

HEADER_SIZE = 64
GROUP_SIZE = 24
VERSION = 0
_HEADER = struct.Struct(">ii")
_GROUP = struct.Struct(">qqii")
_INT32_MAX = 2**31 - 1


def decode(data: bytes, source: str) -> list[SequenceGroup]:
    if len(data) < HEADER_SIZE:
        raise PayloadError(source, "header", f"{HEADER_SIZE} bytes", f"{len(data)} bytes")
    version, count = _HEADER.unpack_from(data, 0)
    if version != VERSION:
        raise PayloadError(source, "header.version", str(VERSION), version)
    if count < 0 or len(data) != HEADER_SIZE + GROUP_SIZE * count:
        raise PayloadError(source, "length", f"{HEADER_SIZE} + {GROUP_SIZE} * #groups bytes (#groups={count})",
                           f"{len(data)} bytes")
    if any(data[_HEADER.size:HEADER_SIZE]):
        raise PayloadError(source, "header.padding", "zero bytes", data[_HEADER.size:HEADER_SIZE])
    groups = []
    for i, fields in enumerate(_GROUP.iter_unpack(memoryview(data)[HEADER_SIZE:])):
        g = SequenceGroup(*fields)
        problem = _inconsistency(g)
        if problem is None and groups and g.first_sequence_start <= groups[-1].first_sequence_start:
            problem = "firstSequenceStart greater than the previous group's"
        if problem:
            raise PayloadError(source, f"group[{i}]", problem, g)
        groups.append(g)
    return groups


def _inconsistency(g: SequenceGroup) -> str | None:
    if g.first_sequence_start < 0:
        return "firstSequenceStart >= 0"
    if g.sequence_size < 1:
        return "sequenceSize >= 1"
    if g.last_sequence_start < g.first_sequence_start:
        return "lastSequenceStart >= firstSequenceStart"
    if g.last_sequence_start > g.first_sequence_start:
        span = g.last_sequence_start - g.first_sequence_start
        if g.sequence_period < g.sequence_size or span % g.sequence_period:
            return "sequencePeriod >= sequenceSize dividing lastSequenceStart - firstSequenceStart"
    elif g.sequence_period < 0:
        return "sequencePeriod >= 0"
    return None


def encode_groups(groups: Iterable[SequenceGroup]) -> bytes:
    groups = list(groups)
    out = bytearray(HEADER_SIZE + GROUP_SIZE * len(groups))
    _HEADER.pack_into(out, 0, VERSION, len(groups))
    for i, g in enumerate(groups):
        try:
            _GROUP.pack_into(out, HEADER_SIZE + GROUP_SIZE * i, g.first_sequence_start, g.last_sequence_start,
                             g.sequence_size, g.sequence_period)
        except struct.error as e:
            raise ValueError(f"group {i} {g} does not fit int64/int32 fields: {e}") from None
    return bytes(out)


def entries_to_groups(entry_ids: Iterable[int]) -> list[SequenceGroup]:
    """Groups exactly as BookKeeper's AvailabilityOfEntriesOfLedger(PrimitiveIterator.OfLong) builds them.

    BookKeeper cuts the input into runs of consecutive ids (an id inside the current run is
    ignored). A new group starts with sequencePeriod 0 and lastSequenceStart = its first start, and a
    run may only join a group when `runStart - lastSequenceStart == sequencePeriod`, which is never
    true for period 0 -- so in practice every run becomes its own group with period 0. Groups are
    kept in a map keyed by firstSequenceStart (a later run with the same start replaces the earlier
    one) and written in key order. Negative ids are rejected (BookKeeper treats -1 as "no run")."""
    by_start: dict[int, SequenceGroup] = {}
    run_start, run_size = None, 0
    for e in entry_ids:
        if e < 0:
            raise ValueError(f"entry ids must be >= 0, got {e}")
        if run_start is not None and run_start <= e < run_start + run_size:
            continue
        if run_start is not None and e == run_start + run_size:
            run_size += 1
            continue
        if run_start is not None:
            by_start[run_start] = _run_group(run_start, run_size)
        run_start, run_size = e, 1
    if run_start is not None:
        by_start[run_start] = _run_group(run_start, run_size)
    return [by_start[k] for k in sorted(by_start)]


def _run_group(start: int, size: int) -> SequenceGroup:
    if size > _INT32_MAX:
        raise ValueError(f"run of {size} entries at {start} exceeds BookKeeper's int32 sequenceSize")
    return SequenceGroup(start, start, size, 0)


def encode_entries(sorted_entry_ids: Iterable[int]) -> bytes:
    return encode_groups(entries_to_groups(sorted_entry_ids))


def _in_group(g: SequenceGroup, entry_id: int) -> bool:
    offset = entry_id - g.first_sequence_start
    if offset < 0 or entry_id >= g.last_sequence_start + g.sequence_size:
        return False
    if g.sequence_period == 0:
        return offset < g.sequence_size
    return offset % g.sequence_period < g.sequence_size


def _first_start(g: SequenceGroup) -> int:
    return g.first_sequence_start


def groups_contain(groups: Sequence[SequenceGroup], entry_id: int) -> bool:
    """`groups` sorted by firstSequenceStart (as decode returns them); O(log #groups)."""
    i = bisect.bisect_right(groups, entry_id, key=_first_start) - 1
    return i >= 0 and _in_group(groups[i], entry_id)


def iter_entries(groups: Sequence[SequenceGroup]) -> Iterator[int]:
    """Every entry id groups_contain() accepts, ascending."""
    for i, g in enumerate(groups):
        # Beyond the next group's start the next group is the floor group, so stop there.
        stop = g.last_sequence_start + g.sequence_size
        if i + 1 < len(groups):
            stop = min(stop, groups[i + 1].first_sequence_start)
        step = g.sequence_period or g.sequence_size
        for run_start in range(g.first_sequence_start, g.last_sequence_start + 1, step):
            if run_start >= stop:
                break
            yield from range(run_start, min(run_start + g.sequence_size, stop))


def count_entries(groups: Sequence[SequenceGroup]) -> int:
    return sum(1 for _ in iter_entries(groups))


def canonical_groups(groups: Sequence[SequenceGroup]) -> list[SequenceGroup]:
    """The same entries with equally sized runs at an equal stride merged into one periodic group.

    Today's bookies emit one group per run (see entries_to_groups), so a healthy bookie of an
    E=5/Qw=3 ledger answers with one group every 5 entries. Merging them makes the audit's cost follow
    the number of *changes* in a bookie's holdings, not the ledger's length. Input sorted and
    non-overlapping (as decode returns it); O(#groups)."""
    out: list[SequenceGroup] = []
    cur: SequenceGroup | None = None
    for g in groups:
        if cur is not None and g.sequence_size == cur.sequence_size:
            gap = g.first_sequence_start - cur.last_sequence_start
            period = cur.sequence_period or gap
            if gap == period and gap > cur.sequence_size and g.sequence_period in (0, period):
                cur = SequenceGroup(cur.first_sequence_start, g.last_sequence_start, cur.sequence_size, period)
                continue
        if cur is not None:
            out.append(cur)
        cur = g
    if cur is not None:
        out.append(cur)
    return out
