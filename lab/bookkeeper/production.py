"""What every production BookKeeper estate does and a healthy audit must accept without a finding:

- clients with shipped defaults: storeSystemTimeAsLedgerCreationTime is false, so most ledgers carry no ctime
  and their creation time is the znode's ZooKeeper ctime (AbstractZkLedgerManager, docs/formats/bookkeeper.md);
- a slow bookie that persists an add after the client gave up on it and re-sent it to a replacement
  (the bookie then holds an entry the metadata places elsewhere);
- re-replication of a lost bookie's fragments, after which the bookie comes back with its old data
  (it holds entries of segments that now name its replacement, until its over-replicated-ledger GC runs);
- writes that go on while the cluster is collected: an OPEN ledger's tail grows between the metadata read and
  the bookie reads;
- retention deleting ledgers while the cluster is collected: the metadata was read, then the ledger is deleted and
  the bookies' garbage collector drops its data before they are asked.
"""
from __future__ import annotations

import random
from dataclasses import replace
from typing import Any, Callable

from audit.systems.bookkeeper.domain.model import CLOSED, LedgerMetadata, Segment
from lab.bookkeeper.sim import Cluster, LedgerWriter

TAIL_GROWTH_ADDS = 5        # adds an OPEN ledger's writer makes while the cluster is being collected
RETENTION_SHARE = 13         # one healthy CLOSED ledger in 13 is deleted by retention during collection
CTIME_STORING_SHARE = 5     # one ledger id in 5 comes from a client that sets storeSystemTimeAsLedgerCreationTime


def stores_ctime(ledger_id: int, version: int) -> bool:
    """Whether the ledger's client stored ctime in the metadata (v1 cannot). Most clients keep the default."""
    return version > 1 and ledger_id % CTIME_STORING_SHARE == 0


def write_with_slow_bookie(w: LedgerWriter, bookie: str, slow_from_ms: int, n: int, t: Callable[[int], int]) -> None:
    """Adds 0..n-1; the first add at or after `slow_from_ms` whose write set holds `bookie` times out on it although
    the bookie persists it: the client changes the ensemble and re-sends the add to the replacement."""
    for e in range(n):
        if not w.slow and t(e) >= slow_from_ms and bookie in _write_set(w, e):
            w.slow.add(bookie)
        w.add(e, t(e))
    w.close()


def _write_set(w: LedgerWriter, entry_id: int) -> list[str]:
    return [w.ensemble[(entry_id + k) % w.ensemble_size] for k in range(w.write_quorum)]


def rereplicate(cluster: Cluster, metadata: dict[int, LedgerMetadata], lost: str, at: int, seed: Any,
                on_update: Callable[[int, int], None]) -> list[int]:
    """The Auditor and ReplicationWorker after `lost` went down: every CLOSED ledger naming it gets, per segment,
    a replacement at the lost bookie's index (the same segment key: the metadata's ensemble is replaced) holding
    the entries the other replicas still have. `lost` keeps its own copies. -> re-replicated ledger ids."""
    done = []
    for lid in sorted(metadata):
        md = metadata[lid]
        if md.state != CLOSED or not any(lost in s.ensemble for s in md.segments):
            continue
        rng = random.Random(f"bookkeeper-lab:{seed}:rereplicate:{lid}")
        bounds = {s.first_entry_id: (first, last) for s, first, last in md.segment_bounds()}
        segments = []
        for seg in md.segments:
            ensemble = list(seg.ensemble)
            if lost in ensemble:
                i = ensemble.index(lost)
                new = cluster.replacement(rng, ensemble, i, md.write_quorum_size, at, {lost})
                first, last = bounds[seg.first_entry_id]
                _copy_fragment(cluster, lid, md, ensemble, i, new, max(first, 0), last)
                ensemble[i] = new
            segments.append(Segment(seg.first_entry_id, tuple(ensemble)))
        metadata[lid] = replace(md, segments=tuple(segments))
        on_update(lid, at)
        done.append(lid)
    return done


def _copy_fragment(cluster: Cluster, lid: int, md: LedgerMetadata, ensemble: list[str], index: int, target: str,
                   first: int, last: int) -> None:
    E, Qw = md.ensemble_size, md.write_quorum_size
    for e in range(first, last + 1):
        if (index - e) % E >= Qw:
            continue  # not on this index's stripe
        others = [ensemble[(e + k) % E] for k in range(Qw) if (e + k) % E != index]
        if any(e in (cluster.entries(b, lid) or ()) for b in others):
            cluster.add_entry(target, lid, e)


def retention_deletes(cluster: Cluster, metadata: dict[int, LedgerMetadata], roles: dict[int, set[str]]) -> set[int]:
    """Healthy CLOSED ledgers that retention deletes during collection; every bookie's copy is garbage collected.
    Picked by position, oldest first (ids grow with creation), so extra fault ledgers shifting ids never leave none."""
    healthy = sorted(lid for lid, md in metadata.items() if md.state == CLOSED and not roles[lid])
    deleted = set(healthy[::RETENTION_SHARE])
    for lid in deleted:
        for bookie in cluster.bookies:
            cluster.drop_ledger(bookie, lid)
    return deleted


def grow_tail(w: LedgerWriter, start_ms: int, dt: int, adds: int = TAIL_GROWTH_ADDS) -> None:
    """The writer keeps going after the snapshot time: more entries reach the bookies than the metadata read
    (taken at the snapshot) can know of."""
    first = w.lap + 1
    for k in range(adds):
        w.add(first + k, start_ms + k * dt)


def znode_stat(ledger_id: int, ctime: int, mtime: int, version: int, data_length: int) -> dict[str, int]:
    """The Stat ZooKeeper keeps for a ledger znode (names as in org.apache.zookeeper.data.Stat). zxids are
    made up but ordered like ZooKeeper's: a later creation has a greater czxid."""
    czxid = (ctime // 1000) * 1000 + ledger_id % 1000
    return {"czxid": czxid, "mzxid": czxid + version, "ctime": ctime, "mtime": mtime, "version": version,
            "cversion": 0, "aversion": 0, "ephemeralOwner": 0, "dataLength": data_length, "numChildren": 0,
            "pzxid": czxid}
