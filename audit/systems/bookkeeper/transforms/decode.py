"""Raw BookKeeper files -> rows of the normalized tables (docs/bookkeeper/contracts.md), as plain Python values.

`decode_file(source_key, data)` classifies a key of `raw/bookkeeper/<cluster>/...` and returns rows
tagged with the table they belong to (keys of other systems give no rows). Anything that cannot be
decoded becomes a `quarantine` row with the reason; nothing is dropped silently."""
from __future__ import annotations

import json
from typing import Iterator

from audit.systems.bookkeeper.domain import evidence
from audit.systems.bookkeeper.domain.model import LedgerMetadata
from audit.systems.bookkeeper.formats import availability, ledger_metadata, protocol, raw_evidence
from audit.systems.bookkeeper.formats.raw_evidence import DELETED_SUFFIX, STAT_SUFFIX
from audit.systems.bookkeeper.formats.sniff import text_or_base64  # BookKeeper's toString convention
from audit.errors import PayloadError

SYSTEM = "bookkeeper"
LEDGERS, AVAILABILITY, BOOKIES, RACKS, QUARANTINE = "bk_ledgers", "bk_entry_availability", "bk_bookies", \
    "_racks", "quarantine"
EVIDENCE, ZNODE_STATS = "bk_bookie_evidence", "_znode_stats"   # _znode_stats: joined into bk_ledgers
OWNER_KEY = "pulsar/managed-ledger"
# Bookie answer statuses (protocol StatusCode names) meaning "this bookie has no such ledger".
# Only NoSuchLedger means "holds nothing": the Auditor (AuditorReplicasCheckTask) treats every other failure,
# ENOENTRY (NoSuchEntryException) included, as an unavailable bookie (docs/formats/bookkeeper.md §1.7).
NO_LEDGER_STATUSES = {"ENOLEDGER"}
# Kinds of raw files (payload_kind in quarantine)
ZNODE, ADMIN_JSON, ENTRIES, ENTRIES_ERROR, BOOKIE_LISTS, RACKS_JSON, COLLECTION = (
    "ledger-metadata-znode", "ledger-metadata-http", "entries-of-ledger", "entries-of-ledger-error",
    "bookies-available", "bookies-racks", "collection")
ZNODE_STAT, INDEX_AVAIL, INDEX_INVENTORY, PROBES, PROBES_BOOKIE = (
    "ledger-metadata-stat", "location-index", "location-index-inventory", "read-probes", "read-probes-bookie")
# ledger-metadata/<znode path>.deleted.json: the znode was gone when looked up again after the bookies were asked
# (audit/systems/bookkeeper/collect/deleted.py); normalize leaves the ledger out of bk_ledgers.
ZNODE_DELETED, DELETED = "ledger-metadata-deleted", "_deleted_ledgers"
Row = tuple[str, dict]


def ledger_row(cluster: str, key: str, md: LedgerMetadata) -> dict:
    custom = {k: text_or_base64(v) for k, v in md.custom_metadata.items()}
    return {"cluster": cluster, "ledger_id": md.ledger_id, "source_key": key, "format_version": md.format_version,
            "state": md.state, "ensemble_size": md.ensemble_size, "write_quorum": md.write_quorum_size,
            "ack_quorum": md.ack_quorum_size, "last_entry_id": md.last_entry_id, "length": md.length,
            "ctime": md.ctime, "stored_ctime": md.ctime, "ctoken": md.ctoken, "digest_type": md.digest_type,
            "has_password": md.has_password,
            "owner_topic": custom.get(OWNER_KEY), "custom_metadata": custom,
            "segments": [{"first_entry_id": s.first_entry_id, "ensemble": list(s.ensemble)} for s in md.segments]}


def _quarantine(cluster: str | None, key: str, kind: str, reason: str) -> Row:
    return QUARANTINE, {"system": SYSTEM, "cluster": cluster, "source_key": key, "payload_kind": kind,
                        "reason": reason}


def _groups(groups) -> list[dict]:
    return [{"first_sequence_start": g.first_sequence_start, "last_sequence_start": g.last_sequence_start,
             "sequence_size": g.sequence_size, "sequence_period": g.sequence_period} for g in groups]


