"""`replaudit import --system bookkeeper`: hand-taken dumps into the raw layout the collector writes
(docs/bookkeeper/contracts.md). Ledger metadata passes through the same password redaction as collection; a
znode that cannot be decoded (so cannot be redacted safely) is rejected with the reason and not stored."""
from __future__ import annotations

from pathlib import Path

from audit.contracts import ImportKind, ImportOption
from audit.systems.bookkeeper.formats.raw_evidence import DELETED_SUFFIX, STAT_SUFFIX
from audit.errors import PayloadError

PER_BOOKIE = {"entries-of-ledger": "<ledgerId>.pb", "read-probes": "<ledgerId>.json + bookie.json"}
BOOKIE = ImportOption("bookie", "bookie id, for entries-of-ledger, read-probes and location-index (else a folder laid "
                                "out as <bookieId>/<files>)")


def _store(kind: str, redact=None):
    def store(put, cluster: str, files: list[tuple[Path, str]], options: dict) -> dict:
        bookie = options.get("bookie")
        if kind in PER_BOOKIE and not bookie and any("/" not in rel for _, rel in files):
            raise ValueError(f"import --kind {kind}: give --bookie (the bookie that answered), or a folder "
                             f"laid out as <bookieId>/{PER_BOOKIE[kind]}")
        stored, rejected = [], []
        for path, rel in files:
            data = path.read_bytes()
            if kind == "ledger-metadata" and rel.endswith((STAT_SUFFIX, DELETED_SUFFIX)):
                # beside a znode: its Stat, or the note that it was deleted during collection (no password in
                # either, but each must have its shape)
                problem = _beside_znode_problem(data, str(path), rel)
                if problem:
                    rejected.append({"file": str(path), "reason": problem})   # names the file
                    continue
            elif redact is not None:
                try:
                    data = redact(data, str(path))
                except PayloadError as exc:
                    rejected.append({"file": str(path), "reason": str(exc)})
                    continue
            key = f"{kind}/" + (f"{bookie}/{rel}" if kind in PER_BOOKIE and bookie else rel)
            put(key, data)
            stored.append(key)
        return {"stored": stored, "rejected": rejected}
    return store


def _beside_znode_problem(data: bytes, name: str, rel: str) -> str | None:
    """Why a Stat or deletion note beside a znode cannot be stored (the normalizer's own parsers), or None."""
    from audit.systems.bookkeeper.formats.ledger_metadata import ledger_id_from_znode_path
    from audit.systems.bookkeeper.formats.raw_evidence import deletion_note, znode_ctime

    suffix = STAT_SUFFIX if rel.endswith(STAT_SUFFIX) else DELETED_SUFFIX
    ledger_id = ledger_id_from_znode_path(rel[: -len(suffix)])
    if ledger_id is None:
        return f"{name}: expected ledger-metadata/<ledger znode path>{suffix}, got {rel}"
    try:
        znode_ctime(data, name) if suffix == STAT_SUFFIX else deletion_note(data, name, ledger_id)
    except PayloadError as exc:
        return str(exc)
    return None


def _store_location_index(put, cluster: str, files: list[tuple[Path, str]], options: dict) -> dict:
    """The folder `python -m audit.systems.bookkeeper.collect.location_index --out F` wrote: F itself, F/location-index
    (<bookieId>/<ledgerId>.avail + inventory.json), or one bookie's files with --bookie."""
    bookie = options.get("bookie")
    stored, rejected = [], []
    for path, rel in files:
        parts = rel.split("/")
        if parts[0] == "location-index":
            parts = parts[1:]
        if bookie and len(parts) == 1:
            parts = [bookie, *parts]
        name = parts[-1]
        if len(parts) != 2 or not (name == "inventory.json" or (name.endswith(".avail") and name[:-6].isdigit())):
            rejected.append({"file": str(path), "reason": "expected <bookieId>/<ledgerId>.avail or "
                             "<bookieId>/inventory.json (give --bookie for one bookie's files)"})
            continue
        key = "location-index/" + "/".join(parts)
        put(key, path.read_bytes())
        stored.append(key)
    return {"stored": stored, "rejected": rejected}


def _redact_znode(data: bytes, name: str) -> bytes:
    from audit.systems.bookkeeper.formats.ledger_metadata import redact_password

    return redact_password(data, name)


def _redact_admin_json(data: bytes, name: str) -> bytes:
    from audit.systems.bookkeeper.formats.admin_json import redact_admin_json

    return redact_admin_json(data, name)


KINDS = {
    "ledger-metadata": ImportKind("ledger metadata znodes (zkCli dump; the znode tree is kept)",
                                  _store("ledger-metadata", _redact_znode)),
    "ledger-metadata-http": ImportKind("the admin HTTP /api/v1/ledger/metadata JSON",
                                       _store("ledger-metadata-http", _redact_admin_json)),
    "entries-of-ledger": ImportKind("GetListOfEntriesOfLedger responses", _store("entries-of-ledger"), (BOOKIE,)),
    "read-probes": ImportKind("read probes of a bookie that does not list its entries (the collector's "
                              "read-probes/<bookieId>/ folder)", _store("read-probes"), (BOOKIE,)),
    "bookies": ImportKind("bookie lists (available, readonly, cookies)", _store("bookies")),
    "location-index": ImportKind("a DbLedgerStorage bookie's entry-location index, read on its host by "
                                 "python -m audit.systems.bookkeeper.collect.location_index", _store_location_index,
                                 (BOOKIE,)),
}
