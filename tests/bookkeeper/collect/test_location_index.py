"""The entry-location index reader against real RocksDB databases in a DbLedgerStorage bookie's layout and
encoding (lab/bookkeeper/location_db.py), decoded back with the AvailabilityOfEntriesOfLedger codec."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from audit.cli.main import EXIT_CLEAN, main
from audit.collectors.base import DirSink
from audit.systems.bookkeeper.collect.location_index import CHUNK, read_location_index
from audit.systems.bookkeeper.formats import availability
from lab.bookkeeper.location_db import (add_locations, close_locations, delete_ledgers, locations_path,
                                              open_locations, write_location_index)
from tests.estates import write_lab_estate

ROOT = Path(__file__).resolve().parents[3]
BOOKIE = "bookie-02.lab:3181"
BIG = 2**31 + 7


def _striped(n: int, ensemble: int, write_quorum: int, index: int) -> list[int]:
    """Entries of an n-entry ledger bookie `index` holds under round-robin striping (E, Qw)."""
    return [e for e in range(n) if (index - e) % ensemble < write_quorum]


# dir 1: striped and contiguous ledgers, a ledger id above 2^31, entries above 2^31, a run across a chunk cut
DIR1 = {1: _striped(1000, 3, 2, 0), 2: list(range(500)), BIG: [0, 1, 2, BIG, BIG + 1, 2**40],
        4: list(range(CHUNK + 10)), 6: [7]}
# dir 2: one more ledger; ledger 9 is deleted the way the bookie deletes it (a range tombstone)
DIR2 = {3: _striped(2000, 5, 3, 4), 9: list(range(100))}


class MemorySink:
    def __init__(self):
        self.objects: dict[str, bytes] = {}

    def put(self, key: str, data: bytes) -> None:
        assert key not in self.objects, key
        self.objects[key] = data


def _entries(sink: MemorySink, ledger_id: int) -> list[int]:
    key = f"location-index/{BOOKIE}/{ledger_id}.avail"
    return list(availability.iter_entries(availability.decode(sink.objects[key], key)))


def _inventory(sink: MemorySink) -> dict:
    return json.loads(sink.objects[f"location-index/{BOOKIE}/inventory.json"])


@pytest.fixture
def bookie_dirs(tmp_path):
    d1, d2 = tmp_path / "ledgers1", tmp_path / "ledgers2"
    write_location_index(d1, DIR1)
    write_location_index(d2, DIR2)
    db = open_locations(d2)
    try:
        add_locations(db, 3, [-0x1000])          # a journal meta-entry id never reaches storage; if it did
        delete_ledgers(db, [9])
    finally:
        close_locations(db)
    return d1, d2


def test_reads_every_ledger_exactly(bookie_dirs):
    sink = MemorySink()
    report = read_location_index(BOOKIE, [str(d) for d in bookie_dirs], sink)
    assert report.gaps == []
    expected = {**DIR1, 3: DIR2[3]}
    assert {k for k in sink.objects if k.endswith(".avail")} == {f"location-index/{BOOKIE}/{i}.avail" for i in expected}
    for ledger_id, ids in expected.items():
        assert _entries(sink, ledger_id) == sorted(ids), ledger_id
        # byte for byte what a bookie's GetListOfEntriesOfLedger answer would carry
        assert sink.objects[f"location-index/{BOOKIE}/{ledger_id}.avail"] == availability.encode_entries(sorted(ids))
    inv = _inventory(sink)
    assert inv["complete"] is True and inv["ledger_ids"] is None and inv["opened_as"] == "read_only"
    assert inv["ledgers"] == len(expected) and inv["entries"] == sum(map(len, expected.values()))
    assert inv["databases"] == [str(locations_path(d)) for d in bookie_dirs]
    assert report.counts["location_index_negative_id_keys"] == 1
    for d in bookie_dirs:   # nothing written into the bookie's directory
        assert not {"rocksdict-config.json", "LOG.old"} & set(os.listdir(locations_path(d)))


def test_asked_ledgers_only(bookie_dirs):
    sink = MemorySink()
    report = read_location_index(BOOKIE, [str(d) for d in bookie_dirs], sink, ledger_ids=[BIG, 3, 9, 5, 4])
    assert report.gaps == []
    assert {k.rsplit("/", 1)[1] for k in sink.objects} == {f"{BIG}.avail", "3.avail", "4.avail", "inventory.json"}
    assert _entries(sink, BIG) == DIR1[BIG] and _entries(sink, 3) == DIR2[3] and _entries(sink, 4) == DIR1[4]
    inv = _inventory(sink)
    assert inv["ledger_ids"] == [3, 4, 5, 9, BIG] and inv["complete"] is True and inv["ledgers"] == 3


def test_secondary_instance_beside_a_running_bookie(tmp_path):
    ledger_dir = tmp_path / "ledgers"
    write_location_index(ledger_dir, {1: range(10)})
    primary = open_locations(ledger_dir)    # holds RocksDB's LOCK, as the bookie does
    try:
        add_locations(primary, 2, range(5, 25))   # only in the primary's WAL and memtable
        sink = MemorySink()
        report = read_location_index(BOOKIE, [str(ledger_dir)], sink, secondary_dir=str(tmp_path / "secondary"))
        assert report.gaps == []
        assert _entries(sink, 1) == list(range(10)) and _entries(sink, 2) == list(range(5, 25))
        assert _inventory(sink)["opened_as"] == "secondary"
        # a read-only open takes no LOCK either, and replays the WAL the same way
        ro = MemorySink()
        assert read_location_index(BOOKIE, [str(ledger_dir)], ro).gaps == []
        avail = {k: v for k, v in sink.objects.items() if k.endswith(".avail")}
        assert {k: v for k, v in ro.objects.items() if k.endswith(".avail")} == avail
    finally:
        close_locations(primary)
    assert "rocksdict-config.json" not in os.listdir(locations_path(ledger_dir))


def test_unreadable_dirs_are_gaps_naming_the_path(tmp_path, bookie_dirs):
    missing = tmp_path / "gone"
    not_rocksdb = tmp_path / "junk"
    (not_rocksdb / "current" / "locations").mkdir(parents=True)
    (not_rocksdb / "current" / "locations" / "CURRENT").write_text("MANIFEST-000042\n")
    empty = tmp_path / "empty"
    (empty / "current" / "locations").mkdir(parents=True)
    sink = MemorySink()
    report = read_location_index(BOOKIE, [str(missing), str(not_rocksdb), str(empty), str(bookie_dirs[0])], sink)
    by_source = {g.source: g.error for g in report.gaps}
    assert set(by_source) == {str(missing / "current" / "locations"), str(not_rocksdb / "current" / "locations"),
                              str(empty / "current" / "locations")}
    assert "not found" in by_source[str(missing / "current" / "locations")]
    assert "MANIFEST-000042" in by_source[str(not_rocksdb / "current" / "locations")]
    assert "CURRENT" in by_source[str(empty / "current" / "locations")]
    assert not missing.exists()              # the reader creates nothing
    assert _entries(sink, 2) == DIR1[2]      # the readable directory was still read
    assert _inventory(sink)["complete"] is False


def test_host_entry_point_then_replaudit_import(tmp_path, bookie_dirs, capsys):
    out = tmp_path / "out"
    args = [sys.executable, "-m", "audit.systems.bookkeeper.collect.location_index", "--bookie", BOOKIE,
            "--out", str(out)]
    for d in bookie_dirs:
        args += ["--ledger-dir", str(d)]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["counts"]["location_index_ledgers"] == 6
    stored = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert f"location-index/{BOOKIE}/inventory.json" in stored and len(stored) == 7

    store = f'{{uri: "file://{tmp_path / "store"}"}}'
    estate = write_lab_estate(tmp_path / "estate.yaml", estate="litest", store=store, cluster="bk-a",
                              lab="{seed: 5, ledgers: 4}")
    assert main(["import", "--estate", str(estate), "--run-id", "imp", "--system", "bookkeeper", "--cluster", "bk-a",
                 "--kind", "location-index", str(out)]) == EXIT_CLEAN
    result = json.loads(capsys.readouterr().out)
    assert result["stored"] == 7 and result["rejected"] == []
    raw = [p for p in (tmp_path / "store").rglob("*") if p.is_file() and "/raw/bookkeeper/bk-a/location-index/" in
           p.as_posix()]
    assert sorted(p.as_posix().split("/raw/bookkeeper/bk-a/", 1)[1] for p in raw) == stored
    sink = DirSink(out)
    assert sink.path_for(f"location-index/{BOOKIE}/2.avail").read_bytes() == availability.encode_entries(DIR1[2])
