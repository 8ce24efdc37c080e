"""The driver's side of the assignment check (audit/systems/kafka/domain/assignment.py): every partition the metadata
knows, with the replica folders the log dirs showed and how each broker's log dirs were read -> missing-replica
findings, "not judged" items, and a metrics row for each partition no log dir showed a replica of.

The metadata row of a partition is the one the partition audit uses (replicas.metadata_rows: the admin API's, else the
furthest KRaft copy). A broker's log dirs count as read when every dir the estate declares for it was scanned (an
imported cluster declares none: what was imported is what it has); its listing instant is the earliest of its dirs'
(`listed_at_ms`, else the scan's start)."""
from __future__ import annotations

from collections import defaultdict

import numpy as np
import pyarrow as pa

from audit.systems.kafka.domain.assignment import Assigned, BrokerRead, missing_replicas, unread_metrics
from audit.systems.kafka.domain.checks import COVERAGE
from audit.systems.kafka.domain.subjects import special_partition
from audit.systems.kafka.transforms.replicas import MetadataRows, _partition_metadata, ints


def broker_reads(log_dirs: list[dict], declared: dict[str, dict[int, int]]) -> dict[str, dict[int, BrokerRead]]:
    """cluster -> broker -> BrokerRead, from state.log_dir_reads rows; `declared`: cluster -> broker -> how many
    log dirs the estate declares for it."""
    by_broker: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for d in log_dirs:
        by_broker[(d["cluster"], d["broker"])].append(d)
    out: dict[str, dict[int, BrokerRead]] = defaultdict(dict)
    for (cluster, broker), dirs in by_broker.items():
        instants = [d["listed_at_ms"] if d["listed_at_ms"] is not None else d["read_started_at_ms"] for d in dirs]
        moving = {special_partition(s["dir"]) for d in dirs for s in d["skipped_dirs"] or ()}
        wanted = declared.get(cluster, {}).get(broker, 0)
        out[cluster][broker] = BrokerRead(None if any(i is None for i in instants) else min(instants),
                                          len({d["dir"] for d in dirs}) >= wanted, frozenset(moving - {None}))
    return out


def _assigned(row: dict) -> Assigned:
    md = _partition_metadata(row)     # leader, ISR and read instant as the partition audit reads them
    since = row["replicas_since_ms"] if row["replicas_since_ms"] is not None else md.read_at_ms
    return Assigned(row["cluster"], row["topic"], row["partition"], md.replicas, md.isr, md.leader, md.leader_epoch,
                    since)


def judge(metadata: MetadataRows | None, found: pa.Table | None, reads: dict[str, dict[int, BrokerRead]],
          assembled_pkeys: np.ndarray, settle_ms: int) -> tuple[list[dict], list[dict]]:
    """(the domain's rows for every metadata partition, metrics rows of those without a collected replica).
    Replicas on brokers of which nothing was read (no log dir, no folder) make one item per cluster, not one each;
    a broker known only by its folders (no scan.json) is read at an unknown instant."""
    if metadata is None or not metadata.rows:
        return [], []
    held: dict[int, set[int]] = defaultdict(set)
    known = {cluster: dict(brokers) for cluster, brokers in reads.items()}
    if found is not None:
        for k, c, b in zip(ints(found, "pkey").tolist(), found.column("cluster").to_pylist(),
                           ints(found, "broker").tolist()):
            held[k].add(b)
            known.setdefault(c, {}).setdefault(b, BrokerRead(None))
    judged = set(assembled_pkeys.tolist())
    items, metrics = [], []
    unread: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for key, row in zip(metadata.keys.tolist(), metadata.rows):
        if not row["replicas"]:
            continue
        p = _assigned(row)
        if key not in judged:
            metrics.append(unread_metrics(p))
        brokers = known.get(p.cluster, {})
        for b in p.replicas:
            if b not in brokers:
                unread[p.cluster][b] += 1
        items += missing_replicas(p, held.get(key, set()) | (set(p.replicas) - set(brokers)), brokers, settle_ms)
    return items + [_not_read(cluster, counts) for cluster, counts in sorted(unread.items())], metrics


def _not_read(cluster: str, replicas: dict[int, int]) -> dict:
    """One "not judged" item for the brokers of a cluster of which nothing was read, with their replica counts."""
    names = ", ".join(str(b) for b in sorted(replicas))
    return {"check": COVERAGE, "severity": None, "cluster": cluster, "topic": None, "partition": None,
            "broker": None, "offset_from": None, "offset_to": None, "entry_count": 0,
            "what": f"{sum(replicas.values())} assigned replica(s) on broker(s) {names} whose log dirs were not "
                    "read: not judged",
            "message": "assigned replicas on brokers not read",
            "detail": {"replicas_by_broker": {str(b): n for b, n in sorted(replicas.items())}}}
