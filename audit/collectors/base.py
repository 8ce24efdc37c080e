"""What every collector implements (docs/architecture.md, "Collector interface").

A collector copies a system's native state into a RawSink, byte for byte where possible, and returns a
CollectionReport: how much it covered and every source it could not read (a CoverageGap). Remote failures
become gaps, never silently missing data; only a broken configuration raises.
"""
from __future__ import annotations

import json
import os
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, runtime_checkable

from audit.errors import PayloadError


@runtime_checkable
class RawSink(Protocol):
    """Stores raw payloads under `raw/<system>/<cluster>/<relative_key>`."""

    def put(self, relative_key: str, data: bytes) -> None: ...


class ScopedSink:
    """A RawSink keeping only the evidence an incident check asked for: `subject_of(key)` names the subject a key
    belongs to (None: evidence of the whole cluster, always kept); keys of subjects no pattern wants are not
    stored, and counted in `dropped`."""

    def __init__(self, sink: RawSink, subject_of: Callable[[str], "str | tuple[str, ...] | None"], scope: Any):
        self.sink, self.subject_of, self.scope, self.dropped = sink, subject_of, scope, 0

    def put(self, relative_key: str, data: bytes) -> None:
        subject = self.subject_of(relative_key)
        names = (subject,) if isinstance(subject, str) else subject
        if names is None or self.scope.wants_any(*names):
            self.sink.put(relative_key, data)
        else:
            self.dropped += 1

    def __getattr__(self, name: str):      # exists(), keys() ... of the wrapped sink
        return getattr(self.sink, name)


@dataclass(frozen=True)
class CoverageGap:
    """Something the collector should have read and could not: `source` (an address, znode path or key),
    `what` (the kind of data, e.g. "ledger metadata"), `error` (why)."""

    source: str
    what: str
    error: str


@dataclass
class CollectionReport:
    system: str
    cluster: str
    counts: dict[str, int] = field(default_factory=dict)
    gaps: list[CoverageGap] = field(default_factory=list)

    def count(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n

    def gap(self, source: str, what: str, error: str) -> None:
        self.gaps.append(CoverageGap(source, what, error))

    def merge(self, other: "CollectionReport") -> None:
        for name, n in other.counts.items():
            self.count(name, n)
        self.gaps.extend(other.gaps)

    def to_dict(self) -> dict[str, Any]:
        return {"system": self.system, "cluster": self.cluster, "counts": dict(sorted(self.counts.items())),
                "gaps": [asdict(g) for g in self.gaps]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CollectionReport":
        return cls(d["system"], d["cluster"], dict(d.get("counts", {})),
                   [CoverageGap(g["source"], g["what"], g["error"]) for g in d.get("gaps", [])])


class SinkError(Exception):
    """A raw key was refused: `key` is the key, `reason` why."""

    def __init__(self, key: str, reason: str):
        self.key = key
        self.reason = reason
        super().__init__(f"raw key {key!r}: {reason}")


def check_relative_key(key: str) -> str:
    """A key is a '/'-separated relative path whose parts are neither empty, '.' nor '..'."""
    if not isinstance(key, str) or not key:
        raise SinkError(str(key), "expected a non-empty string")
    if key.startswith("/") or "\\" in key or "\x00" in key:
        raise SinkError(key, "expected a relative '/'-separated path without backslashes or NUL")
    if any(part in ("", ".", "..") for part in key.split("/")):
        raise SinkError(key, "path parts must not be empty, '.' or '..'")
    return key


class DirSink:
    """RawSink writing `root/<key>`. Writes are atomic (temp file + hard link), and a key is written at most
    once: putting the same bytes again is a no-op, different bytes raise SinkError (a collector must not
    silently replace evidence)."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)
        self._root = os.fspath(root)
        self._made_dirs: set[str] = set()  # skip a mkdir syscall per put: collectors write thousands of keys

    def path_for(self, key: str) -> Path:
        return self.root.joinpath(*check_relative_key(key).split("/"))

    def exists(self, relative_key: str) -> bool:
        """True when `relative_key` is stored: collectors resume by skipping what an earlier attempt wrote."""
        return os.path.isfile(os.path.join(self._root, check_relative_key(relative_key)))

    def put(self, relative_key: str, data: bytes) -> None:
        # Plain strings and os calls, not pathlib: this runs once per znode / ledger answer.
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise SinkError(relative_key, f"expected bytes, got {type(data).__name__}")
        dest = os.path.join(self._root, check_relative_key(relative_key))
        parent, name = os.path.split(dest)
        if parent not in self._made_dirs:
            os.makedirs(parent, exist_ok=True)
            self._made_dirs.add(parent)
        # Unique per process and thread; O_EXCL guards against a stale leftover of the same name.
        tmp = f"{parent}/.{name}.{os.getpid()}.{threading.get_ident()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
            try:
                os.link(tmp, dest)  # fails if dest exists: no check-then-write race
            except FileExistsError:
                with open(dest, "rb") as f:
                    if f.read() != bytes(data):
                        raise SinkError(relative_key, "already stored with different bytes") from None
        finally:
            os.unlink(tmp)


class ImportJob:
    """One `replaudit import` of hand-taken files into raw/<system>/<cluster>/ (an ImportKind's `store`): the keys
    it stored and each file it refused with the reason. Evidence already stored in the run is never replaced
    (`put.exists(key)`, audit/cli/import_dumps.py), and a file its kind's check refuses is named, not stored."""

    def __init__(self, put: Any, system: str, cluster: str):
        self.put, self.where = put, f"raw/{system}/{cluster}"
        self.exists = getattr(put, "exists", None)
        self.stored: list[str] = []
        self.rejected: list[dict] = []

    def taken(self, key: str) -> bool:
        return key in self.stored or (self.exists is not None and self.exists(key))

    def reject(self, path: Any, reason: str) -> None:
        self.rejected.append({"file": str(path), "reason": reason})

    def store(self, path: Path, key: str, check: Any) -> None:
        """`check(data, source)` raises PayloadError for a file that is not what its kind expects."""
        if self.taken(key):
            self.reject(path, f"{path}: {self.where}/{key} is already stored in this run; evidence is never "
                              "replaced (import into a new run)")
            return
        data = path.read_bytes()
        try:
            check(data, str(path))
        except PayloadError as exc:
            self.reject(path, str(exc))
            return
        except (ValueError, TypeError, KeyError) as exc:  # a shape no decoder anticipated: still a named refusal
            self.reject(path, f"{path}: {type(exc).__name__}: {exc}")
            return
        self.put(key, data)
        self.stored.append(key)

    def result(self) -> dict:
        return {"stored": self.stored, "rejected": self.rejected}
