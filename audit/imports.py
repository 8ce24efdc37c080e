"""`replaudit import`: hand-taken dumps into the same raw layout the collectors write.

Ledger metadata passes through the same password redaction as collection; a znode that cannot be
decoded (so cannot be redacted safely) is rejected with the reason and not stored."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from audit.formats.errors import PayloadError


def _walk(paths: Iterable[Path]) -> list[tuple[Path, str]]:
    """(file, relative name) pairs; folders keep their inner paths (a zkCli dump keeps its znode tree)."""
    out = []
    for p in paths:
        if p.is_dir():
            out += [(f, f.relative_to(p).as_posix()) for f in sorted(p.rglob("*")) if f.is_file()]
        elif p.is_file():
            out.append((p, p.name))
        else:
            raise FileNotFoundError(f"{p}: no such file or folder")
    return out


def import_paths(writer, system: str, cluster: str, kind: str, paths: Iterable[Path],
                 bookie: str | None = None) -> dict:
    from audit.formats.bookkeeper.admin_json import redact_admin_json
    from audit.formats.bookkeeper.ledger_metadata import redact_password

    files = _walk(paths)
    if kind == "entries-of-ledger" and not bookie and any("/" not in rel for _, rel in files):
        raise ValueError("import --kind entries-of-ledger: give --bookie (the bookie that answered), or a folder "
                         "laid out as <bookieId>/<ledgerId>.pb")
    stored, rejected = [], []
    for path, rel in files:
        data = path.read_bytes()
        try:
            if kind == "ledger-metadata":
                data = redact_password(data, str(path))
            elif kind == "ledger-metadata-http":
                data = redact_admin_json(data, str(path))
        except PayloadError as exc:
            rejected.append({"file": str(path), "reason": str(exc)})
            continue
        key = f"{system}/{cluster}/{kind}/" + (f"{bookie}/{rel}" if kind == "entries-of-ledger" and bookie else rel)
        writer.put("raw", key, data)
        stored.append(key)
    return {"stored": len(stored), "rejected": rejected, "keys": stored[:20]}
