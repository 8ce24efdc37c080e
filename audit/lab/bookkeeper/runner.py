"""The lab as a collector: builds the simulated cluster and writes its native payloads as raw evidence.

Without `zookeeper:` the lab writes the payloads straight into the sink. With `zookeeper:` set, it loads
its znodes into that (real) ZooKeeper, serves its bookies over the bookie protocol on loopback and runs the
real collector against both, so the whole collection path is exercised."""
from __future__ import annotations

from typing import Any

from audit.collectors.base import CollectionReport


def _lab_cfg(cluster) -> dict:
    return dict(cluster.lab or {})


def collect(cluster, sink, secrets, as_of_ms: int,
            open_ledger_max_age_s: int | None = None) -> tuple[CollectionReport, dict[str, Any]]:
    from audit.lab.bookkeeper import build_lab, emit

    cfg = _lab_cfg(cluster)
    if open_ledger_max_age_s is not None:
        cfg.setdefault("open_ledger_max_age_s", open_ledger_max_age_s)
    lab = build_lab(cfg, as_of_ms, cluster=cluster.name)
    if cluster.zookeeper is not None:
        return _collect_through_zookeeper(lab, cluster, sink, secrets)
    truth = emit(lab, sink)
    report = CollectionReport("bookkeeper", cluster.name)
    report.count("ledger_znodes", len(lab.ledger_ids))
    for gap in truth.get("coverage_gaps", []):
        report.gap(f"{gap['bookie']}", f"entries of ledger {gap['ledger_id']}", gap.get("error", "unreachable"))
    return report, truth


def _collect_through_zookeeper(lab, cluster, sink, secrets):
    from dataclasses import replace

    from audit.collectors.bookkeeper.collector import BookKeeperCollector
    from audit.lab.bookkeeper.bookie_server import serve_lab_bookies
    from audit.lab.bookkeeper.zkload import load_into_zookeeper

    zk = cluster.zookeeper
    load_into_zookeeper(lab, zk.hosts, zk.ledgers_root)
    with serve_lab_bookies(lab) as addresses:
        # The lab's rack map reaches raw/ the way an estate's does: through the collector.
        real = replace(cluster, source="zookeeper", lab=None,
                       bookie_addresses={**addresses, **dict(cluster.bookie_addresses)},
                       racks={**lab.racks, **dict(cluster.racks)})
        report = BookKeeperCollector().collect(real, sink, secrets)
    return report, lab.ground_truth()
