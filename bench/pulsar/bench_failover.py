"""Benchmark of the Pulsar failover audit job (audit/systems/pulsar/transforms/audit.py `run`) on local[2].

    .venv/bin/python bench/pulsar/bench_failover.py [--messages 10000000] [--topics 500] [--quick]

Normalized tables for two clusters with 1e7 entries each (bench/pulsar/gen.py: 500 topics, 10,000
replicated subscriptions on both clusters, 20..60 individually-acked ranges per source cursor, PIP-33
markers, one topic in ten without the source-position property; every cursor read at its cluster's collection,
west a minute after east, and twice more by the rereads, east's subscriptions a few entries further each time)
are generated outside the timed section.
Timed: the whole job (read, cogroup by topic, per-topic domain, write metrics, add findings); target <= 84 s
(no slower than before the reads apart: 2e7 entries in 66-84 s on a quiet machine).
The result is checked: one row per subscription and direction, east -> west skips nothing and its target
cursor is where PIP-33 put it, every row compares a target read between two source reads (no coverage row) and
east's progress between them shows as `unsettled`. Prints rows {name, value, unit, target, ok} (bench/run.py
collects them)."""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))   # the repo root, where `bench` imports from

from bench.common import Results, main_of  # noqa: E402
from bench.pulsar import gen as pulsar_gen  # noqa: E402

TARGET_S = 84


def _run(spark, tables: str, out: str, as_of_ms: int) -> tuple[float, dict]:
    from audit.contracts import AuditRequest
    from audit.systems.pulsar.transforms.audit import run
    from spark_jobs.run import thresholds

    request = AuditRequest("bench", as_of_ms, thresholds(None, []))   # the shipped defaults; after every read
    t0 = time.perf_counter()
    result = run(spark, tables, out, request)
    return time.perf_counter() - t0, result


def _check(spark, out: str, expected: dict, result: dict) -> None:
    from pyspark.sql import functions as F

    if result["pulsar_failover"] != expected["failover_rows"]:
        raise AssertionError(f"{result['pulsar_failover']} failover rows, expected {expected['failover_rows']}")
    rows = spark.read.parquet(os.path.join(out, "metrics", "pulsar_failover"))
    bad = rows.where((F.col("source_cluster") == "east") & (
        (F.col("skipped") != 0) | (F.col("expected_target_mdp") != F.col("target_mdp")) |
        (F.col("only_on_source") != 0) | (F.col("only_on_target") != 0) | (F.col("redelivered") <= 0))).count()
    if bad:
        raise AssertionError(f"{bad} east->west rows are not what the generator laid out")
    # the reads-apart path: every target read lies between two source reads, and east's progress is settled
    east = F.col("source_cluster") == "east"
    unbracketed, unsettled = rows.agg(
        F.sum((F.col("source_read_before_ms").isNull() | F.col("source_read_after_ms").isNull()).cast("long")),
        F.sum(F.when(east, F.col("unsettled")))).first()
    if unbracketed or not unsettled or result["pulsar_coverage"]:
        raise AssertionError(f"{unbracketed} rows without source reads around the target's, {unsettled} unsettled "
                             f"east->west, {result['pulsar_coverage']} coverage rows")


def metrics(argv: list[str] | None = None) -> list[dict]:
    """Rows {name, value, unit, target, ok} for bench/run.py."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=10_000_000, help="entries per cluster")
    p.add_argument("--topics", type=int, default=500)
    p.add_argument("--subscriptions", type=int, default=10_000)
    p.add_argument("--quick", action="store_true", help="100x smaller, for a smoke run")
    args = p.parse_args(argv if argv is not None else [])
    from audit.sparkutil.session import get_spark

    scale = 100 if args.quick else 1
    spec = pulsar_gen.Spec(args.messages // scale, max(1, args.topics // scale), args.subscriptions // scale)
    spark = get_spark("bench-pulsar-failover", master="local[2]", conf={
        "spark.ui.showConsoleProgress": "false", "spark.driver.memory": "4g", "spark.sql.shuffle.partitions": "8"})
    work = tempfile.mkdtemp(prefix="bench-pulsar-")
    results = Results()
    add = results.add

    try:
        t0 = time.perf_counter()
        warm = pulsar_gen.generate(pulsar_gen.Spec(40_000, 4, 40), os.path.join(work, "warm-tables"))
        expected = pulsar_gen.generate(spec, os.path.join(work, "tables"))
        entries = sum(expected["entries"].values())
        add(f"generate {entries:.1e} entries, {expected['subscriptions']} subscriptions (untimed prep)",
            time.perf_counter() - t0, "s", None)
        _, result = _run(spark, os.path.join(work, "warm-tables"), os.path.join(work, "warm"),   # workers up
                         warm["as_of_ms"])
        _check(spark, os.path.join(work, "warm"), warm, result)
        elapsed, result = _run(spark, os.path.join(work, "tables"), os.path.join(work, "out"), expected["as_of_ms"])
        _check(spark, os.path.join(work, "out"), expected, result)
        add(f"pulsar failover audit, {entries:.0e} entries, local[2]", elapsed, "s", f"<= {TARGET_S} s",
            args.quick or elapsed <= TARGET_S)
        add("pulsar failover audit throughput", entries / elapsed, "entries/s", None)
        add("failover rows (subscription x direction)", result["pulsar_failover"], "rows", None)
        add("pulsar findings", result["pulsar_violations"], "rows", None)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def main(argv: list[str] | None = None) -> int:
    return main_of(metrics, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
