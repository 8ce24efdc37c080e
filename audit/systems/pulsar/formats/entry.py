"""Per-entry dump lines (docs/pulsar/contracts.md "Raw evidence", `T/dump/<L>/<first>-<last>.jsonl`).

Each line records one answer of GET .../ledger/{L}/entry/{E}: the broker puts the message metadata in
`X-Pulsar-*` response headers and the (decompressed) payload in the body. Header names are matched
case-insensitively (proxies and HTTP/2 lower-case them). Properties come one header per key
(`X-Pulsar-PROPERTY-<key>`); a single `X-Pulsar-PROPERTY` header holding a JSON object (newer admin
protocol) is read as well.

Brokers before Pulsar 2.9.0 (2021) answer with `X-Pulsar-Message-ID`, the properties, the
publish and event times and the batch count only: no producer name, sequence id, `replicated-from`,
`replicated-to` or `marker-type`. Producer name and sequence id are required fields of every message's metadata
(markers included), so a newer broker always sends them: a read line with none of those headers comes from an
old broker, and `EntryRecord.metadata_headers` is False. Such a record cannot say whether it is a marker or a
replicated copy (docs/formats/pulsar.md §2.8)."""
from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterator, Mapping

from audit.systems.pulsar.domain.positions import Position, parse_position
from audit.errors import MISSING, PayloadError
from audit.systems.pulsar.formats.markers import decode_marker
from audit.systems.pulsar.formats.timefmt import format_time_ms, parse_time_ms

MESSAGE_ID, PUBLISH_TIME, PRODUCER, SEQUENCE_ID = ("X-Pulsar-Message-ID", "X-Pulsar-publish-time",
                                                   "X-Pulsar-producer-name", "X-Pulsar-sequence-id")
REPLICATED_FROM, REPLICATED_TO, MARKER_TYPE = "X-Pulsar-replicated-from", "X-Pulsar-replicated-to", \
    "X-Pulsar-marker-type"
PROPERTY_PREFIX, PROPERTIES_JSON = "X-Pulsar-PROPERTY-", "X-Pulsar-PROPERTY"
# Headers Pulsar 2.9.0 added to the per-entry response (docs/formats/pulsar.md §2.8); any of them present = a broker
# that exposes the message metadata the audit needs (origin, marker type).
METADATA_HEADERS = (PRODUCER, SEQUENCE_ID, REPLICATED_FROM, REPLICATED_TO, MARKER_TYPE)
REPL_SOURCE_POSITION = "__MSG_PROP_REPL_SOURCE_POSITION"  # a copy's source position (docs/formats/pulsar.md §2.5)
OCTET_STREAM = "application/octet-stream"
_INT = re.compile(r"-?\d+")


@dataclass(frozen=True)
class EntryRecord:
    ledger_id: int
    entry_id: int
    producer_name: str | None
    sequence_id: int | None
    publish_time_ms: int | None
    replicated_from: str | None
    replicate_to: tuple[str, ...] | None  # None: header absent (the broker replicates everywhere)
    properties: Mapping[str, str]
    source_position: Position | None
    marker_type: int | None
    marker: dict | None
    body_size: int
    metadata_headers: bool = True  # False: none of METADATA_HEADERS (a pre-2.9 broker, docs/formats/pulsar.md §2.8)

    @property
    def position(self) -> Position:
        return Position(self.ledger_id, self.entry_id)


@dataclass(frozen=True)
class EntryGap:
    """A position asked for and not read: HTTP status 404/500/..., 0 = no answer, or an HTML page."""
    ledger_id: int
    entry_id: int
    status: int
    error: str | None
    content_type: str | None


