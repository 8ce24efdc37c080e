"""The session replaudit builds: its own settings (tests/conftest.py builds the suite's with get_spark)."""
from __future__ import annotations


def test_the_suite_session_has_the_evidence_defaults(spark):
    assert spark.conf.get("spark.sql.files.openCostInBytes") == "65536"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
