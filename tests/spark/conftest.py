import pytest


@pytest.fixture(scope="session")
def spark():
    from audit.sparkutil.session import get_spark

    session = get_spark("replaudit-tests", master="local[2]",
                        conf={"spark.sql.shuffle.partitions": "2", "spark.ui.showConsoleProgress": "false"})
    yield session
    session.stop()