class _Headers:
    def __init__(self, raw: object, source: str):
        if not isinstance(raw, dict):
            raise PayloadError(source, "headers", "an object of header name -> string or list of strings", raw)
        self.by_name: dict[str, tuple[str, list[str]]] = {}
        for name, value in raw.items():
            values = value if isinstance(value, list) else [value]
            if not all(isinstance(v, str) for v in values):
                raise PayloadError(source, f"headers.{name}", "a string or a list of strings", value)
            known = self.by_name.setdefault(name.lower(), (name, []))
            known[1].extend(values)

    def all(self, name: str) -> list[str] | None:
        found = self.by_name.get(name.lower())
        return None if found is None else found[1]

    def one(self, name: str) -> str | None:
        values = self.all(name)
        return values[0] if values else None

    def properties(self, source: str) -> dict[str, str]:
        out: dict[str, str] = {}
        packed = self.one(PROPERTIES_JSON)
        if packed is not None:
            try:
                doc = json.loads(packed)
            except ValueError:
                doc = None
            if not isinstance(doc, dict) or not all(isinstance(v, str) for v in doc.values()):
                raise PayloadError(source, f"headers.{PROPERTIES_JSON}", "a JSON object of string values", packed)
            out.update(doc)
        prefix = PROPERTY_PREFIX.lower()
        for lower, (name, values) in self.by_name.items():
            if lower.startswith(prefix) and len(name) > len(prefix) and values:
                out[name[len(prefix):]] = values[0]
        return out


def _int_header(h: _Headers, name: str, source: str) -> int | None:
    value = h.one(name)
    if value is None:
        return None
    if _INT.fullmatch(value.strip()) is None:
        raise PayloadError(source, f"headers.{name}", "an integer", value)
    return int(value)


def _line_int(doc: dict, key: str, source: str, minimum: int) -> int:
    value = doc.get(key, MISSING)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise PayloadError(source, key, f"an integer >= {minimum}", value)
    return value


def _source_position(props: dict[str, str], source: str) -> Position | None:
    for key, value in props.items():
        if key.upper() == REPL_SOURCE_POSITION:
            return parse_position(value, source, f"headers.{PROPERTY_PREFIX}{key}")
    return None


def decode_entry_line(line: bytes | str, source: str) -> EntryRecord | EntryGap:
    try:
        doc = json.loads(line)
    except ValueError as e:
        raise PayloadError(source, "<line>", f"one JSON object per line ({e})", line[:60]) from None
    if not isinstance(doc, dict):
        raise PayloadError(source, "<line>", "a JSON object", doc)
    ledger_id, entry_id = _line_int(doc, "ledger_id", source, 0), _line_int(doc, "entry_id", source, 0)
    status = _line_int(doc, "status", source, 0)
    content_type = doc.get("content_type")
    if content_type is not None and not isinstance(content_type, str):
        raise PayloadError(source, "content_type", "a string", content_type)
    is_html = (content_type or "").split(";")[0].strip().lower() == "text/html"
    if status != 200 or is_html:  # an HTML 200 is a proxy page, not an entry
        error = doc.get("error")
        if error is not None and not isinstance(error, str):
            raise PayloadError(source, "error", "a string", error)
        return EntryGap(ledger_id, entry_id, status, error or ("HTML page instead of an entry" if is_html else None),
                        content_type)
    h = _Headers(doc.get("headers", MISSING), source)
    message_id = h.one(MESSAGE_ID)
    if message_id != f"{ledger_id}:{entry_id}":
        raise PayloadError(source, f"headers.{MESSAGE_ID}", f"'{ledger_id}:{entry_id}' (the position asked for)",
                           MISSING if message_id is None else message_id)
    body_b64 = doc.get("body_b64", MISSING)
    try:
        body = base64.b64decode(body_b64, validate=True) if isinstance(body_b64, str) else None
    except (binascii.Error, ValueError):
        body = None
    if body is None:
        raise PayloadError(source, "body_b64", "the body as base64 text", body_b64)
    props = h.properties(source)
    publish = h.one(PUBLISH_TIME)
    marker_type = _int_header(h, MARKER_TYPE, source)
    replicate_to = h.all(REPLICATED_TO)
    return EntryRecord(
        ledger_id=ledger_id, entry_id=entry_id, producer_name=h.one(PRODUCER),
        sequence_id=_int_header(h, SEQUENCE_ID, source),
        publish_time_ms=None if publish is None else parse_time_ms(publish, source, f"headers.{PUBLISH_TIME}"),
        replicated_from=h.one(REPLICATED_FROM), replicate_to=None if replicate_to is None else tuple(replicate_to),
        properties=MappingProxyType(props), source_position=_source_position(props, source),
        marker_type=marker_type, marker=None if marker_type is None else decode_marker(marker_type, body, source),
        body_size=len(body), metadata_headers=any(h.one(name) is not None for name in METADATA_HEADERS))


