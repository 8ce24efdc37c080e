"""Benchmark of the MirrorMaker 2 audit (audit/systems/kafka/transforms/mm2_state.py `audit`) on local[2].

    .venv/bin/python -m bench.kafka.bench_mm2 [--partitions 500] [--groups 2000] [--quick]

Normalized kafka_mm2_* tables (bench/kafka/gen.py: 500 upstream partitions with ~100 sparse syncs each, 2,000
consumer groups committed on every partition = 1e6 group-partitions, their checkpoints and target offsets) are
generated outside the timed section. Timed: the whole MirrorMaker 2 part of the audit (Spark joins source,
target and last checkpoint per group and partition; OffsetSyncStore replayed once per partition; every group's
translation, bounds, checkpoint check and failover counts; the domain's verdicts for the rows that need them);
target <= 30 s. The result is checked: one row per group-partition, sampled rows equal the domain's per-group
evaluation, nothing is skipped except where a target group was placed ahead."""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from types import SimpleNamespace

import numpy as np

from bench.common import Results, main_of
from bench.kafka import gen

TARGET_S = 30
VERSION = "3.7.1"


def _translate(syncs, upstream):
    from audit.systems.kafka.domain.mm2 import OffsetSyncStore, store_variant_for

    store = OffsetSyncStore(store_variant_for(VERSION))
    store.load(syncs)
    return np.array([store.translate_downstream(int(u)) for u in upstream], dtype=np.int64)


def _clusters():
    mirror = SimpleNamespace(source_cluster="source", source_alias="source", separator=".", mm2_version=VERSION)
    return (SimpleNamespace(name="target", version=None, mirrors=(mirror,)),)


def _check(out: dict, expected: dict, tables: str) -> None:
    """Row count, and 200 sampled rows against the domain's evaluate_group."""
    import pyarrow.parquet as pq

    from audit.systems.kafka.domain.mm2 import Checkpoint, GroupPartition, evaluate_group

    failover = out["failover"]
    if failover.num_rows != expected["group_partitions"]:
        raise AssertionError(f"{failover.num_rows} rows, expected {expected['group_partitions']}")
    syncs = pq.read_table(os.path.join(tables, "kafka_mm2_syncs")).sort_by("record_offset").to_pylist()
    by_partition: dict = {}
    for s in syncs:
        by_partition.setdefault((s["topic"], s["partition"]), []).append((s["upstream_offset"], s["downstream_offset"]))
    rows = failover.take(np.random.default_rng(1).choice(failover.num_rows, 200, replace=False)).to_pylist()
    for r in rows:
        g = GroupPartition("target", "source", r["group"], r["topic"], r["partition"], VERSION,
                           tuple(by_partition[(r["topic"], r["partition"])]),
                           Checkpoint(r["checkpoint_upstream"], r["checkpoint_downstream"]), r["upstream_committed"],
                           r["source_read_at_ms"], r["target_committed"], r["target_read_at_ms"])
        _, m = evaluate_group(g)
        got = {k: r[k] for k in ("translated", "redelivered_min", "redelivered_max", "skipped_min", "skipped_max",
                                 "exact")}
        want = {k: m[k] for k in got}
        if [r["bounds_low"], r["bounds_high"]] != m["bounds"] or got != want:
            raise AssertionError(f"{r['group']} {r['topic']}-{r['partition']}: {got} != domain {want}")
    skipped = int(np.count_nonzero(np.nan_to_num(failover.column("skipped_min").to_numpy(
        zero_copy_only=False).astype(float)) > 0))
    if skipped > expected["ahead"]:
        raise AssertionError(f"{skipped} group-partitions skip, at most {expected['ahead']} were placed ahead")


def metrics(argv: list[str] | None = None) -> list[dict]:
    """Rows {name, value, unit, target, ok} for bench/run.py."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--partitions", type=int, default=500)
    p.add_argument("--groups", type=int, default=2_000)
    p.add_argument("--quick", action="store_true", help="100x smaller, for a smoke run")
    args = p.parse_args(argv if argv is not None else [])
    from audit.sparkutil.session import get_spark
    from audit.systems.kafka.transforms import mm2_state

    spec = gen.Mm2Spec(args.partitions // (10 if args.quick else 1), args.groups // (10 if args.quick else 1))
    spark = get_spark("bench-kafka-mm2", master="local[2]", conf={
        "spark.ui.showConsoleProgress": "false", "spark.driver.memory": "4g", "spark.sql.shuffle.partitions": "8"})
    work = tempfile.mkdtemp(prefix="bench-kafka-mm2-")
    results = Results()
    add = results.add

    try:
        t0 = time.perf_counter()
        warm_tables, tables = os.path.join(work, "warm"), os.path.join(work, "tables")
        gen.generate_mm2(gen.Mm2Spec(20, 100), warm_tables, _translate)
        expected = gen.generate_mm2(spec, tables, _translate)
        add(f"generate {expected['group_partitions']:.0e} group-partitions, {expected['syncs']} syncs "
            "(untimed prep)", time.perf_counter() - t0, "s", None)
        mm2_state.audit(spark, warm_tables, "warm", _clusters(), 0)          # workers up
        t0 = time.perf_counter()
        out = mm2_state.audit(spark, tables, "bench", _clusters(), 0)
        elapsed = time.perf_counter() - t0
        _check(out, expected, tables)
        add(f"MirrorMaker 2 translation + failover, {expected['group_partitions']:.0e} group-partitions, "
            "local[2]", elapsed, "s", f"<= {TARGET_S} s", args.quick or elapsed <= TARGET_S)
        add("MirrorMaker 2 group-partitions per second", expected["group_partitions"] / elapsed, "rows/s", None)
        add("MirrorMaker 2 findings + not judged", len(out["violations"]) + len(out["coverage"]), "rows", None)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def main(argv: list[str] | None = None) -> int:
    return main_of(metrics, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
