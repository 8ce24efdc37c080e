"""The lab loaded into a real ZooKeeper and served over the bookie protocol, collected by the real collector,
gives the same evidence as the lab's direct emission (znode bytes identical; entry answers equal once decoded)."""
from __future__ import annotations

import json

from audit.collectors.base import DirSink
from audit.config.bookkeeper import BookKeeperCluster, ZooKeeperConfig
from audit.config.secrets import SecretResolver
from audit.formats.bookkeeper import availability, protocol
from audit.lab.bookkeeper.runner import collect as collect_lab_cluster

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


def test_lab_through_real_zookeeper_and_bookie_protocol(zk_client, tmp_path):
    lab_cfg = {"seed": 3, "ledgers": 20}
    direct = BookKeeperCluster(name="bk-lab", source="lab", lab=lab_cfg)
    via_zk = BookKeeperCluster(name="bk-lab", source="lab", lab=lab_cfg,
                               zookeeper=ZooKeeperConfig(hosts=zk_client.hosts_with_chroot))
    a, b = tmp_path / "direct", tmp_path / "zk"
    _, truth_a = collect_lab_cluster(direct, DirSink(a), SecretResolver(), AS_OF)
    report, truth_b = collect_lab_cluster(via_zk, DirSink(b), SecretResolver(), AS_OF)
    assert truth_a == truth_b
    znodes_a = {p.relative_to(a).as_posix(): p.read_bytes() for p in (a / "ledger-metadata").rglob("L*")}
    znodes_b = {p.relative_to(b).as_posix(): p.read_bytes() for p in (b / "ledger-metadata").rglob("L*")}
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
