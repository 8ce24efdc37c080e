"""Ledger-metadata collection against a real ZooKeeper (tests/zk.py)."""
from __future__ import annotations

import json
import struct

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import UnimplementedError
from kazoo.security import make_digest_acl

from audit.collectors.base import DirSink
from audit.systems.bookkeeper.collect.zk_metadata import LEAF, LedgerZnode, child_kind, collect_ledger_metadata
from audit.collectors.zkread import MultiReadData, MultiReadFormatError, MultiReadResults
from audit.systems.bookkeeper.formats.ledger_metadata import decode_znode, redact_password
from lab.loopback import unused_loopback_port
from tests.bookkeeper.collect.data import (PASSWORD, closed_ledger, flat_path, legacy_path, long_path, real_znode,
                                     znode)

BK1, BK2, BK3 = "bk1.example:3181", "bk2.example:3181", "bk3.example:3181"
SECRETS = (PASSWORD, b"passwd", b"foobar")


def _stored(root) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _create(zk, path: str, data: bytes = b"") -> None:
    zk.create(path, data, makepath=True)


def _bookkeeper_scaffolding(zk, root="/ledgers"):
    """The non-ledger znodes a real cluster has under the ledgers root."""
    _create(zk, f"{root}/LAYOUT", b"2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1\n")
    _create(zk, f"{root}/INSTANCEID", b"6c2ad8c1-0f5b-4c0a-9f3e-6f1b1f4f6a0e")
    _create(zk, f"{root}/idgen/ID-0000000042")
    _create(zk, f"{root}/idgen-long")
    _create(zk, f"{root}/underreplication/ledgers/0000/0000/0000/0007/urL0000000007", b'replica: "bk2:3181"\n')
    _create(zk, f"{root}/underreplication/locks")
    _create(zk, f"{root}/available/{BK1}")
    _create(zk, f"{root}/available/{BK2}")
    _create(zk, f"{root}/available/readonly/{BK3}")
    for b in (BK1, BK2, BK3):
        _create(zk, f"{root}/cookies/{b}", b"4\nbookieHost: ...\n")


def test_child_kind_follows_the_three_layouts():
    assert child_kind(("root", 0), "L0000000001") == LEAF
    assert child_kind(("root", 0), "00") == ("legacy", 1)
    assert child_kind(("root", 0), "000") == ("long", 1)
    for name in ("available", "LAYOUT", "INSTANCEID", "idgen", "idgen-long", "underreplication", "cookies",
                 "L0001", "0", "0000"):
        assert child_kind(("root", 0), name) is None, name
    assert child_kind(("legacy", 1), "0000") == ("legacy", 2)
    assert child_kind(("legacy", 2), "L0001") == LEAF
    assert child_kind(("legacy", 2), "0001") is None
    assert child_kind(("long", 3), "0000") == ("long", 4)
    assert child_kind(("long", 4), "L0001") == LEAF
    assert child_kind(("long", 4), "L00001") is None


def test_all_layouts_are_stored_redacted_and_non_ledger_znodes_skipped(zk_client, tmp_path):
    md7 = closed_ledger(7, [(0, (BK1, BK2, BK3))])
    md1 = closed_ledger(1, [(0, (BK1, BK2)), (5, (BK1, BK3))])
    big = 2**31  # >= Integer.MAX_VALUE: the hybrid manager uses the long path
    md_big = closed_ledger(big, [(0, (BK2, BK3))])
    originals = {
        flat_path(7): znode(md7, 3),
        flat_path(8): real_znode(3),
        legacy_path(1): znode(md1, 2),
        legacy_path(12345678): real_znode(2),
        legacy_path(3): znode(closed_ledger(3, [(0, (BK1, BK2))]), 1),
        long_path(big): znode(md_big, 3),
    }
    for rel, data in originals.items():
        _create(zk_client, f"/ledgers/{rel}", data)
    _bookkeeper_scaffolding(zk_client)
    _create(zk_client, "/ledgers/00/0000/notaledger", b"x")
    _create(zk_client, "/ledgers/00/abcd")

    sink_root = tmp_path / "raw"
    report, ledgers = collect_ledger_metadata(zk_client.hosts_with_chroot, "/ledgers", DirSink(sink_root),
                                              timeout_s=10, cluster="bk-a")

    assert report.gaps == []
    assert ledgers == sorted([LedgerZnode(7, flat_path(7)), LedgerZnode(8, flat_path(8)),
                              LedgerZnode(1, legacy_path(1)), LedgerZnode(12345678, legacy_path(12345678)),
                              LedgerZnode(3, legacy_path(3)), LedgerZnode(big, long_path(big))])
    stored = _stored(sink_root)
    assert set(stored) == ({f"ledger-metadata/{rel}" for rel in originals}
                           | {f"ledger-metadata/{rel}.stat.json" for rel in originals} | {"bookies/available.json"})
    for rel, original in originals.items():
        data = stored[f"ledger-metadata/{rel}"]
        assert data == redact_password(original, rel)
        assert not any(secret in data for secret in SECRETS), rel
        # Everything but the password survives.
        before, after = decode_znode(original, rel), decode_znode(data, rel)
        assert after == before
    assert PASSWORD in originals[flat_path(7)]  # the test would be vacuous otherwise
    assert report.counts["ledger_znodes_listed"] == 6
    assert report.counts["ledger_znodes_stored"] == 6
    # LAYOUT INSTANCEID idgen idgen-long underreplication available cookies + notaledger + abcd
    assert report.counts["non_ledger_znodes_skipped"] == 9
    assert json.loads(stored["bookies/available.json"]) == {
        "available": [BK1, BK2], "readonly": [BK3], "cookies": [BK1, BK2, BK3]}
    assert report.to_dict()["cluster"] == "bk-a"


