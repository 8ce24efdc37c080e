"""Pulsar: geo-replication, cross-cluster cursor mapping, failover redeliveries and skips, PIP-33 snapshots.
docs/pulsar/ describes it; docs/formats/pulsar.md the formats it reads."""
from __future__ import annotations

from audit.collectors.pulsar.imports import KINDS
from audit.config.pulsar import PulsarCluster, PulsarThresholds
from audit.contracts import CollectRequest, Sniffer, System, lazy, lazy_value
from audit.domain.pulsar.checks import CHECKS
from audit.report.sections.pulsar import SECTION

NAME = "pulsar"


def collect(req: CollectRequest):
    """The lab (source: lab) or the admin REST collector (source: admin)."""
    if req.cluster.source == "lab":
        from audit.lab.pulsar.runner import collect as collect_lab

        th = req.thresholds
        return collect_lab(req.cluster, req.sink, req.secrets, req.as_of_ms, {
            "replicator_backlog_max": th.pulsar_replicator_backlog_max,
            "snapshot_max_age_s": th.pulsar_snapshot_max_age_s})
    from audit.collectors.pulsar.collector import PulsarCollector

    return PulsarCollector().collect(req.cluster, req.sink, req.secrets), None


def sniffers() -> list[Sniffer]:
    from audit.formats.pulsar.sniff import BY_NAME, SNIFFERS

    return [Sniffer(*s, by_name=True) for s in BY_NAME] + [Sniffer(*s) for s in SNIFFERS]


SYSTEM = System(
    name=NAME, title="Pulsar", cluster_model=PulsarCluster, thresholds_model=PulsarThresholds,
    collect=collect,
    normalize=lazy("audit.transforms.pulsar.normalize:run"),
    audit=lazy("audit.transforms.pulsar.audit:run"),
    checks=CHECKS, report=SECTION, import_kinds=KINDS, sniffers=sniffers,
    suites=lazy_value("audit.validate.suites.pulsar:SUITES"),
    validate_tables={"pulsar_failover": ("metrics", "pulsar_failover")},
    plan_repairs=lazy("audit.repair.pulsar:plan_run"),
    benches=("bench.pulsar.bench_failover",),
    docs="docs/pulsar/",
)
