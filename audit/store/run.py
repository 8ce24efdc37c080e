"""Runs in the object store: each attempt writes under its own prefix, and a run becomes visible only
when its manifest is written -- last. Publishing then deletes the objects of superseded attempts.

    <estate>/runs/<run_id>/manifest.json                        the visible run (written last)
    <estate>/runs/<run_id>/attempts/<attempt_id>/<area>/...     area: raw|tables|findings|metrics|reports

A crash before publish leaves the previous manifest and the objects it lists untouched. One writer per
run id at a time (Airflow retries of a task are sequential); a concurrent attempt would be collected.
"""
from __future__ import annotations

import hashlib
import json
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from audit.store.base import ObjectNotFound, ObjectStore, StoreError, check_key, iter_files

AREAS = ("raw", "tables", "findings", "metrics", "reports")
MANIFEST_FORMAT = "replaudit.run-manifest/1"
# Airflow run ids look like scheduled__2025-01-01T00:00:00+00:00; keep them usable as one key segment.
RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+-]{0,199}$")
ESTATE_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")


class ManifestError(StoreError):
    """A manifest that exists but is not a valid replaudit manifest."""


def _name(kind: str, value: str, pattern: re.Pattern) -> str:
    if not isinstance(value, str) or not pattern.match(value):
        raise ValueError(f"{kind}: expected {pattern.pattern}, got {value!r}")
    return value


def _estate_name(estate: Any) -> str:
    return _name("estate", getattr(estate, "name", estate), ESTATE_RE)


def estate_prefix(estate: Any) -> str:
    """`<estate>/`: where an estate's runs, alert state and metrics history live."""
    return f"{_estate_name(estate)}/"


def run_prefix(estate: Any, run_id: str) -> str:
    return f"{_estate_name(estate)}/runs/{_name('run_id', run_id, RUN_ID_RE)}/"


def manifest_key(estate: Any, run_id: str) -> str:
    return run_prefix(estate, run_id) + "manifest.json"


def new_attempt_id() -> str:
    """Sortable by start time, unique across hosts."""
    return f"{datetime.now(timezone.utc):%Y%m%dT%H%M%S%fZ}-{secrets.token_hex(4)}"


def _sha256_file(path: Path) -> tuple[int, str]:
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()


class AreaSink:
    """`put(relative_key, data)` below one folder of an attempt (e.g. raw/<system>/<cluster>/)."""

    def __init__(self, writer: "RunWriter", area: str, parts: tuple[str, ...]):
        self._writer, self._area, self._parts = writer, area, parts

    def put(self, relative_key: str, data: bytes) -> str:
        return self._writer.put(self._area, "/".join((*self._parts, relative_key)), data)