def test_pipelining_window_smaller_than_the_tree(zk_client, tmp_path):
    ids = list(range(1, 41))
    for i in ids:
        layout = (flat_path, legacy_path, long_path)[i % 3]
        _create(zk_client, f"/ledgers/{layout(i)}", znode(closed_ledger(i, [(0, (BK1, BK2))]), 3))
    report, ledgers = collect_ledger_metadata(zk_client.hosts_with_chroot, "/ledgers", DirSink(tmp_path),
                                              timeout_s=10, window=3)
    assert [z.ledger_id for z in ledgers] == ids
    assert report.counts["ledger_znodes_stored"] == 40
    # No bookie registrations in this tree: that is a reported gap, not an empty cluster.
    assert {g.source.rsplit("/", 1)[-1] for g in report.gaps} == {"available", "cookies"}


def _collect_through(client: KazooClient, tmp_path, **options):
    """collect_ledger_metadata of /ledgers through a test's own kazoo client, started here and closed after."""
    client.start(timeout=10)
    try:
        return collect_ledger_metadata("unused", "/ledgers", DirSink(tmp_path), timeout_s=10, client=client,
                                       **options)
    finally:
        client.stop()
        client.close()


class _DeletingClient(KazooClient):
    """Deletes `victim` just before a request that reads it is queued: a ledger deleted mid-walk.
    Hooks kazoo's request queue so it works for single getData and for multiRead batches alike."""

    victim: str = ""

    def _call(self, request, async_object):
        full = self.chroot + self.victim
        if self.victim and (getattr(request, "path", None) == full or full in getattr(request, "paths", ())):
            victim, self.victim = self.victim, ""
            self.delete(victim)
        return super()._call(request, async_object)


@pytest.mark.parametrize("batch", [1, 100])
def test_znode_deleted_mid_walk_counts_as_deleted_not_as_error(zk_client, tmp_path, batch):
    for i in (1, 2, 3):
        _create(zk_client, f"/ledgers/{legacy_path(i)}", znode(closed_ledger(i, [(0, (BK1, BK2))])))
    _bookkeeper_scaffolding(zk_client)
    client = _DeletingClient(hosts=zk_client.hosts_with_chroot)
    client.victim = f"/ledgers/{legacy_path(2)}"
    report, ledgers = _collect_through(client, tmp_path, batch=batch)
    assert client.victim == ""  # the hook fired
    assert [z.ledger_id for z in ledgers] == [1, 3]
    assert report.counts["ledger_znodes_deleted"] == 1
    assert report.gaps == []
    assert not (tmp_path / "ledger-metadata" / legacy_path(2)).exists()


