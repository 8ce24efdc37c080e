"""Throughput of the ledger-metadata collector against a real ZooKeeper.

    .venv/bin/python -m bench.bookkeeper.bench_zk_collector [N]

Loads N ledger znodes (legacy hierarchical layout, v3 metadata with a password) with pipelined kazoo
creates, then times collect_ledger_metadata. Target: >= 5,000 znodes/s.
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from bench.common import MemorySink

TARGET_PER_S = 5000


def _load(client, n: int, window: int = 1000) -> None:
    from tests.bookkeeper.collect.data import closed_ledger, legacy_path, znode

    ensemble = ("bk1.example:3181", "bk2.example:3181", "bk3.example:3181")
    paths = [f"/ledgers/{legacy_path(i)}" for i in range(1, n + 1)]
    for parent in sorted({p.rsplit("/", 1)[0] for p in paths} | {"/ledgers/available", "/ledgers/cookies"}):
        client.ensure_path(parent)
    data = [znode(closed_ledger(i, [(0, ensemble)], last_entry_id=999)) for i in range(1, n + 1)]
    pending = []
    for path, value in zip(paths, data):
        pending.append(client.create_async(path, value))
        if len(pending) >= window:
            pending.pop(0).get(timeout=30)
    for result in pending:
        result.get(timeout=30)


def _timed_collect(hosts: str, sink, n: int) -> float:
    from audit.systems.bookkeeper.collect.zk_metadata import collect_ledger_metadata

    t0 = time.perf_counter()
    report, ledgers = collect_ledger_metadata(hosts, "/ledgers", sink, timeout_s=30)
    elapsed = time.perf_counter() - t0
    if len(ledgers) != n or report.counts.get("ledger_znodes_stored") != n or report.gaps:
        raise AssertionError(f"collected {len(ledgers)} of {n} ledgers; gaps {report.gaps[:3]}")
    return elapsed


def bench_zk_collector(n: int = 20000) -> dict:
    """Load n ledger znodes into a fresh real ZooKeeper, then time the collector into three sinks:
    memory (collector alone), DirSink on tmpfs (/dev/shm) and DirSink on the temp dir's disk."""
    from kazoo.client import KazooClient

    from audit.collectors.base import DirSink
    from tests.zk import ZooKeeperServer

    result: dict = {"znodes": n, "target_per_s": TARGET_PER_S}
    with ZooKeeperServer() as zk:
        client = KazooClient(hosts=zk.hosts)
        client.start(timeout=30)
        try:
            t0 = time.perf_counter()
            _load(client, n)
            result["load_per_s"] = round(n / (time.perf_counter() - t0))
        finally:
            client.stop()
            client.close()
        sinks = {"memory": lambda d: MemorySink(), "disk": DirSink}
        dirs = {"disk": None}
        if Path("/dev/shm").is_dir():
            sinks["tmpfs"], dirs["tmpfs"] = DirSink, "/dev/shm"
        for name, make in sinks.items():
            with tempfile.TemporaryDirectory(prefix="replaudit-bench-", dir=dirs.get(name)) as out:
                elapsed = _timed_collect(zk.hosts, make(out), n)
            result[f"collect_{name}_s"] = round(elapsed, 3)
            result[f"collect_{name}_per_s"] = round(n / elapsed)
    # The target is the collector's own rate; the DirSink numbers show what the storage adds.
    result["meets_target"] = result["collect_memory_per_s"] >= TARGET_PER_S
    return result


if __name__ == "__main__":
    res = bench_zk_collector(int(sys.argv[1]) if len(sys.argv) > 1 else 20000)
    print(res)
    print(f"collector: {res['collect_memory_per_s']} znodes/s into memory, "
          f"{res.get('collect_tmpfs_per_s', '-')} /s into DirSink on tmpfs, {res['collect_disk_per_s']} /s into "
          f"DirSink on disk (target {TARGET_PER_S}/s)")
    sys.exit(0 if res["meets_target"] else 1)


def metrics(n: int = 20000) -> list[dict]:
    """Rows for `make bench` (bench/run.py)."""
    r = bench_zk_collector(n)
    return [
        {"name": f"zk collector, {n} ledger znodes (reads + redaction)", "value": r["collect_memory_per_s"],
         "unit": "znodes/s", "target": f">= {TARGET_PER_S}", "ok": r["collect_memory_per_s"] >= TARGET_PER_S},
        {"name": f"zk collector into DirSink on disk, {n} znodes", "value": r["collect_disk_per_s"],
         "unit": "znodes/s", "target": "(storage-bound, shown for reference)", "ok": True},
    ]
