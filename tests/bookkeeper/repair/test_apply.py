"""Approved BookKeeper repairs (audit/systems/bookkeeper/repair/apply.py) against the tests' real ZooKeeper: the plan
comes from the dry-run planner, the metadata znodes are written in BookKeeper's format (tests/bookkeeper/collect)."""
from __future__ import annotations

import dataclasses
import threading
import time

import pytest
from kazoo.security import OPEN_ACL_UNSAFE, make_digest_acl

from audit.systems.bookkeeper.config import BookKeeperCluster, ZooKeeperConfig
from audit.config.model import SecretRef, Timeouts
from audit.config.secrets import SecretResolver
from audit.systems.bookkeeper.domain.model import IN_RECOVERY, Segment
from audit.systems.bookkeeper.repair.apply import actions, marker_path, metadata_paths, parse_marker
from audit.systems.bookkeeper.repair.plan import plan_repairs
from audit.repair.common import RepairInputError
from tests.bookkeeper.collect.data import closed_ledger, legacy_path, long_path, znode

B1, B2, B3, B4, B9 = "b1:3181", "b2:3181", "b3:3181", "b4:3181", "b9:3181"
LID = 2156
FAST = Timeouts(connect_s=2.0, request_s=2.0)
LAYOUT_TEXT = b'type: "BASIC"\nversion: 1\n'   # LedgerRereplicationLayoutFormat as checkLayout writes it


def _metadata(lid=LID, ctoken=424242):
    return dataclasses.replace(closed_ledger(lid, [(0, (B1, B2, B3))], last_entry_id=99), ctoken=ctoken)


def _row(md):
    """The bk_ledgers row the planner reads, as normalize derives it from the same metadata."""
    return {"cluster": "bk-a", "ledger_id": md.ledger_id, "state": md.state, "ctoken": md.ctoken,
            "last_entry_id": md.last_entry_id, "ensemble_size": md.ensemble_size,
            "write_quorum": md.write_quorum_size, "ack_quorum": md.ack_quorum_size, "owner_topic": None,
            "segments": [{"first_entry_id": s.first_entry_id, "ensemble": list(s.ensemble)} for s in md.segments]}


def _plan(*mds, missing=B3, lost=()):
    frags = [{"cluster": "bk-a", "ledger_id": md.ledger_id, "segment_first_entry_id": 0, "segment_last_entry_id": 99,
              "bookie": missing, "bookie_index": list(md.segments[0].ensemble).index(missing), "missing_count": 50,
              "missing_ranges": [{"first": 0, "last": 99}]} for md in mds]
    bookies = {b: {"state": "available", "rack": None} for b in (B1, B2, B3, B4)}
    return plan_repairs(frags, {md.ledger_id: _row(md) for md in mds}, bookies, list(lost))


def _cluster(zk_client, **zk):
    return BookKeeperCluster(name="bk-a", source="zookeeper", timeouts=FAST,
                             zookeeper=ZooKeeperConfig(hosts=zk_client.hosts_with_chroot, **zk))


def _autorecovery(zk, acl=None):
    """What ZkLedgerUnderreplicationManager.checkLayout leaves under the root."""
    for path, data in (("/ledgers/underreplication", b""), ("/ledgers/underreplication/LAYOUT", LAYOUT_TEXT),
                       ("/ledgers/underreplication/ledgers", b""), ("/ledgers/underreplication/locks", b"")):
        zk.create(path, data, acl=acl, makepath=True)


def _cluster_with_ledger(zk_client, md=None):
    md = md or _metadata()
    zk_client.create(f"/ledgers/{legacy_path(md.ledger_id)}", znode(md), makepath=True)
    _autorecovery(zk_client)
    return md


def test_paths_follow_bookkeeper():
    # getUrLedgerZnode: four 16-bit groups in hex, urL + %010d (the upstream test's ledger 0xfeadeefdac)
    assert (marker_path("/ledgers", 0xfeadeefdac)
            == "/ledgers/underreplication/ledgers/0000/00fe/adee/fdac/urL1093839814060")
    assert marker_path("/bk/ledgers", 7) == "/bk/ledgers/underreplication/ledgers/0000/0000/0000/0007/urL0000000007"
    assert metadata_paths("/ledgers", 1) == ["/ledgers/L0000000001", f"/ledgers/{legacy_path(1)}",
                                             f"/ledgers/{long_path(1)}"]
    assert metadata_paths("/ledgers", 2**40) == [f"/ledgers/{long_path(2**40)}"]  # beyond 10 digits: long only


