"""Raw Pulsar files -> rows of the normalized tables (docs/pulsar/contracts.md), as plain Python values.

`decode_file(source_key, data)` classifies `raw/pulsar/<cluster>/topics/<tenant>/<ns>/<topic>/...` (and the
cluster's `broker-version.txt`) and returns
rows tagged with their table. Tables whose name starts with "_" are partial rows joined in Spark
(topic rows from stats-internal + dump.json, subscriptions from stats + replicated-status). Whatever does not
decode becomes a `quarantine` row naming source and field; a bad dump line quarantines that line only, and its
position (when the line says which) becomes an entry gap, since it was asked for and not read.

Entry rows carry one column beyond `pulsar_entries`, `metadata_headers` (False: the broker sent none of the message
metadata headers, docs/formats/pulsar.md §2.8, so the entry cannot be told marker or message, local or copy);
normalize.py decides per topic what that means."""
from __future__ import annotations

import json
import re
from typing import Iterator
from urllib.parse import unquote

from audit.errors import PayloadError
from audit.systems.pulsar.formats.broker_version import decode_broker_version
from audit.systems.pulsar.formats.dump_window import decode_dump_window
from audit.systems.pulsar.formats.entry import EntryGap, decode_entry_line, dump_lines, line_source
from audit.systems.pulsar.formats.message_ttl import MESSAGE_TTL_KEY, NAMESPACE_MESSAGE_TTL_KEY, decode_message_ttl
from audit.systems.pulsar.formats.read_instant import READ_SUFFIX, REREAD_BODY, REREADS, decode_read_instant
from audit.systems.pulsar.formats.repl_status import decode_replicated_status
from audit.systems.pulsar.formats.stats import decode_topic_stats
from audit.systems.pulsar.formats.stats_internal import decode_stats_internal

SYSTEM = "pulsar"
TOPICS, LEDGERS, CURSORS, ENTRIES, GAPS, REPLICATION, SUBSCRIPTIONS, BROKERS, QUARANTINE = (
    "pulsar_topics", "pulsar_ledgers", "pulsar_cursors", "pulsar_entries", "pulsar_entry_gaps",
    "pulsar_replication", "pulsar_subscriptions", "pulsar_brokers", "quarantine")
DUMP_WINDOW, SUB_STATUS, READ_INSTANT, TTL = ("_dump_window", "_subscription_status", "_read_instant",
                                             "_message_ttl")  # partial rows
PRIMARY = 0   # the `read` of the collection's own stats-internal.json; rereads carry their pass number
METADATA_HEADERS = "metadata_headers"  # an entry row's extra column (see above), dropped by normalize
# payload_kind values in quarantine
STATS_INTERNAL, STATS, REPL_STATUS, DUMP_CHUNK, DUMP_JSON, COLLECTION, BROKER_VERSION, UNKNOWN = (
    "stats-internal", "stats", "replicated-status", "dump-chunk", "dump-window", "collection", "broker-version",
    "unknown")
MESSAGE_TTL, NAMESPACE_MESSAGE_TTL = "message-ttl", "namespace-message-ttl"
REREAD, READ = "reread", "read-instant"
BROKER_VERSION_FILE = "broker-version.txt"  # the collector's key (collector.py BROKER_VERSION_KEY)
_CHUNK = re.compile(r"(\d+)-(\d+)\.jsonl")
Row = tuple[str, dict]


def quarantine(cluster: str | None, key: str, kind: str, reason: str) -> Row:
    return QUARANTINE, {"system": SYSTEM, "cluster": cluster, "source_key": key, "payload_kind": kind,
                        "reason": reason}


def classify(source_key: str) -> tuple[str, str | None, str, list[str]] | None:
    """(cluster, topic or None, kind, path below the topic folder) for a Pulsar key, else None."""
    parts = [p for p in source_key.split("/") if p]
    if parts[:1] == ["raw"]:
        parts = parts[1:]
    if len(parts) < 3 or parts[0] != SYSTEM:
        return None
    cluster, rest = parts[1], parts[2:]
    if rest in (["collection.json"], ["reread.json"]):
        return cluster, None, COLLECTION, rest
    if rest == [BROKER_VERSION_FILE]:
        return cluster, None, BROKER_VERSION, rest
    if rest[0] != "topics" or len(rest) < 5:
        return cluster, None, UNKNOWN, rest
    topic, below = "persistent://" + "/".join(rest[1:4]), rest[4:]
    return cluster, topic, _topic_file_kind(below), below


