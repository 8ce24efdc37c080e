"""What the MirrorMaker 2 reader sees of a flow at the target's collection (`mm2/<source>/offset-syncs.json`,
`checkpoints.json`, `groups.json`, the documents audit/systems/kafka/collect/mm2.py writes, built here from the
simulation: the lab writes them straight into the sink), and the history of each mirrored partition the ground
truth's failover rows are counted from, record by record (mm2_oracle.py: no offset translation).

The groups are read at one virtual instant, in the reader's order: the target side, the source side, then the
target groups again (`target_after`), all at `now`, so every read instant of groups.json (the document's and each
read's) is `now` and both target reads hold the same offsets; each read finished no later than the next started
AND the other way round, and the audit may judge skips and redeliveries both ways."""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass

from lab.kafka.cluster import Cluster
from lab.kafka.mm2 import Emitted, MirrorFlow, checkpoint_records, sync_records
from lab.kafka.mm2_oracle import PartitionHistory, failover


def _topic_doc(topic: str, records: list[tuple[int, Emitted]], at_ms: int, end: int) -> bytes:
    doc = {"topic": topic, "read_started_at_ms": at_ms, "read_finished_at_ms": at_ms, "end_offsets": {"0": end},
           "records": [{"partition": 0, "offset": o, "timestamp": r.timestamp,
                        "key_b64": base64.b64encode(r.key).decode(), "value_b64": base64.b64encode(r.value).decode()}
                       for o, r in records]}
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _end(cluster: Cluster, topic: str, partition: int) -> tuple[int | None, int | None]:
    log = cluster.leader_log(cluster.partitions[(topic, partition)])
    return (None, None) if log is None else (log.log_start, log.hw)


def _end_row(cluster: Cluster, topic: str, partition: int) -> dict:
    log_start, end = _end(cluster, topic, partition)
    return {"topic": topic, "partition": partition, "log_start": log_start, "end": end}


def _committed(cluster: Cluster, groups) -> dict:
    return {g: [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(cluster.groups.get(g, {}).items())]
            for g in sorted(groups)}


@dataclass(frozen=True)
class FlowRead:
    docs: dict[str, bytes]            # file name -> bytes
    failover: list[dict]              # rows of the ground truth
    syncs: dict[tuple[str, int], list[tuple[int, int]]]   # upstream partition -> (upstream, downstream) in order


def read_flow(flow: MirrorFlow) -> FlowRead:
    now = flow.source.clock.now
    syncs, checkpoints = sync_records(flow), checkpoint_records(flow)
    sync_log = flow.source.leader_log(flow.source.partitions[(flow.syncs_topic, 0)])
    cp_log = flow.target.leader_log(flow.target.partitions[(flow.checkpoints_topic, 0)])
    docs = {"offset-syncs.json": _topic_doc(flow.syncs_topic, syncs, now, sync_log.hw if sync_log else 0),
            "checkpoints.json": _topic_doc(flow.checkpoints_topic, checkpoints, now, cp_log.hw if cp_log else 0)}
    upstream = sorted({(r.fields.topic, r.fields.partition) for _, r in syncs})
    downstream = sorted({(flow.remote(t), p) for t, p in upstream}
                        | {(r.fields.topic, r.fields.partition) for _, r in checkpoints})
    checkpointed = {r.fields.group for _, r in checkpoints}
    source_groups = {g for g, offsets in flow.source.groups.items() if offsets}
    target_groups = {g for g, offsets in flow.target.groups.items() if offsets} | checkpointed
    target = _committed(flow.target, target_groups)
    doc = {"read_started_at_ms": now,
           "target_read_started_at_ms": now,
           "target": target,
           "target_end_offsets": [_end_row(flow.target, t, p) for t, p in downstream],
           "target_read_finished_at_ms": now,
           "source_read_started_at_ms": now,
           "source": _committed(flow.source, source_groups),
           "source_end_offsets": [_end_row(flow.source, t, p) for t, p in upstream],
           "source_read_finished_at_ms": now,
           "target_after_read_started_at_ms": now,
           "target_after": target,          # nothing moves within the virtual instant
           "target_after_read_finished_at_ms": now,
           "read_finished_at_ms": now}
    docs["groups.json"] = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    by_partition: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for _, r in syncs:
        by_partition.setdefault((r.fields.topic, r.fields.partition), []).append(
            (r.fields.upstream_offset, r.fields.downstream_offset))
    return FlowRead(docs, failover_rows(flow, by_partition, now), by_partition)


def _downstream(flow: MirrorFlow, topic: str, p: int) -> list[tuple[int, int]]:
    """(downstream offset, upstream offset) of every record a consumer of the remote partition can read now."""
    log = flow.target.leader_log(flow.target.partitions[(flow.remote(topic), p)])
    if log is None:
        return []
    out = []
    for b in log.batches():
        if b.last >= log.hw:
            break
        out.extend((b.base + i, u) for i, u in enumerate(b.upstream))
    return out


def partition_history(flow: MirrorFlow, topic: str, p: int, syncs: dict) -> PartitionHistory:
    """What the simulation knows of one mirrored partition now: the records MirrorMaker 2 copied that the remote
    partition still serves (each with the upstream offset it copies), the partition's syncs readable in the
    offset-syncs topic, the remote partition's log start."""
    log = flow.target.leader_log(flow.target.partitions[(flow.remote(topic), p)])
    return PartitionHistory(tuple(_downstream(flow, topic, p)), tuple(syncs.get((topic, p), ())),
                            0 if log is None else log.log_start)


def failover_rows(flow: MirrorFlow, syncs: dict, now: int) -> list[dict]:
    """Per group of the flow and mirrored partition it committed on the source: what a consumer of the target
    group failing over now would read again and never read, counted record by record by the oracle
    (mm2_oracle.py, whose doc defines every count) from the partition's history. `upstream_committed` U: the
    source group's committed offset; `target_committed` D: the target group's (None: it has none);
    `target_log_start`: the remote partition's log start (a consumer starting at D below it reads from there)."""
    rows = []
    for group, topic in sorted(flow.groups.items()):
        for (t, p), upstream in sorted(flow.source.groups.get(group, {}).items()):
            if t != topic:
                continue
            target = flow.target.groups.get(group, {}).get((flow.remote(t), p))
            history = partition_history(flow, t, p, syncs)
            seen = failover(history, upstream, target)
            rows.append({"cluster": flow.target.name, "source_cluster": flow.source.name, "source": flow.alias,
                         "group": group, "topic": t, "partition": p, "remote_topic": flow.remote(t),
                         "upstream_committed": upstream, "target_committed": target, "resume_at": seen.resume_at,
                         "sync_position": seen.sync_position, "redelivered": seen.redelivered,
                         "skipped": seen.skipped, "redelivered_behind_syncs": seen.redelivered_behind_syncs,
                         "target_log_start": history.log_start, "read_at_ms": now,
                         "mm2_version": flow.spec.mm2_version})
    return rows
