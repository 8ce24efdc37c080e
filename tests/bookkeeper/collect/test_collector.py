"""BookKeeperCollector end to end: a real ZooKeeper holding ledger metadata, fake bookies answering."""
from __future__ import annotations

import json
import logging

import pytest
from kazoo.security import make_digest_acl

from audit.collectors.base import CollectionReport, DirSink
from audit.systems.bookkeeper.collect.collector import BookKeeperCollector, ClusterConfigError, parse_cluster
from audit.systems.bookkeeper.collect.zk_metadata import collect_ledger_metadata
from audit.systems.bookkeeper.config import BookKeeperCluster, ZooKeeperConfig
from audit.config.model import SecretRef, Timeouts
from audit.systems.bookkeeper.formats import protocol
from lab.loopback import unused_loopback_port
from audit.config.secrets import SecretError, SecretResolver
from tests.bookkeeper.collect.data import PASSWORD, closed_ledger, flat_path, legacy_path, long_path, znode
from lab.bookkeeper.bookie_server import ScriptedBookie

FAST = Timeouts(connect_s=2.0, request_s=2.0)


def _cluster(zk_client, **kw) -> BookKeeperCluster:
    kw.setdefault("zookeeper", ZooKeeperConfig(hosts=zk_client.hosts_with_chroot))
    kw.setdefault("timeouts", FAST)
    return BookKeeperCluster(name="bk-a", source="zookeeper", **kw)


def test_collects_metadata_then_asks_each_ensemble_bookie(zk_client, tmp_path):
    with ScriptedBookie({1: range(10), 2: [0, 1, 2, 3, 4]}) as a, ScriptedBookie({1: range(10), 2: [5, 6]}) as b:
        c = "bookie-c"  # a custom bookie id, mapped to an address nobody listens on
        ledgers = {
            legacy_path(1): znode(closed_ledger(1, [(0, (a.bookie_id, b.bookie_id))])),
            flat_path(2): znode(closed_ledger(2, [(0, (a.bookie_id, c)), (5, (a.bookie_id, b.bookie_id))]), 2),
            long_path(3): b"BookieMetadataFormatVersion\t3\n\x05garbage",
        }
        for rel, data in ledgers.items():
            zk_client.create(f"/ledgers/{rel}", data, makepath=True)
        for bookie in (a.bookie_id, b.bookie_id, c):
            zk_client.create(f"/ledgers/cookies/{bookie}", b"cookie", makepath=True)
        zk_client.create(f"/ledgers/available/{a.bookie_id}", makepath=True)
        zk_client.create(f"/ledgers/available/readonly/{b.bookie_id}", makepath=True)

        cluster = _cluster(zk_client, bookie_addresses={c: f"127.0.0.1:{unused_loopback_port()}"},
                           racks={a.bookie_id: "/r1/a", b.bookie_id: "/r2/b"})
        report = BookKeeperCollector().collect(cluster, DirSink(tmp_path), SecretResolver(environ={}))

    files = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert files == {
        f"ledger-metadata/{legacy_path(1)}", f"ledger-metadata/{flat_path(2)}",
        f"ledger-metadata/{legacy_path(1)}.stat.json", f"ledger-metadata/{flat_path(2)}.stat.json",
        "bookies/available.json", "bookies/racks.json", "collection.json",
        f"entries-of-ledger/{a.bookie_id}/1.pb", f"entries-of-ledger/{a.bookie_id}/2.pb",
        f"entries-of-ledger/{b.bookie_id}/1.pb", f"entries-of-ledger/{b.bookie_id}/2.pb",
        f"entries-of-ledger/{c}/2.error.json",
    }
    for f in files:
        assert PASSWORD not in (tmp_path / f).read_bytes(), f
    answer = protocol.decode_response((tmp_path / f"entries-of-ledger/{b.bookie_id}/2.pb").read_bytes(), "t")
    assert (answer.status, answer.ledger_id) == ("EOK", 2)
    assert json.loads((tmp_path / f"entries-of-ledger/{c}/2.error.json").read_text())["error"] == "unreachable"
    assert json.loads((tmp_path / "bookies/available.json").read_text()) == {
        "available": [a.bookie_id], "readonly": [b.bookie_id], "cookies": sorted([a.bookie_id, b.bookie_id, c])}
    assert json.loads((tmp_path / "bookies/racks.json").read_text()) == {a.bookie_id: "/r1/a", b.bookie_id: "/r2/b"}

    stored = CollectionReport.from_dict(json.loads((tmp_path / "collection.json").read_text()))
    assert stored == report
    assert report.counts["ledger_znodes_stored"] == 2
    assert report.counts["ledgers_decoded"] == 2
    assert report.counts["entries_of_ledger_answered"] == 4
    gap_sources = sorted(g.source for g in report.gaps)
    assert gap_sources == ["bookie://bookie-c", f"zookeeper://{zk_client.hosts_with_chroot}/ledgers/{long_path(3)}"]


def test_digest_auth_reads_protected_metadata_and_never_stores_the_credential(zk_client, tmp_path):
    credential = "auditor:s3cret-digest"
    zk_client.add_auth("digest", credential)
    try:
        _check_digest_auth(zk_client, tmp_path, credential)
    finally:  # only an authenticated client may delete below the protected root
        zk_client.delete("/ledgers", recursive=True)


