"""Session-wide test environment. Airflow reads AIRFLOW_HOME at import, so it is set before anything imports it:
Airflow must never touch ~/airflow."""
import os
import sys

import pytest
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("AIRFLOW_HOME", str(REPO / ".airflow" / "test"))
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO / "dags")
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", str(REPO / ".venv" / "bin" / "python"))
os.environ.setdefault("REPLAUDIT_HOME", str(REPO))
# The suite's Spark work is hundreds of small queries on tiny tables, CPU-bound on two cores, and nearly all of that
# CPU is the driver JVM's: compiling each plan to Java (whole-stage codegen), re-planning it (adaptive execution), the
# JIT's optimising tier and a parallel collector cost more than they save on data this small (one end-to-end CLI
# test: the JVM's CPU 120 s -> about 60 s). Production sessions keep Spark's defaults; an explicit
# PYSPARK_SUBMIT_ARGS wins.
os.environ.setdefault("PYSPARK_SUBMIT_ARGS", "--conf spark.sql.codegen.wholeStage=false "
                      "--conf spark.sql.adaptive.enabled=false --driver-java-options "
                      "'-XX:TieredStopAtLevel=1 -XX:CICompilerCount=1 -XX:+UseSerialGC' pyspark-shell")
Path(os.environ["AIRFLOW_HOME"]).mkdir(parents=True, exist_ok=True)

pytest_plugins = ["tests.zkfixture", "tests.s3fixture"]

# An xdist worker's __main__ (execnet) has neither __spec__ nor __file__, which pyspark.sql.connect takes for a
# doctest run and answers with sys.exit(0) when GX imports it: give it the file it looks for.
_main = sys.modules["__main__"]
if getattr(_main, "__spec__", None) is None and not hasattr(_main, "__file__"):
    _main.__file__ = __file__


def pytest_sessionfinish(session, exitstatus):
    """Stop the shared SparkSession while logging still works (py4j logs on interpreter teardown otherwise)."""
    import sys

    if "pyspark" in sys.modules:
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for the whole suite (the pipeline's own get_spark reuses it); stopped at the end."""
    from audit.sparkutil.session import get_spark

    return get_spark("replaudit-tests", master="local[2]",
                     conf={"spark.sql.shuffle.partitions": "2", "spark.ui.showConsoleProgress": "false"})


# Tests that run a whole audit (the pipeline's run_all, `replaudit run/check/demo`, or an Airflow dag.test), by
# module: `-m "not e2e"` leaves the unit and component tests.
E2E_MODULES = {
    "tests/alerts/test_lab_nights.py", "tests/cli/test_cli.py", "tests/cli/test_import_ctime.py",
    "tests/dags/test_incident_dag.py", "tests/dags/test_nightly_audit_dag.py", "tests/dags/test_repair_dag.py",
    "tests/history/test_history_nights.py", "tests/incident/test_check.py", "tests/kafka/incident/test_subjects.py",
    "tests/kafka/pipeline/test_kafka_lab_seeds.py", "tests/kafka/pipeline/test_real_logdir.py",
    "tests/pipeline/test_pipeline_s3.py", "tests/pulsar/cli/test_import.py", "tests/pulsar/cli/test_snapshots_apart.py",
    "tests/test_plugin_system.py", "tests/bookkeeper/pipeline/test_lab_seeds.py",
    "tests/pulsar/pipeline/test_lab_seeds.py",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
        if Path(str(item.fspath)).resolve().relative_to(REPO).as_posix() in E2E_MODULES:
            item.add_marker(pytest.mark.e2e)
