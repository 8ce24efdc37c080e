"""BookKeeper: replica counts and placement (ReplicasCheck semantics) from ledger metadata and each bookie's
entry lists. docs/bookkeeper/ describes it; docs/formats/bookkeeper.md the formats it reads."""
from __future__ import annotations

from audit.collectors.bookkeeper.imports import KINDS
from audit.config.bookkeeper import BookKeeperCluster, BookKeeperThresholds
from audit.contracts import CollectRequest, Sniffer, System, lazy, lazy_value
from audit.domain.bookkeeper.checks import CHECKS
from audit.report.sections.bookkeeper import SECTION

NAME = "bookkeeper"


def collect(req: CollectRequest):
    """The lab (source: lab) or the real collector (source: zookeeper or admin_http)."""
    if req.cluster.source == "lab":
        from audit.lab.bookkeeper.runner import collect as collect_lab

        return collect_lab(req.cluster, req.sink, req.secrets, req.as_of_ms, req.thresholds.open_ledger_max_age_s)
    from audit.collectors.bookkeeper.collector import BookKeeperCollector

    return BookKeeperCollector().collect(req.cluster, req.sink, req.secrets), None


def sniffers() -> list[Sniffer]:
    from audit.formats.bookkeeper.sniff import SNIFFERS

    return [Sniffer(*s) for s in SNIFFERS]


SYSTEM = System(
    name=NAME, title="BookKeeper", cluster_model=BookKeeperCluster, thresholds_model=BookKeeperThresholds,
    collect=collect,
    normalize=lazy("audit.transforms.bookkeeper.normalize:run"),
    audit=lazy("audit.transforms.bookkeeper.audit:run"),
    checks=CHECKS, report=SECTION, import_kinds=KINDS, sniffers=sniffers,
    suites=lazy_value("audit.validate.suites.bookkeeper:SUITES"),
    validate_tables={"bk_ledger_replicas": ("metrics", "bk_ledger_replicas")},
    plan_repairs=lazy("audit.repair.bookkeeper:plan_run"),
    repair_actions=lazy("audit.repair.apply.bookkeeper:actions"),
    benches=("bench.bookkeeper.bench_replicas", "bench.bookkeeper.bench_zk_collector",
             "bench.bookkeeper.bench_location_index", "bench.bookkeeper.bench_read_probe"),
    docs="docs/bookkeeper/",
)
