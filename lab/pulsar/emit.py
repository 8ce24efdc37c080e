"""Write one lab cluster's raw evidence (docs/pulsar/contracts.md "Raw evidence", keys relative to
raw/pulsar/<cluster>/) through a RawSink, exactly as the admin collector lays it out:

    broker-version.txt   the cluster's configured broker version, as /admin/v2/brokers/version answers it
    topics/<tenant>/<ns>/<topic>/stats-internal.json | stats.json | dump.json
    topics/<tenant>/<ns>/<topic>/subscriptions/<percent-encoded sub>/replicated-status.json
    topics/<tenant>/<ns>/<topic>/message-ttl.json | namespace-message-ttl.json   the TTL answer the collector
                                                   would store for the cluster's broker version (payloads.py)
    topics/<tenant>/<ns>/<topic>/dump/<ledgerId>/<firstEntryId>-<lastEntryId>.jsonl
    <each of the admin bodies above>.read.json   when it was read (audit/systems/pulsar/formats/read_instant.py)
    topics/<tenant>/<ns>/<topic>/rereads/<pass>/stats-internal.json (+ .read.json)   the reread stage's

The dump window runs from the smallest markDeletePosition of any replicated subscription or replicator cursor
(exclusive) to lastConfirmedEntry (inclusive); a chunk never spans ledgers.

`emit_collected` writes what the cluster's collection read at its own instants during the simulation (reads.py),
`emit_rereads` what the reread stage read; `emit_cluster` renders the cluster as it is now (the end of the
simulation, or after a test changed it), all at one instant."""
from __future__ import annotations

import base64
import json
import urllib.parse
from dataclasses import dataclass

from audit.collectors.base import CollectionReport, RawSink
from audit.systems.pulsar.collect.collector import APPLIED_TTL_SINCE, BROKER_VERSION_KEY, TOPIC_TTL
from audit.systems.pulsar.collect.discovery import parse_topic
from audit.systems.pulsar.config import PulsarDump
from audit.systems.pulsar.domain.snapshot_cache import version_tuple
from audit.systems.pulsar.formats.message_ttl import MESSAGE_TTL_KEY, NAMESPACE_MESSAGE_TTL_KEY
from audit.systems.pulsar.formats.read_instant import READ_SUFFIX, REREAD_BODY, REREADS, encode_read_instant
from lab.pulsar.model import Entry, ManagedLedger
from lab.pulsar.payloads import OCTET_STREAM, entry_headers, jackson, namespace_ttl_answer, replicated_status, \
    stats_internal, topic_stats, topic_ttl_answer
from lab.pulsar.reads import Collection, Read
from lab.pulsar.builder import World


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


def _url(cluster: str, topic: str, suffix: str) -> str:
    """Where the body was read: the admin path on the lab cluster (there is no host)."""
    return f"lab://{cluster}{parse_topic(topic).path(suffix)}"


