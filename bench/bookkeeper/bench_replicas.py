"""Benchmark of the BookKeeper replica audit on local[2].

    .venv/bin/python bench/bookkeeper/bench_replicas.py [--ledgers 100000] [--quick]

1. 100,000 CLOSED ledgers, E=5 Qw=3 Qa=2, 3 segments, 10,000 entries each (1e9 logical entries), healthy
   stripes as merged SequenceGroups plus injected holes: time the audit (target <= 20 s: no slower than before
   location-index and read-probe evidence joined the audit).
2. The same at 100,000 entries per ledger (1e10 entries): target <= 1.2x the first time.
3. A naive per-entry Spark implementation (explode every entry) at 1e7 entries, against the range audit
   on the same data.
Generation (numpy/pyarrow -> Parquet) is done before and outside every timed section. Prints a table
and writes bench/results.json: [{name, value, unit, target}]."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET_S = 20
sys.path.insert(0, str(HERE.parent.parent))   # the repo root, where `bench` imports from

from bench.bookkeeper import gen as bk_gen  # noqa: E402
from audit.systems.bookkeeper.domain.striping import count_expected  # noqa: E402


def _audit(spark, state_path: str, out: str, engine: str = "mapInArrow") -> tuple[float, dict]:
    """Timed: read ledger_state Parquet, run the audit transform, write the three outputs as Parquet."""
    from audit.systems.bookkeeper.transforms.audit import audit

    t0 = time.perf_counter()
    state = spark.read.parquet(state_path)
    frames = audit(state, None, run_id="bench", engine=engine)
    for name, df in zip(("metrics", "fragments", "violations"), frames):
        df.write.mode("overwrite").parquet(os.path.join(out, name))
    elapsed = time.perf_counter() - t0
    frames.unpersist()
    frag = spark.read.parquet(os.path.join(out, "fragments"))
    counts = {r["ledger_id"]: r["n"] for r in frag.groupBy("ledger_id").agg({"missing_count": "sum"})
              .withColumnRenamed("sum(missing_count)", "n").collect()}
    return elapsed, counts


def _check(counts: dict, holes: list, E: int = 5, Qw: int = 3) -> None:
    expected = {h.ledger_id: count_expected(h.index, h.first, h.last, E, Qw) for h in holes}
    if counts != expected:
        raise AssertionError(f"audit found {len(counts)} ledgers with missing entries, expected {len(expected)}: "
                             f"{sorted(set(counts.items()) ^ set(expected.items()))[:5]}")


def _naive(spark, state_path: str, out: str) -> tuple[float, int]:
    """Per-entry audit: explode every expected (entry, bookie) and every held entry, anti-join."""
    from pyspark.sql import functions as F

    t0 = time.perf_counter()
    st = spark.read.parquet(state_path)
    entries = st.select("ledger_id", "write_quorum", "ensemble_size", "segments",
                        F.explode(F.sequence(F.lit(0).cast("long"), "last_entry_id")).alias("e"))
    seg = F.element_at(F.filter("segments", lambda s: s["first_entry_id"] <= F.col("e")), -1)
    expected = (entries.select("ledger_id", "e", "ensemble_size", seg["ensemble"].alias("ens"),
                               F.explode(F.sequence(F.lit(0), F.col("write_quorum") - 1)).alias("w"))
                .select("ledger_id", "e", F.element_at("ens", ((F.col("e") + F.col("w")) % F.col("ensemble_size"))
                                                       .cast("int") + 1).alias("bookie")))
    ans = st.select("ledger_id", F.explode("answers").alias("a")).select("ledger_id", "a.bookie",
                                                                         F.explode("a.groups").alias("g"))
    runs = ans.select("ledger_id", "bookie", "g.sequence_size", F.explode(F.sequence(
        "g.first_sequence_start", "g.last_sequence_start",
        F.greatest(F.col("g.sequence_period"), F.lit(1)).cast("long"))).alias("run"))
    held = runs.select("ledger_id", "bookie", F.explode(F.sequence(
        "run", F.col("run") + F.col("sequence_size") - 1)).alias("e"))
    # Spark's size estimate of the exploded side is far too small; a broadcast would exhaust the driver.
    missing = expected.join(held.hint("merge"), ["ledger_id", "e", "bookie"], "left_anti")
    per_ledger = missing.groupBy("ledger_id", "e").count().groupBy("ledger_id").agg(
        F.count("*").alias("below_write"), F.max("count").alias("max_missing"))
    per_ledger.write.mode("overwrite").parquet(os.path.join(out, "naive"))
    elapsed = time.perf_counter() - t0
    return elapsed, spark.read.parquet(os.path.join(out, "naive")).count()


def metrics(argv: list[str] | None = None) -> list[dict]:
    """Rows {name, value, unit, target, ok} for bench/run.py."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ledgers", type=int, default=100_000)
    p.add_argument("--quick", action="store_true", help="10x smaller, for a smoke run")
    p.add_argument("--skip-naive", action="store_true")
    p.add_argument("--engines", default="mapInArrow,arrow_udf")
    args = p.parse_args(argv if argv is not None else [])
    from audit.sparkutil.session import get_spark

    n = args.ledgers // 10 if args.quick else args.ledgers
    spark = get_spark("bench-bk-replicas", master="local[2]", conf={"spark.ui.showConsoleProgress": "false",
                                                                     "spark.driver.memory": "4g"})
    work = tempfile.mkdtemp(prefix="bench-bk-")
    results = []
    try:
        def add(name, value, unit, target, ok=True):
            results.append({"name": name, "value": round(value, 3), "unit": unit, "target": target, "ok": ok})
            print(f"{name:58s} {value:12.3f} {unit:4s} target {target}", flush=True)

        timings = {}
        for per_ledger in (10_000, 100_000):
            t0 = time.perf_counter()
            table, holes = bk_gen.generate(n, per_ledger, n_holes=max(10, n // 1000))
            path = os.path.join(work, f"state-{per_ledger}")
            bk_gen.write(table, path, rows_per_file=-(-n // 8))   # 8 files: work for both cores
            add(f"generate {n} ledgers x {per_ledger} entries (untimed prep)", time.perf_counter() - t0, "s", None)
            engines = args.engines.split(",") if per_ledger == 10_000 else ["mapInArrow"]
            for engine in engines:
                _audit(spark, path, os.path.join(work, "warm"), engine)     # JIT/worker warm-up, not timed
                elapsed, counts = _audit(spark, path, os.path.join(work, f"out-{per_ledger}-{engine}"), engine)
                _check(counts, holes)
                timings[(per_ledger, engine)] = elapsed
                if per_ledger == 10_000 and engine == "mapInArrow":
                    add(f"replica audit {engine}, {n * per_ledger:.0e} entries", elapsed, "s", f"<= {TARGET_S} s",
                        args.quick or elapsed <= TARGET_S)
                elif per_ledger == 10_000:   # the alternative engine, for comparison only
                    add(f"replica audit {engine}, {n * per_ledger:.0e} entries", elapsed, "s", None)
                else:
                    add(f"replica audit {engine}, {n * per_ledger:.0e} entries", elapsed, "s",
                        "<= 1.2x the 10,000-entry time")
        ratio = timings[(100_000, "mapInArrow")] / timings[(10_000, "mapInArrow")]
        add("time ratio 100,000 vs 10,000 entries per ledger", ratio, "x", "<= 1.2", ratio <= 1.2)
        if not args.skip_naive:
            table, holes = bk_gen.generate(1000, 10_000, n_holes=10)
            path = os.path.join(work, "state-naive")
            bk_gen.write(table, path, rows_per_file=125)
            _audit(spark, path, os.path.join(work, "warm"))
            elapsed, counts = _audit(spark, path, os.path.join(work, "out-small"))
            _check(counts, holes)
            add("replica audit mapInArrow, 1e7 entries (1000 ledgers)", elapsed, "s", None)
            naive_s, naive_rows = _naive(spark, path, work)
            if naive_rows != len(holes):
                raise AssertionError(f"naive audit found {naive_rows} ledgers with missing entries, "
                                     f"expected {len(holes)}")
            add("naive per-entry explode audit, 1e7 entries", naive_s, "s", None)
            add("naive / range audit at 1e7 entries", naive_s / elapsed, "x", None)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def main(argv: list[str] | None = None) -> int:
    results = metrics(argv)
    (HERE / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
