"""`replaudit import`: hand-taken dumps into the same raw layout the collectors write.

Ledger metadata passes through the same password redaction as collection; a znode that cannot be
decoded (so cannot be redacted safely) is rejected with the reason and not stored."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable
from urllib.parse import quote

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


BOOKKEEPER_KINDS = ("ledger-metadata", "ledger-metadata-http", "entries-of-ledger", "bookies")
# Pulsar hand-taken dumps: kind -> file name inside the topic folder (docs/pulsar-contracts.md, raw layout).
PULSAR_KINDS = {"stats-internal": "stats-internal.json", "stats": "stats.json",
                "replicated-status": "replicated-status.json", "dump": None}


def pulsar_topic_folder(topic: str) -> str:
    """`persistent://t/ns/x` -> `topics/t/ns/x`: the folder the collector itself keeps the topic's evidence in."""
    from audit.collectors.pulsar.discovery import parse_topic

    try:
        if not isinstance(topic, str) or any(c.isspace() for c in topic):
            raise ValueError(topic)
        return parse_topic(topic).folder
    except ValueError:
        raise ValueError(f"--topic {topic!r}: expected persistent://tenant/namespace/topic") from None


def import_pulsar(writer, cluster: str, kind: str, paths: Iterable[Path], topic: str | None,
                  subscription: str | None = None) -> dict:
    """`pulsar-admin topics stats-internal|stats|get-replicated-subscription-status` outputs, or dump chunks
    (a folder laid out as <ledgerId>/<first>-<last>.jsonl), into raw/pulsar/<cluster>/topics/..."""
    if kind not in PULSAR_KINDS:
        raise ValueError(f"--kind {kind!r}: expected one of {', '.join(PULSAR_KINDS)} for --system pulsar")
    folder = pulsar_topic_folder(topic)
    if kind == "replicated-status":
        if not subscription:
            raise ValueError("import --kind replicated-status: give --subscription")
        folder += "/subscriptions/" + quote(subscription, safe="")
    files = _walk(paths)
    if kind != "dump" and len(files) != 1:
        raise ValueError(f"import --kind {kind}: expected exactly one file, got {len(files)}")
    stored = []
    for path, rel in files:
        key = f"pulsar/{cluster}/{folder}/" + (f"dump/{rel}" if kind == "dump" else PULSAR_KINDS[kind])
        writer.put("raw", key, path.read_bytes())
        stored.append(key)
    return {"stored": len(stored), "rejected": [], "keys": stored[:20]}


def import_paths(writer, system: str, cluster: str, kind: str, paths: Iterable[Path],
                 bookie: str | None = None, topic: str | None = None, subscription: str | None = None) -> dict:
    if system == "pulsar":
        return import_pulsar(writer, cluster, kind, paths, topic, subscription)
    if kind not in BOOKKEEPER_KINDS:
        raise ValueError(f"--kind {kind!r}: expected one of {', '.join(BOOKKEEPER_KINDS)} for --system bookkeeper")
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
