"""DirSink, CollectionReport and SecretResolver."""
from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest

from audit.collectors.base import CollectionReport, CoverageGap, DirSink, RawSink, SinkError
from audit.config.model import SecretRef
from audit.secrets import SecretError, SecretResolver


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


def test_env_reference_resolves_and_is_redacted():
    s = SecretResolver(environ={"ZK_DIGEST": "auditor:pw-123", "EMPTY": ""})
    assert s.resolve({"env": "ZK_DIGEST"}) == "auditor:pw-123"
    assert s.redact("auth failed for auditor:pw-123 at zk1") == "auth failed for *** at zk1"
    assert s.resolve(SecretRef(env="ZK_DIGEST")) == "auditor:pw-123"
    with pytest.raises(SecretError, match="MISSING") as e:
        s.resolve({"env": "MISSING"})
    assert e.value.ref == {"env": "MISSING"}
    with pytest.raises(SecretError, match="EMPTY"):
        s.resolve({"env": "EMPTY"})


@pytest.mark.parametrize("ref", [{}, {"env": "A", "airflow_conn": "b"}, {"vault": "x"}, {"env": ""}, "ENV",
                                 {"env": "A", "field": "password"}])
def test_malformed_references_are_rejected(ref):
    with pytest.raises(SecretError):
        SecretResolver(environ={"A": "v"}).resolve(ref)


def test_airflow_connection_password_then_token_then_field():
    conns = {
        "with_pw": SimpleNamespace(password="pw-abc", login="me", extra_dejson={"token": "tok"}),
        "token_only": SimpleNamespace(password=None, login=None, extra_dejson={"token": "tok-xyz"}),
        "nothing": SimpleNamespace(password="", login=None, extra_dejson={}),
    }

    def get_connection(conn_id):
        if conn_id not in conns:
            raise LookupError(f"The conn_id `{conn_id}` isn't defined")
        return conns[conn_id]

    s = SecretResolver(environ={}, get_connection=get_connection)
    assert s.resolve({"airflow_conn": "with_pw"}) == "pw-abc"
    assert s.resolve({"airflow_conn": "token_only"}) == "tok-xyz"
    assert s.resolve({"airflow_conn": "with_pw", "field": "login"}) == "me"
    assert s.resolve(SecretRef(airflow_conn="with_pw", field="extra.token")) == "tok"
    with pytest.raises(SecretError, match="'nothing' has neither"):
        s.resolve({"airflow_conn": "nothing"})
    with pytest.raises(SecretError, match="'absent' not available"):
        s.resolve({"airflow_conn": "absent"})
    assert s.redact("pw-abc tok-xyz me") == "*** *** ***"


def test_real_airflow_connection_from_environment(monkeypatch):
    # Airflow's own lookup path (task SDK Connection.get -> env secrets backend).
    monkeypatch.setenv("AIRFLOW_CONN_REPLAUDIT_TEST_BK",
                       json.dumps({"conn_type": "generic", "password": "airflow-pw-42"}))
    s = SecretResolver()
    assert s.resolve({"airflow_conn": "replaudit_test_bk"}) == "airflow-pw-42"
    with pytest.raises(SecretError, match="replaudit_test_missing"):
        s.resolve({"airflow_conn": "replaudit_test_missing"})
