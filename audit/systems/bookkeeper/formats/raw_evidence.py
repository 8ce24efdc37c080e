"""Strict parsers of the raw evidence files beside the native payloads (docs/bookkeeper/contracts.md "Raw payload
kinds"): a ledger znode's ZooKeeper Stat and deletion note, a bookie's location-index inventory, and read probes.
Each returns plain values or raises PayloadError naming the file, the field and what was expected. The normalizer
(audit/systems/bookkeeper/transforms/decode.py) turns them into rows; `replaudit import` checks files with them."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from audit.errors import MISSING, PayloadError

# Beside a ledger znode's payload under ledger-metadata/: its Stat, and the note that it was deleted during
# collection (audit/systems/bookkeeper/collect/deleted.py).
STAT_SUFFIX, DELETED_SUFFIX = ".stat.json", ".deleted.json"
# ZooKeeper's Stat fields (docs/formats/bookkeeper.md §1.7, "Ledger creation time"), as the collectors store them.
STAT_FIELDS = ("czxid", "mzxid", "ctime", "mtime", "version", "cversion", "aversion", "ephemeralOwner",
               "dataLength", "numChildren", "pzxid")
ABSENT_STATUSES = ("ENOENTRY", "ENOLEDGER")   # the bookie answered it does not have the entry
OPENED_AS = ("read_only", "secondary")


def _object(data: bytes, key: str, expected: str) -> dict:
    try:
        doc = json.loads(data)
    except ValueError as e:
        raise PayloadError(key, "<root>", f"JSON {expected}", f"{type(e).__name__}: {e}") from None
    if not isinstance(doc, dict):
        raise PayloadError(key, "<root>", f"a JSON object {expected}", doc)
    return doc


def _int(doc: dict, key: str, field: str, lo: int | None = None, hi: int | None = None) -> int:
    v = doc.get(field, MISSING)
    if isinstance(v, bool) or not isinstance(v, int) or (lo is not None and v < lo) or (hi is not None and v > hi):
        bounds = "" if lo is None else f" in [{lo}, {'...' if hi is None else hi}]"
        raise PayloadError(key, field, f"an integer{bounds}", v)
    return v


def _str(doc: dict, key: str, field: str, choices: tuple[str, ...] | None = None) -> str:
    v = doc.get(field, MISSING)
    if not isinstance(v, str) or not v or (choices and v not in choices):
        raise PayloadError(key, field, " or ".join(repr(c) for c in choices) if choices else "a non-empty string", v)
    return v


def _ids(v: Any, key: str, field: str) -> list[int]:
    if not isinstance(v, list) or any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in v):
        raise PayloadError(key, field, "a list of entry ids (integers >= 0)", v)
    return v


def znode_ctime(data: bytes, key: str) -> int | None:
    """The Stat's ctime (ms since epoch); None when ZooKeeper's value is not a time (<= 0)."""
    doc = _object(data, key, "ZooKeeper Stat {czxid, mzxid, ctime, ...}")
    for f in STAT_FIELDS:
        _int(doc, key, f)
    return doc["ctime"] if doc["ctime"] > 0 else None


def znode_mtime(data: bytes, key: str) -> int | None:
    """The Stat's mtime (ms since epoch): the ledger's last metadata write (creation, ensemble change, close);
    None when ZooKeeper's value is not a time (<= 0)."""
    doc = _object(data, key, "ZooKeeper Stat {czxid, mzxid, ctime, ...}")
    _int(doc, key, "mtime")
    return doc["mtime"] if doc["mtime"] > 0 else None


def deletion_note(data: bytes, key: str, ledger_id: int) -> None:
    """Checks a `<znode path>.deleted.json` note: a JSON object naming `ledger_id` (the ledger of its path)."""
    doc = _object(data, key, "deletion note {ledger_id, checked_at_ms, reason}")
    if doc.get("ledger_id", MISSING) != ledger_id:
        raise PayloadError(key, "ledger_id", f"{ledger_id} (from the key)", doc.get("ledger_id", MISSING))


def _bookie(doc: dict, key: str, bookie: str, evidence: str) -> None:
    if doc.get("bookie") != bookie:
        raise PayloadError(key, "bookie", f"{bookie!r} (the bookie of the key)", doc.get("bookie", MISSING))
    if doc.get("evidence") != evidence:
        raise PayloadError(key, "evidence", repr(evidence), doc.get("evidence", MISSING))


