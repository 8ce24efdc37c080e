"""`topics info-internal` (GET .../internal-info): ManagedLedgerInfo, the metadata-store view
(docs/formats/pulsar.md §2.1).

Unlike stats-internal, positions are objects `{ledgerId, entryId}` and acked ranges are a list of
`{from, to}` with `from` exclusive and `to` inclusive, i.e. the same open-closed ranges as
individuallyDeletedMessages. A cursor's `markDelete` here is the last snapshot written to the metadata store;
when `cursorsLedgerId` is not -1 the live position lives in the cursor ledger and may be ahead of it.
The open ledger carries only `ledgerId` (no entries/size)."""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from audit.systems.pulsar.domain.positions import BEFORE_FIRST_ENTRY, Position
from audit.systems.pulsar.domain.rangeset import AckRanges
from audit.errors import PayloadError
from audit.systems.pulsar.formats import jsonbody as jb
from audit.systems.pulsar.formats.stats_internal import ranges_to_json


@dataclass(frozen=True)
class InfoLedger:
    ledger_id: int
    entries: int | None
    size: int | None
    timestamp: int | None
    offloaded: bool | None


@dataclass(frozen=True)
class InfoCursor:
    name: str
    version: int | None
    cursors_ledger_id: int | None
    mark_delete: Position | None
    individually_deleted: AckRanges
    properties: Mapping[str, int]


@dataclass(frozen=True)
class ManagedLedgerInfo:
    version: int | None
    creation_date: str | None
    modification_date: str | None
    ledgers: tuple[InfoLedger, ...]
    terminated_position: Position | None
    cursors: Mapping[str, InfoCursor]
    properties: Mapping[str, str]


def position_info(doc: dict, key: str, source: str, path: str, required: bool = False) -> Position | None:
    value = jb.obj(doc, key, source, path, "a position object {ledgerId, entryId}", required)
    if value is None:
        return None
    where = jb.join(path, key)
    ledger = jb.integer(value, "ledgerId", source, where, required=True)
    entry = jb.integer(value, "entryId", source, where, required=True)
    if ledger < 0 or entry < BEFORE_FIRST_ENTRY:
        raise PayloadError(source, where, "ledgerId >= 0 and entryId >= -1", value)
    return Position(ledger, entry)


def _ranges(doc: dict, source: str, path: str) -> AckRanges:
    items = doc.get("individualDeletedMessages") or []
    where = jb.join(path, "individualDeletedMessages")
    if not isinstance(items, list):
        raise PayloadError(source, where, "a list of {from, to} ranges", items)
    ranges = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise PayloadError(source, f"{where}[{i}]", "a range {from, to}", item)
        lower = position_info(item, "from", source, f"{where}[{i}]", required=True)
        upper = position_info(item, "to", source, f"{where}[{i}]", required=True)
        if not lower < upper:
            raise PayloadError(source, f"{where}[{i}]", "from < to (from exclusive, to inclusive)", item)
        ranges.append((lower, upper))
    return AckRanges(ranges)


def _long_map(doc: dict, key: str, source: str, path: str, kind: type) -> dict:
    value = jb.obj(doc, key, source, path, "an object", required=False) or {}
    for k, v in value.items():
        if not isinstance(v, kind) or isinstance(v, bool):
            raise PayloadError(source, f"{jb.join(path, key)}.{k}", "an integer" if kind is int else "a string", v)
    return dict(value)


def _cursor(name: str, doc: object, source: str) -> InfoCursor:
    path = f"cursors.{name}"
    if not isinstance(doc, dict):
        raise PayloadError(source, path, "a cursor info object", doc)
    return InfoCursor(name=name, version=jb.integer(doc, "version", source, path),
                      cursors_ledger_id=jb.integer(doc, "cursorsLedgerId", source, path),
                      mark_delete=position_info(doc, "markDelete", source, path),
                      individually_deleted=_ranges(doc, source, path),
                      properties=MappingProxyType(_long_map(doc, "properties", source, path, int)))


def _ledger(item: object, source: str, path: str) -> InfoLedger:
    if not isinstance(item, dict):
        raise PayloadError(source, path, "a ledger object {ledgerId, ...}", item)
    offloaded = jb.boolean(item, "isOffloaded", source, path)  # Jackson keeps the Java field name
    return InfoLedger(ledger_id=jb.integer(item, "ledgerId", source, path, required=True),
                      entries=jb.integer(item, "entries", source, path), size=jb.integer(item, "size", source, path),
                      timestamp=jb.integer(item, "timestamp", source, path),
                      offloaded=offloaded if offloaded is not None else jb.boolean(item, "offloaded", source, path))


def decode_info_internal(data: bytes, source: str) -> ManagedLedgerInfo:
    doc = jb.load_object(data, source)
    ledgers = doc.get("ledgers") or []
    if not isinstance(ledgers, list):
        raise PayloadError(source, "ledgers", "a list of ledger objects", ledgers)
    cursors = jb.obj(doc, "cursors", source, "", "an object of cursor name -> cursor info", required=False) or {}
    return ManagedLedgerInfo(
        version=jb.integer(doc, "version", source, ""), creation_date=jb.string(doc, "creationDate", source, ""),
        modification_date=jb.string(doc, "modificationDate", source, ""),
        ledgers=tuple(_ledger(item, source, f"ledgers[{i}]") for i, item in enumerate(ledgers)),
        terminated_position=position_info(doc, "terminatedPosition", source, ""),
        cursors=MappingProxyType({n: _cursor(n, c, source) for n, c in cursors.items()}),
        properties=MappingProxyType(_long_map(doc, "properties", source, "", str)))


def info_internal_to_json(info: ManagedLedgerInfo) -> dict:
    return {"version": info.version, "creation_date": info.creation_date, "modification_date": info.modification_date,
            "ledgers": [{"ledger_id": lg.ledger_id, "entries": lg.entries, "size": lg.size, "timestamp": lg.timestamp,
                         "offloaded": lg.offloaded} for lg in info.ledgers],
            "terminated_position": None if info.terminated_position is None else str(info.terminated_position),
            "cursors": {n: {"version": c.version, "cursors_ledger_id": c.cursors_ledger_id,
                            "mark_delete": None if c.mark_delete is None else str(c.mark_delete),
                            "individually_deleted": ranges_to_json(c.individually_deleted),
                            "properties": dict(c.properties)} for n, c in info.cursors.items()},
            "properties": dict(info.properties)}