# files directly in the topic folder -> their kind
_TOPIC_FILE_KINDS = {"stats-internal.json": STATS_INTERNAL, "stats.json": STATS, "dump.json": DUMP_JSON,
                     MESSAGE_TTL_KEY: MESSAGE_TTL, NAMESPACE_MESSAGE_TTL_KEY: NAMESPACE_MESSAGE_TTL}


def _topic_file_kind(below: list[str]) -> str:
    """The kind of a file by its path below the topic folder."""
    if below and below[-1].endswith(READ_SUFFIX):
        return READ
    if len(below) == 1 and below[0] in _TOPIC_FILE_KINDS:
        return _TOPIC_FILE_KINDS[below[0]]
    if len(below) == 3 and below[0] == "subscriptions" and below[2] == "replicated-status.json":
        return REPL_STATUS
    if len(below) == 3 and below[0] == "dump" and below[2].endswith(".jsonl"):
        return DUMP_CHUNK
    if len(below) == 3 and below[0] == REREADS and _pass(below[1]) and below[2] == REREAD_BODY:
        return REREAD
    return UNKNOWN


def _pass(text: str) -> int | None:
    """A reread pass number (1, 2, ...) or None."""
    return int(text) if text.isdigit() and int(text) > 0 else None


def read_number(below: list[str]) -> int | None:
    """Which read of the topic's cursors a file below the topic folder is: PRIMARY, a reread's pass, else None."""
    if below == ["stats-internal.json"]:
        return PRIMARY
    if len(below) == 3 and below[0] == REREADS and below[2] == REREAD_BODY:
        return _pass(below[1])
    return None


def decode_file(source_key: str, data: bytes) -> list[Row]:
    found = classify(source_key)
    if found is None:
        return []  # another system's raw files, or the lab's ground truth
    cluster, topic, kind, below = found
    if kind == COLLECTION:
        return []  # the collector's own report; coverage is read from it elsewhere
    if kind == UNKNOWN:
        return [quarantine(cluster, source_key, kind, f"{source_key}: unrecognised raw key")]
    if kind == DUMP_CHUNK:
        return list(chunk_rows(cluster, topic, below, source_key, data))
    try:
        return list(_DECODERS[kind](cluster, topic, below, source_key, data))
    except PayloadError as e:
        return [quarantine(cluster, source_key, kind, str(e))]
    except (ValueError, TypeError, KeyError) as e:  # a shape no decoder anticipated: still never fatal
        return [quarantine(cluster, source_key, kind, f"{source_key}: {type(e).__name__}: {e}")]


def _broker_version(cluster: str, topic: None, below: list[str], key: str, data: bytes) -> Iterator[Row]:
    yield BROKERS, {"cluster": cluster, "broker_version": decode_broker_version(data, key), "source_key": key}


def _read_instant(cluster: str, topic: str, below: list[str], key: str, data: bytes) -> Iterator[Row]:
    """The sidecar is checked whatever it describes; only the instants of cursor reads are used."""
    instant = decode_read_instant(data, key)
    body = below[:-1] + [below[-1][:-len(READ_SUFFIX)]]
    read = read_number(body)
    if read is not None:
        yield READ_INSTANT, {"cluster": cluster, "topic": topic, "read": read,
                             "read_requested_ms": instant.requested_at_ms, "read_answered_ms": instant.answered_at_ms}


def _reread(cluster: str, topic: str, below: list[str], key: str, data: bytes) -> Iterator[Row]:
    """A reread's internal stats: its cursors only (the window and ledgers are the collection's)."""
    yield from _cursor_rows(cluster, topic, decode_stats_internal(data, key), key, read_number(below))