def test_undecodable_znode_is_not_stored_and_becomes_a_gap(zk_client, tmp_path):
    good = znode(closed_ledger(1, [(0, (BK1, BK2))]))
    v3_truncated = real_znode(3)[:-10]
    v2_mangled = real_znode(2).replace(b"ensembleSize: 3", b"ensembleSize: three")
    _create(zk_client, f"/ledgers/{flat_path(1)}", good)
    _create(zk_client, f"/ledgers/{flat_path(2)}", v3_truncated)
    _create(zk_client, f"/ledgers/{flat_path(3)}", v2_mangled)
    _create(zk_client, f"/ledgers/{flat_path(4)}", b"")
    _bookkeeper_scaffolding(zk_client)

    report, ledgers = collect_ledger_metadata(zk_client.hosts_with_chroot, "/ledgers", DirSink(tmp_path),
                                              timeout_s=10)

    assert ledgers == [LedgerZnode(1, flat_path(1))]
    # Neither the value nor the Stat of an unstored znode: no Stat without its ledger.
    assert sorted(p.name for p in (tmp_path / "ledger-metadata").iterdir()) == [flat_path(1),
                                                                                 f"{flat_path(1)}.stat.json"]
    assert report.counts["ledger_znodes_undecodable"] == 3
    gaps = {g.source: g for g in report.gaps}
    assert set(gaps) == {f"zookeeper://{zk_client.hosts_with_chroot}/ledgers/{flat_path(i)}" for i in (2, 3, 4)}
    for g in gaps.values():
        assert g.what == "ledger metadata"
        assert "not stored" in g.error
        assert "passwd" not in g.error and "foobar" not in g.error


def test_missing_ledgers_root_is_a_gap(zk_client, tmp_path):
    report, ledgers = collect_ledger_metadata(zk_client.hosts_with_chroot, "/nope", DirSink(tmp_path),
                                              timeout_s=10)
    assert ledgers == []
    assert any(g.source.endswith("/nope") and "does not exist" in g.error for g in report.gaps)
    assert not (tmp_path / "bookies").exists()


def test_unreachable_zookeeper_is_a_gap(tmp_path):
    nobody_listens = f"127.0.0.1:{unused_loopback_port()}"
    report, ledgers = collect_ledger_metadata(nobody_listens, "/ledgers", DirSink(tmp_path), timeout_s=0.5)
    assert ledgers == []
    assert len(report.gaps) == 1 and "cannot connect" in report.gaps[0].error
    assert list(tmp_path.iterdir()) == []


class _OldServerClient(KazooClient):
    """Answers multiRead the way a ZooKeeper < 3.6 does (UnimplementedError), without reaching the server."""

    multi_reads = 0

    def _call(self, request, async_object):
        if isinstance(request, MultiReadData):
            self.multi_reads += 1
            async_object.set_exception(UnimplementedError())
            return True
        return super()._call(request, async_object)


def test_falls_back_to_single_reads_when_multiread_is_unimplemented(zk_client, tmp_path):
    for i in range(1, 8):
        _create(zk_client, f"/ledgers/{flat_path(i)}", znode(closed_ledger(i, [(0, (BK1, BK2))])))
    _bookkeeper_scaffolding(zk_client)
    client = _OldServerClient(hosts=zk_client.hosts_with_chroot)
    report, ledgers = _collect_through(client, tmp_path, batch=3)
    assert client.multi_reads == 3  # the batches sent before the first refusal came back: 3 + 3 + 1 znodes
    assert [z.ledger_id for z in ledgers] == list(range(1, 8))
    assert report.counts["multiread_unsupported"] == 1
    assert report.gaps == []


def test_unreadable_znode_inside_a_batch_is_a_gap_and_the_rest_is_stored(zk_client, tmp_path):
    _bookkeeper_scaffolding(zk_client)
    for i in (1, 2, 3):
        _create(zk_client, f"/ledgers/{flat_path(i)}", znode(closed_ledger(i, [(0, (BK1, BK2))])))
    locked = f"/ledgers/{flat_path(2)}"
    zk_client.set_acls(locked, [make_digest_acl("someone", "else", all=True)])
    try:
        report, ledgers = collect_ledger_metadata(zk_client.hosts_with_chroot, "/ledgers", DirSink(tmp_path),
                                                  timeout_s=10)
    finally:
        zk_client.delete(locked)  # deleting needs rights on the parent only; listing it would not
    assert [z.ledger_id for z in ledgers] == [1, 3]
    assert [(g.source.rsplit("/", 1)[-1], g.error.split(":")[0]) for g in report.gaps] == [
        (flat_path(2), "NoAuthError")]
    assert report.counts["znode_read_errors"] == 1