def _check_digest_auth(zk_client, tmp_path, credential):
    acl = [make_digest_acl("auditor", "s3cret-digest", all=True)]
    zk_client.create("/ledgers", acl=acl)
    zk_client.create(f"/ledgers/{flat_path(1)}", znode(closed_ledger(1, [(0, ("127.0.0.1:1", "127.0.0.1:2"))])),
                     acl=acl)
    for sub in ("available", "cookies"):
        zk_client.create(f"/ledgers/{sub}", acl=acl)
    ref = SecretRef(env="ZK_DIGEST", where="systems.bookkeeper[0].zookeeper.digest_auth")
    zk = ZooKeeperConfig(hosts=zk_client.hosts_with_chroot, digest_auth=ref)
    quick = Timeouts(connect_s=0.5, request_s=0.5)
    cluster = _cluster(zk_client, zookeeper=zk, timeouts=quick)

    with_auth = tmp_path / "with"
    report = BookKeeperCollector().collect(cluster, DirSink(with_auth), SecretResolver({"ZK_DIGEST": credential}))
    assert report.counts["ledger_znodes_stored"] == 1
    assert all(credential.encode() not in p.read_bytes() for p in with_auth.rglob("*") if p.is_file())

    without = tmp_path / "without"
    report = BookKeeperCollector().collect(_cluster(zk_client, timeouts=quick), DirSink(without), SecretResolver({}))
    assert report.counts.get("ledger_znodes_stored", 0) == 0
    assert any("NoAuth" in g.error for g in report.gaps)

    with pytest.raises(SecretError, match="ZK_DIGEST"):
        BookKeeperCollector().collect(cluster, DirSink(tmp_path / "x"), SecretResolver({}))


def test_cluster_config_errors_name_the_field():
    with pytest.raises(ClusterConfigError, match="source"):
        parse_cluster(BookKeeperCluster(name="lab", source="lab", lab={"seed": 1}))
    with pytest.raises(ClusterConfigError, match="zookeeper"):
        parse_cluster({"name": "x", "zookeeper": {"hosts": ""}})
    with pytest.raises(ClusterConfigError, match="timeouts.request_s"):
        parse_cluster({"name": "x", "zookeeper": {"hosts": "h:1"}, "timeouts": {"request_s": 0}})
    with pytest.raises(ClusterConfigError, match="bogus"):
        parse_cluster({"name": "x", "zookeeper": {"hosts": "h:1"}, "bogus": 1})
    s = parse_cluster({"name": "x", "zookeeper": {"hosts": "h:1/bk"}, "timeouts": {"connect_s": 1, "request_s": 7},
                       "bookie_addresses": {"b": "h:3181"}})
    assert (s.zk_hosts, s.ledgers_root, s.zk_timeout_s) == ("h:1/bk", "/ledgers", 7.0)
    assert (s.bookie.connect_timeout_s, s.bookie.request_timeout_s) == (1.0, 7.0)


@pytest.fixture
def kazoo_loggers_as_configured_by_someone_else():
    """"kazoo" left at NOTSET (inherits the root) and "kazoo.client" set to DEBUG; restored afterwards."""
    loggers = [logging.getLogger("kazoo"), logging.getLogger("kazoo.client")]
    saved = [lg.level for lg in loggers]
    loggers[0].setLevel(logging.NOTSET)
    loggers[1].setLevel(logging.DEBUG)
    yield
    for lg, level in zip(loggers, saved):
        lg.setLevel(level)


def _leaks(records, secret: str) -> list[str]:
    texts = ((r.name, r.getMessage() + (r.exc_text or "")) for r in records)
    return [f"{name}: {text[:200]}" for name, text in texts if secret in text]


@pytest.mark.parametrize("path", ["collector", "getData per znode (ZooKeeper < 3.6)"])
def test_no_znode_password_is_logged_with_the_root_logger_at_debug(
        zk_client, tmp_path, caplog, kazoo_loggers_as_configured_by_someone_else, path):
    zk_client.create(f"/ledgers/{flat_path(1)}", znode(closed_ledger(1, [(0, ("127.0.0.1:1", "127.0.0.1:2"))])),
                     makepath=True)
    secret = PASSWORD.decode()
    caplog.set_level(logging.DEBUG)  # the root logger
    caplog.clear()  # the test's own writes above are not the collector's
    if path == "collector":
        quick = Timeouts(connect_s=0.5, request_s=0.5)  # the ensemble bookies do not exist
        report = BookKeeperCollector().collect(_cluster(zk_client, timeouts=quick), DirSink(tmp_path),
                                               SecretResolver({}))
    else:
        report, _ = collect_ledger_metadata(zk_client.hosts_with_chroot, "/ledgers", DirSink(tmp_path), 5.0, batch=1)
    assert report.counts["ledger_znodes_stored"] == 1
    assert _leaks(caplog.records, secret) == []
    assert logging.getLogger().level == logging.DEBUG  # the collector leaves the root alone
    assert logging.getLogger("kazoo.client").getEffectiveLevel() >= logging.INFO

    # Control: with kazoo at DEBUG the same read does leak, so the check above can fail.
    logging.getLogger("kazoo.client").setLevel(logging.DEBUG)
    zk_client.get(f"/ledgers/{flat_path(1)}")
    assert _leaks(caplog.records, secret)