def _stats_internal(cluster: str, topic: str, below: list[str], key: str, data: bytes) -> Iterator[Row]:
    si = decode_stats_internal(data, key)
    lce = si.last_confirmed_entry
    yield TOPICS, {"cluster": cluster, "topic": topic, "state": si.state, "last_confirmed_ledger": lce.ledger_id,
                   "last_confirmed_entry": lce.entry_id, "number_of_entries": si.number_of_entries, "source_key": key}
    open_id = si.open_ledger_id
    for lg in si.ledgers:
        is_open = lg.ledger_id == open_id  # the open ledger's own entry reads 0; live counts are currentLedger*
        yield LEDGERS, {"cluster": cluster, "topic": topic, "ledger_id": lg.ledger_id,
                        "entries": si.current_ledger_entries if is_open else lg.entries,
                        "size": si.current_ledger_size if is_open else lg.size, "is_open": is_open}
    yield from _cursor_rows(cluster, topic, si, key, PRIMARY)


def _cursor_rows(cluster: str, topic: str, si, key: str, read: int) -> Iterator[Row]:
    for c in si.cursors.values():
        rp = c.read_position
        yield CURSORS, {
            "cluster": cluster, "topic": topic, "cursor": c.name, "kind": c.kind, "remote_cluster": c.remote_cluster,
            "replicated": c.replicated, "mark_delete_ledger": c.mark_delete.ledger_id,
            "mark_delete_entry": c.mark_delete.entry_id, "read_ledger": None if rp is None else rp.ledger_id,
            "read_entry": None if rp is None else rp.entry_id,
            "individually_deleted": [{"from_ledger": lo.ledger_id, "from_entry": lo.entry_id,
                                      "to_ledger": hi.ledger_id, "to_entry": hi.entry_id}
                                     for lo, hi in c.individually_deleted],
            "state": c.state, "read": read, "source_key": key}


def _stats(cluster: str, topic: str, below: list[str], key: str, data: bytes) -> Iterator[Row]:
    ts = decode_topic_stats(data, key)
    for r in ts.replication.values():
        yield REPLICATION, {"cluster": cluster, "topic": topic, "remote_cluster": r.remote_cluster,
                            "connected": r.connected, "replication_backlog": r.replication_backlog,
                            "replication_delay_s": r.replication_delay_s, "msg_rate_out": r.msg_rate_out,
                            "source_key": key}
    for s in ts.subscriptions.values():
        yield SUBSCRIPTIONS, {"cluster": cluster, "topic": topic, "subscription": s.name,
                              "is_replicated": s.is_replicated, "is_durable": s.is_durable,
                              "consumers": s.consumers, "msg_out_counter": s.msg_out_counter,
                              "last_consumed_ms": s.last_consumed_ms, "consumed_here": s.consumed_here,
                              "source_key": key}


def _repl_status(cluster: str, topic: str, below: list[str], key: str, data: bytes) -> Iterator[Row]:
    yield SUB_STATUS, {"cluster": cluster, "topic": topic, "subscription": unquote(below[1]),
                       "replicated_status": decode_replicated_status(data, key), "source_key": key}


def _dump_window(cluster: str, topic: str, below: list[str], key: str, data: bytes) -> Iterator[Row]:
    w = decode_dump_window(data, key, topic)
    yield DUMP_WINDOW, {"cluster": cluster, "topic": topic,
                        "dump_from_ledger": w.start.ledger_id, "dump_from_entry": w.start.entry_id,
                        "dump_to_ledger": w.end.ledger_id, "dump_to_entry": w.end.entry_id,
                        "dump_complete": w.complete, "source_key": key}


def _message_ttl(cluster: str, topic: str, below: list[str], key: str, data: bytes) -> Iterator[Row]:
    """The broker's applied TTL of the topic, or (a broker without that GET) its namespace's own setting; an
    answer that sets none gives no row (the audit then takes the estate's)."""
    ttl = decode_message_ttl(data, key)
    if ttl is not None:
        column = "message_ttl_s" if below == [MESSAGE_TTL_KEY] else "namespace_message_ttl_s"
        yield TTL, {"cluster": cluster, "topic": topic, column: ttl, "source_key": key}


_DECODERS = {STATS_INTERNAL: _stats_internal, STATS: _stats, REPL_STATUS: _repl_status, DUMP_JSON: _dump_window,
             BROKER_VERSION: _broker_version, REREAD: _reread, READ: _read_instant, MESSAGE_TTL: _message_ttl,
             NAMESPACE_MESSAGE_TTL: _message_ttl}


