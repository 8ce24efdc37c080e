"""A real RocksDB `locations` database laid out and encoded as a DbLedgerStorage bookie writes it
(docs/formats/bookkeeper.md, "DbLedgerStorage entry-location index"): for tests, the bench and lab bookies.

    write_location_index(ledger_dir, {ledger_id: sorted entry ids})   # -> <ledger_dir>/current/locations

Keys are 16 bytes, ledgerId then entryId, each a big-endian int64 (LongPairWrapper / ArrayUtil.setLong);
values are the 8-byte big-endian entry location (LongWrapper), (entry log id << 32) | offset in that log.
The table options follow KeyValueStorageRocksDB's EntryLocation profile where they decide the file format
(LZ4 blocks of 64 KiB, block-based table format_version 5, xxHash checksums, bytewise comparator), so a
reader that copes with these copes with a bookie's index.

Big indexes are written as sorted SST files ingested in one step (SstFileWriter + ingest_external_file): about
4 M keys/s here, against ~0.5 M/s through puts. `open_locations` gives the read-write handle a running bookie
would hold (it takes RocksDB's LOCK), for tests of readers that must work beside a live bookie.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

KEY_SIZE = 16
_KEY = np.dtype(">i8")
_SST_KEYS = 8_000_000  # keys per SST file: bounds one file's size, the ingest takes them all at once
_U64 = 1 << 64
# rocksdict leaves this beside every database it opens; a bookie's directory has no such file
_ROCKSDICT_CONFIG = "rocksdict-config.json"
DEFAULT_LOG_ID = 1
FIRST_OFFSET = 1024  # entry logs start with a 1 KiB header, so no entry sits at offset 0 (0 = "no location")

LocationOf = Callable[[int, np.ndarray], np.ndarray]


def locations_path(ledger_dir: str | os.PathLike[str]) -> Path:
    """Where a bookie keeps the index of one ledger directory: <ledgerDir>/current/locations
    (LedgerDirsManager appends "current"; EntryLocationIndex names the database "locations")."""
    return Path(ledger_dir) / "current" / "locations"


def bookie_options():
    """rocksdict Options in raw (bytes) mode with the EntryLocation profile's format-deciding settings."""
    import rocksdict

    opts = rocksdict.Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.set_compression_type(rocksdict.DBCompressionType.lz4())
    table = rocksdict.BlockBasedOptions()
    table.set_block_size(64 * 1024)
    table.set_format_version(5)
    table.set_checksum_type(rocksdict.ChecksumType.xxhash())
    opts.set_block_based_table_factory(table)
    return opts


def default_location(ledger_id: int, entry_ids: np.ndarray) -> np.ndarray:
    """Made-up but well-formed locations: entry log 1, offsets 1024 + 64 * i. Readers never rely on them."""
    return (np.int64(DEFAULT_LOG_ID) << 32) | (FIRST_OFFSET + 64 * np.arange(len(entry_ids), dtype=np.int64))


def _unsigned(v: int) -> int:
    return v % _U64  # RocksDB's bytewise order of a big-endian int64 is its unsigned order


def _keys_and_values(ledger_id: int, entry_ids, location_of: LocationOf) -> tuple[bytes, bytes]:
    entries = np.asarray(entry_ids, dtype=np.int64)
    order = np.argsort(entries.astype(np.uint64), kind="stable")
    entries = entries[order]
    if len(entries) > 1 and not (entries[1:] != entries[:-1]).all():
        raise ValueError(f"ledger {ledger_id}: duplicate entry ids")
    keys = np.empty((len(entries), 2), dtype=_KEY)
    keys[:, 0] = ledger_id
    keys[:, 1] = entries
    values = np.asarray(location_of(ledger_id, entries), dtype=_KEY)
    if values.shape != entries.shape:
        raise ValueError(f"ledger {ledger_id}: location_of gave {values.shape} locations for {entries.shape} entries")
    return keys.tobytes(), values.tobytes()


def write_location_index(ledger_dir: str | os.PathLike[str], ledgers: Mapping[int, Sequence[int] | np.ndarray], *,
                         location_of: LocationOf = default_location) -> Path:
    """Add `ledgers` ({ledger id: entry ids}) to the `locations` database of `ledger_dir` (created if missing;
    keys already there with the same ledger and entry are replaced) and return the database's path.
    `location_of(ledger_id, entry_ids) -> int64 array` gives each entry's location."""
    import rocksdict

    path = locations_path(ledger_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    opts = bookie_options()
    staging = Path(tempfile.mkdtemp(prefix=".sst-", dir=path.parent))
    try:
        files = []
        writer, in_file = None, 0
        for ledger_id in sorted(ledgers, key=_unsigned):
            keys, values = _keys_and_values(ledger_id, ledgers[ledger_id], location_of)
            for i in range(0, len(keys), KEY_SIZE):
                if writer is None:
                    files.append(str(staging / f"{len(files):06d}.sst"))
                    writer, in_file = rocksdict.SstFileWriter(opts), 0
                    writer.open(files[-1])
                j = i // 2
                writer[keys[i:i + KEY_SIZE]] = values[j:j + 8]
                in_file += 1
                if in_file >= _SST_KEYS:
                    writer.finish()
                    writer = None
        if writer is not None:
            writer.finish()
        db = rocksdict.Rdict(str(path), opts)
        try:
            if files:
                ingest = rocksdict.IngestExternalFileOptions()
                ingest.set_move_files(True)
                db.ingest_external_file(files, ingest)
        finally:
            db.close()
            _drop_rocksdict_config(path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return path


def open_locations(ledger_dir: str | os.PathLike[str]):
    """The read-write handle a running bookie holds on its index (RocksDB's LOCK taken). Close it with
    close_locations(db) so the directory is left as a bookie leaves it."""
    import rocksdict

    path = locations_path(ledger_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    return rocksdict.Rdict(str(path), bookie_options())


def add_locations(db, ledger_id: int, entry_ids: Iterable[int], *, location_of: LocationOf = default_location) -> None:
    """One write batch of locations, as SingleDirectoryDbLedgerStorage.checkpoint flushes the write cache."""
    import rocksdict

    keys, values = _keys_and_values(ledger_id, list(entry_ids), location_of)
    batch = rocksdict.WriteBatch(raw_mode=True)
    for i in range(0, len(keys), KEY_SIZE):
        batch.put(keys[i:i + KEY_SIZE], values[i // 2:i // 2 + 8])
    db.write(batch)


def delete_ledgers(db, ledger_ids: Iterable[int]) -> None:
    """Drop ledgers as EntryLocationIndex.removeOffsetFromDeletedLedgers does: one deleteRange per ledger from
    (ledgerId, 0) to (ledgerId, Long.MAX_VALUE), end excluded, in one batch."""
    import rocksdict

    batch = rocksdict.WriteBatch(raw_mode=True)
    for ledger_id in ledger_ids:
        batch.delete_range(np.array([ledger_id, 0], _KEY).tobytes(),
                           np.array([ledger_id, 2**63 - 1], _KEY).tobytes())
    db.write(batch)


def close_locations(db) -> None:
    path = Path(db.path())
    db.close()
    _drop_rocksdict_config(path)


def _drop_rocksdict_config(path: Path) -> None:
    try:
        (path / _ROCKSDICT_CONFIG).unlink()
    except FileNotFoundError:
        pass