def test_unchanged_metadata_holds_then_creates_the_marker_bookkeeper_would(zk_client):
    md = _cluster_with_ledger(zk_client)
    before_threads = set(threading.enumerate())
    [action] = actions(_plan(md), _cluster(zk_client), SecretResolver(environ={}))
    path = marker_path("/ledgers", LID)
    assert (action.name, action.target) == ("mark_underreplicated", f"ledger {LID}")
    assert action.request["path"] == path
    assert action.request["missing_replicas"] == [B3]
    assert action.request["content"] == f'replica: "{B3}"\nctime: <epoch ms of the call>\n'

    seen = action.check()
    assert seen.holds, seen
    assert seen.observed["metadata_znode"] == f"/ledgers/{legacy_path(LID)}"
    assert seen.observed["metadata"]["ctoken"] == 424242
    assert seen.observed["marked_replicas"] is None
    assert zk_client.exists("/ledgers/underreplication/ledgers/0000") is None  # a check writes nothing

    t0 = time.time_ns() // 1_000_000
    result = action.run()
    t1 = time.time_ns() // 1_000_000
    assert result["created"] == ["/ledgers/underreplication/ledgers/0000",
                                 "/ledgers/underreplication/ledgers/0000/0000",
                                 "/ledgers/underreplication/ledgers/0000/0000/0000",
                                 "/ledgers/underreplication/ledgers/0000/0000/0000/086c", path]
    data, stat = zk_client.get(path)
    fmt = parse_marker(data, path)
    assert list(fmt.replica) == [B3] and t0 <= fmt.ctime <= t1
    assert data == f'replica: "{B3}"\nctime: {fmt.ctime}\n'.encode()
    assert stat.ephemeralOwner == 0  # persistent
    for parent in result["created"][:-1]:
        assert zk_client.get(parent)[0] == b""
        assert zk_client.get_acls(parent)[0] == OPEN_ACL_UNSAFE
    assert action.verify().holds
    assert set(threading.enumerate()) <= before_threads  # every session closed
    # Applied twice (e.g. by a retry): BookKeeper writes nothing when every replica is listed.
    again = action.run()
    assert (again["created"], again["replicas_added"], again["version"]) == ([], [], 0)


@pytest.mark.parametrize("change", ["new ensemble segment", "state", "re-created ledger (ctoken)", "deleted"])
def test_changed_metadata_does_not_hold(zk_client, change):
    md = _cluster_with_ledger(zk_client)
    [action] = actions(_plan(md), _cluster(zk_client), SecretResolver(environ={}))
    path = f"/ledgers/{legacy_path(LID)}"
    if change == "deleted":
        zk_client.delete(path)
    else:
        now = {"new ensemble segment": dataclasses.replace(md, segments=md.segments + (Segment(50, (B1, B2, B4)),)),
               "state": dataclasses.replace(md, state=IN_RECOVERY, last_entry_id=-1),
               "re-created ledger (ctoken)": dataclasses.replace(md, ctoken=7)}[change]
        zk_client.set(path, znode(now))
    seen = action.check()
    assert not seen.holds
    assert seen.observed["metadata"] != seen.expected["metadata"]
    assert seen.observed["replication_enabled"]


def test_replication_disabled_does_not_hold(zk_client):
    md = _cluster_with_ledger(zk_client)
    zk_client.create("/ledgers/underreplication/disable", b"")  # disableLedgerReplication
    [action] = actions(_plan(md), _cluster(zk_client), SecretResolver(environ={}))
    seen = action.check()
    assert not seen.holds
    assert seen.observed["replication_enabled"] is False
    assert "ledger replication is disabled" in seen.observed["why"]


