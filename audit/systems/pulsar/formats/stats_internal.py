"""`topics stats-internal` (GET .../internalStats): PersistentTopicInternalStats (docs/formats/pulsar.md §2.1).

Every vintage seen is accepted: 2016 outputs (`lastLedgerCreationFailureTimestamp: null`, "yyyy-MM-dd HH:mm:ss.SSS"
timestamps, cursors without `properties`), current ones (ISO-8601 with offset, `active`, `properties`), outputs with
ledger metadata (`-m`), and the transaction views (`transactions coordinator-internal-stats` /
`pending-ack-internal-stats`), which wrap the same ManagedLedgerInternalStats as
`{"<x>Stats": {"managedLedgerName": ..., "managedLedgerInternalStats": {...}}}`. Timestamps are kept as given."""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from audit.systems.pulsar.domain.positions import Position
from audit.systems.pulsar.domain.rangeset import AckRanges, parse_individually_deleted
from audit.errors import PayloadError
from audit.systems.pulsar.formats import jsonbody as jb

REPLICATOR_PREFIX = "pulsar.repl."  # broker setting replicatorPrefix (default "pulsar.repl") + "."
DEDUP_CURSOR = "pulsar.dedup"
COMPACTION_CURSOR = "__compaction"
REPLICATED_PROPERTY = "pulsar.replicated.subscription"
# Managed-ledger states in which the last ledger of `ledgers` is still being written: its entries/size read 0
# there and the live counts are currentLedgerEntries/currentLedgerSize.
OPEN_LEDGER_STATES = frozenset({"LedgerOpened", "ClosingLedger", "Fenced", "WriteFailed"})
KNOWN_KEYS = frozenset({
    "entriesAddedCounter", "numberOfEntries", "totalSize", "currentLedgerEntries", "currentLedgerSize",
    "lastLedgerCreatedTimestamp", "lastLedgerCreationFailureTimestamp", "waitingCursorsCount",
    "pendingAddEntriesCount", "lastConfirmedEntry", "state", "ledgers", "cursors", "schemaLedgers",
    "compactedLedger"})
CURSORS_EXPECTED = "an object of cursor name -> cursor stats"
_WRAPPED = "managedLedgerInternalStats"


@dataclass(frozen=True)
class LedgerInfo:
    ledger_id: int
    entries: int
    size: int
    offloaded: bool | None = None
    under_replicated: bool | None = None
    metadata: str | None = None


@dataclass(frozen=True)
class CursorStats:
    name: str
    mark_delete: Position
    read_position: Position | None
    individually_deleted: AckRanges
    properties: Mapping[str, int]
    state: str | None
    messages_consumed: int | None
    active: bool | None

    @property
    def kind(self) -> str:
        if self.name.startswith(REPLICATOR_PREFIX):
            return "replicator"
        if self.name == DEDUP_CURSOR:
            return "dedup"
        if self.name == COMPACTION_CURSOR:
            return "compaction"
        return "subscription"

    @property
    def remote_cluster(self) -> str | None:
        return self.name[len(REPLICATOR_PREFIX):] if self.kind == "replicator" else None

    @property
    def replicated(self) -> bool:
        return self.properties.get(REPLICATED_PROPERTY) == 1


@dataclass(frozen=True)
class StatsInternal:
    last_confirmed_entry: Position
    state: str | None
    number_of_entries: int | None
    entries_added: int | None
    current_ledger_entries: int | None
    current_ledger_size: int | None
    pending_add_entries: int | None
    last_ledger_created: str | None
    ledgers: tuple[LedgerInfo, ...]
    cursors: Mapping[str, CursorStats]
    extra_keys: tuple[str, ...]

    @property
    def open_ledger_id(self) -> int | None:
        """The ledger being written (its `ledgers` entry shows 0 entries), or None when none is open."""
        if not self.ledgers:
            return None
        last = self.ledgers[-1]
        if self.state in OPEN_LEDGER_STATES:
            return last.ledger_id
        if self.state is None and last.entries == 0 and last.size == 0:
            return last.ledger_id  # no state reported: the 0/0 placeholder is the tell
        return None


def ledger_info(item: object, source: str, path: str) -> LedgerInfo:
    if not isinstance(item, dict):
        raise PayloadError(source, path, "a ledger object {ledgerId, entries, size, ...}", item)
    return LedgerInfo(
        ledger_id=jb.integer(item, "ledgerId", source, path, required=True),
        entries=jb.integer(item, "entries", source, path, required=True),
        size=jb.integer(item, "size", source, path, required=True),
        offloaded=jb.boolean(item, "offloaded", source, path),
        under_replicated=jb.boolean(item, "underReplicated", source, path),
        metadata=jb.string(item, "metadata", source, path))


