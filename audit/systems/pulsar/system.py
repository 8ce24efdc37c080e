"""Pulsar: geo-replication, cross-cluster cursor mapping, failover redeliveries and skips, PIP-33 snapshots.
docs/pulsar/ describes it; docs/formats/pulsar.md the formats it reads."""
from __future__ import annotations

from audit.systems.pulsar.collect.discovery import subject_names
from audit.systems.pulsar.collect.imports import KINDS
from audit.systems.pulsar.config import PulsarCluster, PulsarThresholds
from audit.contracts import CollectRequest, RereadRequest, Sniffer, System, lazy, lazy_value
from audit.systems.pulsar.domain.checks import CHECKS
from audit.systems.pulsar.report import SECTION
from lab.pulsar.config import parse_pulsar_lab

NAME = "pulsar"


def topic_of_key(key: str) -> tuple[str, ...] | None:
    """The topic a raw key belongs to (`topics/<tenant>/<namespace>/<local>/...`), as its full name and, for a
    partition, its partitioned topic's too; None for keys of the whole cluster."""
    if not key.startswith("topics/"):
        return None
    parts = key.split("/")
    if len(parts) < 5:
        return None
    return subject_names(f"persistent://{parts[1]}/{parts[2]}/{parts[3]}")


def collect(req: CollectRequest):
    """The lab (source: lab) or the admin REST collector (source: admin). An incident check's subjects are topic
    patterns (`persistent://tenant/ns/topic*`): the admin collector reads only the topics they match, the lab
    stores only those and its ground truth speaks only of them."""
    scoped = bool(req.scope.subjects)
    if req.cluster.source == "lab":
        from audit.collectors.base import ScopedSink
        from lab.pulsar.runner import collect as collect_lab

        # the estate's thresholds (backlog, snapshot age, message TTL, redelivery tolerance): the ground truth
        # judges by the ones the audit applies
        sink = ScopedSink(req.sink, topic_of_key, req.scope) if scoped else req.sink
        report, truth = collect_lab(req.cluster, sink, req.secrets, req.as_of_ms, req.thresholds)
        return report, (_scoped_truth(truth, req.scope) if scoped else truth)
    from audit.systems.pulsar.collect.collector import PulsarCollector

    return PulsarCollector(scope=req.scope).collect(req.cluster, req.sink, req.secrets), None


def _scoped_truth(truth: dict, scope) -> dict:
    """The lab's ground truth of the topics asked for only (what the scoped collection can speak for)."""
    def wanted(item: dict) -> bool:
        topic = item.get("topic")
        return topic is None or scope.wants_any(*subject_names(topic))

    return {**truth, **{k: [i for i in truth[k] if wanted(i)] for k in ("findings", "failover")
                        if isinstance(truth.get(k), list)}}


def reread(req: RereadRequest) -> dict:
    """Every collected topic's cursors read again, on every cluster, in two passes (docs/pulsar/contracts.md
    "Rereads"): lab clusters by their simulated world, admin clusters through the REST API."""
    from dataclasses import replace

    lab = tuple(c for c in req.clusters if c.source == "lab")
    admin = tuple(c for c in req.clusters if c.source != "lab")
    reports = {}
    if lab:
        from lab.pulsar.runner import reread as reread_lab

        reports.update(reread_lab(replace(req, clusters=lab)))
    if admin:
        from audit.systems.pulsar.collect.reread import reread as reread_admin

        reports.update(reread_admin(replace(req, clusters=admin)))
    return reports


def sniffers() -> list[Sniffer]:
    from audit.systems.pulsar.formats.sniff import BY_NAME, SNIFFERS

    return [Sniffer(*s, by_name=True) for s in BY_NAME] + [Sniffer(*s) for s in SNIFFERS]


SYSTEM = System(
    name=NAME, title="Pulsar", cluster_model=PulsarCluster, thresholds_model=PulsarThresholds,
    collect=collect,
    normalize=lazy("audit.systems.pulsar.transforms.normalize:run"),
    audit=lazy("audit.systems.pulsar.transforms.audit:run"),
    checks=CHECKS, report=SECTION, import_kinds=KINDS, sniffers=sniffers,
    suites=lazy_value("audit.systems.pulsar.suites:SUITES"),
    validate_tables={"pulsar_failover": ("metrics", "pulsar_failover")},
    plan_repairs=lazy("audit.systems.pulsar.repair.plan:plan_run"),
    repair_actions=lazy("audit.systems.pulsar.repair.apply:actions"),
    reread=reread,
    benches=("bench.pulsar.bench_failover", "bench.pulsar.bench_incident"),
    docs="docs/pulsar/",
    subject="topic (persistent://tenant/namespace/topic; a partitioned topic's name matches its partitions)",
    lab_config=parse_pulsar_lab,
)
