"""The lab as a collector: builds the simulated cluster and writes its native payloads as raw evidence.

Without `zookeeper:` the lab writes the payloads straight into the sink. With `zookeeper:` set, it loads
its znodes into that (real) ZooKeeper, serves its bookies over the bookie protocol on loopback and runs the
real collector against both, so the whole collection path is exercised."""
from __future__ import annotations

from typing import Any

from audit.collectors.base import CollectionReport
from audit.systems.bookkeeper.formats import raw_evidence


def _lab_cfg(cluster) -> dict:
    return dict(cluster.lab or {})


def collect(cluster, sink, secrets, as_of_ms: int,
            open_ledger_max_age_s: int | None = None) -> tuple[CollectionReport, dict[str, Any]]:
    from lab.bookkeeper import build_lab, emit

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
    import tempfile
    from dataclasses import replace

    from audit.systems.bookkeeper.collect.collector import BookKeeperCollector
    from lab.bookkeeper.bookie_server import serve_lab_bookies
    from lab.bookkeeper.config import LOCATION_INDEX
    from lab.bookkeeper.evidence import LIST_PROBE_TIMEOUT_S
    from lab.bookkeeper.location_db import write_location_index
    from lab.bookkeeper.zkload import delete_znodes, load_into_zookeeper, znode_times

    zk = cluster.zookeeper
    load_into_zookeeper(lab, zk.hosts, zk.ledgers_root)
    def retention() -> None:   # runs after the metadata walk, before the bookies answer
        delete_znodes(zk.hosts, zk.ledgers_root, [lab.znode_path(lid) for lid in lab.state.deleted_during_collection])

    with serve_lab_bookies(lab, retention) as addresses, \
            tempfile.TemporaryDirectory(prefix="lab-bookies-") as disks:
        # DbLedgerStorage bookies whose host the collector runs on: their real RocksDB index, read in place.
        location_index = {}
        for n, bookie in enumerate(lab.bookies):
            if lab.evidence(bookie) == LOCATION_INDEX and lab.reachable(bookie):
                ledger_dir = f"{disks}/bookie-{n}/ledgers"
                write_location_index(ledger_dir, lab.index_holdings(bookie))
                location_index[bookie] = [ledger_dir]
        # The lab's rack map reaches raw/ the way an estate's does: through the collector.
        real = replace(cluster, source="zookeeper", lab=None,
                       bookie_addresses={**addresses, **dict(cluster.bookie_addresses)},
                       racks={**lab.racks, **dict(cluster.racks)},
                       location_index={**location_index, **dict(cluster.location_index)},
                       read_probe_percent=lab.config.read_probe_percent,
                       list_probe_timeout_s=LIST_PROBE_TIMEOUT_S)
        recording = _IndexReads(sink)
        report = BookKeeperCollector().collect(real, recording, secrets)
    # ZooKeeper stamped the znodes with its own clock when they were loaded: ledgers whose client stored no
    # ctime are as old as that, and every znode was last written then (so read within the index's settle time),
    # which the ground truth must know to stay exact.
    times = znode_times(lab, zk.hosts, zk.ledgers_root)
    return report, lab.ground_truth(znode_ctimes={lid: t[0] for lid, t in times.items()},
                                    znode_mtimes={lid: t[1] for lid, t in times.items()},
                                    index_reads=recording.read_at)


class _IndexReads:
    """Passes puts through and keeps each location index's read_at_ms (the collector reads on the wall clock)."""

    def __init__(self, sink):
        self.sink, self.read_at = sink, {}

    def put(self, key: str, data: bytes) -> None:
        if key.startswith("location-index/") and key.endswith("/inventory.json"):
            bookie = key.split("/")[1]
            self.read_at[bookie] = raw_evidence.inventory(data, key, bookie)["read_at_ms"]
        self.sink.put(key, data)

    def __getattr__(self, name):
        return getattr(self.sink, name)