def cursor_stats(name: str, doc: object, source: str, path: str | None = None) -> CursorStats:
    """One entry of `cursors`; `path` defaults to `cursors.<name>`."""
    path = path or f"cursors.{name}"
    if not isinstance(doc, dict):
        raise PayloadError(source, path, "a cursor stats object", doc)
    props = jb.obj(doc, "properties", source, path, "an object of property -> long", required=False) or {}
    for key, value in props.items():
        if not isinstance(value, int) or isinstance(value, bool):
            raise PayloadError(source, f"{path}.properties.{key}", "an integer", value)
    text = doc.get("individuallyDeletedMessages", "[]")  # absent = nothing acked out of order
    try:
        ranges = parse_individually_deleted(text, source)
    except PayloadError as e:
        raise PayloadError(e.source, f"{path}.individuallyDeletedMessages", e.expected, e.got) from None
    return CursorStats(
        name=name,
        mark_delete=jb.position(doc, "markDeletePosition", source, path),
        read_position=jb.position(doc, "readPosition", source, path, required=False),
        individually_deleted=ranges,
        properties=MappingProxyType(dict(props)),
        state=jb.string(doc, "state", source, path),
        messages_consumed=jb.integer(doc, "messagesConsumedCounter", source, path),
        active=jb.boolean(doc, "active", source, path))


def _unwrap(doc: dict, source: str) -> tuple[dict, tuple[str, ...]]:
    """The transaction views nest the stats one level down; everything else is returned as is."""
    if "cursors" in doc or "lastConfirmedEntry" in doc or len(doc) != 1:
        return doc, ()
    (outer, inner), = doc.items()
    if isinstance(inner, dict) and isinstance(inner.get(_WRAPPED), dict):
        return inner[_WRAPPED], (outer,)
    return doc, ()


def stats_internal_from_dict(doc: dict, source: str) -> StatsInternal:
    doc, wrapper = _unwrap(doc, source)
    p = ""
    ledgers = doc.get("ledgers", [])
    if not isinstance(ledgers, list):
        raise PayloadError(source, "ledgers", "a list of ledger objects", ledgers)
    cursors_doc = jb.obj(doc, "cursors", source, p, CURSORS_EXPECTED)
    cursors = {name: cursor_stats(name, c, source) for name, c in cursors_doc.items()}
    for key in ("lastLedgerCreationFailureTimestamp",):
        jb.string(doc, key, source, p)  # null (2016) or absent (newer) both mean "never failed"
    for key in ("totalSize", "waitingCursorsCount"):
        jb.integer(doc, key, source, p)
    return StatsInternal(
        last_confirmed_entry=jb.position(doc, "lastConfirmedEntry", source, p),
        state=jb.string(doc, "state", source, p),
        number_of_entries=jb.integer(doc, "numberOfEntries", source, p),
        entries_added=jb.integer(doc, "entriesAddedCounter", source, p),
        current_ledger_entries=jb.integer(doc, "currentLedgerEntries", source, p),
        current_ledger_size=jb.integer(doc, "currentLedgerSize", source, p),
        pending_add_entries=jb.integer(doc, "pendingAddEntriesCount", source, p),
        last_ledger_created=jb.string(doc, "lastLedgerCreatedTimestamp", source, p),
        ledgers=tuple(ledger_info(item, source, f"ledgers[{i}]") for i, item in enumerate(ledgers)),
        cursors=MappingProxyType(cursors),
        extra_keys=wrapper + tuple(sorted(k for k in doc if k not in KNOWN_KEYS)))


def decode_stats_internal(data: bytes, source: str) -> StatsInternal:
    return stats_internal_from_dict(jb.load_object(data, source), source)


def ranges_to_json(ranges: AckRanges) -> list[list[str]]:
    return [[str(lo), str(hi)] for lo, hi in ranges]


def cursor_to_json(c: CursorStats) -> dict:
    return {"kind": c.kind, "remote_cluster": c.remote_cluster, "replicated": c.replicated,
            "mark_delete": str(c.mark_delete),
            "read_position": None if c.read_position is None else str(c.read_position),
            "individually_deleted": ranges_to_json(c.individually_deleted), "properties": dict(c.properties),
            "state": c.state, "messages_consumed": c.messages_consumed, "active": c.active}


def stats_internal_to_json(si: StatsInternal) -> dict:
    open_id = si.open_ledger_id
    return {
        "last_confirmed_entry": str(si.last_confirmed_entry), "state": si.state,
        "number_of_entries": si.number_of_entries, "entries_added": si.entries_added,
        "current_ledger_entries": si.current_ledger_entries, "current_ledger_size": si.current_ledger_size,
        "pending_add_entries": si.pending_add_entries, "last_ledger_created": si.last_ledger_created,
        "ledgers": [{"ledger_id": lg.ledger_id, "entries": lg.entries, "size": lg.size, "offloaded": lg.offloaded,
                     "under_replicated": lg.under_replicated, "metadata": lg.metadata,
                     "is_open": lg.ledger_id == open_id} for lg in si.ledgers],
        "cursors": {name: cursor_to_json(c) for name, c in si.cursors.items()},
        "extra_keys": list(si.extra_keys)}
