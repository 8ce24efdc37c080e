"""The Kafka lab as the system record's `Lab` part (audit/systems/kafka/system.py)."""
from __future__ import annotations

from audit.contracts import CollectRequest
from audit.systems.kafka.domain.subjects import flow_wanted, wanted
from lab.kafka.runner import collect as collect_lab
from lab.scope import keep_wanted


def collect(req: CollectRequest):
    # the estate's thresholds (follower lag, MM2 redelivery tolerance): the ground truth judges by the ones the
    # audit applies
    return collect_lab(req.cluster, req.sink, req.secrets, req.as_of_ms, req.thresholds,
                       scope=req.scope if req.scope.subjects else None)


def scope_truth(truth: dict, scope, cluster) -> dict:
    """The wanted topic-partitions only: a MirrorMaker 2 item (it names its flow's `source` alias) is wanted by its
    upstream or its remote topic-partition, as the audit judges it; `acknowledged_lost` (per topic) keeps the
    topics a pattern names."""
    separators = {(m.source_alias or m.source_cluster): (m.separator or ".")
                  for m in (getattr(cluster, "mirrors", None) or ())}

    def keep(item: dict) -> bool:
        topic, partition = item.get("topic"), item.get("partition")
        if topic is None or partition is None:
            return True
        if item.get("source") is not None:
            return flow_wanted(scope, topic, partition, item["source"], separators.get(item["source"], "."))
        return wanted(scope, topic, partition)

    out = keep_wanted(truth, ("findings", "mm2_failover", "truncations"), keep)
    if isinstance(truth.get("acknowledged_lost"), dict):
        out["acknowledged_lost"] = {t: n for t, n in truth["acknowledged_lost"].items() if scope.wants(t)}
    return out
