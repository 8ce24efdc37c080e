"""Read probes of bookies that do not answer GetListOfEntriesOfLedger, against the lab's loopback bookies
(lab/bookkeeper/bookie_server.py) and its scripted peer (ScriptedBookie)."""
from __future__ import annotations

import json

import pytest

from audit.collectors.base import DirSink
from audit.systems.bookkeeper.collect import read_probe
from audit.systems.bookkeeper.collect.bookie_client import BookieClientConfig, collect_entries_of_ledgers
from audit.systems.bookkeeper.collect.read_probe import ReadProbeConfig, probe_bookie
from audit.systems.bookkeeper.domain.verification import fragments_of, iter_ledger_probes
from lab.bookkeeper import build_lab
from lab.bookkeeper.bookie_server import ScriptedBookie, serve_lab_bookies
from tests.bookkeeper.domain.cases import expected_entries, ledger

AS_OF_MS = 1_700_000_000_000
LIST = BookieClientConfig(connect_timeout_s=2.0, request_timeout_s=5.0, list_probe_timeout_s=0.2)
CLUSTER = "bk-lab"


def _lab(db_percent: int):
    return build_lab({"seed": 7, "ledgers": 30, "entries_per_ledger": 60, "db_ledger_storage_percent": db_percent},
                     AS_OF_MS, cluster=CLUSTER)


def _collect(lab, root, share: int):
    """The bookie client with the read prober behind it, as the collector wires them."""
    by_bookie = {}
    for lid in lab.ledger_ids:
        for b in lab.ensemble_bookies(lid):
            by_bookie.setdefault(b, set()).add(lid)
    closed = {lid: lab.metadata(lid) for lid in lab.ledger_ids if lab.metadata(lid).is_closed}
    sink = DirSink(root)
    with serve_lab_bookies(lab) as addresses:
        async def probe(bookie, ledger_ids, reason):
            return await read_probe.probe_bookie_async(
                bookie, ledger_ids, closed, sink, addresses=addresses, cluster=CLUSTER, reason=reason,
                config=ReadProbeConfig(connect_timeout_s=2.0, request_timeout_s=5.0, share_percent=share))

        report = collect_entries_of_ledgers(by_bookie, sink, addresses=addresses, config=LIST, cluster=CLUSTER,
                                            probe_unsupported=probe)
    return report, by_bookie, closed


def _probe_file(root, bookie: str, lid: int) -> dict:
    return json.loads((root / "read-probes" / bookie / f"{lid}.json").read_text())


def _expand(ranges) -> list[int]:
    return [e for first, last in ranges for e in range(first, last + 1)]


def test_full_share_finds_exactly_the_entries_a_db_ledger_storage_bookie_lacks(tmp_path):
    lab = _lab(100)  # every bookie on DbLedgerStorage: none answers the entry list
    report, by_bookie, closed = _collect(lab, tmp_path, 100)
    live = sorted(b for b in by_bookie if lab.reachable(b))
    assert report.counts["bookies_list_unsupported"] == len(live)
    assert report.counts["read_probe_bookies"] == len(live)
    partial = 0
    for bookie in live:
        meta = json.loads((tmp_path / "read-probes" / bookie / "bookie.json").read_text())
        assert meta == {"bookie": bookie, "evidence": "read_probe", "share_percent": 100, "reason": meta["reason"]}
        assert "unanswered within 0.2 s" in meta["reason"] and "apache/bookkeeper#2078" in meta["reason"]
        assert not (tmp_path / "entries-of-ledger" / bookie).exists()  # no list answers, no list errors
        for lid in sorted(by_bookie[bookie] & set(closed)):
            expected = expected_entries(closed[lid], bookie)
            held = set(lab.entries_on(bookie, lid) or ())
            got = _probe_file(tmp_path, bookie, lid)
            assert got["probed"] == len(expected) and got["share_percent"] == 100 and got["failed"] == {}
            assert _expand(got["present"]) == [e for e in expected if e in held]
            absent = sorted(got["absent"]["ENOENTRY"] + got["absent"]["ENOLEDGER"])
            assert absent == [e for e in expected if e not in held]
            if held:
                assert got["absent"]["ENOLEDGER"] == []
                partial += bool(absent)
            else:
                assert got["absent"]["ENOENTRY"] == []
    assert partial, "the seed must give a bookie that lacks some (not all) of a ledger's entries"
    # Full share: nothing sampled, so no coverage gap for the probed bookies; the dead ones stay unreachable.
    assert all(not g.what.endswith("sampled)") for g in report.gaps)
    for bookie in sorted(set(by_bookie) - set(live)):
        errors = {json.loads(p.read_text())["error"] for p in (tmp_path / "entries-of-ledger" / bookie).iterdir()}
        assert errors == {"unreachable"}
        assert not (tmp_path / "read-probes" / bookie).exists()