def _avail(cluster, bookie, ledger_id, status, error, groups, key, kind=evidence.ENTRIES_OF_LEDGER,
           **probe) -> Row:
    return AVAILABILITY, {"cluster": cluster, "bookie": bookie, "ledger_id": ledger_id, "status": status,
                          "error": error, "groups": groups, "source_key": key, "evidence": kind,
                          "probe_share": probe.get("probe_share"), "probed": probe.get("probed"),
                          "absent": probe.get("absent")}


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
        return ZNODE_STAT if rest[-1].endswith(STAT_SUFFIX) else ZNODE_DELETED if rest[-1].endswith(
            DELETED_SUFFIX) else ZNODE
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
    if head == "location-index":
        return INDEX_INVENTORY if rest[-1] == "inventory.json" else INDEX_AVAIL
    if head == "read-probes":
        return PROBES_BOOKIE if rest[-1] == "bookie.json" else PROBES
    return "unknown"


def _decode(cluster: str, rest: list[str], key: str, data: bytes) -> Iterator[Row]:
    kind = _kind(rest)
    if kind == ZNODE:
        yield from _znode_rows(cluster, rest, key, data)
    elif kind == ADMIN_JSON:
        yield from _admin_json_rows(cluster, key, data)
    elif kind in (ENTRIES, ENTRIES_ERROR):
        yield from _entries(cluster, rest, key, data, kind)
    elif kind == BOOKIE_LISTS:
        yield from _bookie_lists(cluster, key, data)
    elif kind == RACKS_JSON:
        yield from _rack_rows(cluster, key, data)
    elif kind == ZNODE_STAT:
        yield from stat_rows(cluster, rest, key, data)
    elif kind == ZNODE_DELETED:
        yield from _deleted_rows(cluster, rest, key, data)
    elif kind in (INDEX_AVAIL, PROBES):
        yield from ledger_evidence_rows(cluster, rest, key, data, kind)
    elif kind in (INDEX_INVENTORY, PROBES_BOOKIE):
        yield from bookie_evidence_rows(cluster, rest, key, data, kind)
    elif kind == COLLECTION:
        return  # the collector's own report; coverage is read from it elsewhere
    else:
        yield _quarantine(cluster, key, kind, "unrecognised raw key")


def _znode_rows(cluster: str, rest: list[str], key: str, data: bytes) -> Iterator[Row]:
    path = "/".join(rest[1:])
    ledger_id = ledger_metadata.ledger_id_from_znode_path(path)
    if ledger_id is None:
        yield _quarantine(cluster, key, ZNODE, f"{path}: not a ledger znode path (L%010d, 2-4-4 or 3-4-4-4-4)")
        return
    yield LEDGERS, ledger_row(cluster, key, ledger_metadata.decode_znode(data, key, ledger_id))


def _admin_json_rows(cluster: str, key: str, data: bytes) -> Iterator[Row]:
    for md in ledger_metadata.decode_admin_json(data, key):
        yield LEDGERS, ledger_row(cluster, key, md)


def _rack_rows(cluster: str, key: str, data: bytes) -> Iterator[Row]:
    racks = json.loads(data)
    if not isinstance(racks, dict) or not all(isinstance(v, str) for v in racks.values()):
        raise PayloadError(key, "<root>", 'an object {"bookie": "/region/rack"}', racks)
    for bookie, rack in sorted(racks.items()):
        yield RACKS, {"cluster": cluster, "bookie": bookie, "rack": rack}


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



def stat_rows(cluster: str, rest: list[str], key: str, data: bytes) -> Iterator[Row]:
    """ledger-metadata/<znode path>.stat.json -> the znode's ctime and mtime, joined into bk_ledgers by normalize."""
    path = "/".join(rest[1:])[: -len(STAT_SUFFIX)]
    ledger_id = ledger_metadata.ledger_id_from_znode_path(path)
    if ledger_id is None:
        raise PayloadError(key, "key", "ledger-metadata/<ledger znode path>.stat.json", "/".join(rest))
    yield ZNODE_STATS, {"cluster": cluster, "ledger_id": ledger_id, "znode_ctime": raw_evidence.znode_ctime(data, key),
                        "znode_mtime": raw_evidence.znode_mtime(data, key), "source_key": key}