class RunWriter:
    """Writes one attempt of one run. `estate` is an Estate or its name."""

    def __init__(self, store: ObjectStore, estate: Any, run_id: str, attempt_id: str | None = None):
        self.store = store
        self.estate = _estate_name(estate)
        self.run_id = _name("run_id", run_id, RUN_ID_RE)
        self.attempt_id = _name("attempt_id", attempt_id or new_attempt_id(), RUN_ID_RE)
        self.run_prefix = run_prefix(self.estate, self.run_id)
        self.prefix = f"{self.run_prefix}attempts/{self.attempt_id}/"
        self._written: dict[str, tuple[int, str]] = {}  # key -> (size, sha256), saves re-reading at publish

    def key(self, area: str, *parts: str) -> str:
        if area not in AREAS:
            raise ValueError(f"area: expected one of {', '.join(AREAS)}, got {area!r}")
        rel = "/".join(p.strip("/") for p in parts if p.strip("/"))
        return check_key(self.prefix + area + ("/" + rel if rel else ""), self.store.uri)

    def sink(self, area: str, *parts: str) -> AreaSink:
        self.key(area, *parts)  # validate now, not at the first put
        return AreaSink(self, area, parts)

    def put(self, area: str, relpath: str, data: bytes) -> str:
        key = self.key(area, relpath)
        self.store.put(key, data)
        self._written[key] = (len(data), hashlib.sha256(data).hexdigest())
        return key

    def upload_file(self, area: str, relpath: str, local_path: str | Path) -> str:
        key = self.key(area, relpath)
        self.store.upload_file(local_path, key)
        self._written[key] = _sha256_file(Path(local_path))
        return key

    def upload_dir(self, area: str, local_dir: str | Path, relprefix: str = "") -> list[str]:
        local_dir = Path(local_dir)
        return [self.upload_file(area, "/".join(filter(None, (relprefix.strip("/"),
                                                               p.relative_to(local_dir).as_posix()))), p)
                for p in sorted(iter_files(local_dir))]

    def publish(self, summary: dict) -> dict:
        """Write the manifest (last), then delete superseded attempts of this run. Returns the manifest."""
        if not isinstance(summary, dict):
            raise TypeError(f"summary: expected a dict, got {type(summary).__name__}")
        objects = [self._describe(key) for key in self.store.list(self.prefix)]
        missing = sorted(set(self._written) - {o["key"] for o in objects})
        if missing:
            raise StoreError(self.store.uri, missing[0],
                             f"written by this attempt but not listed ({len(missing)} keys)")
        manifest = {
            "format": MANIFEST_FORMAT,
            "estate": self.estate,
            "run_id": self.run_id,
            "attempt_id": self.attempt_id,
            "created": datetime.now(timezone.utc).isoformat(timespec="microseconds"),
            "prefix": self.prefix,
            "objects": objects,
            "summary": summary,
        }
        try:
            body = json.dumps(manifest, indent=2, sort_keys=True).encode()
        except (TypeError, ValueError) as exc:
            raise TypeError(f"summary: expected JSON-serializable values: {exc}") from exc
        self.store.put(self.run_prefix + "manifest.json", body)
        self.store.delete(k for k in self.store.list(self.run_prefix + "attempts/") if not k.startswith(self.prefix))
        return manifest

    def _describe(self, key: str) -> dict:
        if key not in self._written:  # written outside this writer, e.g. Spark straight into a local store
            local = self.store.local_path(key)
            if local is not None:
                self._written[key] = _sha256_file(local)
            else:
                data = self.store.get(key)
                self._written[key] = (len(data), hashlib.sha256(data).hexdigest())
        size, sha = self._written[key]
        return {"key": key, "size": size, "sha256": sha}


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    attempt_id: str
    created: datetime
    manifest: dict

    def objects(self, area: str | None = None) -> list[dict]:
        """Manifest entries ({key, size, sha256}), optionally only those of one area."""
        start = self.manifest["prefix"] + (f"{area}/" if area else "")
        return [o for o in self.manifest["objects"] if o["key"].startswith(start)]


def read_manifest(store: ObjectStore, estate: Any, run_id: str) -> dict | None:
    """The published manifest of a run, or None if the run was never published."""
    key = manifest_key(estate, run_id)
    try:
        data = store.get(key)
    except ObjectNotFound:
        return None
    try:
        manifest = json.loads(data)
    except ValueError as exc:
        raise ManifestError(store.uri, key, f"expected JSON, got {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        got = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        raise ManifestError(store.uri, key, f"expected format {MANIFEST_FORMAT!r}, got {got!r}")
    return manifest


def _info(manifest: dict) -> RunInfo:
    return RunInfo(manifest["run_id"], manifest["attempt_id"], datetime.fromisoformat(manifest["created"]), manifest)


def list_runs(store: ObjectStore, estate: Any) -> list[RunInfo]:
    """Published runs only, oldest first (by manifest creation time, then run id)."""
    runs = []
    for run_id in store.list_prefixes(f"{_estate_name(estate)}/runs"):
        if not RUN_ID_RE.match(run_id):
            continue  # not something RunWriter made
        manifest = read_manifest(store, estate, run_id)
        if manifest is not None:
            runs.append(_info(manifest))
    return sorted(runs, key=lambda r: (r.created, r.run_id))


def latest_run(store: ObjectStore, estate: Any, before: datetime | str | None = None) -> RunInfo | None:
    """The newest published run. `before` a datetime: published before it. `before` a run id: any
    other run, published before that run if it is published itself (for drift against history)."""
    runs = list_runs(store, estate)
    if isinstance(before, datetime):
        cutoff = before if before.tzinfo else before.replace(tzinfo=timezone.utc)
        runs = [r for r in runs if r.created < cutoff]
    elif isinstance(before, str):
        this = next((r for r in runs if r.run_id == before), None)
        runs = [r for r in runs if r.run_id != before and (this is None or r.created < this.created)]
    return runs[-1] if runs else None
