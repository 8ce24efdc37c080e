"""Spark job runner: one stage of one system, in-process (the pipeline) or under spark-submit on a cluster.

    spark-submit spark_jobs/run.py --system S --stage normalize --input <attempt>/raw --output <attempt>/tables
    spark-submit spark_jobs/run.py --system S --stage audit --input <attempt>/tables --output <attempt> \\
        --estate estate.yaml --run-id r1 --as-of-ms 1700000000000 [--set KEY=VALUE]

normalize reads the system's folder of raw/ and writes its tables (and its folder of tables/quarantine); audit reads
its tables and writes its metrics and findings (and its folder of findings/violations). Thresholds come from the
estate file's `thresholds:` (default: every system's defaults); `--set KEY=VALUE` overrides one, as in the file."""
from __future__ import annotations

import argparse
import json
import os
import sys

STAGES = ("normalize", "audit")


def thresholds(estate_file: str | None, overrides: list[str]):
    """The estate's thresholds with `KEY=VALUE` overrides, validated as the estate file itself would be."""
    import yaml

    from audit.config.estate import parse_estate

    doc = {}
    if estate_file:
        with open(estate_file, encoding="utf-8") as f:
            doc = yaml.safe_load(f) or {}
    merged = dict(doc.get("thresholds") or {})
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--set {item!r}: expected KEY=VALUE (a key of the estate's thresholds:)")
        merged[key] = yaml.safe_load(value)
    source = f"{estate_file or 'defaults'} with --set" if overrides else (estate_file or "defaults")
    return parse_estate(yaml.safe_dump({"estate": "thresholds", "systems": {}, "thresholds": merged}),
                        source).thresholds


def estate_clusters(estate_file: str | None, system: str) -> tuple:
    """The estate file's clusters of `system`, validated (none without a file)."""
    if not estate_file:
        return ()
    from audit.config.estate import load_estate

    return tuple(load_estate(estate_file).clusters(system))


def run_stage(spark, system: str, stage: str, input_dir: str, output_dir: str, *, run_id: str = "",
              as_of_ms: int | None = None, thresholds=None, clusters: tuple = (), scope=None) -> dict:
    """One stage of one registered system; returns the job's counts. `clusters`: the estate's clusters of the
    system (what the estate declares about them, e.g. a broker version)."""
    from audit import systems
    from audit.contracts import EVERYTHING, AuditRequest

    sys_ = systems.get(system)
    if stage == "normalize":
        return sys_.pipeline.normalize(spark, input_dir, output_dir)
    if stage == "audit":
        return sys_.pipeline.audit(spark, input_dir, output_dir,
                                   AuditRequest(run_id, as_of_ms, thresholds, tuple(clusters), scope or EVERYTHING))
    raise ValueError(f"stage {stage!r}: expected one of {', '.join(STAGES)}")


def main(argv: list[str] | None = None) -> dict:
    from audit import systems

    p = argparse.ArgumentParser(prog="run.py", description=__doc__.splitlines()[0])
    p.add_argument("--system", required=True, choices=systems.names())
    p.add_argument("--stage", required=True, choices=STAGES)
    p.add_argument("--input", required=True, help="normalize: the attempt's raw/ folder; audit: its tables/ folder")
    p.add_argument("--output", required=True, help="normalize: the attempt's tables/ folder; audit: the attempt "
                                                   "folder (metrics/ and findings/ are written below it)")
    p.add_argument("--estate", default=os.environ.get("REPLAUDIT_ESTATE"), help="estate YAML (its thresholds)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override one threshold")
    p.add_argument("--run-id", default="")
    p.add_argument("--as-of-ms", type=int, default=None, help="reference time for ages (ms since epoch)")
    p.add_argument("--master", default=None, help="Spark master (default: local[*] or $SPARK_MASTER)")
    args = p.parse_args(argv)
    if not os.path.isdir(args.input):
        p.error(f"--input {args.input}: not a folder")
    try:
        th = thresholds(args.estate, args.set) if args.stage == "audit" else None
        clusters = estate_clusters(args.estate, args.system) if args.stage == "audit" else ()
    except (ValueError, OSError) as exc:
        p.error(str(exc))
    from audit.sparkutil.session import get_spark

    spark = get_spark(f"replaudit-{args.system}-{args.stage}", args.master)
    try:
        out = run_stage(spark, args.system, args.stage, args.input, args.output, run_id=args.run_id,
                        as_of_ms=args.as_of_ms, thresholds=th, clusters=clusters)
    except FileNotFoundError as exc:
        p.error(str(exc))
    print(json.dumps(out, sort_keys=True))
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
