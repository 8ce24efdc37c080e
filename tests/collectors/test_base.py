"""DirSink and CollectionReport."""
from __future__ import annotations

import json
import os

import pytest

from audit.collectors.base import CollectionReport, CoverageGap, DirSink, RawSink, SinkError


def test_dir_sink_writes_under_root_once(tmp_path):
    sink = DirSink(tmp_path)
    assert isinstance(sink, RawSink)
    sink.put("entries-of-ledger/bk1:3181/7.pb", b"\x00\x01")
    assert (tmp_path / "entries-of-ledger" / "bk1:3181" / "7.pb").read_bytes() == b"\x00\x01"
    sink.put("entries-of-ledger/bk1:3181/7.pb", b"\x00\x01")  # same bytes again: fine
    with pytest.raises(SinkError, match="different bytes"):
        sink.put("entries-of-ledger/bk1:3181/7.pb", b"\x00\x02")
    assert (tmp_path / "entries-of-ledger" / "bk1:3181" / "7.pb").read_bytes() == b"\x00\x01"
    assert sorted(os.listdir(tmp_path / "entries-of-ledger" / "bk1:3181")) == ["7.pb"]  # no temp files left


@pytest.mark.parametrize("key", ["../x", "a/../../x", "/etc/passwd", "a//b", "a/./b", "", "a\\b", "a/"])
def test_dir_sink_refuses_keys_outside_root(tmp_path, key):
    with pytest.raises(SinkError) as e:
        DirSink(tmp_path / "root").put(key, b"x")
    assert e.value.key == key
    assert not (tmp_path / "x").exists()


def test_dir_sink_refuses_non_bytes(tmp_path):
    with pytest.raises(SinkError, match="expected bytes"):
        DirSink(tmp_path).put("a", "text")


def test_collection_report_json_round_trip_and_merge():
    r = CollectionReport("bookkeeper", "bk-a")
    r.count("ledger_znodes_stored", 3)
    r.gap("bookie://bk1:3181", "entries of ledger", "timeout: ...")
    other = CollectionReport("bookkeeper", "bk-a", {"ledger_znodes_stored": 2, "x": 1},
                             [CoverageGap("zookeeper://h/ledgers", "ledger metadata", "NoAuth")])
    r.merge(other)
    assert r.counts == {"ledger_znodes_stored": 5, "x": 1}
    assert [g.error for g in r.gaps] == ["timeout: ...", "NoAuth"]
    assert CollectionReport.from_dict(json.loads(r.to_json())) == r
