"""The ground truth of a failover to a MirrorMaker 2 target, counted record by record over the simulated history
(mm2_read.py gathers it at the reader's instant): which upstream offset every readable record of the remote
partition copies, the offset syncs readable in the topic, and how far the group had consumed on the source.
Nothing here translates a group's offset through the syncs: neither the simulated connectors' rules (mm2_rules.py)
nor the audit's (audit/systems/kafka/domain/mm2.py, failover.py) are used, so that the truth agreeing with the
audit means something.

A consumer of the target group after a failover starts at the target group's committed offset D, or at the
remote partition's log start when D is below it (retention deleted what lies there), and reads every record from
there. On the source the group had consumed every upstream offset below its committed offset U. Then:
- `redelivered`: the records it reads that copy an upstream offset below U;
- `skipped`: the upstream offsets >= U copied to the target (and still readable there) of which it reads no copy,
  every copy lying before where it starts (when a restart copied an offset twice and the second copy lies at or
  after the start, that offset is read: not skipped);
- `resume_at`: the first readable record copying an offset >= U (where a consumer should resume).

`redelivered_behind_syncs` is the part of the redelivery the collected offset syncs already prove (the findings
claim it as a lower bound), counted over the records too. A sync names one record of the target: the one at its
downstream offset, which copies its upstream offset (the history checks it; a record retention deleted cannot
be checked, and nothing readable lies before it). The proof sync is the usable sync naming the latest record
among those whose upstream offset is at or below U. It shows the group past every record before the one it
names, and past that record too when the group had consumed the offset it copies (when it copies U itself the
group resumes there): `sync_position` = the first target offset past that span; `redelivered_behind_syncs` = the
redelivered records inside it (what they really copy: an earlier task lifetime's copies of offsets >= U that a
restart left inside the span are not counted).

Usable: the syncs after the last place where the topic goes back (a sync whose upstream or downstream offset is
below the previous sync's). From the syncs alone an upstream offset before such a rewind may name another record
since (the topic recreated or truncated; a restarted task's resume looks the same), and OffsetSyncStore
(apache/kafka connect/mirror OffsetSyncStore.updateSyncArray: "Old offsets are invalid, so overwrite them all")
forgets every earlier sync too; likewise a downstream offset before the target went back may name another
record. So no claim rests on them, even where the simulation knows the rewind was a restart."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PartitionHistory:
    """One mirrored partition at the read, as the simulation knows it."""

    copies: tuple[tuple[int, int], ...]   # (target offset, upstream offset) of every readable record, by offset
    syncs: tuple[tuple[int, int], ...]    # (upstream offset, target offset) of the readable syncs, in topic order
    log_start: int                        # the remote partition's log start


@dataclass(frozen=True)
class Outcome:
    resume_at: int | None
    sync_position: int | None
    redelivered: int
    skipped: int
    redelivered_behind_syncs: int


def usable_syncs(syncs) -> list[tuple[int, int]]:
    """The syncs after the last rewind of the topic (module doc), in topic order."""
    usable: list[tuple[int, int]] = []
    for upstream, downstream in syncs:
        if usable and (upstream < usable[-1][0] or downstream < usable[-1][1]):
            usable = []
        usable.append((upstream, downstream))
    return usable


def proof_sync(history: PartitionHistory, upstream_committed: int) -> tuple[int, int] | None:
    """(upstream, target offset) of the proof sync for a group at `upstream_committed` (module doc), None without:
    the usable sync naming the latest record among those copying an offset at or below it, whose record the target
    holds as the sync names it (or lies below the log start)."""
    copied = dict(history.copies)
    named = [(d, u) for u, d in usable_syncs(history.syncs)
             if u <= upstream_committed and (d < history.log_start or copied.get(d) == u)]
    if not named:
        return None
    d, u = max(named)
    return u, d


def failover(history: PartitionHistory, upstream_committed: int, target_committed: int | None) -> Outcome:
    """What a consumer of the target group, failing over now, reads again and never reads (module doc). Without a
    target committed offset nothing is counted."""
    consumed = upstream_committed            # every upstream offset below it was consumed on the source
    resume_at = next((d for d, u in history.copies if u >= consumed), None)
    # the last target offset the proof sync shows the group past: the record it names when the group had consumed
    # the offset that record copies, else the one before it
    through = None
    proof = proof_sync(history, consumed)
    if proof is not None:
        named_upstream, named = proof
        through = named if named_upstream < consumed else named - 1
    sync_position = None if through is None else through + 1
    if target_committed is None:
        return Outcome(resume_at, sync_position, 0, 0, 0)
    start = max(target_committed, history.log_start)
    read = [(d, u) for d, u in history.copies if d >= start]
    redelivered = sum(1 for _, u in read if u < consumed)
    read_upstream = {u for _, u in read}
    skipped = len({u for _, u in history.copies if u >= consumed} - read_upstream)
    behind = 0 if through is None else sum(1 for d, u in read if d <= through and u < consumed)
    return Outcome(resume_at, sync_position, redelivered, skipped, behind)