def test_zero_share_reads_first_and_last_of_each_fragment_and_list_bookies_behave_as_before(tmp_path):
    lab = _lab(50)  # half the bookies list, half do not
    report, by_bookie, closed = _collect(lab, tmp_path, 0)
    live = [b for b in by_bookie if lab.reachable(b)]
    db = sorted(b for b in live if lab.storage(b) == "DbLedgerStorage")
    assert db and len(db) < len(live)
    assert report.counts["bookies_list_unsupported"] == len(db)
    for bookie in sorted(live):
        if bookie not in db:
            files = {p.name for p in (tmp_path / "entries-of-ledger" / bookie).iterdir()}
            assert files == {f"{lid}.pb" for lid in by_bookie[bookie]}
            assert not (tmp_path / "read-probes" / bookie).exists()
            continue
        for lid in sorted(by_bookie[bookie] & set(closed)):
            md = closed[lid]
            bounds = [f.stored_bounds() for f in fragments_of(md, bookie)]
            ends = sorted({e for b in bounds if b for e in b})
            got = _probe_file(tmp_path, bookie, lid)
            assert got["probed"] == len(ends)
            held = set(lab.entries_on(bookie, lid) or ())
            assert _expand(got["present"]) == [e for e in ends if e in held]
            assert sorted(got["absent"]["ENOENTRY"] + got["absent"]["ENOLEDGER"]) == [e for e in ends if e not in held]
    sampled = [g for g in report.gaps if g.what.endswith("sampled)")]
    assert sorted(g.source for g in sampled) == [f"bookie://{b}" for b in db]
    assert "read probes at 0 %" in sampled[0].error


def test_failures_are_never_absent(tmp_path):
    with ScriptedBookie({5: range(10)}, mode="no_list", read_status="EIO") as bk:
        md = ledger({0: [bk.bookie_id, "y"]}, 9, Qw=2, ledger_id=5)
        report = probe_bookie(bk.bookie_id, [5], {5: md}, DirSink(tmp_path), cluster="c", reason="test",
                              config=ReadProbeConfig(request_timeout_s=2.0, share_percent=100))
    got = _probe_file(tmp_path, bk.bookie_id, 5)
    assert got == {"ledger_id": 5, "share_percent": 100, "probed": 10, "present": [],
                   "absent": {"ENOENTRY": [], "ENOLEDGER": []}, "failed": {"EIO": list(range(10))}}
    assert [g.error.split(":")[0] for g in report.gaps] == ["EIO"]


def test_unreachable_bookie_marks_every_probe_failed_and_skips_open_ledgers(tmp_path):
    from lab.loopback import unused_loopback_port

    bookie = f"127.0.0.1:{unused_loopback_port()}"
    closed_md = ledger({0: [bookie, "y"]}, 3, Qw=2, ledger_id=1)
    open_md = ledger({0: [bookie, "y"]}, -1, Qw=2, ledger_id=2, state="OPEN")
    report = probe_bookie(bookie, [1, 2], {1: closed_md, 2: open_md}, DirSink(tmp_path),
                          config=ReadProbeConfig(connect_timeout_s=1.0, share_percent=100))
    got = _probe_file(tmp_path, bookie, 1)
    assert got["failed"] == {"unreachable": [0, 1, 2, 3]} and got["absent"] == {"ENOENTRY": [], "ENOLEDGER": []}
    assert not (tmp_path / "read-probes" / bookie / "2.json").exists()
    assert report.counts["read_probe_ledgers_not_closed"] == 1