def _deleted_rows(cluster: str, rest: list[str], key: str, data: bytes) -> Iterator[Row]:
    path = "/".join(rest[1:])[: -len(DELETED_SUFFIX)]
    ledger_id = ledger_metadata.ledger_id_from_znode_path(path)
    if ledger_id is None:
        raise PayloadError(key, "key", f"ledger-metadata/<ledger znode path>{DELETED_SUFFIX}", "/".join(rest))
    raw_evidence.deletion_note(data, key, ledger_id)
    yield DELETED, {"cluster": cluster, "ledger_id": ledger_id, "source_key": key}


def _bookie_and_ledger(rest: list[str], key: str, suffix: str) -> tuple[str, int]:
    if len(rest) != 3 or not rest[2].endswith(suffix) or not rest[2][: -len(suffix)].isdigit():
        raise PayloadError(key, "key", f"{rest[0]}/<bookieId>/<ledgerId>{suffix}", "/".join(rest))
    return rest[1], int(rest[2][: -len(suffix)])


def ledger_evidence_rows(cluster: str, rest: list[str], key: str, data: bytes, kind: str) -> Iterator[Row]:
    """location-index/<bookie>/<ledgerId>.avail and read-probes/<bookie>/<ledgerId>.json -> one availability row.
    Bad content leaves the bookie's holdings unknown (status error: a coverage gap) and is quarantined."""
    bookie, ledger_id = _bookie_and_ledger(rest, key, ".avail" if kind == INDEX_AVAIL else ".json")
    try:
        if kind == INDEX_AVAIL:   # the list answer's own bytes, from the bookie's `locations` index
            groups = _groups(availability.canonical_groups(availability.decode(data, key)))
            yield _avail(cluster, bookie, ledger_id, "ok", None, groups, key, evidence.LOCATION_INDEX)
            return
        p = raw_evidence.probes(data, key, ledger_id)
        probe = {"probe_share": p.share_percent, "probed": p.probed}
        if p.probed and p.failed and not p.present and not p.absent:
            error = "every read probe failed: " + ", ".join(f"{k} x{len(v)}" for k, v in p.failed.items())
            yield _avail(cluster, bookie, ledger_id, "unavailable", error, None, key, evidence.READ_PROBE, **probe)
        else:
            yield _avail(cluster, bookie, ledger_id, "ok", None, None, key, evidence.READ_PROBE, absent=p.absent,
                         **probe)
    except PayloadError as e:
        yield _avail(cluster, bookie, ledger_id, "error", f"undecodable evidence: {e}", None, key,
                     evidence.LOCATION_INDEX if kind == INDEX_AVAIL else evidence.READ_PROBE)
        yield _quarantine(cluster, key, kind, str(e))


def bookie_evidence_rows(cluster: str, rest: list[str], key: str, data: bytes, kind: str) -> Iterator[Row]:
    """location-index/<bookie>/inventory.json and read-probes/<bookie>/bookie.json -> one bk_bookie_evidence row."""
    if len(rest) != 3:
        raise PayloadError(key, "key", f"{rest[0]}/<bookieId>/{rest[-1]}", "/".join(rest))
    bookie = rest[1]
    row = {"cluster": cluster, "bookie": bookie, "source_key": key, "share_percent": None, "ledger_ids": None,
           "read_at_ms": None}
    if kind == INDEX_INVENTORY:
        inv = raw_evidence.inventory(data, key, bookie)
        row.update(evidence=evidence.LOCATION_INDEX, complete=inv["complete"], reason=inv["reason"],
                   ledger_ids=inv["ledger_ids"], read_at_ms=inv["read_at_ms"])
    else:
        doc = raw_evidence.probe_bookie(data, key, bookie)
        # Probes never see what a bookie holds outside its stripe: never a complete inventory.
        row.update(evidence=evidence.READ_PROBE, complete=False, share_percent=doc["share_percent"],
                   reason=doc["reason"])
    yield EVIDENCE, row
