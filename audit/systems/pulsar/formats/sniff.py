"""Pulsar entries for audit.formats.inspect.

JSON bodies are told apart by their keys: stats-internal has lastConfirmedEntry/cursors (also inside the
transaction views' managedLedgerInternalStats wrapper), info-internal has version + object-shaped positions,
stats has msgRateIn/publishers/subscriptions/replication, the replicated-subscription status is an object of
topic name -> boolean. A dump chunk is `*.jsonl` whose first line has ledger_id/entry_id/status.
A marker payload is bare protobuf without a type tag, so it is recognised only by file name:
`<anything>.marker-<type>.bin` (e.g. `12-7.marker-12.bin`)."""
from __future__ import annotations

import re

from audit.systems.pulsar.formats import entry, info_internal, markers, repl_status, stats, stats_internal
from audit.formats.sniffing import json_object

_MARKER_NAME = re.compile(r"\.marker-(\d+)\.bin$")
_SNIFF_MAX = 64 * 1024 * 1024  # never json-parse anything bigger just to sniff


def _json_object(data: bytes) -> dict | None:
    return json_object(data, _SNIFF_MAX)


def _is_stats_internal(doc: dict) -> bool:
    if "lastConfirmedEntry" in doc or ("cursors" in doc and "ledgers" in doc and "version" not in doc):
        return True
    return len(doc) == 1 and any(isinstance(v, dict) and "managedLedgerInternalStats" in v for v in doc.values())


def _sniff_stats_internal(data: bytes, name: str) -> bool:
    doc = _json_object(data)
    return doc is not None and _is_stats_internal(doc)


def _sniff_info_internal(data: bytes, name: str) -> bool:
    doc = _json_object(data)
    return doc is not None and "version" in doc and "ledgers" in doc and "lastConfirmedEntry" not in doc


def _sniff_stats(data: bytes, name: str) -> bool:
    doc = _json_object(data)
    return doc is not None and not _is_stats_internal(doc) and (
        "msgRateIn" in doc or "publishers" in doc or "replication" in doc or
        ("subscriptions" in doc and isinstance(doc["subscriptions"], dict)))


def _sniff_repl_status(data: bytes, name: str) -> bool:
    doc = _json_object(data)
    return doc is not None and repl_status.looks_like_status(doc)


def _sniff_dump_chunk(data: bytes, name: str) -> bool:
    if not name.endswith(".jsonl"):
        return False
    first = next(iter(entry.dump_lines(data[:1 << 20])), None)
    doc = _json_object(first[1]) if first else None
    return doc is not None and {"ledger_id", "entry_id", "status"} <= doc.keys()


def _sniff_marker(data: bytes, name: str) -> bool:
    return _MARKER_NAME.search(name) is not None


def _decode_stats_internal(data: bytes, name: str) -> dict:
    return stats_internal.stats_internal_to_json(stats_internal.decode_stats_internal(data, name))


def _decode_info_internal(data: bytes, name: str) -> dict:
    return info_internal.info_internal_to_json(info_internal.decode_info_internal(data, name))


def _decode_stats(data: bytes, name: str) -> dict:
    return stats.topic_stats_to_json(stats.decode_topic_stats(data, name))


def _decode_repl_status(data: bytes, name: str) -> dict:
    return {"topics": repl_status.decode_replicated_status(data, name)}


def _decode_dump_chunk(data: bytes, name: str) -> dict:
    items = [entry.entry_to_json(item) for item in entry.decode_dump_chunk(data, name)]
    read = sum(1 for i in items if "status" not in i)
    return {"entries": items, "read": read, "not_read": len(items) - read}


def _decode_marker(data: bytes, name: str) -> dict:
    return markers.decode_marker(int(_MARKER_NAME.search(name).group(1)), data, name)


# Recognised by file name alone, so tried before any content sniffer (a marker's protobuf bytes could
# pass for another system's binary payload).
BY_NAME = [("pulsar.marker", _sniff_marker, _decode_marker)]
SNIFFERS = [
    ("pulsar.stats_internal", _sniff_stats_internal, _decode_stats_internal),
    ("pulsar.info_internal", _sniff_info_internal, _decode_info_internal),
    ("pulsar.stats", _sniff_stats, _decode_stats),
    ("pulsar.replicated_subscription_status", _sniff_repl_status, _decode_repl_status),
    ("pulsar.dump_chunk", _sniff_dump_chunk, _decode_dump_chunk),
]
