"""LocalStore: a folder with the same key layout as the S3 store (the embedded default)."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterable, Iterator

from audit.store.base import ObjectNotFound, ObjectStore, StoreError, check_key, check_prefix, folder

# Half-written files carry this prefix next to their target, so os.replace stays on one filesystem;
# list() never shows them and keys may not use it.
TMP_PREFIX = ".replaudit-tmp-"


class LocalStore(ObjectStore):
    def __init__(self, root: str | Path):
        self.root = Path(root).absolute()
        self.uri = "file://" + str(self.root)

    def _path(self, key: str) -> Path:
        check_key(key, self.uri)
        if any(part.startswith(TMP_PREFIX) for part in key.split("/")):
            raise StoreError(self.uri, key, f"key segments must not start with {TMP_PREFIX!r}")
        return self.root / key

    def local_path(self, key: str) -> Path:
        return self._path(key)

    def put(self, key: str, data: bytes) -> None:
        target = self._path(key)
        self._write_atomically(target, lambda f: f.write(data))

    def upload_file(self, local_path: str | Path, key: str) -> None:
        target = self._path(key)
        if Path(local_path).resolve() == target.resolve():
            return  # already in place (Spark wrote straight into the store folder)
        with open(local_path, "rb") as src:
            self._write_atomically(target, lambda f: shutil.copyfileobj(src, f, 1 << 20))

    def _write_atomically(self, target: Path, write) -> None:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, dir=target.parent)
        except OSError as exc:
            raise StoreError(self.uri, str(target.relative_to(self.root)), f"cannot write: {exc}") from exc
        try:
            with os.fdopen(fd, "wb") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
            raise ObjectNotFound(self.uri, key, "no such object") from exc

    def download_file(self, key: str, local_path: str | Path) -> None:
        source = self._path(key)
        if not source.is_file():
            raise ObjectNotFound(self.uri, key, "no such object")
        Path(local_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, local_path)

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def list(self, prefix: str = "") -> Iterator[str]:
        check_prefix(prefix, self.uri)
        # Walk only the deepest folder the prefix names, then filter by the string prefix.
        start = self.root / prefix.rsplit("/", 1)[0] if "/" in prefix else self.root
        if not start.is_dir():
            return iter(())
        keys = []
        for dirpath, _, filenames in os.walk(start):
            rel_dir = Path(dirpath).relative_to(self.root).as_posix()
            for name in filenames:
                if name.startswith(TMP_PREFIX):
                    continue
                key = name if rel_dir == "." else f"{rel_dir}/{name}"
                if key.startswith(prefix):
                    keys.append(key)
        return iter(sorted(keys))

    def list_prefixes(self, prefix: str) -> Iterator[str]:
        check_prefix(prefix, self.uri)
        base = self.root / folder(prefix) if folder(prefix) else self.root
        if not base.is_dir():
            return iter(())
        names = [p.name for p in base.iterdir() if p.is_dir() and _has_files(p)]
        return iter(sorted(names))

    def delete(self, keys: Iterable[str]) -> int:
        count = 0
        for key in keys:
            path = self._path(key)
            path.unlink(missing_ok=True)
            count += 1
            self._prune(path.parent)
        return count

    def _prune(self, directory: Path) -> None:
        """Remove folders left empty, up to the store root, so deleted attempts leave nothing behind."""
        while directory != self.root and self.root in directory.parents:
            try:
                directory.rmdir()
            except OSError:
                return
            directory = directory.parent


def _has_files(directory: Path) -> bool:
    for _, _, filenames in os.walk(directory):
        if any(not name.startswith(TMP_PREFIX) for name in filenames):
            return True
    return False
