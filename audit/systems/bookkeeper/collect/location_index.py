"""Exact entry evidence of a DbLedgerStorage bookie from its own entry-location index, read on the bookie host.

DbLedgerStorage (Pulsar's default bookie storage) throws UnsupportedOperationException for
GetListOfEntriesOfLedger, so the question "which entries does this bookie hold" is answered from the index it
reads entries through: the RocksDB database <ledgerDir>/current/locations of each ledger directory, one key
per stored entry (docs/formats/bookkeeper.md, "DbLedgerStorage entry-location index"). Only keys are read.

Writes, under the collector's raw layout (docs/bookkeeper/contracts.md):
  location-index/<bookie>/<ledgerId>.avail   AvailabilityOfEntriesOfLedger bytes, exactly
                                             availability.encode_entries(the ledger's entry ids)
  location-index/<bookie>/inventory.json     what was read, and whether it is complete

Two ways to open an index, neither writing into the bookie's directory:
  read-only (default)   a private view (symlinks to the database's files) opened read-only with every table
                        file opened up front, so a bookie compacting meanwhile cannot pull files from under the
                        scan. RocksDB's read-only open takes no LOCK: it works beside a running bookie too.
  secondary             RocksDB's secondary instance of the live database (`secondary_dir` holds its own
                        info log and state), caught up with the primary before the scan. The Python binding
                        drops a rocksdict-config.json beside the database on open; it is removed again.

On the host:  python -m audit.systems.bookkeeper.collect.location_index --bookie ID --ledger-dir D [--ledger-dir D2]
                  [--secondary-dir S] [--ledger-id L ...] --out FOLDER
then:         replaudit import --system bookkeeper --kind location-index FOLDER/location-index ...
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import sys
import tempfile
from itertools import islice
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np

from audit.collectors.base import CollectionReport, DirSink, RawSink
from audit.systems.bookkeeper.formats.availability import HEADER_SIZE, VERSION
from audit.timeutil import now_ms

SYSTEM = "bookkeeper"
WHAT = "DbLedgerStorage entry-location index (RocksDB 'locations')"
KEY_SIZE = 16                     # LongPairWrapper: ledgerId, entryId as big-endian int64 (ArrayUtil)
CHUNK = 1 << 16                   # keys decoded per numpy step
_FIRST_CHUNK = 256                # asked ledgers: start small, most ledgers are short
_INT32_MAX = 2**31 - 1
_GROUP = np.dtype([("first", ">i8"), ("last", ">i8"), ("size", ">i4"), ("period", ">i4")])
_NOT_DB_FILES = ("LOCK", "LOG", "rocksdict-config.json")   # kept out of the read-only view
_ROCKSDICT_CONFIG = "rocksdict-config.json"   # the binding leaves it beside a database it opens
_OPEN_TRIES = 3                   # a view races a bookie's flush/compaction only in the instant of opening


class IndexUnreadable(Exception):
    """The index at `path` is not what a bookie writes, or could not be read: becomes a CoverageGap."""

    def __init__(self, path: str, error: str):
        self.path, self.error = path, error
        super().__init__(f"{path}: {error}")


def locations_db(ledger_dir: str) -> Path:
    """The `locations` database of a configured ledger (or index) directory: <dir>/current/locations
    (LedgerDirsManager appends "current"; EntryLocationIndex names the database). A directory given as its
    .../current is accepted too. Raises IndexUnreadable naming what was expected."""
    base = Path(ledger_dir)
    candidates = [base / "current" / "locations"] + ([base / "locations"] if base.name == "current" else [])
    for db in candidates:
        if (db / "CURRENT").is_file():
            return db
    for db in candidates:
        if db.is_dir():
            raise IndexUnreadable(str(db), "expected a RocksDB database (its CURRENT file); found a directory "
                                  "without one")
    raise IndexUnreadable(str(candidates[0]), "expected the DbLedgerStorage 'locations' RocksDB directory; not found")


def read_location_index(bookie: str, ledger_dirs: Sequence[str], sink: RawSink, *,
                        ledger_ids: Iterable[int] | None = None, secondary_dir: str | None = None,
                        cluster: str = "") -> CollectionReport:
    """Store location-index/<bookie>/<ledgerId>.avail for every ledger the indexes of `ledger_dirs` hold (or
    only for `ledger_ids`), then location-index/<bookie>/inventory.json. A directory that cannot be read is a
    gap naming its path; the others are still read. A ledger found in two directories keeps the first one's
    entries and is a gap (DbLedgerStorage reads a ledger from one directory only: signSafeMod(ledgerId, #dirs))."""
    report = CollectionReport(SYSTEM, cluster)
    asked = None if ledger_ids is None else sorted({int(x) for x in ledger_ids})
    read_at_ms = now_ms()
    stored: set[int] = set()
    databases, entries = [], 0
    for i, ledger_dir in enumerate(ledger_dirs):
        try:
            db_path = locations_db(ledger_dir)
            with _Opened(db_path, secondary_dir, i) as db:
                keys = _all_keys(db, db_path) if asked is None else _asked_keys(db, db_path, asked)
                for ledger_id, starts, sizes in _ledger_runs(keys, report):
                    if ledger_id in stored:
                        report.gap(str(db_path), WHAT, f"ledger {ledger_id} is also in an earlier directory's index; "
                                   "the bookie reads one directory per ledger, kept the first")
                        continue
                    try:
                        data = _encode(ledger_id, starts, sizes)
                    except ValueError as exc:
                        report.gap(str(db_path), WHAT, str(exc))
                        continue
                    sink.put(f"location-index/{bookie}/{ledger_id}.avail", data)
                    stored.add(ledger_id)
                    entries += int(sizes.sum())
                    report.count("location_index_ledgers")
            databases.append(str(db_path))
        except IndexUnreadable as exc:
            report.gap(exc.path, WHAT, exc.error)
    report.count("location_index_entries", entries)
    inventory = {"bookie": bookie, "evidence": "location_index", "ledger_dirs": [str(d) for d in ledger_dirs],
                 "databases": databases, "opened_as": "secondary" if secondary_dir else "read_only",
                 "read_at_ms": read_at_ms, "ledgers": len(stored), "entries": entries,
                 "complete": not report.gaps, "ledger_ids": asked}
    sink.put(f"location-index/{bookie}/inventory.json", json.dumps(inventory, indent=2).encode())
    return report


class _Opened:
    """The index opened read-only through a private view, or as a secondary instance; closed and cleaned up
    on exit. Open failures become IndexUnreadable naming the database."""

    def __init__(self, db_path: Path, secondary_dir: str | None, index: int):
        self.db_path, self.secondary_dir, self.index = db_path, secondary_dir, index
        self.db, self.view = None, None

    def __enter__(self):
        import rocksdict

        opts = rocksdict.Options(raw_mode=True)
        opts.set_max_open_files(-1)       # every table file opened (and so kept) at open time
        last = None
        for _ in range(_OPEN_TRIES):
            try:
                if self.secondary_dir:
                    self.db = self._open_secondary(rocksdict, opts)
                else:
                    self.view = _make_view(self.db_path)
                    self.db = rocksdict.Rdict(str(self.view), opts, access_type=rocksdict.AccessType.read_only())
                return self.db
            except Exception as exc:      # rocksdict raises plain Exception with RocksDB's status text
                last = exc
                self._cleanup()
                if "No such file" not in str(exc):
                    break
        raise IndexUnreadable(str(self.db_path), f"expected a RocksDB database a bookie can open; {last}")

    def _open_secondary(self, rocksdict, opts):
        own = Path(self.secondary_dir) / f"{self.index}-{self.db_path.parent.parent.name or 'locations'}"
        own.mkdir(parents=True, exist_ok=True)
        config = self.db_path / _ROCKSDICT_CONFIG
        had_config = config.exists()
        try:
            db = rocksdict.Rdict(str(self.db_path), opts, access_type=rocksdict.AccessType.secondary(str(own)))
        finally:
            if not had_config:
                config.unlink(missing_ok=True)
        db.try_catch_up_with_primary()
        return db

    def _cleanup(self) -> None:
        if self.db is not None:
            try:
                self.db.close()
            finally:
                self.db = None
        if self.view is not None:
            shutil.rmtree(self.view, ignore_errors=True)
            self.view = None

    def __exit__(self, *exc) -> None:
        self._cleanup()


def _make_view(db_path: Path) -> Path:
    view = Path(tempfile.mkdtemp(prefix="replaudit-locations-"))
    db_path = db_path.resolve()
    for name in os.listdir(db_path):
        if name not in _NOT_DB_FILES and not name.startswith("LOG.old"):
            os.symlink(db_path / name, view / name)
    return view


def _read_options():
    import rocksdict

    ro = rocksdict.ReadOptions()
    ro.fill_cache(False)                  # one pass over everything: caching blocks only costs
    ro.set_readahead_size(4 << 20)
    return ro


def _chunks(db, db_path: Path, from_key: bytes | None, first: int) -> Iterator[np.ndarray]:
    """Keys from `from_key` on, as (n, 2) int64 arrays [ledgerId, entryId], in growing chunks up to CHUNK."""
    keys = db.keys(from_key=from_key, read_opt=_read_options()) if from_key else db.keys(read_opt=_read_options())
    size = first
    try:
        while chunk := list(islice(keys, size)):
            raw = b"".join(chunk)
            if len(raw) != KEY_SIZE * len(chunk):
                bad = next(k for k in chunk if len(k) != KEY_SIZE)
                raise IndexUnreadable(str(db_path), f"expected {KEY_SIZE}-byte keys (ledgerId, entryId as big-endian "
                                  f"int64); found a {len(bad)}-byte key {bad[:32].hex()}")
            yield np.frombuffer(raw, dtype=">i8").astype(np.int64).reshape(-1, 2)
            size = min(size * 4, CHUNK)
    except IndexUnreadable:
        raise
    except Exception as exc:              # RocksDB I/O or corruption while iterating
        raise IndexUnreadable(str(db_path), f"reading keys failed: {exc}") from None


def _all_keys(db, db_path: Path) -> Iterator[np.ndarray]:
    return _chunks(db, db_path, None, CHUNK)


def _asked_keys(db, db_path: Path, asked: list[int]) -> Iterator[np.ndarray]:
    """Each asked ledger's keys: seek to (ledgerId, 0), stop at the first key of another ledger."""
    for ledger_id in asked:
        if ledger_id < 0:
            continue
        for keys in _chunks(db, db_path, struct.pack(">qq", ledger_id, 0), _FIRST_CHUNK):
            mine = keys[:, 0] == ledger_id
            if not mine.all():
                yield keys[:np.argmin(mine)]
                break
            yield keys


def _ledger_runs(chunks: Iterator[np.ndarray], report: CollectionReport
                 ) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """(ledgerId, run starts, run sizes) per ledger, runs being maximal stretches of consecutive entry ids, in
    key order. A ledger is yielded once its last key has been seen, so a scan that fails midway never yields a
    cut-short ledger. Keys with a negative id are skipped (counted): no bookie path writes them, and
    GetListOfEntriesOfLedger never reports one."""
    current, pieces = None, []
    for keys in chunks:
        ledgers, entry_ids = keys[:, 0], keys[:, 1]
        keep = (ledgers >= 0) & (entry_ids >= 0)
        if not keep.all():
            report.count("location_index_negative_id_keys", int((~keep).sum()))
            ledgers, entry_ids = ledgers[keep], entry_ids[keep]
        if not len(ledgers):
            continue
        starts_at = np.empty(len(ledgers), dtype=bool)
        starts_at[0] = True
        starts_at[1:] = (ledgers[1:] != ledgers[:-1]) | (entry_ids[1:] != entry_ids[:-1] + 1)
        run_idx = np.flatnonzero(starts_at)
        run_starts = entry_ids[run_idx]
        run_sizes = np.diff(np.append(run_idx, len(ledgers)))
        run_ledgers = ledgers[run_idx]
        cuts = [0, *(np.flatnonzero(run_ledgers[1:] != run_ledgers[:-1]) + 1).tolist(), len(run_idx)]
        for a, b in zip(cuts, cuts[1:]):
            ledger_id = int(run_ledgers[a])
            if ledger_id != current:
                if current is not None:
                    yield current, *_joined(pieces)
                current, pieces = ledger_id, []
            pieces.append((run_starts[a:b], run_sizes[a:b]))
    if current is not None:
        yield current, *_joined(pieces)


def _joined(pieces: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """One ledger's runs from its chunks: a run cut by a chunk boundary is joined again."""
    if len(pieces) == 1:
        return pieces[0]
    starts = np.concatenate([p[0] for p in pieces])
    sizes = np.concatenate([p[1] for p in pieces])
    new = np.ones(len(starts), dtype=bool)
    new[1:] = starts[1:] != starts[:-1] + sizes[:-1]
    idx = np.flatnonzero(new)
    return starts[idx], np.add.reduceat(sizes, idx)


def _encode(ledger_id: int, starts: np.ndarray, sizes: np.ndarray) -> bytes:
    """What availability.encode_entries gives for these entries: one group per run, sequencePeriod 0 (the
    groups BookKeeper's AvailabilityOfEntriesOfLedger builds), built without a Python int per entry."""
    if int(sizes.max()) > _INT32_MAX:
        raise ValueError(f"ledger {ledger_id}: a run of more than 2^31-1 entries exceeds the int32 sequenceSize")
    groups = np.zeros(len(starts), dtype=_GROUP)
    groups["first"] = starts
    groups["last"] = starts
    groups["size"] = sizes
    return struct.pack(">ii", VERSION, len(starts)).ljust(HEADER_SIZE, b"\0") + groups.tobytes()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m audit.systems.bookkeeper.collect.location_index",
                                description="Read a DbLedgerStorage bookie's entry-location index on its host into "
                                            "a folder for `replaudit import --kind location-index`.")
    p.add_argument("--bookie", required=True, help="the bookie's id, as the ledger metadata names it (host:port)")
    p.add_argument("--ledger-dir", action="append", required=True, dest="ledger_dirs",
                   help="a ledgerDirectories entry (indexDirectories when the bookie sets them); repeat per dir")
    p.add_argument("--secondary-dir", help="open as a RocksDB secondary instance keeping its state here")
    p.add_argument("--ledger-id", action="append", type=int, dest="ledger_ids", help="only these ledgers; repeat")
    p.add_argument("--out", required=True, help="folder receiving location-index/<bookie>/...")
    args = p.parse_args(argv)
    report = read_location_index(args.bookie, args.ledger_dirs, DirSink(args.out), ledger_ids=args.ledger_ids,
                                 secondary_dir=args.secondary_dir)
    print(report.to_json())
    return 3 if report.gaps else 0   # the CLI's EXIT_INCOMPLETE: some index could not be read


if __name__ == "__main__":
    sys.exit(main())
