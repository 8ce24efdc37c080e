"""The session replaudit builds: its own settings, and the caller's winning over them."""
from __future__ import annotations


def test_the_suite_session_has_the_evidence_defaults_and_the_callers_settings(spark):
    # tests/conftest.py built it with get_spark(conf={"spark.sql.shuffle.partitions": "2", ...})
    assert spark.conf.get("spark.sql.files.openCostInBytes") == "65536"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
