"""`T/dump.json`, the dump window and its outcome (docs/pulsar/contracts.md "Raw evidence"), as the admin
collector (audit/systems/pulsar/collect/dump.py) and the lab write it:

    {"topic", "from": "L:E" (exclusive), "to": "L:E" (inclusive), "ledgers": [{"ledger_id", "entries"}],
     "entries_expected", "entries_read", "entries_failed", "complete": bool, "reason"}

plus the collector's own `from_cursor`, `basis`, `entries_not_fetched`. `topic`, `from`, `to` and `complete` are
what the audit reads; the counts, when present, must be non-negative integers, and a window that says it is
complete must have read every position it expected."""
from __future__ import annotations

from dataclasses import dataclass

from audit.systems.pulsar.domain.positions import Position
from audit.errors import PayloadError
from audit.systems.pulsar.formats import jsonbody as jb

COUNTS = ("entries_expected", "entries_read", "entries_failed", "entries_not_fetched")


@dataclass(frozen=True)
class DumpWindowDoc:
    topic: str
    start: Position   # exclusive
    end: Position     # inclusive
    complete: bool
    counts: dict[str, int]
    ledgers: tuple[tuple[int, int], ...]   # (ledger_id, entries in the window)


def _count(doc: dict, key: str, source: str, path: str) -> int | None:
    value = jb.integer(doc, key, source, path)
    if value is not None and value < 0:
        raise PayloadError(source, jb.join(path, key), "an integer >= 0", value)
    return value


def decode_dump_window(data: bytes, source: str, topic: str | None = None) -> DumpWindowDoc:
    """`topic`: the topic the file is stored for (its folder); the document must name that one."""
    doc = jb.load_object(data, source)
    named = doc.get("topic")
    if topic is not None and named != topic:
        raise PayloadError(source, "topic", f"{topic!r} (the topic folder it is stored in)", named)
    topic = jb.string(doc, "topic", source, "", required=True)
    if not topic.startswith("persistent://"):
        raise PayloadError(source, "topic", "persistent://tenant/namespace/topic", topic)
    start, end = (jb.position(doc, k, source, "") for k in ("from", "to"))
    complete = jb.boolean(doc, "complete", source, "", required=True)
    counts = {k: v for k in COUNTS if (v := _count(doc, k, source, "")) is not None}
    if complete and counts.get("entries_read", 0) != counts.get("entries_expected", 0):
        raise PayloadError(source, "complete", f"false when entries_read ({counts['entries_read']}) differs from "
                           f"entries_expected ({counts['entries_expected']})", True)
    ledgers = doc.get("ledgers", [])
    if not isinstance(ledgers, list):
        raise PayloadError(source, "ledgers", "a list of {ledger_id, entries}", ledgers)
    spans = []
    for i, lg in enumerate(ledgers):
        path = f"ledgers[{i}]"
        if not isinstance(lg, dict):
            raise PayloadError(source, path, "an object {ledger_id, entries}", lg)
        spans.append((jb.integer(lg, "ledger_id", source, path, required=True),
                      _count(lg, "entries", source, path)))
    reason = doc.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise PayloadError(source, "reason", "a string or null", reason)
    return DumpWindowDoc(topic, start, end, complete, counts, tuple(spans))
