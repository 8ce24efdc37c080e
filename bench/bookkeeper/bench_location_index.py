"""Throughput of the DbLedgerStorage entry-location index reader on a 1e8-entry index.

    .venv/bin/python -m bench.bookkeeper.bench_location_index [LEDGERS [ENTRIES_PER_LEDGER]]

The index is a real RocksDB `locations` database in the bookie's encoding (lab/bookkeeper/location_db.py):
LEDGERS ledgers of ENTRIES_PER_LEDGER entries each, striped as bookie 0 of an E=3/Qw=2 ensemble holds them
(2 of every 3 entries: one group per run, the worst realistic shape for the AvailabilityOfEntriesOfLedger
encoding). The default 100,000 x 1,500 gives 1e8 held entries. Building it takes a minute and ~1 GB, so it is
built once and kept under .work/bench/location-index-<LEDGERS>x<ENTRIES>/ (`make clean` removes it); later runs
reuse it. The timed part is read_location_index into a memory sink. Target: 1e8 entries in <= 60 s.
"""
from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import numpy as np

from bench.common import MemorySink

ROOT = Path(__file__).resolve().parents[2]
TARGET_S_PER_1E8 = 60.0
ENSEMBLE, WRITE_QUORUM, BOOKIE_INDEX = 3, 2, 0


def _held(entries_per_ledger: int) -> np.ndarray:
    e = np.arange(entries_per_ledger, dtype=np.int64)
    return e[(BOOKIE_INDEX - e) % ENSEMBLE < WRITE_QUORUM]


def build_index(ledgers: int, entries_per_ledger: int) -> tuple[Path, float | None]:
    """The cached ledger directory (built when absent) and the build time in seconds (None when reused)."""
    from lab.bookkeeper.location_db import write_location_index

    ledger_dir = ROOT / ".work" / "bench" / f"location-index-{ledgers}x{entries_per_ledger}"
    done = ledger_dir / "BUILT"
    if done.is_file():
        return ledger_dir, None
    shutil.rmtree(ledger_dir, ignore_errors=True)   # a build cut short earlier
    held = _held(entries_per_ledger)
    t0 = time.perf_counter()
    write_location_index(ledger_dir, {ledger_id: held for ledger_id in range(1, ledgers + 1)})
    elapsed = time.perf_counter() - t0
    done.write_text(f"{ledgers} ledgers x {len(held)} held entries, built in {elapsed:.1f} s\n")
    return ledger_dir, elapsed


def bench_location_index(ledgers: int = 100_000, entries_per_ledger: int = 1500) -> dict:
    from audit.systems.bookkeeper.collect.location_index import read_location_index

    ledger_dir, build_s = build_index(ledgers, entries_per_ledger)
    expected = ledgers * len(_held(entries_per_ledger))
    sink = MemorySink()
    t0 = time.perf_counter()
    report = read_location_index("bench-bookie:3181", [str(ledger_dir)], sink)
    elapsed = time.perf_counter() - t0
    if report.gaps or report.counts.get("location_index_entries") != expected:
        raise AssertionError(f"read {report.counts} of {expected} entries; gaps {report.gaps[:3]}")
    return {"ledgers": ledgers, "entries": expected, "build_s": None if build_s is None else round(build_s, 1),
            "read_s": round(elapsed, 2), "entries_per_s": round(expected / elapsed),
            "avail_bytes": sum(map(len, sink.objects.values())),
            "target_s": TARGET_S_PER_1E8 * expected / 1e8}


def metrics(ledgers: int = 100_000, entries_per_ledger: int = 1500) -> list[dict]:
    """Rows for `make bench` (bench/run.py)."""
    r = bench_location_index(ledgers, entries_per_ledger)
    ok = r["read_s"] <= r["target_s"]
    return [
        {"name": f"location index reader, {r['entries']:,} entries in {ledgers:,} ledgers (E=3/Qw=2 stripes)",
         "value": r["entries_per_s"], "unit": "entries/s", "target": f">= {round(1e8 / TARGET_S_PER_1E8):,}",
         "ok": ok},
        {"name": f"location index reader, total time for {r['entries']:,} entries", "value": r["read_s"],
         "unit": "s", "target": f"<= {r['target_s']:g}", "ok": ok},
    ]


if __name__ == "__main__":
    res = bench_location_index(*(int(a) for a in sys.argv[1:3]))
    print(res)
    sys.exit(0 if res["read_s"] <= res["target_s"] else 1)
