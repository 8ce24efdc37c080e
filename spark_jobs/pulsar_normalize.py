"""Spark job: raw Pulsar files -> normalized Parquet tables (docs/pulsar-contracts.md "Normalized tables").

    spark-submit spark_jobs/pulsar_normalize.py --input <attempt>/raw --output <attempt>/tables

The `quarantine` table is shared with the other normalizers (bk_normalize writes it first, with overwrite).
This job rewrites it as "every existing row whose system is not pulsar + this run's Pulsar rows", through a
sibling folder that then replaces it: BookKeeper's rows are kept and a re-run never duplicates Pulsar's."""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import uuid

import pyarrow.parquet as pq

from audit.transforms.pulsar.normalize import QUARANTINE, normalize_pulsar
from audit.transforms.pulsar.decode import QUARANTINE as QUARANTINE_TABLE, SYSTEM


def _rows_written(path: str) -> int:
    # The footers hold the counts: no Spark job needed to read them back.
    return sum(pq.read_metadata(os.path.join(path, n)).num_rows for n in os.listdir(path) if n.endswith(".parquet"))


def _merge_quarantine(spark, pulsar_rows, tables_dir: str) -> None:
    target = os.path.join(tables_dir, QUARANTINE_TABLE)
    merged = pulsar_rows
    if os.path.isdir(target) and any(n.endswith(".parquet") for n in os.listdir(target)):
        others = spark.read.schema(QUARANTINE).parquet(target).where(
            "system IS NULL OR system <> '{}'".format(SYSTEM))
        merged = others.unionByName(pulsar_rows)
    staging = os.path.join(tables_dir, f".{QUARANTINE_TABLE}.{uuid.uuid4().hex}")
    merged.write.mode("overwrite").parquet(staging)  # reads `target` to the end before it is replaced
    if os.path.isdir(target):
        shutil.rmtree(target)
    os.rename(staging, target)


def run(spark, raw_dir: str, out_dir: str) -> dict:
    """Write out_dir/<table>/ for every Pulsar table (empty ones too) and merge quarantine rows;
    returns {table: row count}; `quarantine` counts the whole shared table after the merge."""
    counts = {}
    tables = normalize_pulsar(spark, raw_dir)
    try:
        for name, df in tables.items():
            if name == QUARANTINE_TABLE:
                continue
            path = os.path.join(out_dir, name)
            df.write.mode("overwrite").parquet(path)
            counts[name] = _rows_written(path)
        _merge_quarantine(spark, tables[QUARANTINE_TABLE], out_dir)
        counts[QUARANTINE_TABLE] = _rows_written(os.path.join(out_dir, QUARANTINE_TABLE))
    finally:
        tables.unpersist()
    return counts


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="pulsar_normalize", description=__doc__.splitlines()[0])
    p.add_argument("--input", required=True, help="the attempt's raw/ folder (holding pulsar/<cluster>/...)")
    p.add_argument("--output", required=True, help="the attempt's tables/ folder")
    p.add_argument("--master", default=None, help="Spark master (default: local[*] or $SPARK_MASTER)")
    args = p.parse_args(argv)
    if not os.path.isdir(args.input):
        p.error(f"--input {args.input}: not a folder")
    from audit.sparkutil.session import get_spark

    counts = run(get_spark("pulsar_normalize", args.master), args.input, args.output)
    print(" ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    return counts


if __name__ == "__main__":
    main(sys.argv[1:])
