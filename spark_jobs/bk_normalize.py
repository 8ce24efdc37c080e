"""Spark job: raw BookKeeper files -> normalized Parquet tables (contracts.md "Normalized tables").

    spark-submit spark_jobs/bk_normalize.py --input <attempt>/raw --output <attempt>/tables"""
from __future__ import annotations

import argparse
import os
import sys

from audit.transforms.bookkeeper.spark import normalize_bookkeeper


def run(spark, raw_dir: str, tables_dir: str) -> dict:
    """Write tables_dir/<table>/ for every normalized table; returns {table: row count}."""
    counts = {}
    tables = normalize_bookkeeper(spark, raw_dir)
    for name, df in tables.items():
        df.write.mode("overwrite").parquet(os.path.join(tables_dir, name))
        counts[name] = spark.read.parquet(os.path.join(tables_dir, name)).count()
    tables.unpersist()
    return counts


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="bk_normalize", description=__doc__.splitlines()[0])
    p.add_argument("--input", required=True, help="the attempt's raw/ folder (holding bookkeeper/<cluster>/...)")
    p.add_argument("--output", required=True, help="the attempt's tables/ folder")
    p.add_argument("--master", default=None, help="Spark master (default: local[*] or $SPARK_MASTER)")
    args = p.parse_args(argv)
    if not os.path.isdir(args.input):
        p.error(f"--input {args.input}: not a folder")
    from audit.sparkutil.session import get_spark

    counts = run(get_spark("bk_normalize", args.master), args.input, args.output)
    print(" ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    return counts


if __name__ == "__main__":
    main(sys.argv[1:])