def test_out_of_order_answers_match_by_txn_id_over_one_connection(tmp_path):
    # 4 x 40 reads: the first is answered alone, then 53 batches of 3 in reverse order.
    entries = {lid: [e for e in range(40) if e % 3] for lid in range(1, 5)}
    with ScriptedBookie(entries, mode="no_list", answer_in_batches_of=3) as bk:
        mds = {lid: ledger({0: [bk.bookie_id]}, 39, E=1, Qw=1, ledger_id=lid) for lid in entries}
        probe_bookie(bk.bookie_id, list(mds), mds, DirSink(tmp_path),
                     config=ReadProbeConfig(request_timeout_s=2.0, window=7, share_percent=100))
    assert bk.connections == 1 and len(bk.reads) == 4 * 40
    for lid in entries:
        got = _probe_file(tmp_path, bk.bookie_id, lid)
        assert got["absent"]["ENOENTRY"] == list(range(0, 40, 3)) and got["failed"] == {}


def test_config_is_checked():
    with pytest.raises(ValueError):
        ReadProbeConfig(share_percent=101)
    with pytest.raises(ValueError):
        ReadProbeConfig(window=0)


def test_zero_share_plan_matches_the_domain_rule():
    md = ledger({0: ["a", "b", "c"], 30: ["a", "d", "c"]}, 59, Qw=2)
    assert list(iter_ledger_probes(md, "a", 0)) == [0, 29, 30, 59]


def test_collector_wires_read_probes_and_location_index(zk_client, tmp_path, monkeypatch):
    """BookKeeperCollector end to end: real ZooKeeper holding the lab's metadata, the lab's loopback bookies; one
    bookie configured under location_index is read through read_location_index (stubbed: its module reads
    RocksDB, tested on its own) instead of being asked."""
    from audit.collectors.base import CollectionReport
    from audit.systems.bookkeeper.collect import location_index
    from audit.systems.bookkeeper.collect.collector import BookKeeperCollector
    from audit.systems.bookkeeper.config import BookKeeperCluster, ZooKeeperConfig
    from audit.config.model import Timeouts
    from audit.config.secrets import SecretResolver
    from lab.bookkeeper.zkload import load_into_zookeeper

    lab = _lab(50)
    load_into_zookeeper(lab, client=zk_client)
    live_db = [b for b in lab.bookies if lab.reachable(b) and lab.storage(b) == "DbLedgerStorage"]
    indexed, probed = live_db[0], live_db[1:]
    calls = []

    def fake_index(bookie, ledger_dirs, sink, *, ledger_ids=None, secondary_dir=None, cluster=""):
        calls.append((bookie, ledger_dirs, ledger_ids, cluster))
        report = CollectionReport("bookkeeper", cluster)
        report.count("location_index_bookies")
        return report

    monkeypatch.setattr(location_index, "read_location_index", fake_index)
    with serve_lab_bookies(lab) as addresses:
        cluster = BookKeeperCluster(
            name=CLUSTER, source="zookeeper", zookeeper=ZooKeeperConfig(hosts=zk_client.hosts_with_chroot),
            bookie_addresses=addresses, timeouts=Timeouts(connect_s=2.0, request_s=5.0), list_probe_timeout_s=0.2,
            read_probe_percent=100, location_index={indexed: ["/var/lib/bookkeeper/ledgers"]})
        report = BookKeeperCollector().collect(cluster, DirSink(tmp_path), SecretResolver(environ={}))

    assert calls == [(indexed, ["/var/lib/bookkeeper/ledgers"], None, CLUSTER)]
    assert report.counts["location_index_bookies"] == 1
    assert not (tmp_path / "entries-of-ledger" / indexed).exists() and not (tmp_path / "read-probes" / indexed).exists()
    assert report.counts["bookies_list_unsupported"] == len(probed)
    for bookie in probed:
        for lid in lab.ledger_ids:
            md = lab.metadata(lid)
            if bookie not in lab.ensemble_bookies(lid) or not md.is_closed:
                continue
            got = _probe_file(tmp_path, bookie, lid)
            held = set(lab.entries_on(bookie, lid) or ())
            expected = expected_entries(md, bookie)
            assert sorted(got["absent"]["ENOENTRY"] + got["absent"]["ENOLEDGER"]) == [e for e in expected
                                                                                     if e not in held]
