"""Kafka: leader-epoch consistency across a partition's replicas (follower truncation by leader epoch,
docs/formats/kafka.md §11; committed data lost, divergent logs) from broker log dirs, cluster metadata and
OffsetsForLeaderEpoch answers; MirrorMaker 2 offset translation and failover redeliveries / skips. docs/kafka/ describes
it; docs/formats/kafka.md the formats it reads."""
from __future__ import annotations

from audit.contracts import CollectRequest, Incident, Lab, Pipeline, Repair, System, SystemConfig, Validation
from audit.systems.kafka.collect.imports import KINDS
from audit.systems.kafka.config import KafkaCluster, KafkaThresholds
from audit.systems.kafka.domain.checks import CHECKS
from audit.systems.kafka.domain.subjects import partition_of_key
from audit.systems.kafka.report import SECTION

NAME = "kafka"


def collect(req: CollectRequest):
    """The real collector (source: admin or log-dirs). An incident check's subjects are topic-partition patterns
    (`orders*`, `orders-3`; audit/systems/kafka/domain/subjects.py): the scanner skips the partition dirs no pattern
    wants and the admin collector asks about the wanted partitions only."""
    from audit.systems.kafka.collect.collector import KafkaCollector

    # mirrors read their source cluster's entry (bootstrap, SASL) from the estate (KafkaCluster.source_of)
    cluster = req.cluster
    sources = {m.source_cluster: cluster.source_of(m) for m in cluster.mirrors}
    return KafkaCollector(clusters=sources, scope=req.scope if req.scope.subjects else None).collect(
        cluster, req.sink, req.secrets)


def normalize(spark, raw_dir: str, tables_dir: str) -> dict:
    from audit.systems.kafka.transforms.normalize import run

    return run(spark, raw_dir, tables_dir)


def audit(spark, tables_dir: str, attempt_dir: str, request) -> dict:
    from audit.systems.kafka.transforms.audit import run

    return run(spark, tables_dir, attempt_dir, request)


def sniffers():
    from audit.systems.kafka.formats.sniff import BY_NAME, SNIFFERS

    return BY_NAME, SNIFFERS


def suites():
    from audit.systems.kafka.suites import SUITES

    return SUITES


def plan_repairs(outputs):
    from audit.systems.kafka.repair.plan import plan_run

    return plan_run(outputs)


def repair_actions(plan, cluster, secrets):
    from audit.systems.kafka.repair.apply import actions

    return actions(plan, cluster, secrets)


def lab_collect(req: CollectRequest):
    from lab.kafka.plugin import collect as collect_lab

    return collect_lab(req)


def lab_config(block):
    from lab.kafka.config import parse_kafka_lab

    return parse_kafka_lab(block)


def lab_scope_truth(truth: dict, scope, cluster) -> dict:
    from lab.kafka.plugin import scope_truth

    return scope_truth(truth, scope, cluster)


SYSTEM = System(
    name=NAME, title="Kafka", checks=CHECKS,
    config=SystemConfig(KafkaCluster, KafkaThresholds),
    pipeline=Pipeline(collect=collect, normalize=normalize, audit=audit, import_kinds=KINDS, sniffers=sniffers),
    report=SECTION,
    validation=Validation(suites, {"kafka_partition_metrics": ("metrics", "kafka_partitions"),
                                   "kafka_replica_metrics": ("metrics", "kafka_replicas"),
                                   "kafka_mm2_failover": ("metrics", "kafka_mm2_failover")}),
    repair=Repair(plan_repairs, repair_actions),
    lab=Lab(collect=lab_collect, config=lab_config, scope_truth=lab_scope_truth),
    incident=Incident("topic-partition (`<topic>` or `<topic>-<partition>`: `orders*` or `orders-3`)",
                      partition_of_key),
    benches=("bench.kafka.bench_epochs", "bench.kafka.bench_scanner", "bench.kafka.bench_mm2"),
)