def test_missing_autorecovery_layout_does_not_hold(zk_client):
    md = _metadata()
    zk_client.create(f"/ledgers/{legacy_path(LID)}", znode(md), makepath=True)
    [action] = actions(_plan(md), _cluster(zk_client), SecretResolver(environ={}))
    seen = action.check()
    assert not seen.holds and seen.observed["autorecovery_layout"].startswith("missing")


def test_existing_marker_gets_the_missing_replicas_merged(zk_client):
    md = _cluster_with_ledger(zk_client)
    path = marker_path("/ledgers", LID)
    zk_client.create(path, f'replica: "{B9}"\nctime: 1\n'.encode(), makepath=True)
    [action] = actions(_plan(md), _cluster(zk_client), SecretResolver(environ={}))
    seen = action.check()
    assert seen.holds and seen.observed["marked_replicas"] == [B9]
    result = action.run()
    assert (result["created"], result["replicas_added"], result["version"]) == ([], [B3], 1)
    fmt = parse_marker(zk_client.get(path)[0], path)
    assert list(fmt.replica) == [B9, B3] and fmt.ctime > 1
    assert action.verify().holds


def test_digest_auth_and_the_acl_bookkeeper_gave_its_znodes(zk_client):
    credential = "auditor:s3cret-digest"
    acl = [make_digest_acl("auditor", "s3cret-digest", all=True)]
    zk_client.add_auth("digest", credential)
    try:
        md = _metadata()
        zk_client.create(f"/ledgers/{legacy_path(LID)}", znode(md), makepath=True)
        _autorecovery(zk_client, acl=acl)
        ref = SecretRef(env="ZK_DIGEST", where="systems.bookkeeper[0].zookeeper.digest_auth")
        [action] = actions(_plan(md), _cluster(zk_client, digest_auth=ref),
                           SecretResolver(environ={"ZK_DIGEST": credential}))
        assert credential not in repr(action.request)
        assert action.check().holds
        result = action.run()
        assert result["acl"] == [{"scheme": "digest", "id": "auditor", "perms": 31}]
        for created in result["created"]:
            assert zk_client.get_acls(created)[0] == acl
        assert action.verify().holds
    finally:  # only an authenticated client may delete below the protected znodes
        zk_client.delete("/ledgers", recursive=True)


def test_escalations_alone_give_no_action_and_a_planned_ledger_with_lost_entries_a_note(zk_client):
    md, other = _metadata(), _metadata(lid=LID + 1)
    plan = _plan(md, other, lost=[{"ledger_id": LID + 1, "entry_count": 100}])
    found = actions(plan, _cluster(zk_client), SecretResolver(environ={}))
    assert [a.target for a in found] == [f"ledger {LID}", f"ledger {LID + 1}"]
    assert "note" not in found[0].request and "no replica left" in found[1].request["note"]
    only_escalations = {**plan, "ledgers": []}
    with pytest.raises(RepairInputError) as e:
        actions(only_escalations, _cluster(zk_client), SecretResolver(environ={}))
    assert e.value.field == "ledgers"


def test_lab_cluster_and_bad_fields_are_input_errors(zk_client):
    plan = _plan(_metadata())
    lab = BookKeeperCluster(name="bk-lab", source="lab", lab={"seed": 1})
    with pytest.raises(RepairInputError) as e:
        actions({**plan, "cluster": "bk-lab"}, lab, SecretResolver(environ={}))
    assert (e.value.source, e.value.field) == ("cluster bk-lab", "source")
    assert "a lab cluster has nothing to repair" in e.value.expected
    cluster = _cluster(zk_client)
    cases = [({**plan, "cluster": "bk-b"}, ("plan", "cluster")),
             ({**plan, "system": "pulsar"}, ("plan", "system")),
             ({**plan, "preconditions": []}, ("plan.preconditions", "ledger_id")),
             ({**plan, "preconditions": [{**plan["preconditions"][0], "segments": "x"}]},
              ("preconditions[0]", "segments")),
             ({**plan, "ledgers": [{**plan["ledgers"][0], "fragments": [{"bookie": 3}]}]},
              ("ledgers[0].fragments[0]", "bookie"))]
    for bad, (source, field) in cases:
        with pytest.raises(RepairInputError) as e:
            actions(bad, cluster, SecretResolver(environ={}))
        assert (e.value.source, e.value.field) == (source, field), bad
