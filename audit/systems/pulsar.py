"""Pulsar: geo-replication, cross-cluster cursor mapping, failover redeliveries and skips, PIP-33 snapshots.
docs/pulsar/ describes it; docs/formats/pulsar.md the formats it reads."""
from __future__ import annotations

from audit.collectors.pulsar.imports import KINDS
from audit.config.pulsar import PulsarCluster, PulsarThresholds
from audit.contracts import CollectRequest, RereadRequest, Sniffer, System, lazy, lazy_value
from audit.domain.pulsar.checks import CHECKS
from audit.report.sections.pulsar import SECTION

NAME = "pulsar"


def collect(req: CollectRequest):
    """The lab (source: lab) or the admin REST collector (source: admin)."""
    if req.cluster.source == "lab":
        from audit.lab.pulsar.runner import collect as collect_lab

        # the estate's thresholds (backlog, snapshot age, message TTL, redelivery tolerance): the ground truth
        # judges by the ones the audit applies
        return collect_lab(req.cluster, req.sink, req.secrets, req.as_of_ms, req.thresholds)
    from audit.collectors.pulsar.collector import PulsarCollector

    return PulsarCollector().collect(req.cluster, req.sink, req.secrets), None


def reread(req: RereadRequest) -> dict:
    """Every collected topic's cursors read again, on every cluster, in two passes (docs/pulsar/contracts.md
    "Rereads"): lab clusters by their simulated world, admin clusters through the REST API."""
    from dataclasses import replace

    lab = tuple(c for c in req.clusters if c.source == "lab")
    admin = tuple(c for c in req.clusters if c.source != "lab")
    reports = {}
    if lab:
        from audit.lab.pulsar.runner import reread as reread_lab

        reports.update(reread_lab(replace(req, clusters=lab)))
    if admin:
        from audit.collectors.pulsar.reread import reread as reread_admin

        reports.update(reread_admin(replace(req, clusters=admin)))
    return reports


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
    reread=reread,
    benches=("bench.pulsar.bench_failover",),
    docs="docs/pulsar/",
)
