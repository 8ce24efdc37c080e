"""BookKeeper: replica counts and placement (ReplicasCheck semantics) from ledger metadata and each bookie's
entry lists. docs/bookkeeper/ describes it; docs/formats/bookkeeper.md the formats it reads."""
from __future__ import annotations

from audit.systems.bookkeeper.collect.imports import KINDS
from audit.systems.bookkeeper.config import BookKeeperCluster, BookKeeperThresholds
from audit.contracts import CollectRequest, Sniffer, System, lazy, lazy_value
from audit.systems.bookkeeper.domain.checks import CHECKS
from audit.systems.bookkeeper.report import SECTION
from lab.bookkeeper.config import parse_lab_config

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
    """The lab (source: lab) or the real collector (source: zookeeper or admin_http). An incident check's
    subjects are ledger ids (patterns such as `2156` or `21*`): the collectors read the metadata of those ledgers
    only and ask the bookies about them only; the lab stores only their evidence and its ground truth speaks only
    of them."""
    from audit.collectors.base import ScopedSink

    scoped = bool(req.scope.subjects)
    sink = ScopedSink(req.sink, ledger_of_key, req.scope) if scoped else req.sink
    if req.cluster.source == "lab":
        from lab.bookkeeper.runner import collect as collect_lab

        report, truth = collect_lab(req.cluster, sink, req.secrets, req.as_of_ms,
                                    req.thresholds.open_ledger_max_age_s)
        return report, (_scoped_truth(truth, req.scope) if scoped else truth)
    from audit.systems.bookkeeper.collect.collector import BookKeeperCollector

    return BookKeeperCollector(scope=req.scope).collect(req.cluster, sink, req.secrets), None


def _scoped_truth(truth: dict, scope) -> dict:
    """The lab's ground truth of the ledgers asked for only (what the scoped collection can speak for)."""
    from collections import Counter

    def wanted(item) -> bool:
        return not isinstance(item, dict) or item.get("ledger_id") is None or scope.wants(str(item["ledger_id"]))

    out = {**truth, **{k: [i for i in v if wanted(i)] for k, v in truth.items() if isinstance(v, list)
                       and k != "faults"}}
    if isinstance(truth.get("summary"), dict):
        out["summary"] = {**truth["summary"], "findings_by_check": dict(Counter(f["check"] for f in out["findings"]))}
    return out


def sniffers() -> list[Sniffer]:
    from audit.systems.bookkeeper.formats.sniff import SNIFFERS

    return [Sniffer(*s) for s in SNIFFERS]


SYSTEM = System(
    name=NAME, title="BookKeeper", cluster_model=BookKeeperCluster, thresholds_model=BookKeeperThresholds,
    collect=collect,
    normalize=lazy("audit.systems.bookkeeper.transforms.normalize:run"),
    audit=lazy("audit.systems.bookkeeper.transforms.audit:run"),
    checks=CHECKS, report=SECTION, import_kinds=KINDS, sniffers=sniffers,
    suites=lazy_value("audit.systems.bookkeeper.suites:SUITES"),
    validate_tables={"bk_ledger_replicas": ("metrics", "bk_ledger_replicas")},
    plan_repairs=lazy("audit.systems.bookkeeper.repair.plan:plan_run"),
    repair_actions=lazy("audit.systems.bookkeeper.repair.apply:actions"),
    benches=("bench.bookkeeper.bench_replicas", "bench.bookkeeper.bench_zk_collector",
             "bench.bookkeeper.bench_location_index", "bench.bookkeeper.bench_read_probe",
             "bench.bookkeeper.bench_incident"),
    docs="docs/bookkeeper/",
    subject="ledger (its decimal id: 2156, or a pattern such as 21*)",
    lab_config=parse_lab_config,
)
