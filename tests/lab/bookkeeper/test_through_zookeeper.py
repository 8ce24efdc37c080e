"""The lab loaded into a real ZooKeeper and served over the bookie protocol, collected by the real collector,
gives the same evidence as the lab's direct emission (znode bytes identical; entry answers equal once decoded)."""
from __future__ import annotations

import json

import pytest

from audit.collectors.base import DirSink
from audit.systems.bookkeeper.config import BookKeeperCluster, ZooKeeperConfig
from audit.config.secrets import SecretResolver
from audit.systems.bookkeeper.formats import availability, protocol
from lab.bookkeeper.runner import collect as collect_lab_cluster

AS_OF = 1_790_000_000_000


def _answers(root):
    out = {}
    for f in (root / "entries-of-ledger").rglob("*"):
        if f.is_file():
            rel = f.relative_to(root).as_posix()
            if f.suffix == ".pb":
                a = protocol.decode_response(f.read_bytes(), rel)
                out[rel] = (a.status, None if a.availability is None
                            else list(availability.iter_entries(availability.decode(a.availability, rel))))
            else:
                out[rel] = json.loads(f.read_text())["error"]
    return out


def _files(root, folder, suffix):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in (root / folder).rglob(f"*{suffix}") if p.is_file()}


def _inventories(root):
    # where the index was read and when differ between the two paths; what it says does not
    volatile = ("ledger_dirs", "databases", "read_at_ms")
    return {k: {f: v for f, v in json.loads(data).items() if f not in volatile}
            for k, data in _files(root, "location-index", "inventory.json").items()}


# below 100 % the real collector must draw the same probes as the lab's emission and its ground truth
@pytest.mark.parametrize("share", [100, 10])
def test_lab_through_real_zookeeper_and_bookie_protocol(zk_client, tmp_path, share):
    lab_cfg = {"seed": 7, "ledgers": 30, "read_probe_percent": share}
    direct = BookKeeperCluster(name="bk-lab", source="lab", lab=lab_cfg)
    via_zk = BookKeeperCluster(name="bk-lab", source="lab", lab=lab_cfg,
                               zookeeper=ZooKeeperConfig(hosts=zk_client.hosts_with_chroot))
    a, b = tmp_path / "direct", tmp_path / "zk"
    _, truth_a = collect_lab_cluster(direct, DirSink(a), SecretResolver(), AS_OF)
    report, truth_b = collect_lab_cluster(via_zk, DirSink(b), SecretResolver(), AS_OF)
    # ZooKeeper stamps the znodes with its own clock: a ledger whose client stored no ctime is "created" at load,
    # so only the open-too-long verdicts may differ, and the ZooKeeper side's truth knows it
    # It also stamps mtime then, just before the collector reads the location indexes on the wall clock: every
    # ledger naming an index bookie is read before it settled there, and the ZooKeeper side's truth knows it
    # (the bookie is unavailable for those ledgers, never missing entries).
    unsettled_a = {u["ledger_id"] for u in truth_a["unsettled_index"]}
    unsettled_b = {u["ledger_id"] for u in truth_b["unsettled_index"]}
    assert unsettled_a < unsettled_b
    index_bookies = {b for b, e in truth_a["bookie_evidence"].items() if e == "location_index"}
    assert all(set(u["bookies"]) <= index_bookies for u in truth_b["unsettled_index"])

    def settled(t):
        """The truth without age verdicts and without the ledgers the ZooKeeper side reads unsettled."""
        def keep(rows):
            return [r for r in rows if r.get("ledger_id") not in unsettled_b]
        out = {k: keep(v) if isinstance(v, list) and v and isinstance(v[0], dict) and "ledger_id" in v[0] else v
               for k, v in t.items() if k not in ("summary", "unsettled_index", "faults")}
        out["findings"] = [f for f in out["findings"] if f["check"] != "bk.ledger_open_too_long"]
        out["faults"] = [(f["kind"], f["ledgers"]) for f in t["faults"]]
        return out
    assert settled(truth_a) == settled(truth_b) and settled(truth_a)["replicas"]
    assert all(f in truth_a["findings"] or f["check"] == "bk.ledger_open_too_long" for f in truth_b["findings"])
    stats = {k: json.loads(v) for k, v in _files(b, "ledger-metadata", ".stat.json").items()}
    assert stats and all(AS_OF < s["ctime"] <= s["mtime"] for s in stats.values())   # stamped at load, after AS_OF
    assert all(f["faults"] == ["open_ledger_abandoned"] for f in truth_b["findings"]
               if f["check"] == "bk.ledger_open_too_long")
    # retention deleted a ledger between the metadata walk and the bookie reads: the collector looked it up again
    deleted_a = {k: json.loads(v)["ledger_id"] for k, v in _files(a, "ledger-metadata", ".deleted.json").items()}
    deleted_b = {k: json.loads(v)["ledger_id"] for k, v in _files(b, "ledger-metadata", ".deleted.json").items()}
    assert deleted_a == deleted_b != {}
    beside = (".stat.json", ".deleted.json")
    znodes_a = {k: v for k, v in _files(a, "ledger-metadata", "").items() if not k.endswith(beside)}
    znodes_b = {k: v for k, v in _files(b, "ledger-metadata", "").items() if not k.endswith(beside)}
    assert znodes_a and znodes_a == znodes_b          # redacted by the collector exactly as the lab stores them
    assert all(b"lab-pw" not in v for v in znodes_b.values())
    answers_a, answers_b = _answers(a), _answers(b)
    ok_a = {k: v for k, v in answers_a.items() if not isinstance(v, str)}
    ok_b = {k: v for k, v in answers_b.items() if not isinstance(v, str)}
    assert ok_a == ok_b
    # unreachable lab bookies are refused connections: gaps, never "no entries"
    assert {k for k, v in answers_a.items() if isinstance(v, str)} == {
        k for k, v in answers_b.items() if isinstance(v, str)}
    assert (len(report.gaps) > 0) == any(isinstance(v, str) for v in answers_a.values())
    # DbLedgerStorage bookies: the real reader over a real RocksDB index, and read probes over the bookie protocol,
    # store what the lab's direct emission stores
    assert _files(a, "location-index", ".avail") == _files(b, "location-index", ".avail") != {}
    assert _inventories(a) == _inventories(b) != {}
    assert _files(a, "read-probes", ".json") == _files(b, "read-probes", ".json") != {}
