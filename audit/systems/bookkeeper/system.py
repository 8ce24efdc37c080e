"""BookKeeper: replica counts and placement (ReplicasCheck semantics) from ledger metadata and each bookie's
entry lists. docs/bookkeeper/ describes it; docs/formats/bookkeeper.md the formats it reads."""
from __future__ import annotations

from audit.contracts import (CollectRequest, Incident, Lab, Pipeline, Repair, System, SystemConfig, Validation)
from audit.systems.bookkeeper.collect.imports import KINDS
from audit.systems.bookkeeper.config import BookKeeperCluster, BookKeeperThresholds
from audit.systems.bookkeeper.domain.checks import CHECKS
from audit.systems.bookkeeper.report import SECTION

NAME = "bookkeeper"


def ledger_of_key(key: str) -> str | None:
    """The ledger a raw key belongs to, as its decimal id (the incident check's subject); None for keys of the
    whole cluster (bookie lists, racks, a bookie's inventory or probe note, the collection report)."""
    from audit.systems.bookkeeper.formats.ledger_metadata import ledger_id_from_znode_path

    area, _, rest = key.partition("/")
    if area == "ledger-metadata":
        for suffix in (".stat.json", ".deleted.json"):
            rest = rest.removesuffix(suffix)
        ledger_id = ledger_id_from_znode_path(rest)
        return None if ledger_id is None else str(ledger_id)
    stem = rest.rsplit("/", 1)[-1].split(".", 1)[0]
    if area in ("entries-of-ledger", "read-probes", "location-index", "ledger-metadata-http") and stem.isdigit():
        return str(int(stem))
    return None


def collect(req: CollectRequest):
    """The real collector (source: zookeeper or admin_http). An incident check's subjects are ledger ids (patterns
    such as `2156` or `21*`): the collector reads the metadata of those ledgers only, asks the bookies about them
    only and stores only their evidence."""
    from audit.collectors.base import ScopedSink
    from audit.systems.bookkeeper.collect.collector import BookKeeperCollector

    sink = ScopedSink(req.sink, ledger_of_key, req.scope) if req.scope.subjects else req.sink
    return BookKeeperCollector(scope=req.scope).collect(req.cluster, sink, req.secrets)


def normalize(spark, raw_dir: str, tables_dir: str) -> dict:
    from audit.systems.bookkeeper.transforms.normalize import run

    return run(spark, raw_dir, tables_dir)


def audit(spark, tables_dir: str, attempt_dir: str, request) -> dict:
    from audit.systems.bookkeeper.transforms.audit import run

    return run(spark, tables_dir, attempt_dir, request)


def sniffers():
    from audit.systems.bookkeeper.formats.sniff import SNIFFERS

    return (), SNIFFERS


def suites():
    from audit.systems.bookkeeper.suites import SUITES

    return SUITES


def plan_repairs(outputs):
    from audit.systems.bookkeeper.repair.plan import plan_run

    return plan_run(outputs)


def repair_actions(plan, cluster, secrets):
    from audit.systems.bookkeeper.repair.apply import actions

    return actions(plan, cluster, secrets)


def lab_collect(req: CollectRequest):
    from lab.bookkeeper.plugin import collect as collect_lab

    return collect_lab(req)


def lab_config(block):
    from lab.bookkeeper.config import parse_lab_config

    return parse_lab_config(block)


def lab_scope_truth(truth: dict, scope, cluster) -> dict:
    from lab.bookkeeper.plugin import scope_truth

    return scope_truth(truth, scope, cluster)


SYSTEM = System(
    name=NAME, title="BookKeeper", checks=CHECKS,
    config=SystemConfig(BookKeeperCluster, BookKeeperThresholds),
    pipeline=Pipeline(collect=collect, normalize=normalize, audit=audit, import_kinds=KINDS, sniffers=sniffers),
    report=SECTION,
    validation=Validation(suites, {"bk_ledger_replicas": ("metrics", "bk_ledger_replicas")}),
    repair=Repair(plan_repairs, repair_actions),
    lab=Lab(collect=lab_collect, config=lab_config, scope_truth=lab_scope_truth),
    incident=Incident("ledger (its decimal id: 2156, or a pattern such as 21*)", ledger_of_key),
    benches=("bench.bookkeeper.bench_replicas", "bench.bookkeeper.bench_zk_collector",
             "bench.bookkeeper.bench_location_index", "bench.bookkeeper.bench_read_probe",
             "bench.bookkeeper.bench_incident"),
)
