"""Kafka's GX suites (docs/kafka/contracts.md "Metrics" and "Checks"): metrics/kafka_partitions, metrics/kafka_replicas
and metrics/kafka_mm2_failover (written by audit/systems/kafka/transforms/audit.py), and the Kafka findings in
findings/violations. They run only when the pipeline hands over the Kafka metrics. Every expectation guards a check of
the Kafka checks table (audit.systems.kafka.domain.checks), with its severity, like the findings."""
from __future__ import annotations

from audit.systems.kafka.domain.checks import CHECKS
from audit.validate.spec import SuiteSpec, expect, unexpected_rows

SYSTEM = "kafka"
PARTITIONS, REPLICAS, MM2 = "kafka_partition_metrics", "kafka_replica_metrics", "kafka_mm2_failover"
# GX table name -> where the audit writes it under the attempt (the System record's validate_tables)
TABLES = {PARTITIONS: ("metrics", "kafka_partitions"), REPLICAS: ("metrics", "kafka_replicas"),
          MM2: ("metrics", "kafka_mm2_failover")}
KAFKA = (PARTITIONS,)
LOST, DIVERGENT, EPOCH_BATCHES, LAGGING = ("kafka.committed_data_lost", "kafka.divergent_logs",
                                           "kafka.batch_epoch_outside_cache", "kafka.follower_lagging")
SEQUENCES, ISR, MISSING = "kafka.producer_sequence_gap", "kafka.isr_missing_committed", "kafka.replica_missing"
MM2_MISMATCH, MM2_AHEAD, MM2_REDELIVERY = ("kafka.mm2_checkpoint_mismatch", "kafka.mm2_target_group_ahead",
                                           "kafka.mm2_failover_redelivery")

KAFKA_PARTITIONS = SuiteSpec(PARTITIONS, PARTITIONS, (
    *(expect("ExpectColumnValuesToNotBeNull", {"column": c}, LOST, CHECKS, f"every partition row has its {c}")
      for c in ("cluster", "topic", "partition")),
    expect("ExpectColumnValuesToBeBetween", {"column": "max_lag", "min_value": 0}, LAGGING, CHECKS,
           "a follower's lag is never negative"),
    expect("UnexpectedRowsExpectation",
           unexpected_rows("collected_replicas = 0 AND NOT reference_rule <=> 'no-replica-collected'"), MISSING, CHECKS,
           "a partition with no collected replica says so (it is counted, never dropped)"),
    expect("UnexpectedRowsExpectation", unexpected_rows("isr_size > replica_count"), ISR, CHECKS,
           "the ISR is a subset of the assigned replicas"),
), applies_when=KAFKA)

KAFKA_REPLICAS = SuiteSpec(REPLICAS, REPLICAS, (
    expect("ExpectColumnValuesToBeInSet", {"column": "role", "value_set": ["reference", "follower", "unjudged"]},
           DIVERGENT, CHECKS, "a replica is the partition's reference, a follower of it, or unjudged"),
    expect("UnexpectedRowsExpectation", unexpected_rows("role = 'reference' AND first_mismatch_offset IS NOT NULL"),
           DIVERGENT, CHECKS, "the reference replica is never compared with itself"),
    expect("UnexpectedRowsExpectation", unexpected_rows("batches <> v2_batches + legacy_batches"), EPOCH_BATCHES,
           CHECKS, "every indexed batch is a v2 batch or a legacy magic 0/1 message set"),
    expect("UnexpectedRowsExpectation", unexpected_rows("batch_epoch_violations > v2_batches"), EPOCH_BATCHES,
           CHECKS, "batch epoch violations are counted among the v2 batches (legacy ones have no epoch)"),
    expect("ExpectColumnValuesToBeBetween", {"column": "sequence_gaps", "min_value": 0}, SEQUENCES, CHECKS,
           "sequence gaps are never negative"),
    expect("UnexpectedRowsExpectation", unexpected_rows("log_start_offset > log_end_offset"), LOST, CHECKS,
           "a replica's log start offset is at or below its log end offset"),
), applies_when=KAFKA)

KAFKA_MM2 = SuiteSpec(MM2, MM2, (
    *(expect("ExpectColumnValuesToNotBeNull", {"column": c}, MM2_MISMATCH, CHECKS,
             f"every MirrorMaker 2 row has its {c}") for c in ("cluster", "source", "group", "topic", "partition",
                                                              "rule")),
    expect("ExpectColumnValuesToBeInSet", {"column": "rule", "value_set": ["pre-3.4.1", "3.4.1+"]}, MM2_MISMATCH,
           CHECKS, "the translation rule is OffsetSyncStore's before 3.4.1 or from 3.4.1 (KAFKA-14666)"),
    expect("UnexpectedRowsExpectation", unexpected_rows("bounds_low > bounds_high"), MM2_MISMATCH, CHECKS,
           "the failover offset bounds are an interval"),
    expect("ExpectColumnValuesToBeBetween", {"column": "redelivered_min", "min_value": 0}, MM2_REDELIVERY, CHECKS,
           "redeliveries are never negative"),
    expect("UnexpectedRowsExpectation", unexpected_rows("redelivered_min > redelivered_max"), MM2_REDELIVERY, CHECKS,
           "the redelivered bounds are an interval"),
    expect("ExpectColumnValuesToBeBetween", {"column": "skipped_min", "min_value": 0}, MM2_AHEAD, CHECKS,
           "skips are never negative"),
    expect("UnexpectedRowsExpectation", unexpected_rows("skipped_min > skipped_max"), MM2_AHEAD, CHECKS,
           "the skipped bounds are an interval"),
    expect("UnexpectedRowsExpectation",
           unexpected_rows("exact AND (redelivered_min <> redelivered_max OR skipped_min <> skipped_max)"),
           MM2_REDELIVERY, CHECKS, "an exact row has one redelivered and one skipped count"),
), applies_when=KAFKA)

KAFKA_VIOLATIONS = SuiteSpec("kafka_violations", "violations", (
    # each check: its findings name the partition they are about, with the contract severity
    *(expect("UnexpectedRowsExpectation",
             unexpected_rows(f"system = '{SYSTEM}' AND `check` = '{c}' AND (severity <> '{k.severity}' OR "
                             "get_json_object(evidence, '$.topic') IS NULL OR "
                             "get_json_object(evidence, '$.partition') IS NULL)"),
             c, CHECKS, f"every {c} finding names its topic and partition, with severity {k.severity}")
      for c, k in sorted(CHECKS.items())),
    # one per check of the table, with its severity: the run fails on any Kafka finding at that severity
    *(expect("UnexpectedRowsExpectation", unexpected_rows(f"`check` = '{c}'"), c, CHECKS, f"no {c} finding")
      for c in sorted(CHECKS)),
), applies_when=KAFKA)

SUITES: tuple[SuiteSpec, ...] = (KAFKA_PARTITIONS, KAFKA_REPLICAS, KAFKA_MM2, KAFKA_VIOLATIONS)
