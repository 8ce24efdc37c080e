"""LocalStaging: local folders for Spark (which reads and writes local paths only here)."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Iterable

from audit.store.base import iter_files
from audit.store.run import RunWriter

SPARK_SUCCESS = "_SUCCESS"   # written last by Spark into every table folder it writes


class LocalStaging:
    """Local folders Spark can read and write (Spark uses local paths only; s3a:// is for real clusters).

    LocalStore: the attempt folder itself, so nothing is copied. Other stores: a staging folder
    `<staging_root>/<estate>/<run_id>/<attempt_id>` (default root: <project home>/.work/staging) that
    `commit()` uploads; `fetch()` downloads what the attempt already holds (e.g. raw evidence). `label` gives
    tasks of one attempt that run at the same time (one per system) folders of their own.
    As a context manager it commits on success and always removes the staging folder.
    """

    def __init__(self, writer: RunWriter, staging_root: str | Path | None = None, label: str | None = None):
        self.writer = writer
        direct = writer.store.local_path(writer.prefix.rstrip("/"))
        self.direct = direct is not None
        if direct is not None:
            self.root = direct
        else:
            if staging_root is None:
                from audit.config.home import project_home

                staging_root = project_home() / ".work" / "staging"
            self._staging_root = Path(staging_root)
            self.root = self._staging_root / writer.estate / writer.run_id / (
                writer.attempt_id + (f"-{label}" if label else ""))
        self._fetched: dict[Path, tuple[int, int]] = {}  # path -> (size, mtime_ns) as downloaded

    def _local(self, area: str, parts: Iterable[str]) -> Path:
        key = self.writer.key(area, *parts)
        return self.root / key[len(self.writer.prefix):]

    def dir(self, area: str, *parts: str) -> Path:
        """A folder to write into (created)."""
        path = self._local(area, parts)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def fetch(self, area: str, *parts: str) -> Path:
        """The attempt's objects under area/parts, as a local folder."""
        path = self._local(area, parts)
        if not self.direct:
            for file in self.writer.store.download_prefix(self.writer.key(area, *parts), path):
                st = file.stat()
                self._fetched[file] = (st.st_size, st.st_mtime_ns)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def fetch_file(self, area: str, *parts: str) -> Path | None:
        """One object of the attempt as a local file, or None if the attempt does not hold it."""
        path = self._local(area, parts)
        if not self.direct:
            key = self.writer.key(area, *parts)
            if not self.writer.store.exists(key):
                return None
            path.parent.mkdir(parents=True, exist_ok=True)
            self.writer.store.download_file(key, path)
            st = path.stat()
            self._fetched[path] = (st.st_size, st.st_mtime_ns)
        return path if path.is_file() else None

    def commit(self) -> list[str]:
        """Upload new or changed staged files (nothing to do for a local store). Returns their keys.

        A table folder this task (re)wrote -- one whose Spark `_SUCCESS` marker is new or changed -- replaces the
        store's copy whole: its objects that the new folder does not hold (the part files of an earlier run of the
        same task, whose names differ) are deleted, so a rerun never leaves rows twice."""
        if self.direct or not self.root.is_dir():
            return []
        keys, rewritten = [], []
        files = sorted(iter_files(self.root))
        for file in files:
            st = file.stat()
            if self._fetched.get(file) == (st.st_size, st.st_mtime_ns):
                continue
            area, _, rel = file.relative_to(self.root).as_posix().partition("/")
            keys.append(self.writer.upload_file(area, rel, file))
            if file.name == SPARK_SUCCESS:
                rewritten.append(file.parent)
        for folder in rewritten:
            prefix = self.writer.prefix + folder.relative_to(self.root).as_posix() + "/"
            held = {self.writer.prefix + f.relative_to(self.root).as_posix() for f in files
                    if f.is_relative_to(folder)}
            self.writer.store.delete([k for k in self.writer.store.list(prefix) if k not in held])
        return keys

    def cleanup(self) -> None:
        if self.direct:
            return
        if self.root.exists():
            shutil.rmtree(self.root)
        for parent in (self.root.parent, self.root.parent.parent):  # <run_id>, <estate> if now empty
            try:
                parent.rmdir()
            except OSError:
                break

    def __enter__(self) -> "LocalStaging":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self.commit()
        finally:
            self.cleanup()