def _entry_row(cluster: str, topic: str, key: str, rec) -> dict:
    m, sp = rec.marker or {}, rec.source_position
    return {"cluster": cluster, "topic": topic, "ledger_id": rec.ledger_id, "entry_id": rec.entry_id,
            "producer_name": rec.producer_name, "sequence_id": rec.sequence_id,
            "publish_time_ms": rec.publish_time_ms, "replicated_from": rec.replicated_from,
            "replicate_to": None if rec.replicate_to is None else list(rec.replicate_to),
            "source_position_ledger": sp and sp.ledger_id, "source_position_entry": sp and sp.entry_id,
            "marker_type": rec.marker_type, "snapshot_id": m.get("snapshot_id"),
            "marker_source_cluster": m.get("source_cluster"), "marker_local_ledger": m.get("local_ledger"),
            "marker_local_entry": m.get("local_entry"), "marker_subscription": m.get("subscription"),
            "marker_clusters": m.get("clusters"), "source_key": key, METADATA_HEADERS: rec.metadata_headers}


def _gap(cluster: str, topic: str, key: str, ledger_id: int, entry_id: int, status: int, error: str | None) -> Row:
    return GAPS, {"cluster": cluster, "topic": topic, "ledger_id": ledger_id, "entry_id": entry_id,
                  "status": status, "error": error, "source_key": key}


def _asked_position(line: bytes) -> tuple[int, int, int] | None:
    """(ledger, entry, status) of a line that failed to decode, when the line still says which position it is."""
    try:
        doc = json.loads(line)
        values = [doc.get(k) for k in ("ledger_id", "entry_id", "status")] if isinstance(doc, dict) else []
    except ValueError:
        return None
    if len(values) == 3 and all(isinstance(v, int) and not isinstance(v, bool) for v in values[:2]):
        return values[0], values[1], values[2] if isinstance(values[2], int) else 0
    return None


def chunk_rows(cluster: str, topic: str, below: list[str], key: str, data: bytes) -> Iterator[Row]:
    m = _CHUNK.fullmatch(below[2])
    if not below[1].isdigit() or m is None or int(m.group(1)) > int(m.group(2)):
        yield quarantine(cluster, key, DUMP_CHUNK, str(PayloadError(
            key, "key", "dump/<ledgerId>/<firstEntryId>-<lastEntryId>.jsonl", "/".join(below))))
        return
    ledger_id, first, last = int(below[1]), int(m.group(1)), int(m.group(2))
    seen: set[int] = set()
    for number, line in dump_lines(data):
        src = line_source(key, number)
        try:
            item = decode_entry_line(line, src)
            if item.ledger_id != ledger_id or not first <= item.entry_id <= last:
                raise PayloadError(src, "ledger_id/entry_id", f"a position in {ledger_id}:{first}..{ledger_id}:{last}"
                                   " (the chunk's key)", f"{item.ledger_id}:{item.entry_id}")
        except (PayloadError, ValueError, TypeError, KeyError) as e:
            e = e if isinstance(e, PayloadError) else f"{src}: {type(e).__name__}: {e}"
            yield quarantine(cluster, key, DUMP_CHUNK, str(e))
            asked = _asked_position(line)
            if asked and asked[0] == ledger_id and first <= asked[1] <= last and asked[1] not in seen:
                seen.add(asked[1])
                yield _gap(cluster, topic, key, asked[0], asked[1], asked[2], f"undecodable line: {e}")
            continue
        if item.entry_id in seen:
            yield quarantine(cluster, key, DUMP_CHUNK, f"{src}: position {ledger_id}:{item.entry_id} repeated")
            continue
        seen.add(item.entry_id)
        if isinstance(item, EntryGap):
            yield _gap(cluster, topic, key, item.ledger_id, item.entry_id, item.status, item.error)
        else:
            yield ENTRIES, _entry_row(cluster, topic, key, item)
    missing = [e for e in range(first, last + 1) if e not in seen]
    if missing:  # a chunk is written once complete: a position without a line was never answered
        yield quarantine(cluster, key, DUMP_CHUNK, f"{key}: {len(missing)} position(s) without a line, first "
                                                   f"{ledger_id}:{missing[0]}")
        for e in missing:
            yield _gap(cluster, topic, key, ledger_id, e, 0, "no line in the dump chunk")
