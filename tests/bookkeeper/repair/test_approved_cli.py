"""An approved BookKeeper repair end to end through `replaudit repair apply`: the planner's plan published in a
run, the estate's cluster on the tests' real ZooKeeper; the marker AutoRecovery acts on is written only after
approval, only while the ledger's metadata is what the audit saw, and every call is in the store's audit log."""
from __future__ import annotations

import json

from audit.cli.main import main
from audit.systems.bookkeeper.repair.apply import marker_path, parse_marker
from audit.repair.log import records
from audit.store import open_store
from tests.bookkeeper.collect.data import legacy_path, znode
from tests.bookkeeper.repair.test_apply import B3, LID, _cluster_with_ledger, _plan
from tests.repair.flow import publish_plans


def _estate(tmp_path, zk_client):
    path = tmp_path / "estate.yaml"
    path.write_text(f"""
estate: repairs
store: {{uri: "file://{tmp_path / 'store'}"}}
systems:
  bookkeeper:
    - name: bk-a
      source: zookeeper
      zookeeper: {{hosts: "{zk_client.hosts_with_chroot}"}}
""")
    return str(path)


def _apply(estate, pid, approve=True):
    return main(["repair", "apply", "--estate", estate, "--plan", pid, "--json"]
                + (["--approve", pid, "--by", "oncall"] if approve else []))


def test_approved_plan_marks_the_ledger_and_logs_every_call(zk_client, tmp_path, capsys):
    md = _cluster_with_ledger(zk_client)
    plan = _plan(md)
    publish_plans(tmp_path, [plan])
    estate, pid = _estate(tmp_path, zk_client), plan["plan_id"]
    path = marker_path("/ledgers", LID)

    assert _apply(estate, pid, approve=False) == 0                  # dry run: checked, nothing written
    assert json.loads(capsys.readouterr().out)["status"] == "dry_run_ok"
    assert zk_client.exists(path) is None

    assert _apply(estate, pid) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "applied"
    assert list(parse_marker(zk_client.get(path)[0], path).replica) == [B3]
    log = records(open_store(f"file://{tmp_path / 'store'}"), "repairs", pid)
    applied = [r for r in log if r["attempt"] == log[-1]["attempt"]]
    assert [r["event"] for r in applied] == ["requested", "plan", "check", "call", "result", "verify", "finished"]
    assert applied[0]["approved_by"] == "oncall"
    assert applied[3]["request"]["path"] == path and applied[5]["holds"] is True

    assert _apply(estate, pid) == 3                                  # once only
    assert "already applied" in capsys.readouterr().err


def test_metadata_that_moved_since_the_audit_stops_the_plan(zk_client, tmp_path, capsys):
    md = _cluster_with_ledger(zk_client)
    plan = _plan(md)
    publish_plans(tmp_path, [plan])
    # the ledger was re-replicated by someone else meanwhile: B3 replaced in its ensemble
    moved = md.__class__(**{**md.__dict__, "segments": (md.segments[0].__class__(0, ("b1:3181", "b2:3181",
                                                                                      "b4:3181")),)})
    zk_client.set(f"/ledgers/{legacy_path(LID)}", znode(moved))
    assert _apply(_estate(tmp_path, zk_client), plan["plan_id"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "precondition_failed" and "ensemble" in out["reason"]
    assert zk_client.exists(marker_path("/ledgers", LID)) is None
