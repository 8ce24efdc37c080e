"""ObjectStore: the few operations replaudit needs from S3 or a local folder, with one key layout.

Keys are '/'-separated relative names (no leading '/', no empty, '.' or '..' segments). `list(prefix)`
is a plain string-prefix match, like S3. Folder-style helpers (upload_dir, download_prefix) treat their
prefix as a folder: "a/b" and "a/b/" both mean everything below "a/b/".

This module holds the interface and the helpers the implementations share; it imports none of them (opening
a store by URI is factory.py's job).
"""
from __future__ import annotations

import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Iterable, Iterator


class StoreError(Exception):
    """A store operation that failed; names the store URI and the key."""

    def __init__(self, uri: str, key: str, message: str):
        self.uri, self.key, self.message = uri, key, message
        super().__init__(f"{uri}: {key}: {message}")


class ObjectNotFound(StoreError, KeyError):
    def __str__(self) -> str:  # KeyError would repr() the message
        return f"{self.uri}: {self.key}: {self.message}"


class InvalidKey(StoreError, ValueError):
    pass


def check_key(key: str, uri: str = "") -> str:
    if not isinstance(key, str) or not key or key.startswith("/") or "\\" in key:
        raise InvalidKey(uri, str(key), "a relative '/'-separated key is required")
    if any(part in ("", ".", "..") for part in key.split("/")):
        raise InvalidKey(uri, key, "key segments must not be empty, '.' or '..'")
    return key


def check_prefix(prefix: str, uri: str = "") -> str:
    if not isinstance(prefix, str) or prefix.startswith("/") or "\\" in prefix:
        raise InvalidKey(uri, str(prefix), "a relative '/'-separated prefix is required")
    if any(part in (".", "..") for part in prefix.split("/")):
        raise InvalidKey(uri, prefix, "prefix segments must not be '.' or '..'")
    return prefix


def folder(prefix: str) -> str:
    """'a/b' or 'a/b/' -> 'a/b/'; '' -> ''."""
    prefix = prefix.strip("/")
    return prefix + "/" if prefix else ""


class ObjectStore(ABC):
    uri: str

    @abstractmethod
    def put(self, key: str, data: bytes) -> None:
        """Write the whole object; readers see the old or the new bytes, never a mix."""

    @abstractmethod
    def get(self, key: str) -> bytes:
        """Raises ObjectNotFound."""

    @abstractmethod
    def list(self, prefix: str = "") -> Iterator[str]:
        """Every key starting with `prefix`, in lexicographic order."""

    @abstractmethod
    def list_prefixes(self, prefix: str) -> Iterator[str]:
        """Names of the immediate sub-folders of folder `prefix` (S3 common prefixes), sorted."""

    @abstractmethod
    def exists(self, key: str) -> bool: ...

    @abstractmethod
    def delete(self, keys: Iterable[str]) -> int:
        """Delete the keys (missing ones are fine); returns how many were requested."""

    @abstractmethod
    def upload_file(self, local_path: str | Path, key: str) -> None: ...

    @abstractmethod
    def download_file(self, key: str, local_path: str | Path) -> None: ...

    def local_path(self, key: str) -> Path | None:
        """A real filesystem path for `key` if this store is a local folder (Spark can write there)."""
        return None

    def upload_dir(self, local_dir: str | Path, prefix: str) -> list[str]:
        """Upload every file below local_dir to `prefix/<relative path>`; returns the keys, sorted."""
        local_dir = Path(local_dir)
        keys = []
        for path in sorted(iter_files(local_dir)):
            key = folder(prefix) + path.relative_to(local_dir).as_posix()
            self.upload_file(path, key)
            keys.append(key)
        return keys

    def download_prefix(self, prefix: str, local_dir: str | Path) -> list[Path]:
        """Download every object below folder `prefix` to `local_dir/<key relative to prefix>`."""
        local_dir = Path(local_dir)
        base = folder(prefix)
        paths = []
        for key in self.list(base):
            target = local_dir / key[len(base):]
            target.parent.mkdir(parents=True, exist_ok=True)
            self.download_file(key, target)
            paths.append(target)
        return paths


def iter_files(root: Path) -> Iterator[Path]:
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            yield Path(dirpath) / name
