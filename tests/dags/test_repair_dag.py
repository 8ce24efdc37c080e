"""The repair DAG through real Airflow runs (`dag.test`): Params checked at trigger time, a dry run by default, a
person's answer through Airflow's own human-in-the-loop handler (the Core API route the UI calls) deciding whether
anything is applied, and every call in the store's audit log. The calls go to a register on loopback."""
from __future__ import annotations

import threading
import time

import pytest

from audit.repair.log import records
from audit.store import open_store
from tests.dags.test_nightly_audit_dag import _dagbag, airflow_db  # noqa: F401  (fixture)
from tests.repair.flow import Register, make_plan, publish_plans, repairable_demo, write_estate


@pytest.fixture
def register():
    reg = Register(a=1)
    yield reg
    reg.close()


def _dag():
    return _dagbag().dags["replaudit_repair"]


def _states(dag_run) -> dict:
    return {ti.task_id: str(ti.state).rsplit(".", 1)[-1].lower() for ti in dag_run.get_task_instances()}


def _answer_when_asked(option: str, user: str, stop: threading.Event) -> threading.Thread:
    """Answers the approval as a person does in the UI: through the Core API's HITL route, as `user`, once the task
    is parked awaiting input (the route resumes only a parked task; an answer written while the task is still
    running would be kept but never wake it)."""
    def respond():
        from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
        from airflow.api_fastapi.core_api.datamodels.hitl import UpdateHITLDetailPayload
        from airflow.api_fastapi.core_api.routes.public.hitl import update_hitl_detail
        from airflow.models.hitl import HITLDetail
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.session import create_session
        from airflow.utils.state import TaskInstanceState
        from sqlalchemy import select

        deadline = time.monotonic() + 120
        while not stop.is_set() and time.monotonic() < deadline:
            with create_session() as session:
                waiting = session.execute(
                    select(TaskInstance.run_id).join(HITLDetail, HITLDetail.ti_id == TaskInstance.id)
                    .where(TaskInstance.dag_id == "replaudit_repair", TaskInstance.task_id == "approve",
                           TaskInstance.state == TaskInstanceState.AWAITING_INPUT,
                           HITLDetail.responded_at.is_(None))).scalars().first()
                if waiting is not None:
                    update_hitl_detail(dag_id="replaudit_repair", dag_run_id=waiting, task_id="approve",
                                       update_hitl_detail_payload=UpdateHITLDetailPayload(chosen_options=[option]),
                                       user=SimpleAuthManagerUser(username=user, role="admin"), session=session)
                    return
            stop.wait(0.2)

    thread = threading.Thread(target=respond, daemon=True)
    thread.start()
    return thread


def _run_answered(conf: dict, option: str, user: str = "oncall"):
    stop = threading.Event()
    thread = _answer_when_asked(option, user, stop)
    try:
        return _dag().test(run_conf=conf)
    finally:
        stop.set()
        thread.join()


def test_params_are_checked_before_anything_runs(airflow_db):
    from airflow.sdk.definitions.param import ParamValidationError

    dag = _dag()
    assert type(dag.timetable).__name__ == "NullTimetable"
    for bad in ({"plan_id": "latest"}, {"plan_id": "A" * 64}, {"plan_id": "0" * 64, "apply": "yes"}):
        with pytest.raises(ParamValidationError):
            dag.test(run_conf=bad)


def test_dry_run_by_default(airflow_db, register, tmp_path):
    with repairable_demo():
        plan = make_plan(register.url, [("a", 1, 2)])
        publish_plans(tmp_path, [plan])
        dag_run = _dag().test(run_conf={"estate_file": str(write_estate(tmp_path)), "plan_id": plan["plan_id"]})
    assert _states(dag_run) == {"review": "success", "wants_apply": "success", "approve": "skipped",
                                "apply": "skipped"}
    assert register.posts() == []
    log = records(open_store(f"file://{tmp_path / 'store'}"), "repairs", plan["plan_id"])
    assert [r["event"] for r in log] == ["requested", "plan", "check", "finished"]


def test_approved_plan_is_applied_and_logged(airflow_db, register, tmp_path):
    with repairable_demo():
        plan = make_plan(register.url, [("a", 1, 2)])
        publish_plans(tmp_path, [plan])
        dag_run = _run_answered({"estate_file": str(write_estate(tmp_path)), "plan_id": plan["plan_id"],
                                 "apply": True}, "Approve")
    assert _states(dag_run)["apply"] == "success", _states(dag_run)
    assert register.posts() == [("/a", {"value": 2})]
    log = records(open_store(f"file://{tmp_path / 'store'}"), "repairs", plan["plan_id"])
    applied = [r for r in log if r["attempt"] == log[-1]["attempt"]]
    assert applied[0]["approved_by"] == "oncall" and applied[-1]["status"] == "applied"
    assert [r["event"] for r in applied] == ["requested", "plan", "check", "call", "result", "verify", "finished"]


def test_rejected_plan_is_not_applied(airflow_db, register, tmp_path):
    with repairable_demo():
        plan = make_plan(register.url, [("a", 1, 2)])
        publish_plans(tmp_path, [plan])
        dag_run = _run_answered({"estate_file": str(write_estate(tmp_path)), "plan_id": plan["plan_id"],
                                 "apply": True}, "Reject")
    assert _states(dag_run)["apply"] == "skipped"
    assert register.posts() == []


def test_a_stale_plan_fails_the_review(airflow_db, register, tmp_path):
    with repairable_demo():
        plan = make_plan(register.url, [("a", 1, 2)])
        publish_plans(tmp_path, [plan])
        dag_run = _dag().test(run_conf={"estate_file": str(write_estate(tmp_path, max_age="0s")),
                                        "plan_id": plan["plan_id"], "apply": True})
    states = _states(dag_run)
    assert states["review"] == "failed" and states["apply"] in ("upstream_failed", "skipped")
    assert register.posts() == []
    log = records(open_store(f"file://{tmp_path / 'store'}"), "repairs", plan["plan_id"])
    assert log[-1]["event"] == "refused" and log[-1]["reason"].startswith("stale: planned by run run-1")
