"""Which persistent topics to collect: the estate's `topics` and every persistent topic of its `namespaces`.

Admin REST (PersistentTopics v2):
- GET /admin/v2/persistent/{tenant}/{namespace}              -> ["persistent://t/ns/x",
                                                                "persistent://t/ns/y-partition-0", ...]
- GET /admin/v2/persistent/{tenant}/{namespace}/partitioned  -> ["persistent://t/ns/y", ...] (partitioned parents)
- GET /admin/v2/persistent/{tenant}/{namespace}/{topic}/partitions -> {"partitions": n, ...} (0: not partitioned)
A partitioned topic is expanded to `<topic>-partition-<i>`: each partition is its own managed ledger, and a
partition that never received a producer is missing from the namespace list although it exists.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Iterable

from audit.collectors.base import CollectionReport
from audit.systems.pulsar.collect.admin_client import PERSISTENT, AdminClient, AdminResponse, quote

SCHEME = "persistent://"
PARTITION_SUFFIX = re.compile(r"-partition-\d+$")
_NAME = re.compile(r"^persistent://([^/]+)/([^/]+)/([^/]+)$")


def subject_names(full: str) -> tuple[str, ...]:
    """What an incident check's topic patterns are matched against: the topic's full name and, for a partition
    (`-partition-N`), its partitioned topic's too."""
    parent = full.rsplit("-partition-", 1)[0]
    return (full, parent) if parent != full else (full,)


@dataclass(frozen=True, order=True)
class TopicName:
    tenant: str
    namespace: str
    local: str

    @property
    def full(self) -> str:
        return f"{SCHEME}{self.tenant}/{self.namespace}/{self.local}"

    @property
    def folder(self) -> str:
        """Where the topic's raw evidence goes (docs/pulsar/contracts.md, "Raw evidence")."""
        return f"topics/{self.tenant}/{self.namespace}/{self.local}"

    def path(self, suffix: str = "") -> str:
        return f"{PERSISTENT}/{quote(self.tenant)}/{quote(self.namespace)}/{quote(self.local)}{suffix}"

    def partition(self, index: int) -> "TopicName":
        return TopicName(self.tenant, self.namespace, f"{self.local}-partition-{index}")


def parse_topic(name: str) -> TopicName:
    m = _NAME.match(name) if isinstance(name, str) else None
    if m is None or any(part in (".", "..") for part in m.groups()):
        raise ValueError(f"expected persistent://tenant/namespace/topic, got {name!r}")
    return TopicName(*m.groups())


def _json_answer(resp: AdminResponse) -> tuple[object, str | None]:
    if resp.error is not None:
        return None, resp.error
    try:
        return json.loads(resp.body), None
    except ValueError:
        return None, f"HTTP 200 but not JSON ({resp.content_type}): {resp.body[:80]!r}"


def _name_list(client: AdminClient, path: str, report: CollectionReport, what: str) -> list[TopicName] | None:
    resp = client.get(path)
    doc, error = _json_answer(resp)
    if error is None and not (isinstance(doc, list) and all(isinstance(n, str) for n in doc)):
        error = f"expected a JSON list of topic names, got {type(doc).__name__}"
    if error is not None:
        report.gap(resp.url, what, error)
        return None
    names = []
    for name in doc:
        if not name.startswith(SCHEME):
            continue  # a non-persistent topic has no managed ledger to audit
        try:
            names.append(parse_topic(name))
        except ValueError as e:
            report.gap(resp.url, what, f"skipped a topic name: {e}")
    return names


def partitions_of(client: AdminClient, topic: TopicName, report: CollectionReport) -> int | None:
    """The partition count (0 = not partitioned), or None after recording a gap."""
    resp = client.get(topic.path("/partitions"))
    doc, error = _json_answer(resp)
    n = doc.get("partitions") if isinstance(doc, dict) else None
    if error is None and (not isinstance(n, int) or isinstance(n, bool) or n < 0):
        error = f"field partitions: expected an integer >= 0, got {n!r}"
    if error is not None:
        report.gap(resp.url, "partitioned topic metadata", error)
        return None
    return n


def _expand(client: AdminClient, topic: TopicName, report: CollectionReport) -> list[TopicName]:
    if PARTITION_SUFFIX.search(topic.local):
        return [topic]  # already one partition
    n = partitions_of(client, topic, report)
    if n is None:
        return []
    return [topic.partition(i) for i in range(n)] if n > 0 else [topic]


def discover_topics(client: AdminClient, namespaces: Iterable[str], topics: Iterable[str],
                    report: CollectionReport) -> list[TopicName]:
    """Every topic (partition) to collect, sorted and without duplicates. Listing failures become gaps."""
    found: set[TopicName] = set()
    for ns in namespaces:
        tenant, _, namespace = ns.partition("/")
        base = f"{PERSISTENT}/{quote(tenant)}/{quote(namespace)}"
        listed = _name_list(client, base, report, "namespace topic list")
        found.update(listed or ())
        parents = _name_list(client, f"{base}/partitioned", report, "namespace partitioned topic list")
        for parent in parents or ():
            found.update(_expand(client, parent, report))
    for name in topics:
        found.update(_expand(client, parse_topic(name), report))
    report.count("topics_discovered", len(found))
    return sorted(found)
