"""Write one lab cluster's raw evidence (docs/pulsar/contracts.md "Raw evidence", keys relative to
raw/pulsar/<cluster>/) through a RawSink, exactly as the admin collector lays it out:

    broker-version.txt   the cluster's configured broker version, as /admin/v2/brokers/version answers it
    topics/<tenant>/<ns>/<topic>/stats-internal.json | stats.json | dump.json
    topics/<tenant>/<ns>/<topic>/subscriptions/<percent-encoded sub>/replicated-status.json
    topics/<tenant>/<ns>/<topic>/dump/<ledgerId>/<firstEntryId>-<lastEntryId>.jsonl

The dump window runs from the smallest markDeletePosition of any replicated subscription or replicator cursor
(exclusive) to lastConfirmedEntry (inclusive); a chunk never spans ledgers."""
from __future__ import annotations

import base64
import json
import urllib.parse

from audit.collectors.base import CollectionReport, RawSink
from audit.collectors.pulsar.collector import BROKER_VERSION_KEY
from audit.collectors.pulsar.discovery import parse_topic
from audit.config.pulsar import PulsarDump
from audit.lab.pulsar.model import Entry
from audit.lab.pulsar.payloads import OCTET_STREAM, entry_headers, jackson, replicated_status, stats_internal, \
    topic_stats
from audit.lab.pulsar.topic import Topic
from audit.lab.pulsar.builder import World


def headers_dict(headers: list[tuple[str, str]]) -> dict[str, str | list[str]]:
    """A header sent once is a string, one sent more than once the list of its values (the contract)."""
    values: dict[str, list[str]] = {}
    for name, value in headers:
        values.setdefault(name, []).append(value)
    return {name: v[0] if len(v) == 1 else v for name, v in values.items()}


def dump_line(entry: Entry) -> bytes:
    doc = {"ledger_id": entry.ledger_id, "entry_id": entry.entry_id, "status": 200, "content_type": OCTET_STREAM,
           "headers": headers_dict(entry_headers(entry)), "body_b64": base64.b64encode(entry.payload).decode()}
    return json.dumps(doc, separators=(",", ":")).encode() + b"\n"


def dump_window(topic: Topic) -> tuple[int, int]:
    """(first index in the window, last index) — empty when first > last."""
    return topic.replicated_cursor_floor() + 1, len(topic.ml.entries) - 1


def _dump(topic: Topic, folder: str, sink: RawSink, dump: PulsarDump, report: CollectionReport) -> None:
    ml = topic.ml
    first, last = dump_window(topic)
    expected = max(0, last - first + 1)
    read_last = min(last, first + dump.max_entries_per_topic - 1)
    per_ledger: dict[int, list[Entry]] = {}
    for idx in range(first, read_last + 1):
        entry = ml.entries[idx]
        per_ledger.setdefault(entry.ledger_id, []).append(entry)
    for ledger_id, entries in per_ledger.items():
        for start in range(0, len(entries), dump.chunk_entries):
            chunk = entries[start:start + dump.chunk_entries]
            key = f"{folder}/dump/{ledger_id}/{chunk[0].entry_id}-{chunk[-1].entry_id}.jsonl"
            sink.put(key, b"".join(dump_line(e) for e in chunk))
            report.count("dump_chunks")
    read = max(0, read_last - first + 1)
    report.count("dump_entries_read", read)
    complete = read == expected
    if not complete:
        report.gap(topic.name, "dump entries", f"{expected - read} entries beyond max_entries_per_topic "
                                               f"({dump.max_entries_per_topic}) not read")
    window_ledgers: dict[int, int] = {}
    for idx in range(first, last + 1):
        lid = ml.entries[idx].ledger_id
        window_ledgers[lid] = window_ledgers.get(lid, 0) + 1
    doc = {"topic": topic.name, "from": "%d:%d" % ml.previous_position(first), "to": "%d:%d" % ml.last_position(),
           "ledgers": [{"ledger_id": lid, "entries": n} for lid, n in window_ledgers.items()],
           "entries_expected": expected, "entries_read": read, "entries_failed": 0, "complete": complete,
           "reason": None if complete else f"max_entries_per_topic {dump.max_entries_per_topic} reached"}
    sink.put(f"{folder}/dump.json", json.dumps(doc, indent=1).encode())


def emit_topic(world: World, topic: Topic, sink: RawSink, dump: PulsarDump, report: CollectionReport) -> None:
    folder = parse_topic(topic.name).folder  # the collector's own layout
    sink.put(f"{folder}/stats-internal.json", jackson(stats_internal(topic)))
    sink.put(f"{folder}/stats.json", jackson(topic_stats(topic, world.as_of_ms)))
    report.count("topics")
    for name, sub in sorted(topic.subscriptions.items()):
        if sub.replicated:
            enc = urllib.parse.quote(name, safe="")
            sink.put(f"{folder}/subscriptions/{enc}/replicated-status.json", jackson(replicated_status(topic, name)))
            report.count("replicated_subscriptions")
    _dump(topic, folder, sink, dump, report)


def emit_cluster(world: World, cluster: str, sink: RawSink, dump: PulsarDump | None = None) -> CollectionReport:
    report = CollectionReport("pulsar", cluster)
    sink.put(BROKER_VERSION_KEY, world.config.broker_version_of(cluster).encode())   # admin_server.py's answer
    for topic in world.topics_of(cluster):
        emit_topic(world, topic, sink, dump or PulsarDump(), report)
    return report

