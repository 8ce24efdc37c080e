"""Kafka: leader-epoch consistency across a partition's replicas (KIP-101 / KIP-279 truncation, committed data lost,
divergent logs) from broker log dirs, cluster metadata and OffsetsForLeaderEpoch answers; MirrorMaker 2 offset
translation and failover redeliveries / skips. docs/kafka/ describes it; docs/formats/kafka.md the formats it
reads."""
from __future__ import annotations

from audit.collectors.kafka.imports import KINDS
from audit.config.kafka import KafkaCluster, KafkaThresholds
from audit.contracts import CollectRequest, Sniffer, System, lazy, lazy_value
from audit.domain.kafka.checks import CHECKS
from audit.report.sections.kafka import SECTION

NAME = "kafka"


def collect(req: CollectRequest):
    """The lab (source: lab) or the real collector (source: admin or log-dirs)."""
    if req.cluster.source == "lab":
        from audit.lab.kafka.runner import collect as collect_lab

        # the estate's thresholds (follower lag, MM2 redelivery tolerance): the ground truth judges by the ones the
        # audit applies
        return collect_lab(req.cluster, req.sink, req.secrets, req.as_of_ms, req.thresholds)
    from audit.collectors.kafka.collector import KafkaCollector

    # mirrors read their source cluster's entry (bootstrap, SASL) from the estate (KafkaCluster.source_of)
    cluster = req.cluster
    sources = {m.source_cluster: cluster.source_of(m) for m in cluster.mirrors}
    return KafkaCollector(clusters=sources).collect(cluster, req.sink, req.secrets), None


def sniffers() -> list[Sniffer]:
    from audit.formats.kafka.sniff import BY_NAME, SNIFFERS

    return [Sniffer(*s, by_name=True) for s in BY_NAME] + [Sniffer(*s) for s in SNIFFERS]


SYSTEM = System(
    name=NAME, title="Kafka", cluster_model=KafkaCluster, thresholds_model=KafkaThresholds,
    collect=collect,
    normalize=lazy("audit.transforms.kafka.normalize:run"),
    audit=lazy("audit.transforms.kafka.audit:run"),
    checks=CHECKS, report=SECTION, import_kinds=KINDS, sniffers=sniffers,
    suites=lazy_value("audit.validate.suites.kafka:SUITES"),
    validate_tables={"kafka_partition_metrics": ("metrics", "kafka_partitions"),
                     "kafka_replica_metrics": ("metrics", "kafka_replicas"),
                     "kafka_mm2_failover": ("metrics", "kafka_mm2_failover")},
    plan_repairs=lazy("audit.repair.kafka:plan_run"),
    benches=("bench.kafka.bench_epochs", "bench.kafka.bench_scanner", "bench.kafka.bench_mm2"),
    docs="docs/kafka/",
)
