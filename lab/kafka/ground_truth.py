"""The ground-truth document of one lab cluster (raw/_lab/<cluster>/ground_truth.json through the pipeline):
its scenarios and faults, the findings its collected evidence shows (truth.py for the replicas; for the MirrorMaker 2
flows into it, the failover rows mm2_read.py gathers and mm2_oracle.py counts record by record), one failover row
per MirrorMaker 2 group and mirrored partition, and what the evidence cannot show but happened (acknowledged
messages lost with every copy, truncations, elections)."""
from __future__ import annotations

from typing import Any

from lab.kafka.truth import ReadAt, cluster_truth
from lab.kafka.world import World


def _mm2_findings(rows: list[dict], tolerance: int) -> list[dict]:
    out = []
    base_keys = ("cluster", "source", "group", "topic", "partition")
    for r in rows:
        base = {k: r[k] for k in base_keys}
        if r["skipped"]:
            low = r["resume_at"] if r["resume_at"] is not None else r["target_committed"] - r["skipped"]
            out.append({"check": "kafka.mm2_target_group_ahead", **base, "offset_from": low,
                        "offset_to": r["target_committed"] - 1, "entry_count": r["skipped"]})
        if r["redelivered_behind_syncs"] > tolerance:
            out.append({"check": "kafka.mm2_failover_redelivery", **base,
                        "offset_from": max(r["target_committed"], r["target_log_start"]),
                        "offset_to": r["sync_position"] - 1, "entry_count": r["redelivered_behind_syncs"]})
    return out


def acknowledged_lost(world: World, name: str) -> dict[str, int]:
    """Per topic: messages acknowledged to an acks=all producer that the collected reference replica does not hold
    (retention aside): lost with every copy, so no evidence is left of them."""
    col = world.collections[name]
    out: dict[str, int] = {}
    held: dict[tuple[str, int], set] = {}
    for producer in world.producers:
        if producer.cluster.name != name:
            continue
        for ack in producer.acks:
            if not ack.acks_all or ack.acked_ms > col.admin_at_ms:
                continue
            view = col.partitions.get((ack.topic, ack.partition))
            image = col.images.get(view.leader) if view is not None and view.leader is not None else None
            snap = image.replicas.get((ack.topic, ack.partition)) if image is not None else None
            if snap is None or ack.offset < snap.log_start:
                continue
            if snap.key not in held:
                held[snap.key] = {(b.producer, n) for b in snap.batches for n in b.messages}
            lost = sum(1 for n in range(ack.first_no, ack.first_no + ack.count)
                       if (ack.producer, n) not in held[snap.key])
            if lost:
                out[ack.topic] = out.get(ack.topic, 0) + lost
    return out


def lab_truth(world: World, name: str, reads: dict[int, dict[int, ReadAt]], settings: dict[str, Any]) -> dict:
    col = world.collections[name]
    cluster = world.clusters[name]
    findings = cluster_truth(cluster, col, reads, md_read_ms=col.admin_at_ms, hw_read_ms=col.admin_at_ms,
                             lag_max=settings["follower_lag_max"])
    failover = [row for read in col.mm2.values() for row in read.failover]
    findings += _mm2_findings(failover, settings["mm2_redelivery_tolerance"])
    return {
        "system": "kafka", "cluster": name, "seed": world.config.seed, "as_of_ms": world.as_of_ms,
        "policy": cluster.policy, "mode": cluster.spec.mode, "declared_version": cluster.broker_version,
        "collected_at_ms": col.admin_at_ms, "scan_at_ms": {str(b): t for b, t in sorted(col.scan_at_ms.items())},
        "scenarios": [{"name": m.name, "topics": list(m.topics), "description": m.description}
                      for m in world.scenarios if m.cluster == name],
        "faults": [f for m in world.scenarios if m.cluster == name for f in m.faults],
        "mirrors": [{"source": f.spec.source, "target": f.spec.target, "mm2_version": f.spec.mm2_version,
                     "scenarios": list(f.spec.scenarios), "restarts_ms": list(f.restarts),
                     "dropped_syncs": f.dropped_syncs}
                    for f in world.mirrors if name in (f.spec.source, f.spec.target)],
        "findings": findings,
        "mm2_failover": failover,
        "acknowledged_lost": acknowledged_lost(world, name),
        "elections": [e for e in cluster.events if e["kind"] == "election"],
        "truncations": list(cluster.replication.truncations),
    }
