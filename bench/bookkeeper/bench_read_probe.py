"""Throughput of the read prober (audit/systems/bookkeeper/collect/read_probe.py) against the lab's loopback bookies.

    .venv/bin/python -m bench.bookkeeper.bench_read_probe [PROBES]

Builds a lab cluster with every bookie on DbLedgerStorage, then probes every reachable bookie at 100 % share
(every entry the metadata places on it: one ReadRequest each), all bookies at once, as the collector does.
Client and lab bookies share one Python process (the bookies run in a thread of their own), so the figure is
a floor for a real bookie. Target: >= 20,000 probes/s.
"""
from __future__ import annotations

import asyncio
import sys
import time

from bench.common import MemorySink

TARGET_PER_S = 20000
AS_OF_MS = 1_700_000_000_000


def _lab(probes: int):
    from lab.bookkeeper import build_lab

    # Each entry is on Qw bookies (mostly 2 in the lab): about 2 probes per entry at 100 %.
    ledgers = 60
    return build_lab({"seed": 11, "ledgers": ledgers, "entries_per_ledger": max(10, round(probes / 2 / ledgers)),
                      "db_ledger_storage_percent": 100, "faults": []}, AS_OF_MS)


def bench_read_probe(probes: int = 200_000) -> dict:
    from audit.systems.bookkeeper.collect.read_probe import ReadProbeConfig, probe_bookie_async
    from lab.bookkeeper.bookie_server import serve_lab_bookies

    lab = _lab(probes)
    closed = {lid: lab.metadata(lid) for lid in lab.ledger_ids if lab.metadata(lid).is_closed}
    by_bookie: dict[str, list[int]] = {}
    for lid in closed:
        for bookie in lab.ensemble_bookies(lid):
            by_bookie.setdefault(bookie, []).append(lid)
    cfg = ReadProbeConfig(connect_timeout_s=5.0, request_timeout_s=30.0, window=100, share_percent=100)
    sink = MemorySink()

    async def run(addresses):
        return await asyncio.gather(*(probe_bookie_async(b, ids, closed, sink, config=cfg, addresses=addresses,
                                                         cluster=lab.cluster, reason="bench")
                                      for b, ids in sorted(by_bookie.items()) if lab.reachable(b)))

    with serve_lab_bookies(lab) as addresses:
        t0 = time.perf_counter()
        reports = asyncio.run(run(addresses))
        elapsed = time.perf_counter() - t0
    sent = sum(r.counts.get("read_probes_sent", 0) for r in reports)
    failed = [g for r in reports for g in r.gaps if not g.what.endswith("sampled)")]
    if failed or not sent:
        raise AssertionError(f"{sent} probes sent; failures {failed[:3]}")
    return {"probes": sent, "bookies": len(reports), "ledgers": len(closed), "seconds": round(elapsed, 3),
            "probes_per_s": round(sent / elapsed), "target_per_s": TARGET_PER_S,
            "meets_target": sent / elapsed >= TARGET_PER_S}


def metrics(probes: int = 200_000) -> list[dict]:
    """Rows for `make bench` (bench/run.py)."""
    r = bench_read_probe(probes)
    return [{"name": f"read probes, {r['probes']} ReadRequests to {r['bookies']} loopback lab bookies",
             "value": r["probes_per_s"], "unit": "probes/s", "target": f">= {TARGET_PER_S}",
             "ok": r["meets_target"]}]


if __name__ == "__main__":
    res = bench_read_probe(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000)
    print(res)
    sys.exit(0 if res["meets_target"] else 1)