def message_ttl(world: World, cluster: str, topic: str) -> tuple[str, bytes, str]:
    """(key below the topic folder, body, url) of the TTL answer the collector stores for the topic: the
    topic-level applied one where the broker has it, else the namespace's (collector.py MessageTtls)."""
    version = version_tuple(world.config.broker_version_of(cluster)) or (99, 0, 0)
    name = parse_topic(topic)
    ttl_s = world.topic(cluster, topic).settings.message_ttl_ms // 1000
    answer = topic_ttl_answer(version, ttl_s, applied=True) if version >= APPLIED_TTL_SINCE else None
    if answer is not None and answer[0] in (200, 204):
        return MESSAGE_TTL_KEY, answer[1], _url(cluster, topic, TOPIC_TTL)
    _, body = namespace_ttl_answer(version, world.config.ttl_ms(f"{name.tenant}/{name.namespace}") // 1000)
    path = f"/admin/v2/namespaces/{urllib.parse.quote(name.tenant, safe='')}/" \
           f"{urllib.parse.quote(name.namespace, safe='')}/messageTTL"
    return NAMESPACE_MESSAGE_TTL_KEY, body, f"lab://{cluster}{path}"


def _put(sink: RawSink, key: str, body: bytes, url: str, requested_ms: int, answered_ms: int) -> None:
    sink.put(key, body)
    sink.put(key + READ_SUFFIX, encode_read_instant(url, requested_ms, answered_ms))


@dataclass(frozen=True)
class TopicEvidence:
    """One topic's collection, whenever it was read: the bodies, their instants and the dump window."""
    cluster: str
    topic: str
    ml: ManagedLedger
    internal: tuple[bytes, int, int]
    stats: tuple[bytes, int, int]
    statuses: dict[str, tuple[bytes, int, int]]
    ttl: tuple[int, int]  # when the message TTL was read (it never changes in the lab)
    first: int           # the window's first index
    entries: int         # entries held when the internal stats were read: the window ends at entries - 1
    dump_at: tuple[int, int]


def _dump(ev: TopicEvidence, folder: str, sink: RawSink, dump: PulsarDump, report: CollectionReport) -> None:
    ml, first, last = ev.ml, ev.first, ev.entries - 1
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
        report.gap(ev.topic, "dump entries", f"{expected - read} entries beyond max_entries_per_topic "
                                             f"({dump.max_entries_per_topic}) not read")
    window_ledgers: dict[int, int] = {}
    for idx in range(first, last + 1):
        lid = ml.entries[idx].ledger_id
        window_ledgers[lid] = window_ledgers.get(lid, 0) + 1
    to = ml.positions[last] if last >= 0 else ml.previous_position(0)
    doc = {"topic": ev.topic, "from": "%d:%d" % ml.previous_position(first), "to": "%d:%d" % to,
           "ledgers": [{"ledger_id": lid, "entries": n} for lid, n in window_ledgers.items()],
           "entries_expected": expected, "entries_read": read, "entries_failed": 0, "complete": complete,
           "reason": None if complete else f"max_entries_per_topic {dump.max_entries_per_topic} reached",
           "read_started_at_ms": ev.dump_at[0] if read else None,
           "read_finished_at_ms": ev.dump_at[1] if read else None}
    sink.put(f"{folder}/dump.json", json.dumps(doc, indent=1).encode())


def write_topic(world: World, ev: TopicEvidence, sink: RawSink, dump: PulsarDump, report: CollectionReport) -> None:
    folder = parse_topic(ev.topic).folder  # the collector's own layout
    for key, suffix, (body, requested, answered) in (("stats-internal.json", "/internalStats", ev.internal),
                                                     ("stats.json", "/stats", ev.stats)):
        _put(sink, f"{folder}/{key}", body, _url(ev.cluster, ev.topic, suffix), requested, answered)
    report.count("topics")
    for name, (body, requested, answered) in sorted(ev.statuses.items()):
        enc = urllib.parse.quote(name, safe="")
        _put(sink, f"{folder}/subscriptions/{enc}/replicated-status.json", body,
             _url(ev.cluster, ev.topic, f"/subscription/{enc}/replicatedSubscriptionStatus"), requested, answered)
        report.count("replicated_subscriptions")
    key, body, url = message_ttl(world, ev.cluster, ev.topic)
    _put(sink, f"{folder}/{key}", body, url, *ev.ttl)
    _dump(ev, folder, sink, dump, report)


def _collected(world: World, c: Collection) -> TopicEvidence:
    r = c.read
    return TopicEvidence(r.cluster, r.topic, world.topic(r.cluster, r.topic).ml, (r.body, r.requested_ms,
                         r.answered_ms), (c.stats, *c.stats_at), c.statuses, c.stats_at, r.floor + 1, r.entries,
                         c.dump_at)


def _now(world: World, cluster: str, name: str) -> TopicEvidence:
    topic, now = world.topic(cluster, name), world.clock.now
    statuses = {s: (jackson(replicated_status(topic, s)), now, now) for s, sub in topic.subscriptions.items()
                if sub.replicated}
    return TopicEvidence(cluster, name, topic.ml, (jackson(stats_internal(topic)), now, now),
                         (jackson(topic_stats(topic, now)), now, now), statuses, (now, now),
                         topic.replicated_cursor_floor() + 1, len(topic.ml.entries), (now, now))


def _cluster(world: World, cluster: str, sink: RawSink, dump: PulsarDump | None, evidence) -> CollectionReport:
    report = CollectionReport("pulsar", cluster)
    sink.put(BROKER_VERSION_KEY, world.config.broker_version_of(cluster).encode())   # admin_server.py's answer
    for ev in evidence:
        write_topic(world, ev, sink, dump or PulsarDump(), report)
    return report


def emit_cluster(world: World, cluster: str, sink: RawSink, dump: PulsarDump | None = None) -> CollectionReport:
    """The cluster as it is now, every body read at the clock's current instant."""
    return _cluster(world, cluster, sink, dump, [_now(world, cluster, t.name) for t in world.topics_of(cluster)])


def emit_collected(world: World, cluster: str, sink: RawSink, dump: PulsarDump | None = None) -> CollectionReport:
    """What the cluster's collection read during the simulation, topic by topic at its own instants."""
    collections = [world.reads.collections[(cluster, t.name)] for t in world.topics_of(cluster)]
    return _cluster(world, cluster, sink, dump, [_collected(world, c) for c in collections])


def reread_key(topic: str, number: int) -> str:
    return f"{parse_topic(topic).folder}/{REREADS}/{number}/{REREAD_BODY}"


def emit_rereads(world: World, cluster: str, sink: RawSink, topics: set[str] | None = None) -> CollectionReport:
    """The reread stage's reads of the cluster's topics (`topics`: only these, by full name)."""
    report = CollectionReport("pulsar", cluster)
    for topic in world.topics_of(cluster):
        if topics is not None and topic.name not in topics:
            continue
        reads: list[Read] = world.reads.rereads.get((cluster, topic.name), [])
        for r in reads:
            _put(sink, reread_key(topic.name, r.number), r.body, _url(cluster, topic.name, "/internalStats"),
                 r.requested_ms, r.answered_ms)
            report.count("rereads")
    return report
