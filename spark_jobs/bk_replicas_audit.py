"""Spark job: normalized BookKeeper tables -> ReplicasCheck metrics, missing fragments and violations.

    spark-submit spark_jobs/bk_replicas_audit.py --input <attempt>/tables --output <attempt> \\
        --as-of-ms 1700000000000 --open-ledger-max-age-ms 86400000

Writes <output>/metrics/bk_ledger_replicas, <output>/findings/bk_missing_fragments and
<output>/findings/violations (Parquet, replacing what an earlier try of the same attempt wrote)."""
from __future__ import annotations

import argparse
import os
import sys

from audit.transforms.bookkeeper.spark import ledger_state, replica_audit

OUTPUTS = {"metrics": ("metrics", "bk_ledger_replicas"), "fragments": ("findings", "bk_missing_fragments"),
           "violations": ("findings", "violations")}


def run(spark, tables_dir: str, root: str, *, run_id: str = "", as_of_ms: int | None = None,
        open_ledger_max_age_ms: int | None = None, min_racks_per_write_quorum: int = 2) -> dict:
    """Returns {output: row count} and, per check, the number of violations."""
    def table(name):
        return spark.read.parquet(os.path.join(tables_dir, name))

    bookies_path = os.path.join(tables_dir, "bk_bookies")
    bookies = table("bk_bookies") if os.path.isdir(bookies_path) else None
    state = ledger_state(table("bk_ledgers"), table("bk_entry_availability"))
    frames = replica_audit(
        state, bookies, run_id=run_id, as_of_ms=as_of_ms, open_ledger_max_age_ms=open_ledger_max_age_ms,
        min_racks_per_write_quorum=min_racks_per_write_quorum)
    metrics, fragments, violations = frames
    out = {}
    for name, df in (("metrics", metrics), ("fragments", fragments), ("violations", violations)):
        path = os.path.join(root, *OUTPUTS[name])
        df.write.mode("overwrite").parquet(path)
        out[name] = spark.read.parquet(path).count()
    by_check = spark.read.parquet(os.path.join(root, *OUTPUTS["violations"])).groupBy("check").count().collect()
    out["violations_by_check"] = {r["check"]: r["count"] for r in by_check}
    frames.unpersist()
    return out


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="bk_replicas_audit", description=__doc__.splitlines()[0])
    p.add_argument("--input", required=True, help="the attempt's tables/ folder (bk_ledgers, bk_entry_availability, "
                                                  "bk_bookies)")
    p.add_argument("--output", required=True, help="the attempt folder; metrics/ and findings/ are written below it")
    p.add_argument("--run-id", default="")
    p.add_argument("--as-of-ms", type=int, default=None, help="reference time for ledger ages (ms since epoch)")
    p.add_argument("--open-ledger-max-age-ms", type=int, default=None,
                   help="OPEN/IN_RECOVERY ledgers older than this (by ctime) are reported")
    p.add_argument("--min-racks-per-write-quorum", type=int, default=2)
    p.add_argument("--master", default=None, help="Spark master (default: local[*] or $SPARK_MASTER)")
    args = p.parse_args(argv)
    if (args.open_ledger_max_age_ms is None) != (args.as_of_ms is None):
        p.error("--as-of-ms and --open-ledger-max-age-ms go together")
    for name in ("bk_ledgers", "bk_entry_availability"):
        if not os.path.isdir(os.path.join(args.input, name)):
            p.error(f"--input {args.input}: table {name}/ not found")
    from audit.sparkutil.session import get_spark

    out = run(get_spark("bk_replicas_audit", args.master), args.input, args.output, run_id=args.run_id,
              as_of_ms=args.as_of_ms, open_ledger_max_age_ms=args.open_ledger_max_age_ms,
              min_racks_per_write_quorum=args.min_racks_per_write_quorum)
    print(" ".join(f"{k}={v}" for k, v in sorted(out.items())))
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
