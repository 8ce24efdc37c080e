"""Spark job: normalized Pulsar tables -> failover and snapshot metrics, and Pulsar findings.

    spark-submit spark_jobs/pulsar_audit.py --input <attempt>/tables --output <attempt> \\
        --run-id r1 --as-of-ms 1700000000000 --replicator-backlog-max 10000 --snapshot-max-age-s 300

Writes <output>/metrics/pulsar_failover and <output>/metrics/pulsar_snapshots (Parquet, replacing an earlier
try's) and adds the Pulsar rows to <output>/findings/violations, which the BookKeeper audit job has already
written for the same run: they are written to a hidden staging folder, then moved into findings/violations as
part-pulsar-*.parquet files (a re-run first deletes its own earlier part-pulsar-* files, never BookKeeper's).
Both systems' rows then read together with spark.read.parquet(findings/violations) or pyarrow, same schema."""
from __future__ import annotations

import argparse
import glob
import os
import shutil
import sys

from audit.domain.pulsar.pip33 import DEFAULT_CACHE_LIMIT

PREFIX = "part-pulsar-"
OUTPUTS = {"pulsar_failover": ("metrics", "pulsar_failover"), "pulsar_snapshots": ("metrics", "pulsar_snapshots")}


def _read(spark, tables_dir: str) -> dict:
    """Every input table that exists and holds Parquet files, read with the columns the audit uses (given, so
    no schema-inference job per table; a column the files lack reads as null). The rest count as empty."""
    from audit.transforms.pulsar.audit import INPUTS

    out = {}
    for name, schema in INPUTS.items():
        path = os.path.join(tables_dir, name)
        if glob.glob(os.path.join(path, "**", "*.parquet"), recursive=True):
            out[name] = spark.read.schema(schema).parquet(path)
    return out


def add_violations(df, root: str) -> int:
    """Move `df`'s rows into <root>/findings/violations as part-pulsar-* files (see the module doc)."""
    target = os.path.join(root, "findings", "violations")
    staging = os.path.join(root, "findings", "_pulsar_violations.staging")   # "_": ignored by Parquet readers
    df.write.mode("overwrite").parquet(staging)
    os.makedirs(target, exist_ok=True)
    for old in glob.glob(os.path.join(target, PREFIX + "*")) + glob.glob(os.path.join(target, "." + PREFIX + "*")):
        os.remove(old)
    moved = 0
    for path in sorted(glob.glob(os.path.join(staging, "part-*.parquet"))):
        os.replace(path, os.path.join(target, PREFIX + os.path.basename(path)[len("part-"):]))
        moved += 1
    shutil.rmtree(staging)
    return moved


def run(spark, tables_dir: str, root: str, *, run_id: str = "", as_of_ms: int | None = None,
        replicator_backlog_max: int | None = 10_000, snapshot_max_age_s: int | None = 300,
        snapshot_cache_limit: int = DEFAULT_CACHE_LIMIT) -> dict:
    """Returns {pulsar_failover, pulsar_snapshots, pulsar_violations: row counts, pulsar_violations_by_check}
    (keys prefixed: the pipeline merges them into the BookKeeper job's result)."""
    from audit.transforms.pulsar.audit import empty_tables, pulsar_audit

    tables = _read(spark, tables_dir) or empty_tables(spark)
    frames = pulsar_audit(tables, run_id=run_id, as_of_ms=as_of_ms, replicator_backlog_max=replicator_backlog_max,
                          snapshot_max_age_s=snapshot_max_age_s, snapshot_cache_limit=snapshot_cache_limit)
    failover, snapshots, violations = frames
    counted = frames.cached.groupBy("kind", "check").count().collect()   # one pass over the persisted rows
    n = {kind: sum(r["count"] for r in counted if r["kind"] == kind) for kind in ("failover", "snapshots")}
    by_check = {r["check"]: r["count"] for r in counted if r["kind"] == "violation"}
    for name, df in (("pulsar_failover", failover), ("pulsar_snapshots", snapshots)):
        df.write.mode("overwrite").parquet(os.path.join(root, *OUTPUTS[name]))
    add_violations(violations, root)
    frames.unpersist()
    return {"pulsar_failover": n["failover"], "pulsar_snapshots": n["snapshots"],
            "pulsar_violations": sum(by_check.values()), "pulsar_violations_by_check": by_check}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="pulsar_audit", description=__doc__.splitlines()[0])
    p.add_argument("--input", required=True, help="the attempt's tables/ folder (pulsar_* tables)")
    p.add_argument("--output", required=True, help="the attempt folder; metrics/ and findings/ are written below it")
    p.add_argument("--run-id", default="")
    p.add_argument("--as-of-ms", type=int, default=None, help="reference time (ms since epoch) for ages")
    p.add_argument("--replicator-backlog-max", type=int, default=10_000)
    p.add_argument("--snapshot-max-age-s", type=int, default=300)
    p.add_argument("--snapshot-cache-limit", type=int, default=DEFAULT_CACHE_LIMIT,
                   help="replicatedSubscriptionsSnapshotMaxCachedPerSubscription of the brokers (10; 30 since "
                        "4.0.9/4.1.3)")
    p.add_argument("--master", default=None, help="Spark master (default: local[*] or $SPARK_MASTER)")
    args = p.parse_args(argv)
    if not os.path.isdir(args.input):
        p.error(f"--input {args.input}: not a folder")
    from audit.sparkutil.session import get_spark

    out = run(get_spark("pulsar_audit", args.master), args.input, args.output, run_id=args.run_id,
              as_of_ms=args.as_of_ms, replicator_backlog_max=args.replicator_backlog_max,
              snapshot_max_age_s=args.snapshot_max_age_s, snapshot_cache_limit=args.snapshot_cache_limit)
    print(" ".join(f"{k}={v}" for k, v in sorted(out.items())))
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
