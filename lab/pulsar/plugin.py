"""The Pulsar lab as the system record's `Lab` part (audit/systems/pulsar/system.py)."""
from __future__ import annotations

from audit.contracts import CollectRequest
from audit.systems.pulsar.collect.discovery import subject_names
from lab.pulsar.runner import collect as collect_lab
from lab.pulsar.runner import reread  # noqa: F401  (the Lab part's reread)
from lab.scope import keep_wanted


def collect(req: CollectRequest):
    # the estate's thresholds (backlog, snapshot age, message TTL, redelivery tolerance): the ground truth judges by
    # the ones the audit applies
    return collect_lab(req.cluster, req.sink, req.secrets, req.as_of_ms, req.thresholds)


def scope_truth(truth: dict, scope, cluster) -> dict:
    """The topics asked for only."""
    def wanted(item: dict) -> bool:
        topic = item.get("topic")
        return topic is None or scope.wants_any(*subject_names(topic))

    return keep_wanted(truth, ("findings", "failover"), wanted)
