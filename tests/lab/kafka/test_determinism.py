"""Same mapping and as_of -> the same raw bytes and ground truth (the lab simulates again from scratch); another
seed or instant changes them; the temporary log dirs are gone afterwards; a default cluster is fast."""
from __future__ import annotations

import glob
import json
import os
import tempfile

from tests.lab.kafka.helpers import AS_OF, cluster, collect

LAB = {"seed": 5, "clusters": [cluster("hw", "high-watermark", "kip101-scenario-2"),
                               cluster("busy", "leader-epoch", "healthy-under-load", log_dirs={3: 2})]}


def _leftovers() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "kafka-lab-*")))


def test_same_mapping_same_bytes_and_truth():
    before = _leftovers()
    for name in ("hw", "busy"):
        a, _, ta = collect(LAB, name, fresh=True)
        b, _, tb = collect(LAB, name, fresh=True)
        assert a.keys() == b.keys()
        assert [k for k in a if a[k] != b[k]] == []
        assert json.dumps(ta, sort_keys=True) == json.dumps(tb, sort_keys=True)
        assert any(k.endswith("/batches.json") for k in a) and "admin/metadata.json" in a
    assert _leftovers() == before


def test_other_seed_or_instant_changes_the_evidence():
    base, _, _ = collect(LAB, "busy", fresh=True)
    other, _, _ = collect({**LAB, "seed": 6}, "busy", fresh=True)
    later, _, _ = collect(LAB, "busy", AS_OF + 60_000, fresh=True)
    key = "brokers/1/dir0/replication-offset-checkpoint"
    assert base[key] != other[key]
    assert base["admin/metadata.json"] != later["admin/metadata.json"]


def test_second_log_dir_and_meta_properties_forms():
    raw, _, _ = collect(LAB, "busy")
    kraft = raw["brokers/3/dir1/meta.properties"]
    assert b"version=1" in kraft and b"directory.id=" in kraft
    assert any(k.startswith("brokers/3/dir1/") and k.endswith("/batches.json") for k in raw)
    zk, _, _ = collect(LAB, "hw")
    meta = zk["brokers/1/dir0/meta.properties"]
    assert b"version=0" in meta and b"broker.id=1" in meta
    scan = json.loads(raw["brokers/3/dir1/scan.json"])
    assert scan["log_dir"] == "/var/lib/kafka/data-1" and scan["errors"] == [] and scan["vanished"] == []


def test_default_cluster_is_collected_whole():
    raw, report, _ = collect({"seed": 8}, "primary", fresh=True)
    assert report.counts["batches_indexed"] > 10_000 and report.gaps == []
