"""Benchmark of the partition audit (audit/systems/kafka/transforms/audit.py `run`) on local[2].

    .venv/bin/python -m bench.kafka.bench_epochs [--partitions 100000] [--batches 10000000] [--quick]

Normalized tables (bench/kafka/gen.py: 100,000 partitions x 3 replicas, 1e7 batch headers, one partition in
1,000 with a follower holding 20 committed offsets the leader overwrote) are generated outside the timed section.
Timed: the whole job (read, per-replica state from the batch headers, the domain's verdicts and metrics per
partition, write every output); target <= 60 s. The result is checked: exactly the injected losses are found,
with their offsets, and one metrics row per partition and replica."""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from types import SimpleNamespace

from bench.common import Results, main_of
from bench.kafka import gen

TARGET_S = 60


def _request(run_id: str):
    from audit.contracts import AuditRequest

    thresholds = SimpleNamespace(kafka_follower_lag_max=10_000, kafka_mm2_redelivery_tolerance=0)
    return AuditRequest(run_id, gen.T0 + 600_000, thresholds, ())


def _run(spark, tables: str, out: str) -> tuple[float, dict]:
    from audit.systems.kafka.transforms.audit import run

    t0 = time.perf_counter()
    result = run(spark, tables, out, _request("bench"))
    return time.perf_counter() - t0, result


def _check(spark, out: str, expected: dict, result: dict) -> None:
    if result["kafka_partitions"] != expected["partitions"] or result["kafka_replicas"] != expected["replicas"]:
        raise AssertionError(f"{result['kafka_partitions']} partition / {result['kafka_replicas']} replica rows, "
                             f"expected {expected['partitions']} / {expected['replicas']}")
    if result["kafka_violations_by_check"] != ({"kafka.committed_data_lost": expected["lost_findings"]}
                                               if expected["lost_findings"] else {}):
        raise AssertionError(f"findings {result['kafka_violations_by_check']}, expected "
                             f"{expected['lost_findings']} committed_data_lost")
    rows = spark.read.parquet(os.path.join(out, "findings", "violations", "system=kafka")).collect()
    if sum(r["entry_count"] for r in rows) != expected["lost_offsets"]:
        raise AssertionError(f"{sum(r['entry_count'] for r in rows)} lost offsets, expected "
                             f"{expected['lost_offsets']}")


def metrics(argv: list[str] | None = None) -> list[dict]:
    """Rows {name, value, unit, target, ok} for bench/run.py."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--partitions", type=int, default=100_000)
    p.add_argument("--batches", type=int, default=10_000_000)
    p.add_argument("--quick", action="store_true", help="100x smaller, for a smoke run")
    args = p.parse_args(argv if argv is not None else [])
    from audit.sparkutil.session import get_spark

    scale = 100 if args.quick else 1
    spec = gen.Spec(args.partitions // scale, args.batches // scale)
    spark = get_spark("bench-kafka-epochs", master="local[2]", conf={
        "spark.ui.showConsoleProgress": "false", "spark.driver.memory": "4g", "spark.sql.shuffle.partitions": "8"})
    work = tempfile.mkdtemp(prefix="bench-kafka-")
    results = Results()
    add = results.add

    try:
        t0 = time.perf_counter()
        warm = gen.generate_partitions(gen.Spec(2_000, 200_000, fault_every=100, files=2),
                                       os.path.join(work, "warm-tables"))
        expected = gen.generate_partitions(spec, os.path.join(work, "tables"))
        add(f"generate {expected['batches']:.1e} batch headers, {expected['replicas']} replicas (untimed prep)",
            time.perf_counter() - t0, "s", None)
        _, result = _run(spark, os.path.join(work, "warm-tables"), os.path.join(work, "warm"))   # workers up
        _check(spark, os.path.join(work, "warm"), warm, result)
        elapsed, result = _run(spark, os.path.join(work, "tables"), os.path.join(work, "out"))
        _check(spark, os.path.join(work, "out"), expected, result)
        add(f"kafka partition audit, {spec.partitions} partitions x 3, {expected['batches']:.0e} batches, "
            "local[2]", elapsed, "s", f"<= {TARGET_S} s", args.quick or elapsed <= TARGET_S)
        add("kafka partition audit throughput", expected["batches"] / elapsed, "batches/s", None)
        add("kafka findings (injected losses)", result["kafka_violations"], "rows", None)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def main(argv: list[str] | None = None) -> int:
    return main_of(metrics, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
