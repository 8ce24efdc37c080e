"""Kafka: leader-epoch consistency across a partition's replicas (KIP-101 / KIP-279 truncation, committed data lost,
divergent logs) from broker log dirs, cluster metadata and OffsetsForLeaderEpoch answers; MirrorMaker 2 offset
translation and failover redeliveries / skips. docs/kafka/ describes it; docs/formats/kafka.md the formats it
reads."""
from __future__ import annotations

from audit.systems.kafka.collect.imports import KINDS
from audit.systems.kafka.config import KafkaCluster, KafkaThresholds
from audit.contracts import CollectRequest, Sniffer, System, lazy, lazy_value
from audit.systems.kafka.domain.checks import CHECKS
from audit.systems.kafka.domain.subjects import flow_wanted, partition_of_key, wanted
from audit.systems.kafka.report import SECTION
from lab.kafka.config import parse_kafka_lab

NAME = "kafka"


def collect(req: CollectRequest):
    """The lab (source: lab) or the real collector (source: admin or log-dirs). An incident check's subjects are
    topic-partition patterns (`orders*`, `orders-3`; audit/systems/kafka/domain/subjects.py): the scanner skips the
    partition dirs no pattern wants, the admin collector asks about the wanted partitions only, the lab stores only
    their evidence (and the whole cluster's) and its ground truth speaks only of them."""
    scoped = bool(req.scope.subjects)
    if req.cluster.source == "lab":
        from audit.collectors.base import ScopedSink
        from lab.kafka.runner import collect as collect_lab

        # the estate's thresholds (follower lag, MM2 redelivery tolerance): the ground truth judges by the ones the
        # audit applies
        sink = ScopedSink(req.sink, partition_of_key, req.scope) if scoped else req.sink
        report, truth = collect_lab(req.cluster, sink, req.secrets, req.as_of_ms, req.thresholds,
                                    scope=req.scope if scoped else None)
        return report, (_scoped_truth(truth, req.scope, req.cluster) if scoped else truth)
    from audit.systems.kafka.collect.collector import KafkaCollector

    # mirrors read their source cluster's entry (bootstrap, SASL) from the estate (KafkaCluster.source_of)
    cluster = req.cluster
    sources = {m.source_cluster: cluster.source_of(m) for m in cluster.mirrors}
    return KafkaCollector(clusters=sources, scope=req.scope if scoped else None).collect(
        cluster, req.sink, req.secrets), None


def _scoped_truth(truth: dict, scope, cluster) -> dict:
    """The lab's ground truth of the wanted topic-partitions only (what the scoped collection can speak for): a
    MirrorMaker 2 item (it names its flow's `source` alias) is wanted by its upstream or its remote topic-partition,
    as the audit judges it; `acknowledged_lost` (per topic) keeps the topics a pattern names."""
    separators = {(m.source_alias or m.source_cluster): (m.separator or ".")
                  for m in (getattr(cluster, "mirrors", None) or ())}

    def keep(item: dict) -> bool:
        topic, partition = item.get("topic"), item.get("partition")
        if topic is None or partition is None:
            return True
        if item.get("source") is not None:
            return flow_wanted(scope, topic, partition, item["source"], separators.get(item["source"], "."))
        return wanted(scope, topic, partition)

    out = {**truth, **{k: [i for i in truth[k] if keep(i)] for k in ("findings", "mm2_failover", "truncations")
                       if isinstance(truth.get(k), list)}}
    if isinstance(truth.get("acknowledged_lost"), dict):
        out["acknowledged_lost"] = {t: n for t, n in truth["acknowledged_lost"].items() if scope.wants(t)}
    return out


def sniffers() -> list[Sniffer]:
    from audit.systems.kafka.formats.sniff import BY_NAME, SNIFFERS

    return [Sniffer(*s, by_name=True) for s in BY_NAME] + [Sniffer(*s) for s in SNIFFERS]


SYSTEM = System(
    name=NAME, title="Kafka", cluster_model=KafkaCluster, thresholds_model=KafkaThresholds,
    collect=collect,
    normalize=lazy("audit.systems.kafka.transforms.normalize:run"),
    audit=lazy("audit.systems.kafka.transforms.audit:run"),
    checks=CHECKS, report=SECTION, import_kinds=KINDS, sniffers=sniffers,
    suites=lazy_value("audit.systems.kafka.suites:SUITES"),
    validate_tables={"kafka_partition_metrics": ("metrics", "kafka_partitions"),
                     "kafka_replica_metrics": ("metrics", "kafka_replicas"),
                     "kafka_mm2_failover": ("metrics", "kafka_mm2_failover")},
    plan_repairs=lazy("audit.systems.kafka.repair.plan:plan_run"),
    repair_actions=lazy("audit.systems.kafka.repair.apply:actions"),
    benches=("bench.kafka.bench_epochs", "bench.kafka.bench_scanner", "bench.kafka.bench_mm2"),
    docs="docs/kafka/",
    subject="topic-partition (`<topic>` or `<topic>-<partition>`: `orders*` or `orders-3`)",
    lab_config=parse_kafka_lab,
)
