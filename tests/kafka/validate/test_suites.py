"""The Kafka GX suites over small Spark DataFrames in the audit's own metrics schemas: every expectation with its
exact unexpected count, and the suites left out of a run without Kafka metrics."""
import json
from pathlib import Path

import pytest

from audit.systems.kafka.domain.checks import CHECKS
from audit.systems.kafka.system import SYSTEM
from audit.transforms.common import VIOLATIONS
from audit.systems.kafka.transforms.audit_rows import MM2_FAILOVER, PARTITION_METRICS, REPLICA_METRICS
from audit.validate.gx_runner import applicable_suites, run_validations
from audit.systems.kafka.suites import (KAFKA_MM2, KAFKA_PARTITIONS, KAFKA_REPLICAS, KAFKA_VIOLATIONS, MM2,
                                         PARTITIONS, REPLICAS, SUITES, TABLES)

PROJECT = Path(__file__).resolve().parents[3] / "expectations"


def _row(schema, **values) -> dict:
    return {name: values.get(name) for name in schema.fieldNames()}


def part(p: int, **kw) -> dict:
    return _row(PARTITION_METRICS, **{"run_id": "r1", "cluster": "east", "topic": "t", "partition": p,
                                      "replica_count": 3, "collected_replicas": 3, "isr_size": 3, "max_lag": 0, **kw})


def rep(broker: int, **kw) -> dict:
    return _row(REPLICA_METRICS, **{"run_id": "r1", "cluster": "east", "topic": "t", "partition": 0,
                                    "broker": broker, "role": "follower", "log_start_offset": 0,
                                    "log_end_offset": 10, "batches": 4, "v2_batches": 4, "legacy_batches": 0,
                                    "batch_epoch_violations": 0, "sequence_gaps": 0, **kw})


def mm2(name: str | None, **kw) -> dict:
    return _row(MM2_FAILOVER, **{"run_id": "r1", "cluster": "east", "source": "west", "group": name,
                                 "topic": "orders", "partition": 0, "rule": "3.4.1+", "bounds_low": 5,
                                 "bounds_high": 5, "exact": True, "redelivered_min": 0, "redelivered_max": 0,
                                 "skipped_min": 0, "skipped_max": 0, **kw})


PARTITION_ROWS = [part(0), part(1, max_lag=-1, isr_size=4), part(2, collected_replicas=0, topic=None)]
REPLICA_ROWS = [rep(1, role="reference"), rep(2, role="reference", first_mismatch_offset=3),
                rep(3, role="leader", batches=5, batch_epoch_violations=9, log_start_offset=11, sequence_gaps=-1)]
MM2_ROWS = [mm2("clean"), mm2("bad", rule="3.4", bounds_low=7, redelivered_min=2, redelivered_max=1,
                              skipped_min=-1),
            mm2(None, exact=True, skipped_min=0, skipped_max=3)]


def kv(check: str, severity: str, **evidence) -> tuple:
    return ("r1", "kafka", "east", check, severity, "t-0", 1, "m", json.dumps(evidence))


FULL = {"topic": "t", "partition": 0}
FINDINGS = [kv("kafka.divergent_logs", "critical", broker=2, **FULL),
            kv("kafka.follower_lagging", "major", broker=2, **FULL),         # wrong severity
            kv("kafka.high_watermark_above_log_end", "warning", topic="t"),  # evidence without the partition
            ("r1", "pulsar", "p", "pulsar.failover_loss", "critical", "x", 1, "m", "{}")]


@pytest.fixture(scope="module")
def outcome(spark, tmp_path_factory):
    tables = {PARTITIONS: spark.createDataFrame(PARTITION_ROWS, PARTITION_METRICS),
              REPLICAS: spark.createDataFrame(REPLICA_ROWS, REPLICA_METRICS),
              MM2: spark.createDataFrame(MM2_ROWS, MM2_FAILOVER),
              "violations": spark.createDataFrame(FINDINGS, VIOLATIONS)}
    return run_validations(spark, tables, PROJECT, tmp_path_factory.mktemp("docs"))


def _by_description(outcome, name):
    (suite,) = [s for s in outcome.suites if s.name == name]
    return suite, {e.description: (e.success, e.unexpected_count) for e in suite.expectations}


def _expected(spec, failures: dict) -> dict:
    out = {e.description: (True, 0) for e in spec.expectations}
    out.update({d: (False, n) for d, n in failures.items()})
    return out


def test_partition_suite_counts(outcome):
    suite, got = _by_description(outcome, PARTITIONS)
    assert suite.status == "failed"
    assert got == _expected(KAFKA_PARTITIONS, {
        "every partition row has its topic": 1, "a follower's lag is never negative": 1,
        "a partition with no collected replica says so (it is counted, never dropped)": 1,
        "the ISR is a subset of the assigned replicas": 1})


def test_replica_suite_counts(outcome):
    _, got = _by_description(outcome, REPLICAS)
    assert got == _expected(KAFKA_REPLICAS, {
        "a replica is the partition's reference, a follower of it, or unjudged": 1,
        "the reference replica is never compared with itself": 1,
        "every indexed batch is a v2 batch or a legacy magic 0/1 message set": 1,
        "batch epoch violations are counted among the v2 batches (legacy ones have no epoch)": 1,
        "sequence gaps are never negative": 1,
        "a replica's log start offset is at or below its log end offset": 1})


def test_mm2_suite_counts(outcome):
    _, got = _by_description(outcome, MM2)
    assert got == _expected(KAFKA_MM2, {
        "every MirrorMaker 2 row has its group": 1,
        "the translation rule is OffsetSyncStore's before 3.4.1 or from 3.4.1 (KAFKA-14666)": 1,
        "the failover offset bounds are an interval": 1, "the redelivered bounds are an interval": 1,
        "skips are never negative": 1, "an exact row has one redelivered and one skipped count": 2})


def test_violations_suite_counts(outcome):
    suite, got = _by_description(outcome, "kafka_violations")
    assert suite.table == "violations"
    assert got == _expected(KAFKA_VIOLATIONS, {
        "every kafka.follower_lagging finding names its topic and partition, with severity warning": 1,
        "every kafka.high_watermark_above_log_end finding names its topic and partition, with severity warning": 1,
        "no kafka.divergent_logs finding": 1, "no kafka.follower_lagging finding": 1,
        "no kafka.high_watermark_above_log_end finding": 1})
    assert {(e.check, e.severity) for e in suite.expectations} == {(c, k.severity) for c, k in CHECKS.items()}


def test_every_expectation_guards_a_kafka_check_with_its_severity():
    for spec in SUITES:
        for e in spec.expectations:
            assert e.check in CHECKS and e.severity == CHECKS[e.check].severity


def test_the_record_hands_over_the_metrics_the_suites_read():
    assert dict(SYSTEM.validation.tables) == TABLES
    assert {s.table for s in SUITES} == {*TABLES, "violations"}


def test_kafka_suites_apply_only_with_kafka_metrics():
    names = [s.name for s in applicable_suites({"violations": 1, PARTITIONS: None})]
    assert not [n for n in names if n.startswith("kafka")]
    names = [s.name for s in applicable_suites({"violations": 1, PARTITIONS: 1})]
    assert [n for n in names if n.startswith("kafka")] == [s.name for s in SUITES]