def inventory(data: bytes, key: str, bookie: str) -> dict:
    """{complete, ledger_ids (None = every ledger), reason} of location-index/<bookie>/inventory.json."""
    doc = _object(data, key, "location-index inventory")
    _bookie(doc, key, bookie, "location_index")
    for f in ("ledger_dirs", "databases"):
        v = doc.get(f, MISSING)
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise PayloadError(key, f, "a list of paths", v)
    opened = _str(doc, key, "opened_as", OPENED_AS)
    read_at, ledgers, entries = _int(doc, key, "read_at_ms", 0), _int(doc, key, "ledgers", 0), \
        _int(doc, key, "entries", 0)
    complete = doc.get("complete", MISSING)
    if not isinstance(complete, bool):
        raise PayloadError(key, "complete", "true or false", complete)
    asked = doc.get("ledger_ids", MISSING)
    if asked is not None:
        asked = _ids(asked, key, "ledger_ids")
    reason = (f"locations index of {len(doc['databases'])} database(s) read {opened} at {read_at} ms: "
              f"{ledgers} ledgers, {entries} entries" + ("" if asked is None else f", {len(asked)} ledgers asked")
              + ("" if complete else "; incomplete: a ledger without a file is unknown"))
    return {"complete": complete, "ledger_ids": asked, "reason": reason, "read_at_ms": read_at}


def probe_bookie(data: bytes, key: str, bookie: str) -> dict:
    """{share_percent, reason} of read-probes/<bookie>/bookie.json."""
    doc = _object(data, key, "read-probe bookie report")
    _bookie(doc, key, bookie, "read_probe")
    return {"share_percent": _int(doc, key, "share_percent", 0, 100), "reason": _str(doc, key, "reason")}


@dataclass(frozen=True)
class Probes:
    share_percent: int
    probed: int
    present: int                      # entries answered EOK
    absent: list[int]                 # answered ENOENTRY or ENOLEDGER: the bookie does not have them
    failed: dict[str, list[int]]      # no answer or an error: unknown, never missing


def probes(data: bytes, key: str, ledger_id: int) -> Probes:
    """read-probes/<bookie>/<ledgerId>.json; the counts must add up to `probed`."""
    doc = _object(data, key, "read probes {ledger_id, share_percent, probed, present, absent, failed}")
    if _int(doc, key, "ledger_id", 0) != ledger_id:
        raise PayloadError(key, "ledger_id", f"{ledger_id} (from the key)", doc["ledger_id"])
    share, probed = _int(doc, key, "share_percent", 0, 100), _int(doc, key, "probed", 0)
    ranges = doc.get("present", MISSING)
    if not isinstance(ranges, list):
        raise PayloadError(key, "present", "a list of [first, last] entry-id ranges", ranges)
    present, prev = 0, -1
    for i, r in enumerate(ranges):
        ok = (isinstance(r, list) and len(r) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in r)
              and prev < r[0] <= r[1])
        if not ok:
            raise PayloadError(key, f"present[{i}]", "[first, last] with first <= last, ascending, disjoint", r)
        present += r[1] - r[0] + 1
        prev = r[1]
    absent_doc = doc.get("absent", MISSING)
    if not isinstance(absent_doc, dict) or not set(absent_doc) <= set(ABSENT_STATUSES):
        raise PayloadError(key, "absent", '{"ENOENTRY": [ids], "ENOLEDGER": [ids]} (either may be left out)',
                           absent_doc)
    absent = sorted(e for s in ABSENT_STATUSES for e in _ids(absent_doc.get(s, []), key, f"absent.{s}"))
    failed_doc = doc.get("failed", MISSING)
    if not isinstance(failed_doc, dict):
        raise PayloadError(key, "failed", '{"<status or transport kind>": [ids]}', failed_doc)
    failed = {str(k): _ids(v, key, f"failed.{k}") for k, v in sorted(failed_doc.items())}
    total = present + len(absent) + sum(len(v) for v in failed.values())
    if total != probed:
        raise PayloadError(key, "probed", f"present + absent + failed entries = {total}", probed)
    return Probes(share, probed, present, absent, failed)
