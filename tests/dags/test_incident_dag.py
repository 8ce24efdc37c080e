"""The incident check DAG: Params validated when the run is triggered, and a scoped run marked as an incident."""
from __future__ import annotations

import pytest

from audit.config.estate import load_estate
from audit.store import open_store
from audit.store.run import list_runs
from tests.dags.test_nightly_audit_dag import _dagbag, airflow_db  # noqa: F401  (fixture)
from tests.estates import write_lab_estate


def _dag():
    return _dagbag().dags["replaudit_incident_check"]


def test_params_are_checked_before_anything_runs(airflow_db, tmp_path):
    from airflow.sdk.definitions.param import ParamValidationError

    dag = _dag()
    assert type(dag.timetable).__name__ == "NullTimetable"       # triggered by hand only
    for bad in ({"systems": ["bookeeper"]}, {"clusters": ["Bad Name"]}, {"window": "soon"}, {"deep": "yes"},
                {"subjects": [""]}):
        with pytest.raises(ParamValidationError):
            dag.test(run_conf=bad)
    assert not (tmp_path / "store").exists()


def test_a_scoped_run_is_an_incident_run(airflow_db, tmp_path):
    estate = write_lab_estate(tmp_path / "estate.yaml", estate="dagincident",
                              store=f'{{uri: "file://{tmp_path / "store"}"}}', cluster="bk-x",
                              lab="{seed: 11, ledgers: 24}")
    dag_run = _dag().test(run_conf={"estate_file": str(estate), "systems": ["bookkeeper"], "clusters": ["bk-x"]})
    assert str(dag_run.state) in ("success", "DagRunState.SUCCESS"), dag_run.state
    (run,) = list_runs(open_store(load_estate(str(estate)).store.uri), "dagincident")
    assert run.run_id == "incident__" + dag_run.run_id
    summary = run.manifest["summary"]
    assert summary["run"]["kind"] == "incident"
    assert (summary["run"]["scope"]["systems"], summary["run"]["scope"]["clusters"]) == (["bookkeeper"], ["bk-x"])
