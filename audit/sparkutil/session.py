"""One SparkSession per process, set up for quiet, deterministic local runs. SPARK_LOCAL_IP is pinned to
127.0.0.1: without it Spark picks another interface when the host name resolves to loopback, and warns."""
from __future__ import annotations

import os
import sys
from typing import Mapping

# Evidence is many small files (checkpoints, cursors, batch indexes): Spark's 4 MB open cost per file packs only
# ~32 of them into a read task, and every normalizer's table write scans its input again; 64 KB packs thousands
# (normalize CPU 140 s -> 56 s on a 20-world lab estate of 9,500 files). An estate's `spark.conf` still wins.
EVIDENCE_DEFAULTS = {"spark.sql.files.openCostInBytes": "65536"}

LOCAL_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",    # progress bars garble task logs
    "spark.sql.shuffle.partitions": "4",        # the default 200 only costs scheduling time locally
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


def get_spark(app_name: str = "replaudit", master: str | None = None, conf: Mapping[str, str] | None = None):
    """The active session if there is one (its config is left alone), else a new one.

    `master` defaults to $SPARK_MASTER or local[*]. Workers run this interpreter unless PYSPARK_PYTHON
    says otherwise, so `audit` (installed into the same venv) is importable in UDFs."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    master = master or os.environ.get("SPARK_MASTER") or "local[*]"
    builder = SparkSession.builder.appName(app_name).master(master)
    settings = dict(LOCAL_DEFAULTS) if master.startswith("local") else {"spark.ui.enabled": "false"}
    settings.update(EVIDENCE_DEFAULTS)
    settings.update(conf or {})
    for k, v in settings.items():
        builder = builder.config(k, str(v))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("REPLAUDIT_SPARK_LOG_LEVEL", "ERROR"))
    return spark
