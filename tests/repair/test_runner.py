"""The shared approved-repair flow (audit/repair/runner.py) through its real interface, the CLI: a dry run by
default, refusal of stale, changed, unapproved and already applied plans, a stop at the first precondition that
does not hold, and every step in the store's audit log (secrets scrubbed). The calls go to a real HTTP server on
loopback that records them (tests/repair/flow.py)."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest

from audit.cli.main import main
from audit.config.estate import load_estate
from audit.config.secrets import SecretResolver
from audit.repair import runner
from audit.repair.log import records
from audit.store import open_store
from tests.repair.flow import Register, make_plan, publish_plans, repairable_demo, write_estate


@pytest.fixture
def register():
    reg = Register(a=1, b=10)
    yield reg
    reg.close()


@pytest.fixture
def demo():
    with repairable_demo():
        yield


def _cli(*args) -> int:
    return main(["repair", *args])


def _log(tmp_path, plan_id):
    return records(open_store(f"file://{tmp_path / 'store'}"), "repairs", plan_id)


def test_dry_run_by_default_checks_everything_and_calls_nothing(demo, register, tmp_path, capsys):
    estate = write_estate(tmp_path)
    plan = make_plan(register.url, [("a", 1, 2), ("b", 10, 11)])
    publish_plans(tmp_path, [plan])
    assert _cli("apply", "--estate", str(estate), "--plan", plan["plan_id"]) == 0
    out = capsys.readouterr().out
    assert f"sha256 of the plan: {plan['plan_id']}" in out and "dry_run: dry_run_ok" in out
    assert register.posts() == [] and register.values == {"a": 1, "b": 10}
    events = [r["event"] for r in _log(tmp_path, plan["plan_id"])]
    # the second step's precondition is what the first call leaves: a dry run cannot read it
    assert events == ["requested", "plan", "check", "not_checked", "finished"]


def test_an_approved_plan_is_applied_with_every_call_in_the_audit_log(demo, register, tmp_path, monkeypatch):
    monkeypatch.setenv("DEMO_REPAIR_TOKEN", "s3cret-token")
    estate = write_estate(tmp_path)
    plan = make_plan(register.url, [("a", 1, 2), ("b", 10, 11)], with_token=True)
    publish_plans(tmp_path, [plan])
    pid = plan["plan_id"]
    assert _cli("apply", "--estate", str(estate), "--plan", pid, "--approve", pid, "--by", "oncall") == 0
    assert register.posts() == [("/a", {"value": 2}), ("/b", {"value": 11})]
    log = _log(tmp_path, pid)
    assert [(r["event"], r.get("step")) for r in log] == [
        ("requested", None), ("plan", None), ("check", 1), ("call", 1), ("result", 1), ("verify", 1),
        ("check", 2), ("call", 2), ("result", 2), ("verify", 2), ("finished", None)]
    assert log[0]["approved_by"] == "oncall" and log[-1]["status"] == "applied"
    assert log[3]["request"] == {"method": "POST", "url": f"{register.url}/a", "body": {"value": 2}}
    assert log[2]["observed"] == 1 and log[5]["observed"] == 2
    stored = "".join(json.dumps(r) for r in log)
    assert "s3cret-token" not in stored and "***" in stored        # the result echoed it: scrubbed
    # applying it again is refused: the log says it was applied
    assert _cli("apply", "--estate", str(estate), "--plan", pid, "--approve", pid) == 3
    assert len(register.posts()) == 2
    assert _log(tmp_path, pid)[-1]["event"] == "refused"


def test_the_first_precondition_that_does_not_hold_stops_the_plan(demo, register, tmp_path):
    estate = write_estate(tmp_path)
    register.values["b"] = 12                   # b moved after the audit
    plan = make_plan(register.url, [("a", 1, 2), ("b", 10, 11), ("a", 2, 3)])
    publish_plans(tmp_path, [plan])
    pid = plan["plan_id"]
    assert _cli("apply", "--estate", str(estate), "--plan", pid, "--approve", pid) == 1
    assert register.posts() == [("/a", {"value": 2})]          # nothing after step 2
    last = _log(tmp_path, pid)[-2:]
    assert (last[0]["event"], last[0]["step"], last[0]["holds"], last[0]["observed"], last[0]["expected"]) == \
        ("check", 2, False, 12, 10)
    assert last[1]["status"] == "precondition_failed" and "expected 10, found 12" in last[1]["reason"]


@pytest.mark.parametrize("case", ["stale", "edited", "file_changed", "unknown", "bad_id", "wrong_approval"])
def test_refusals(demo, register, tmp_path, capsys, case):
    estate = write_estate(tmp_path, max_age="1h")
    plan = make_plan(register.url, [("a", 1, 2)])
    pid = plan["plan_id"]
    if case == "edited":
        plan["steps"][0]["to"] = 99                 # the id no longer matches the content
    key = publish_plans(tmp_path, [plan])
    if case == "file_changed":
        path = tmp_path / "store" / key
        path.write_text(path.read_text().replace('"dry_run": true', '"dry_run": true ', 1))
    args = ["apply", "--estate", str(estate), "--plan", pid, "--approve", pid]
    if case == "unknown":
        args[4] = args[6] = "0" * 64
    elif case == "bad_id":
        args[4] = args[6] = "latest"
    elif case == "wrong_approval":
        args[6] = "f" * 64
    if case == "stale":
        loaded = load_estate(str(estate))
        store = open_store(loaded.store.uri)
        later = runner.find_plan(store, "repairs", pid).planned_at + timedelta(hours=2)
        with pytest.raises(runner.RepairRefused, match="stale: .* beyond the estate's repairs.max_plan_age"):
            runner.run_plan(store, loaded, pid, secrets=SecretResolver(), dry_run=True, now=later)
    else:
        assert _cli(*args) == (2 if case == "wrong_approval" else 3)
        err = capsys.readouterr().err
        assert {"edited": "no longer hashes to its id", "file_changed": "changed after run run-1 was published",
                "unknown": "no published run of estate 'repairs' holds this plan",
                "bad_id": "a plan id is 64 lowercase hex digits",
                "wrong_approval": "approve the plan you reviewed"}[case] in err
    assert register.posts() == []


def test_a_plan_without_an_approver_is_refused(demo, register, tmp_path):
    estate = load_estate(str(write_estate(tmp_path)))
    plan = make_plan(register.url, [("a", 1, 2)])
    publish_plans(tmp_path, [plan])
    with pytest.raises(runner.RepairRefused, match="not approved"):
        runner.run_plan(open_store(estate.store.uri), estate, plan["plan_id"], secrets=SecretResolver(),
                        dry_run=False, approved_by=None)
    assert register.posts() == []


def test_plan_lists_and_shows_what_the_approver_sees(demo, register, tmp_path, capsys):
    estate = write_estate(tmp_path)
    plans = [make_plan(register.url, [("a", 1, 2)]), make_plan(register.url, [("b", 10, 11)])]
    publish_plans(tmp_path, plans)
    assert _cli("plan", "--estate", str(estate), "--json") == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["run_id"] == "run-1" and [p["plan_id"] for p in listed["plans"]] == [p["plan_id"] for p in plans]
    assert _cli("plan", "--estate", str(estate), "--plan", plans[1]["plan_id"]) == 0
    shown = capsys.readouterr().out
    assert "1. set_register on b" in shown and f'"url": "{register.url}/b"' in shown
    assert register.calls == []                 # showing a plan reads nothing from the cluster
