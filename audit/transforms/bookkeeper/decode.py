"""Raw BookKeeper files -> rows of the normalized tables (docs/bookkeeper/contracts.md), as plain Python values.

`decode_file(source_key, data)` classifies a key of `raw/bookkeeper/<cluster>/...` and returns rows
tagged with the table they belong to (keys of other systems give no rows). Anything that cannot be
decoded becomes a `quarantine` row with the reason; nothing is dropped silently."""
from __future__ import annotations

import json
from typing import Iterator

from audit.domain.bookkeeper.model import LedgerMetadata
from audit.formats.bookkeeper import availability, ledger_metadata, protocol
from audit.formats.bookkeeper.sniff import text_or_base64  # BookKeeper's toString convention
from audit.formats.errors import PayloadError

SYSTEM = "bookkeeper"
LEDGERS, AVAILABILITY, BOOKIES, RACKS, QUARANTINE = "bk_ledgers", "bk_entry_availability", "bk_bookies", \
    "_racks", "quarantine"
OWNER_KEY = "pulsar/managed-ledger"
# Bookie answer statuses (protocol StatusCode names) meaning "this bookie has no such ledger".
# Only NoSuchLedger means "holds nothing": the Auditor (AuditorReplicasCheckTask) treats every other failure,
# ENOENTRY (NoSuchEntryException) included, as an unavailable bookie (docs/formats/bookkeeper.md §1.7).
NO_LEDGER_STATUSES = {"ENOLEDGER"}
# Kinds of raw files (payload_kind in quarantine)
ZNODE, ADMIN_JSON, ENTRIES, ENTRIES_ERROR, BOOKIE_LISTS, RACKS_JSON, COLLECTION = (
    "ledger-metadata-znode", "ledger-metadata-http", "entries-of-ledger", "entries-of-ledger-error",
    "bookies-available", "bookies-racks", "collection")
Row = tuple[str, dict]


def ledger_row(cluster: str, key: str, md: LedgerMetadata) -> dict:
    custom = {k: text_or_base64(v) for k, v in md.custom_metadata.items()}
    return {"cluster": cluster, "ledger_id": md.ledger_id, "source_key": key, "format_version": md.format_version,
            "state": md.state, "ensemble_size": md.ensemble_size, "write_quorum": md.write_quorum_size,
            "ack_quorum": md.ack_quorum_size, "last_entry_id": md.last_entry_id, "length": md.length,
            "ctime": md.ctime, "ctoken": md.ctoken, "digest_type": md.digest_type, "has_password": md.has_password,
            "owner_topic": custom.get(OWNER_KEY), "custom_metadata": custom,
            "segments": [{"first_entry_id": s.first_entry_id, "ensemble": list(s.ensemble)} for s in md.segments]}


def _quarantine(cluster: str | None, key: str, kind: str, reason: str) -> Row:
    return QUARANTINE, {"system": SYSTEM, "cluster": cluster, "source_key": key, "payload_kind": kind,
                        "reason": reason}


def _groups(groups) -> list[dict]:
    return [{"first_sequence_start": g.first_sequence_start, "last_sequence_start": g.last_sequence_start,
             "sequence_size": g.sequence_size, "sequence_period": g.sequence_period} for g in groups]


def _avail(cluster, bookie, ledger_id, status, error, groups, key) -> Row:
    return AVAILABILITY, {"cluster": cluster, "bookie": bookie, "ledger_id": ledger_id, "status": status,
                          "error": error, "groups": groups, "source_key": key}


def split_key(source_key: str) -> tuple[str, list[str]] | None:
    """('<cluster>', [rest...]) for `raw/bookkeeper/<cluster>/<rest>`, else None."""
    parts = [p for p in source_key.split("/") if p]
    if parts[:1] == ["raw"]:
        parts = parts[1:]
    if len(parts) < 3 or parts[0] != SYSTEM:
        return None
    return parts[1], parts[2:]


def decode_file(source_key: str, data: bytes) -> list[Row]:
    split = split_key(source_key)
    if split is None:
        return []  # another system's raw files (or the lab's ground truth): not BookKeeper's to judge
    cluster, rest = split
    try:
        return list(_decode(cluster, rest, source_key, data))
    except PayloadError as e:
        return [_quarantine(cluster, source_key, _kind(rest), str(e))]
    except (ValueError, KeyError, TypeError) as e:  # JSON shape problems and the like
        return [_quarantine(cluster, source_key, _kind(rest), f"{type(e).__name__}: {e}")]


def _kind(rest: list[str]) -> str:
    head = rest[0]
    if head == "ledger-metadata":
        return ZNODE
    if head == "ledger-metadata-http":
        return ADMIN_JSON
    if head == "entries-of-ledger":
        return ENTRIES_ERROR if rest[-1].endswith(".error.json") else ENTRIES
    if rest == ["bookies", "available.json"]:
        return BOOKIE_LISTS
    if rest == ["bookies", "racks.json"]:
        return RACKS_JSON
    if rest == ["collection.json"]:
        return COLLECTION
    return "unknown"