def test_multiread_reply_with_an_unexpected_operation_is_refused():
    reply = struct.pack("!iBi", 5, 0, 0) + struct.pack("!iBi", -1, 1, -1)  # a setData result
    with pytest.raises(MultiReadFormatError, match="MultiHeader.type"):
        MultiReadData.deserialize(reply, 0)


STAT_FIELDS = ["czxid", "mzxid", "ctime", "mtime", "version", "cversion", "aversion", "ephemeralOwner",
               "dataLength", "numChildren", "pzxid"]


@pytest.mark.parametrize("batch", [1, 100])
def test_each_stored_znode_keeps_its_stat_as_zookeeper_reports_it(zk_client, tmp_path, batch):
    """The Stat beside each value is the one ZooKeeper hands kazoo's own getData, for multiRead batches and for
    the one-getData-per-znode reads alike: its ctime is the creation time BookKeeper falls back to."""
    _bookkeeper_scaffolding(zk_client)
    paths = [flat_path(5), legacy_path(6), long_path(2**31 + 7)]
    for i, rel in enumerate(paths):
        _create(zk_client, f"/ledgers/{rel}", znode(closed_ledger(5 + i, [(0, (BK1, BK2))]), 3))
    zk_client.set(f"/ledgers/{paths[0]}", znode(closed_ledger(5, [(0, (BK1, BK3))]), 3))  # mtime, version move

    report, ledgers = collect_ledger_metadata(zk_client.hosts_with_chroot, "/ledgers", DirSink(tmp_path),
                                              timeout_s=10, batch=batch)

    assert report.gaps == [] and len(ledgers) == 3
    assert ("multiread_unsupported" in report.counts) is False
    for rel in paths:
        _, expected = zk_client.get(f"/ledgers/{rel}")
        stored = json.loads((tmp_path / "ledger-metadata" / f"{rel}.stat.json").read_bytes())
        assert list(stored) == STAT_FIELDS
        assert stored == expected._asdict(), rel
        assert stored["ctime"] > 0 and all(isinstance(v, int) for v in stored.values())
    first = json.loads((tmp_path / "ledger-metadata" / f"{paths[0]}.stat.json").read_bytes())
    assert first["version"] == 1 and first["mtime"] >= first["ctime"]


def test_multiread_reply_decodes_each_stat_like_kazoo_get():
    stat = tuple(range(1, 12))  # czxid .. pzxid, each field distinct
    reply = (struct.pack("!iBi", 4, 0, 0) + struct.pack("!i", 3) + b"abc" + struct.pack("!qqqqiiiqiiq", *stat)
             + struct.pack("!iBi", -1, 0, -101) + struct.pack("!i", -101)  # NoNode in the second slot
             + struct.pack("!iBi", 4, 0, 0) + struct.pack("!i", -1) + struct.pack("!qqqqiiiqiiq", *stat)
             + struct.pack("!iBi", -1, 1, -1))
    results = MultiReadData.deserialize(reply, 0)
    assert isinstance(results, MultiReadResults) and len(results) == 3
    data, znode_stat = results[0]
    assert data == b"abc" and tuple(znode_stat) == stat and znode_stat.ctime == 3
    assert type(results[1]).__name__ == "NoNodeError"
    assert results[2][0] is None and results[2][1].pzxid == 11
    assert "abc" not in repr(results)


def test_an_incident_check_reads_its_ledgers_only(zk_client, tmp_path):
    for lid in (1, 2, 3, 21, 2**31):
        rel = long_path(lid) if lid >= 2**31 else legacy_path(lid)
        _create(zk_client, f"/ledgers/{rel}", znode(closed_ledger(lid, [(0, (BK1, BK2))]), 3))
    _bookkeeper_scaffolding(zk_client)
    report, ledgers = collect_ledger_metadata(zk_client.hosts_with_chroot, "/ledgers", DirSink(tmp_path / "raw"),
                                              timeout_s=10, wants=lambda lid: str(lid).startswith("2"))
    assert [z.ledger_id for z in ledgers] == [2, 21, 2**31]
    assert {k for k in _stored(tmp_path / "raw") if not k.endswith(".stat.json")} == {
        "bookies/available.json", f"ledger-metadata/{legacy_path(2)}", f"ledger-metadata/{legacy_path(21)}",
        f"ledger-metadata/{long_path(2**31)}"}
    assert (report.counts["ledger_znodes_listed"], report.counts["ledger_znodes_not_in_scope"]) == (5, 2)
    assert report.gaps == []
