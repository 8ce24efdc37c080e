"""Replicas the metadata assigns against the replicas the log dirs hold: a partition never drops out of the audit
because a folder is missing (docs/formats/kafka.md §11.3).

A broker creates a partition's log (the `<topic>-<partition>` folder) when it applies the metadata that makes it a
replica, and removes it only when the metadata no longer assigns it. So on a broker whose log dirs were all read, an
assigned replica with no folder is missing: its data is not there, whatever the ISR says. Reads happen one after
another while the cluster moves, so the verdict is given only where no change in between can explain the absence:
- the assignment must be older than the broker's listing by the settle time (a broker applies new metadata within
  seconds; the assignment instant is the KRaft record's batch timestamp, an upper bound, or else the instant the
  metadata was read, which is after it);
- a `-delete`, `-future` or `-stray` folder of the same partition on that broker (a deletion, a move between its log
  dirs or a re-created topic under way) leaves the replica not judged.
A broker whose log dirs were not (all) read says nothing: the replica is not judged, and a partition with no replica
read at all still counts (`unread_metrics`)."""
from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Iterable, NamedTuple

from audit.systems.kafka.domain.checks import COVERAGE
from audit.systems.kafka.domain.partition import item

MISSING = "kafka.replica_missing"
STRAY = "kafka.stray_replica"


def topic_id_bytes(text: str | None) -> bytes | None:
    """A topic id as 16 bytes, from Kafka's URL-safe base64 text (partition.metadata, KRaft records) or the UUID
    text an admin client prints; None when absent or not a topic id."""
    if not text:
        return None
    try:
        if len(text) == 36 and text.count("-") == 4:
            raw = bytes.fromhex(text.replace("-", ""))
        else:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        return None
    return raw if len(raw) == 16 else None


def is_stray(replica_topic_id: str | None, metadata_topic_id: str | None) -> bool:
    """True when the replica's partition.metadata names another topic id than the metadata: a copy of a deleted
    topic's partition (re-created under the same name while the broker was down; Kafka renames it `-stray` only
    when the broker starts)."""
    a, b = topic_id_bytes(replica_topic_id), topic_id_bytes(metadata_topic_id)
    return a is not None and b is not None and a != b


def stray_replica(cluster: str, topic: str, partition: int, broker: int, replica_topic_id: str,
                  metadata_topic_id: str, where: str | None) -> dict:
    """The finding for a stray copy: reported, never judged against the topic the metadata now has."""
    return item(_Partition(cluster, topic, partition), STRAY, broker, None, None, 0,
                f"broker {broker} holds a copy of {topic}-{partition} from topic id {replica_topic_id}, not the "
                f"metadata's {metadata_topic_id} (a deleted topic's replica left behind): not judged against the "
                "new topic", {"replica_topic_id": replica_topic_id, "metadata_topic_id": metadata_topic_id,
                              "dir": where})


class _Partition(NamedTuple):
    """What partition.item needs to name a partition."""

    cluster: str
    topic: str
    partition: int


@dataclass(frozen=True)
class BrokerRead:
    """What the audit knows of one broker's log dirs."""

    listed_at_ms: int | None            # the earliest listing of its dirs (None: unknown)
    complete: bool = True               # every log dir the estate declares for it was read
    in_motion: frozenset = field(default_factory=frozenset)   # (topic, partition) of its -delete/-future/-stray dirs


@dataclass(frozen=True)
class Assigned:
    """One partition as the metadata gives it."""

    cluster: str
    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...] | None
    leader: int | None
    leader_epoch: int | None
    assigned_by_ms: int | None          # the replica list stood by then (record timestamp, else the metadata read)


def _item(p: Assigned, check: str, broker: int | None, message: str, detail: dict) -> dict:
    return item(p, check, broker, None, None, 0, message, detail)


def missing_replicas(p: Assigned, found: Iterable[int], reads: dict[int, BrokerRead], settle_ms: int) -> list[dict]:
    """Findings (`kafka.replica_missing`) and "not judged" items for the assigned replicas with no folder among the
    brokers' log dirs read (`found`: brokers holding a folder of the partition, indexed or not)."""
    held, out = set(found), []
    for broker in p.replicas:
        if broker in held:
            continue
        read = reads.get(broker)
        detail = {"assigned_replicas": list(p.replicas), "isr": None if p.isr is None else list(p.isr),
                  "in_isr": None if p.isr is None else broker in p.isr, "leader": p.leader,
                  "assigned_by_ms": p.assigned_by_ms}
        if read is None or not read.complete:
            out.append(_item(p, COVERAGE, broker, "assigned replica on a broker whose log dirs were not all read: "
                                                  "not judged", detail))
            continue
        detail["listed_at_ms"] = read.listed_at_ms
        if (p.topic, p.partition) in read.in_motion:
            out.append(_item(p, COVERAGE, broker, "assigned replica found only as a -delete, -future or -stray "
                                                  "folder (a deletion, move or re-creation under way): not judged",
                             detail))
            continue
        if p.assigned_by_ms is None or read.listed_at_ms is None or \
                read.listed_at_ms - p.assigned_by_ms < settle_ms:
            out.append(_item(p, COVERAGE, broker, "assigned replica absent from a log dir listed too soon after "
                                                  "the assignment (or at an unknown instant): not judged", detail))
            continue
        detail["assigned_for_ms"] = read.listed_at_ms - p.assigned_by_ms
        in_isr = "" if p.isr is None or broker not in p.isr else " though the ISR names it"
        out.append(_item(p, MISSING, broker, f"broker {broker}'s log dirs hold no replica of the partition the "
                                             f"metadata assigns it (assigned for at least "
                                             f"{detail['assigned_for_ms'] // 1000} s){in_isr}", detail))
    return out


def unread_metrics(p: Assigned) -> dict:
    """The kafka_partitions numbers of a partition the metadata knows and no log dir showed a replica of."""
    return {"cluster": p.cluster, "topic": p.topic, "partition": p.partition, "reference_broker": None,
            "reference_rule": "no-replica-collected", "leader": p.leader, "leader_epoch": p.leader_epoch,
            "replica_count": len(p.replicas), "collected_replicas": 0,
            "isr_size": None if p.isr is None else len(p.isr),
            "under_replicated": None if p.isr is None else len(set(p.isr)) < len(set(p.replicas)),
            "offline": p.leader is None, "log_start_offset": None, "log_end_offset": None, "high_watermark": None,
            "latest_epoch": None, "min_divergence_offset": None, "truncating_followers": 0, "max_lag": None,
            "followers": []}