def _decode(cluster: str, rest: list[str], key: str, data: bytes) -> Iterator[Row]:
    kind = _kind(rest)
    if kind == ZNODE:
        path = "/".join(rest[1:])
        ledger_id = ledger_metadata.ledger_id_from_znode_path(path)
        if ledger_id is None:
            yield _quarantine(cluster, key, kind, f"{path}: not a ledger znode path (L%010d, 2-4-4 or 3-4-4-4-4)")
            return
        yield LEDGERS, ledger_row(cluster, key, ledger_metadata.decode_znode(data, key, ledger_id))
    elif kind == ADMIN_JSON:
        for md in ledger_metadata.decode_admin_json(data, key):
            yield LEDGERS, ledger_row(cluster, key, md)
    elif kind in (ENTRIES, ENTRIES_ERROR):
        yield from _entries(cluster, rest, key, data, kind)
    elif kind == BOOKIE_LISTS:
        yield from _bookie_lists(cluster, key, data)
    elif kind == RACKS_JSON:
        racks = json.loads(data)
        if not isinstance(racks, dict) or not all(isinstance(v, str) for v in racks.values()):
            raise PayloadError(key, "<root>", 'an object {"bookie": "/region/rack"}', racks)
        for bookie, rack in sorted(racks.items()):
            yield RACKS, {"cluster": cluster, "bookie": bookie, "rack": rack}
    elif kind == COLLECTION:
        return  # the collector's own report; coverage is read from it elsewhere
    else:
        yield _quarantine(cluster, key, kind, "unrecognised raw key")


def _entries(cluster: str, rest: list[str], key: str, data: bytes, kind: str) -> Iterator[Row]:
    if len(rest) != 3:
        raise PayloadError(key, "key", "entries-of-ledger/<bookieId>/<ledgerId>.pb|.error.json", "/".join(rest))
    bookie, name = rest[1], rest[2]
    stem = name[: -len(".error.json")] if kind == ENTRIES_ERROR else name[: -len(".pb")] if name.endswith(".pb") \
        else None
    if stem is None or not stem.isdigit():
        raise PayloadError(key, "key", "<ledgerId>.pb or <ledgerId>.error.json", name)
    ledger_id = int(stem)
    if kind == ENTRIES_ERROR:
        doc = json.loads(data)
        if not isinstance(doc, dict) or not isinstance(doc.get("error"), str):
            raise PayloadError(key, "error", 'an object {"error": "timeout|unreachable|...", "message": ...}', doc)
        message = doc.get("message")
        error = doc["error"] + (f": {message}" if message else "")
        yield _avail(cluster, bookie, ledger_id, "unavailable", error, None, key)
        return
    try:
        answer = protocol.decode_response(data, key)
        if answer.ledger_id is not None and answer.ledger_id != ledger_id:
            raise PayloadError(key, "getListOfEntriesOfLedgerResponse.ledgerId", f"{ledger_id} (from the key)",
                               answer.ledger_id)
        if answer.status == "EOK":
            if answer.availability is None:
                raise PayloadError(key, "availabilityOfEntriesOfLedger", "bytes with status EOK", None)
            groups = availability.decode(answer.availability, key)
            # canonical: equal runs at an equal stride become one periodic group (bookies send one per run)
            yield _avail(cluster, bookie, ledger_id, "ok", None, _groups(availability.canonical_groups(groups)), key)
        elif answer.status in NO_LEDGER_STATUSES:
            yield _avail(cluster, bookie, ledger_id, "no_such_ledger", answer.status, None, key)
        else:
            yield _avail(cluster, bookie, ledger_id, "error", f"bookie answered {answer.status}", None, key)
    except PayloadError as e:
        # The bookie's holdings are unknown: a coverage gap for the audit, and the payload is quarantined.
        yield _avail(cluster, bookie, ledger_id, "error", f"undecodable answer: {e}", None, key)
        yield _quarantine(cluster, key, kind, str(e))


def _bookie_lists(cluster: str, key: str, data: bytes) -> Iterator[Row]:
    doc = json.loads(data)
    if not isinstance(doc, dict) or not all(isinstance(doc.get(k, []), list) for k in ("available", "readonly",
                                                                                         "cookies")):
        raise PayloadError(key, "<root>", '{"available": [...], "readonly": [...], "cookies": [...]}', doc)
    state: dict[str, str] = {}
    for b in doc.get("cookies", []):
        state[b] = "registered"
    for b in doc.get("available", []):
        state[b] = "available"
    for b in doc.get("readonly", []):
        state[b] = "readonly"  # a read-only bookie registers under available/readonly
    for b, st in sorted(state.items()):
        yield BOOKIES, {"cluster": cluster, "bookie": b, "state": st}
