"""A SparkSession for the validation tests: the shared factory (reuses an active session)."""
import pytest


@pytest.fixture(scope="session")
def spark():
    from audit.sparkutil.session import get_spark

    session = get_spark("replaudit-tests-validate", master="local[1]",
                        conf={"spark.sql.shuffle.partitions": "1", "spark.ui.showConsoleProgress": "false"})
    yield session
    session.stop()
