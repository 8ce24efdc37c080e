"""A minimal extra system, registered by tests to prove that a system plugs in without touching shared code.

"demo" clusters are lab-only: each emits two payloads (JSON counters); normalize reads them into demo_counters;
audit raises one `demo.total_over_limit` finding per cluster whose counters add up above the estate threshold
`demo_total_max`. Everything runs on Spark DataFrames (no Python UDF), so Spark's workers need nothing from here."""
from __future__ import annotations

import json
import os
from contextlib import contextmanager
from html import escape
from typing import Literal

from pydantic import BaseModel, ConfigDict

from audit import systems
from audit.collectors.base import CollectionReport
from audit.contracts import Check, ImportKind, Lab, Pipeline, ReportSection, System, SystemConfig, Validation

NAME = "demo"
CHECK = "demo.total_over_limit"


class DemoCluster(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    source: Literal["lab"]
    total: int = 5                          # what the two payloads add up to


class DemoThresholds(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    demo_total_max: int = 3


def collect(req):
    first = min(req.cluster.total, 1)
    req.sink.put("counters/a.json", json.dumps({"counter": first}).encode())
    req.sink.put("counters/b.json", json.dumps({"counter": req.cluster.total - first}).encode())
    report = CollectionReport(NAME, req.cluster.name, {"payloads": 2})
    over = req.cluster.total > req.thresholds.demo_total_max
    truth = {"cluster": req.cluster.name,
             "findings": [{"check": CHECK, "cluster": req.cluster.name, "entry_count": req.cluster.total}] if over
             else []}
    return report, truth


def normalize(spark, raw_dir: str, tables_dir: str) -> dict:
    from pyspark.sql import functions as F

    from audit.transforms.common import QUARANTINE, quarantine_path, system_raw_root

    files = (spark.read.option("recursiveFileLookup", "true").schema("counter long")
             .json(system_raw_root(raw_dir, NAME)).withColumn("path", F.input_file_name()))
    cluster = F.regexp_extract("path", r"/" + NAME + r"/([^/]+)/counters/", 1)
    counters = files.select(cluster.alias("cluster"), "counter")
    counters.write.mode("overwrite").parquet(os.path.join(tables_dir, "demo_counters"))
    spark.createDataFrame([], QUARANTINE).write.mode("overwrite").parquet(quarantine_path(tables_dir, NAME))
    return {"demo_counters": counters.count()}


def audit(spark, tables_dir: str, root: str, request) -> dict:
    from pyspark.sql import functions as F

    from audit.transforms.common import VIOLATIONS, conform, violations_path

    totals = spark.read.parquet(os.path.join(tables_dir, "demo_counters")).groupBy("cluster").agg(
        F.sum("counter").alias("entry_count"))
    over = totals.where(F.col("entry_count") > request.thresholds.demo_total_max).select(
        F.lit(request.run_id).alias("run_id"), F.lit(NAME).alias("system"), "cluster", F.lit(CHECK).alias("check"),
        F.lit("major").alias("severity"), F.concat(F.lit("cluster "), "cluster").alias("subject"), "entry_count",
        F.lit("counters add up above demo_total_max").alias("message"), F.lit("{}").alias("evidence"))
    over = conform(over, VIOLATIONS)
    over.write.mode("overwrite").parquet(violations_path(root, NAME))
    totals.write.mode("overwrite").parquet(os.path.join(root, "metrics", "demo_totals"))
    return {"demo_violations": over.count()}


def _summary(outputs):
    rows = [v for v in outputs.violations if v.get("system") == NAME]
    return {NAME: {"findings": len(rows)}}


SECTION = ReportSection(
    summary=_summary,
    html=lambda summary, violations: f'<h2 id="demo">Demo</h2><p>{escape(str(summary.get(NAME)))}</p>',
    text=lambda summary: [f"  demo: {summary.get(NAME, {}).get('findings', 0)} finding(s)"],
    truth_key=lambda f: (NAME, f["check"], f["cluster"]),
    claims=lambda v: [((NAME, v["check"], v["cluster"]), v.get("entry_count"))],
    truth_item=lambda f: {},
)


def _suites():
    from audit.validate.spec import ExpectationSpec, SuiteSpec

    return (SuiteSpec("demo_totals", "demo_totals", (
        ExpectationSpec("ExpectColumnValuesToBeBetween", {"column": "entry_count", "min_value": 0, "max_value": 3},
                        CHECK, "major", "no cluster's counters add up above 3"),), applies_when=("demo_totals",)),)


def _store(put, cluster, files, options):
    keys = []
    for path, rel in files:
        put(f"counters/{rel}", path.read_bytes())
        keys.append(f"counters/{rel}")
    return {"stored": keys, "rejected": []}


def _real_collect(req):
    raise ValueError("demo clusters are lab-only")


SYSTEM = System(
    name=NAME, title="Demo", checks={CHECK: Check("major", "a cluster's counters add up above the limit")},
    config=SystemConfig(DemoCluster, DemoThresholds),
    pipeline=Pipeline(collect=_real_collect, normalize=normalize, audit=audit,
                      import_kinds={"counters": ImportKind("counter JSON files", _store)},
                      sniffers=lambda: ((), [("demo.counter", lambda d, n: d.startswith(b'{"counter"'),
                                              lambda d, n: json.loads(d))])),
    report=SECTION, validation=Validation(_suites, {"demo_totals": ("metrics", "demo_totals")}),
    lab=Lab(collect=collect, config=lambda block: block),
)


@contextmanager
def registered(system: System = SYSTEM):
    systems.register(system)
    try:
        yield system
    finally:
        systems.unregister(system.name)
