"""Pulsar: geo-replication, cross-cluster cursor mapping, failover redeliveries and skips, PIP-33 snapshots.
docs/pulsar/ describes it; docs/formats/pulsar.md the formats it reads."""
from __future__ import annotations

from audit.collectors.pulsar.imports import KINDS
from audit.config.pulsar import PulsarCluster, PulsarThresholds
from audit.contracts import CollectRequest, Sniffer, System
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


def normalize(spark, raw_dir: str, tables_dir: str) -> dict:
    from audit.transforms.pulsar.normalize import run

    return run(spark, raw_dir, tables_dir)


def audit(spark, tables_dir: str, root: str, request) -> dict:
    from audit.transforms.pulsar.audit import run

    return run(spark, tables_dir, root, request)


def sniffers() -> list[Sniffer]:
    from audit.formats.pulsar.sniff import BY_NAME, SNIFFERS

    return [Sniffer(*s, by_name=True) for s in BY_NAME] + [Sniffer(*s) for s in SNIFFERS]


def suites():
    from audit.validate.suites.pulsar import SUITES

    return SUITES


def plan_repairs(outputs):
    from audit.repair.pulsar import plan_run

    return plan_run(outputs)


SYSTEM = System(
    name=NAME, title="Pulsar", cluster_model=PulsarCluster, thresholds_model=PulsarThresholds,
    collect=collect, normalize=normalize, audit=audit, checks=CHECKS, report=SECTION, import_kinds=KINDS,
    sniffers=sniffers, suites=suites, validate_tables={"pulsar_failover": ("metrics", "pulsar_failover")},
    plan_repairs=plan_repairs, benches=("bench.pulsar.bench_failover",), docs="docs/pulsar/",
)