def dump_lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, line) for every non-blank line."""
    for number, line in enumerate(data.split(b"\n"), 1):
        if line.strip():
            yield number, line


def line_source(source: str, number: int) -> str:
    return f"{source}:line {number}"


def decode_dump_chunk(data: bytes, source: str) -> Iterator[EntryRecord | EntryGap]:
    """Every line of a chunk; the first bad line raises (normalize decodes line by line instead)."""
    for number, line in dump_lines(data):
        yield decode_entry_line(line, line_source(source, number))


def encode_entry_line(ledger_id: int, entry_id: int, body: bytes = b"", *, producer_name: str | None = None,
                      sequence_id: int | None = None, publish_time_ms: int | None = None,
                      replicated_from: str | None = None, replicate_to: list[str] | tuple[str, ...] | None = None,
                      properties: Mapping[str, str] | None = None, marker_type: int | None = None,
                      extra_headers: Mapping[str, str | list[str]] | None = None) -> bytes:
    """One read line, newline-terminated, in the exact contract shape (headers named as the broker sends them)."""
    headers: dict[str, str | list[str]] = {MESSAGE_ID: f"{ledger_id}:{entry_id}"}
    for key, value in (properties or {}).items():
        headers[PROPERTY_PREFIX + key] = value
    optional = [(PUBLISH_TIME, None if publish_time_ms is None else format_time_ms(publish_time_ms)),
                (PRODUCER, producer_name), (SEQUENCE_ID, None if sequence_id is None else str(sequence_id)),
                (REPLICATED_FROM, replicated_from),
                (REPLICATED_TO, None if replicate_to is None else
                 (list(replicate_to) if len(replicate_to) != 1 else replicate_to[0])),
                (MARKER_TYPE, None if marker_type is None else str(marker_type))]
    headers.update((name, value) for name, value in optional if value is not None)
    headers.update(extra_headers or {})
    doc = {"ledger_id": ledger_id, "entry_id": entry_id, "status": 200, "content_type": OCTET_STREAM,
           "headers": headers, "body_b64": base64.b64encode(body).decode()}
    return json.dumps(doc, separators=(",", ":")).encode() + b"\n"


def encode_gap_line(ledger_id: int, entry_id: int, status: int, error: str,
                    content_type: str | None = "text/plain") -> bytes:
    doc = {"ledger_id": ledger_id, "entry_id": entry_id, "status": status, "error": error,
           "content_type": content_type}
    return json.dumps(doc, separators=(",", ":")).encode() + b"\n"


def entry_to_json(item: EntryRecord | EntryGap) -> dict:
    if isinstance(item, EntryGap):
        return {"position": f"{item.ledger_id}:{item.entry_id}", "status": item.status, "error": item.error}
    return {"position": str(item.position), "producer_name": item.producer_name, "sequence_id": item.sequence_id,
            "publish_time_ms": item.publish_time_ms, "replicated_from": item.replicated_from,
            "replicate_to": None if item.replicate_to is None else list(item.replicate_to),
            "properties": dict(item.properties),
            "source_position": None if item.source_position is None else str(item.source_position),
            "marker": item.marker, "body_size": item.body_size, "metadata_headers": item.metadata_headers}
