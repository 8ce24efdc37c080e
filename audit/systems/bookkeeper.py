"""BookKeeper: replica counts and placement (ReplicasCheck semantics) from ledger metadata and each bookie's
entry lists. docs/bookkeeper/ describes it; docs/formats/bookkeeper.md the formats it reads."""
from __future__ import annotations

from audit.collectors.bookkeeper.imports import KINDS
from audit.config.bookkeeper import BookKeeperCluster, BookKeeperThresholds
from audit.contracts import CollectRequest, Sniffer, System
from audit.domain.bookkeeper.checks import CHECKS
from audit.report.sections.bookkeeper import SECTION

NAME = "bookkeeper"


def collect(req: CollectRequest):
    """The lab (source: lab) or the real collector (source: zookeeper)."""
    if req.cluster.source == "lab":
        from audit.lab.bookkeeper.runner import collect as collect_lab

        return collect_lab(req.cluster, req.sink, req.secrets, req.as_of_ms, req.thresholds.open_ledger_max_age_s)
    from audit.collectors.bookkeeper.collector import BookKeeperCollector

    return BookKeeperCollector().collect(req.cluster, req.sink, req.secrets), None


def normalize(spark, raw_dir: str, tables_dir: str) -> dict:
    from audit.transforms.bookkeeper.normalize import run

    return run(spark, raw_dir, tables_dir)


def audit(spark, tables_dir: str, root: str, request) -> dict:
    from audit.transforms.bookkeeper.audit import run

    return run(spark, tables_dir, root, request)


def sniffers() -> list[Sniffer]:
    from audit.formats.bookkeeper.sniff import SNIFFERS

    return [Sniffer(*s) for s in SNIFFERS]


def suites():
    from audit.validate.suites.bookkeeper import SUITES

    return SUITES


def plan_repairs(outputs):
    from audit.repair.bookkeeper import plan_run

    return plan_run(outputs)


SYSTEM = System(
    name=NAME, title="BookKeeper", cluster_model=BookKeeperCluster, thresholds_model=BookKeeperThresholds,
    collect=collect, normalize=normalize, audit=audit, checks=CHECKS, report=SECTION, import_kinds=KINDS,
    sniffers=sniffers, suites=suites, validate_tables={"bk_ledger_replicas": ("metrics", "bk_ledger_replicas")},
    plan_repairs=plan_repairs, benches=("bench.bookkeeper.bench_replicas", "bench.bookkeeper.bench_zk_collector"),
    docs="docs/bookkeeper/",
)
