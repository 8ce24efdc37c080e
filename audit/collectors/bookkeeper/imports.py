"""`replaudit import --system bookkeeper`: hand-taken dumps into the raw layout the collector writes
(docs/bookkeeper/contracts.md). Ledger metadata passes through the same password redaction as collection; a
znode that cannot be decoded (so cannot be redacted safely) is rejected with the reason and not stored."""
from __future__ import annotations

from pathlib import Path

from audit.contracts import ImportKind, ImportOption
from audit.formats.errors import PayloadError

BOOKIE = ImportOption("bookie", "bookie id, for entries-of-ledger (else a folder laid out as <bookieId>/<ledgerId>.pb)")


def _store(kind: str, redact=None):
    def store(put, cluster: str, files: list[tuple[Path, str]], options: dict) -> dict:
        bookie = options.get("bookie")
        if kind == "entries-of-ledger" and not bookie and any("/" not in rel for _, rel in files):
            raise ValueError("import --kind entries-of-ledger: give --bookie (the bookie that answered), or a folder "
                             "laid out as <bookieId>/<ledgerId>.pb")
        stored, rejected = [], []
        for path, rel in files:
            data = path.read_bytes()
            if redact is not None:
                try:
                    data = redact(data, str(path))
                except PayloadError as exc:
                    rejected.append({"file": str(path), "reason": str(exc)})
                    continue
            key = f"{kind}/" + (f"{bookie}/{rel}" if kind == "entries-of-ledger" and bookie else rel)
            put(key, data)
            stored.append(key)
        return {"stored": stored, "rejected": rejected}
    return store


def _redact_znode(data: bytes, name: str) -> bytes:
    from audit.formats.bookkeeper.ledger_metadata import redact_password

    return redact_password(data, name)


def _redact_admin_json(data: bytes, name: str) -> bytes:
    from audit.formats.bookkeeper.admin_json import redact_admin_json

    return redact_admin_json(data, name)


KINDS = {
    "ledger-metadata": ImportKind("ledger metadata znodes (zkCli dump; the znode tree is kept)",
                                  _store("ledger-metadata", _redact_znode)),
    "ledger-metadata-http": ImportKind("the admin HTTP /api/v1/ledger/metadata JSON",
                                       _store("ledger-metadata-http", _redact_admin_json)),
    "entries-of-ledger": ImportKind("GetListOfEntriesOfLedger responses", _store("entries-of-ledger"), (BOOKIE,)),
    "bookies": ImportKind("bookie lists (available, readonly, cookies)", _store("bookies")),
}
