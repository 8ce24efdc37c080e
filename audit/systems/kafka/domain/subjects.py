"""What an incident check's subject patterns match here (docs/incident.md): a topic-partition, known by two names,
its topic (`orders`) and its partition (`orders-3`, the broker's partition dir name); a pattern matching either
wants it (`orders*`, `orders`, `orders-3`). A MirrorMaker 2 flow's group-partition is wanted when its upstream
topic-partition or its remote (target) topic-partition `<alias><separator><topic>` is. Evidence of the whole
cluster or broker (meta.properties, the dir's offset checkpoints, scan.json, the admin documents, the KRaft metadata
log `__cluster_metadata-0`, the MirrorMaker 2 documents) belongs to no subject and is always kept."""
from __future__ import annotations

import re
from typing import Any

METADATA_PARTITION_DIR = "__cluster_metadata-0"      # KRaft metadata log: the cluster's metadata, not a subject
_PARTITION_DIR = re.compile(r"^(?P<topic>[A-Za-z0-9._-]+)-(?P<partition>\d{1,10})$")
# LocalLog's DeleteDirPattern / FutureDirPattern / StrayDirPattern: `<topic>-<partition>.<unique id>-<suffix>`
_SPECIAL_DIR = re.compile(r"^(?P<topic>[A-Za-z0-9._-]+)-(?P<partition>\d{1,10})\.[^.]+-(delete|future|stray)$")


def subject_names(topic: str, partition: int) -> tuple[str, str]:
    """The names an incident check's patterns are matched against: the topic and `<topic>-<partition>`."""
    return topic, f"{topic}-{partition}"


def wanted(scope: Any, topic: str, partition: int) -> bool:
    """True when `scope` (audit.contracts.Scope, or None: everything) wants the topic-partition."""
    return scope is None or scope.wants_any(*subject_names(topic, partition))


def flow_wanted(scope: Any, topic: str, partition: int, alias: str, separator: str = ".") -> bool:
    """A MirrorMaker 2 group-partition of upstream `topic`: wanted by its upstream or its remote topic-partition."""
    return wanted(scope, topic, partition) or wanted(scope, f"{alias}{separator}{topic}", partition)


def partition_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a partition dir `<topic>-<partition>`; None for anything else (the KRaft metadata
    log, `-delete` / `-future` / `-stray` dirs, other names)."""
    if name == METADATA_PARTITION_DIR:
        return None
    m = _PARTITION_DIR.match(name)
    if m is None or int(m.group("partition")) > 0x7FFFFFFF:
        return None
    return m.group("topic"), int(m.group("partition"))


def special_partition(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a `-delete`, `-future` or `-stray` dir (a deletion, a move between log dirs, a replica
    found unassigned at start-up); None for any other name."""
    m = _SPECIAL_DIR.match(name)
    return None if m is None else (m.group("topic"), int(m.group("partition")))


def partition_of_key(key: str) -> tuple[str, ...] | None:
    """The subject names of a raw key below raw/<system>/<cluster>/ (docs/kafka/contracts.md "Raw evidence"): a
    partition dir's files `brokers/<b>/<d>/<topic>-<p>/...` belong to that topic-partition; every other key
    (a log dir's own files, the admin and MirrorMaker 2 documents, imports, the collector's reports, the KRaft
    metadata log) to the whole cluster or broker: None, always kept."""
    parts = key.split("/")
    if len(parts) < 5 or parts[0] != "brokers" or not parts[1].isdigit() or not re.match(r"^dir\d+$", parts[2]):
        return None
    tp = partition_dir(parts[3])
    return None if tp is None else subject_names(*tp)
