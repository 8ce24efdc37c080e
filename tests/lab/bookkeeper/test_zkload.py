"""Loading a lab cluster into a real ZooKeeper: the hierarchical layout, bookie registrations, and ledger
znodes that carry the password (redacted, they equal what emit() stores)."""
from __future__ import annotations

import pytest

from audit.systems.bookkeeper.formats import ledger_metadata
from lab.bookkeeper import LabError, build_lab
from lab.bookkeeper.zkload import LAYOUT, load_into_zookeeper

AS_OF = 1_760_000_000_000


@pytest.fixture(scope="module")
def lab():
    return build_lab({"seed": 7, "ledgers": 30, "entries_per_ledger": 50}, AS_OF)


def test_load_creates_the_hierarchical_layout(zk_client, lab):
    created = load_into_zookeeper(lab, zk_client.hosts_with_chroot, "/ledgers", window=7)
    assert zk_client.get("/ledgers/LAYOUT")[0] == LAYOUT
    lists = lab.bookie_lists()
    assert sorted(c for c in zk_client.get_children("/ledgers/available") if c != "readonly") == lists["available"]
    assert sorted(zk_client.get_children("/ledgers/available/readonly")) == lists["readonly"] != []
    assert sorted(zk_client.get_children("/ledgers/cookies")) == lists["cookies"]
    cookie = zk_client.get(f"/ledgers/cookies/{lists['cookies'][0]}")[0]
    assert cookie.startswith(b"4\n") and lists["cookies"][0].encode() in cookie
    found = {}
    for top in zk_client.get_children("/ledgers"):
        if top.isdigit():
            for mid in zk_client.get_children(f"/ledgers/{top}"):
                for leaf in zk_client.get_children(f"/ledgers/{top}/{mid}"):
                    path = f"{top}/{mid}/{leaf}"
                    found[ledger_metadata.ledger_id_from_znode_path(path)] = zk_client.get(f"/ledgers/{path}")[0]
    assert sorted(found) == lab.ledger_ids
    assert created == len(lab.ledger_ids) + len({lab.znode_path(l).rsplit("/", 1)[0] for l in lab.ledger_ids}) \
        + len({lab.znode_path(l).split("/")[0] for l in lab.ledger_ids}) + 6 \
        + len(lists["available"]) + len(lists["readonly"]) + len(lists["cookies"])
    for lid, data in found.items():
        md = ledger_metadata.decode_znode(data, "zk", lid)
        assert md == lab.metadata(lid)
        if md.format_version > 1:
            assert b"lab-pw-" in data
        assert ledger_metadata.redact_password(data, "zk") == lab.znode(lid)


def test_loading_twice_is_refused(zk_client, lab):
    load_into_zookeeper(lab, client=zk_client, ledgers_root="/bk")
    with pytest.raises(LabError, match="already exists"):
        load_into_zookeeper(lab, client=zk_client, ledgers_root="/bk")
    assert zk_client.connected   # a given client is left open
