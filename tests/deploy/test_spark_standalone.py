"""The Spark jobs run unchanged on a real Spark cluster: the audit of a lab run submitted with spark-submit to a
standalone master and worker on loopback writes the same findings and metrics as the same job in local mode."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from audit import pipeline
from audit.config.estate import load_estate
from spark_jobs.run import run_stage
from tests.estates import write_lab_estate
from tests.spark_standalone import SPARK_HOME, StandaloneCluster

REPO = Path(__file__).resolve().parents[2]
AS_OF_MS = 1_790_000_000_000
# a master, a worker, an executor and a driver JVM: run by `make deploy-test` and CI, not by every `make test`
pytestmark = pytest.mark.deploy


def _rows(spark, folder: Path) -> list[tuple]:
    df = spark.read.parquet(str(folder))
    return sorted(tuple(r) for r in df.select(sorted(df.columns)).collect())


def test_the_audit_submitted_to_a_standalone_cluster_equals_local_mode(tmp_path, spark):
    estate_file = write_lab_estate(tmp_path / "estate.yaml", estate="standalone",
                                   store=f'{{uri: "file://{tmp_path / "store"}"}}', cluster="bk-s",
                                   lab="{seed: 5, ledgers: 24}")
    ctx = pipeline.start_run(str(estate_file), "r1", AS_OF_MS)
    pipeline.collect_cluster(ctx, "bookkeeper", "bk-s")
    attempt = Path(ctx.store.local_path(ctx.writer.prefix.rstrip("/")))
    tables = tmp_path / "tables"
    run_stage(spark, "bookkeeper", "normalize", str(attempt / "raw"), str(tables))
    estate = load_estate(str(estate_file))
    local = tmp_path / "local"
    run_stage(spark, "bookkeeper", "audit", str(tables), str(local), run_id="r1", as_of_ms=AS_OF_MS,
              thresholds=estate.thresholds, clusters=tuple(estate.clusters("bookkeeper")))

    cluster_out = tmp_path / "cluster"
    with StandaloneCluster(cores=2) as cluster:
        done = subprocess.run(
            [str(SPARK_HOME / "bin" / "spark-submit"), "--master", cluster.master_url,
             "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.executor.memory=512m",
             "--conf", f"spark.pyspark.python={sys.executable}", "--conf", "spark.ui.enabled=false",
             str(REPO / "spark_jobs" / "run.py"), "--system", "bookkeeper", "--stage", "audit",
             "--input", str(tables), "--output", str(cluster_out), "--estate", str(estate_file),
             "--run-id", "r1", "--as-of-ms", str(AS_OF_MS), "--master", cluster.master_url],
            capture_output=True, text=True, timeout=300, cwd=REPO,
            env={**cluster.env(), "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(REPO)})
        assert done.returncode == 0, done.stderr[-4000:] + cluster.logs()
        # the executors ran on the worker, not in the driver
        apps = list((cluster.root / "work").glob("app-*"))
        assert apps and any(apps[0].rglob("stderr")), cluster.logs()

    local_tables = sorted(p.relative_to(local) for p in local.rglob("_SUCCESS"))
    assert sorted(p.relative_to(cluster_out) for p in cluster_out.rglob("_SUCCESS")) == local_tables
    assert any("violations" in str(p) for p in local_tables)
    for marker in local_tables:
        folder = marker.parent
        assert _rows(spark, cluster_out / folder) == _rows(spark, local / folder), folder
    assert _rows(spark, local / "findings" / "violations")       # the lab's faults were found in both
