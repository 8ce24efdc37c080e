"""The nightly DAG: imports cleanly, and a real Airflow run (`dag.test`) on a small lab estate collects,
audits, validates, publishes the run and posts the violations to a webhook receiver on loopback."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.browser import open_report
from tests.estates import write_lab_estate
from tests.http_receiver import receiver_factory  # noqa: F401  (fixture)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def airflow_db():
    home = Path(os.environ["AIRFLOW_HOME"])
    assert home.is_relative_to(REPO), "tests must never use ~/airflow"
    if not (home / "airflow.db").exists():
        subprocess.run([str(Path(sys.executable).with_name("airflow")), "db", "migrate"], check=True,
                       stdout=subprocess.DEVNULL, env=dict(os.environ))
    return home


def _dagbag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(REPO / "dags"))


def test_dags_import_without_errors():
    bag = _dagbag()
    assert bag.import_errors == {}
    dag = bag.dags["replaudit_nightly_audit"]
    assert "expression='0 0 * * *'" in repr(dag.timetable)  # @daily
    assert {t.task_id for t in dag.tasks} >= {"collect", "normalize", "audit", "validate", "report", "alert"}
    assert dag.tasks[-1].task_id == "alert" or "alert" in {t.task_id for t in dag.leaves}


def test_nightly_dag_run_on_small_lab_posts_violations(airflow_db, tmp_path, receiver_factory, monkeypatch):
    receiver = receiver_factory()
    monkeypatch.setenv("LAB_HOOK_TOKEN", "Bearer dag-test-token")
    estate = write_lab_estate(tmp_path / "estate.yaml", estate="dagtest",
                              store=f'{{uri: "file://{tmp_path / "store"}"}}',
                              cluster="bk-small", lab="{seed: 11, ledgers: 24}", extra=f"""
alerts:
  routes:
    - name: ops
      kind: webhook
      url: "{receiver.url}"
      headers_from: {{Authorization: {{env: LAB_HOOK_TOKEN}}}}
      min_severity: minor""")
    dag = _dagbag().dags["replaudit_nightly_audit"]
    dag_run = dag.test(run_conf={"estate_file": str(estate)})
    assert str(dag_run.state) in ("success", "DagRunState.SUCCESS"), dag_run.state

    from audit.config.estate import load_estate
    from audit.store import open_store
    from audit.store.run import list_runs

    runs = list_runs(open_store(load_estate(estate).store.uri), "dagtest")
    assert [r.run_id for r in runs] == [dag_run.run_id]   # the Airflow run id names the audit run
    summary = runs[0].manifest["summary"]
    assert summary["lab"]["missed"] == 0 and summary["lab"]["false_alarms"] == 0, summary["lab"]
    keys = {o["key"].split("/attempts/")[1].split("/", 1)[1] for o in runs[0].manifest["objects"]}
    assert {"reports/summary.json", "reports/report.html", "reports/repair_plan.json"} <= keys

    assert len(receiver.requests) == 1
    posted = receiver.requests[0]
    assert posted["headers"]["Authorization"] == "Bearer dag-test-token"
    body = posted["body"]
    assert body["run_id"] == summary["run_id"]
    # the first night: every finding and every source not covered is new (audit/alerts/lifecycle.py)
    assert {v["notice"] for v in body["violations"]} == {"new"}
    checks = {v["check"] for v in body["violations"]} - {"audit_incomplete"}
    assert checks and checks <= set(summary["counts"]["by_check"])

    # the published report in a real browser: no console error, every plot laid out (the replica histogram and
    # one line per metric of the history), a screenshot taken
    report = Path(summary["run"]["report_location"].removeprefix("file://"))
    page = open_report(report, tmp_path / "report.png")
    assert page.title.startswith("replaudit report: dagtest run ")
    assert [e for e in page.console if e["level"] in ("SEVERE", "WARNING")] == []
    plotted = len(summary["history"]["metrics"]) + 1
    assert len(page.plots) >= plotted and all(w > 0 and h > 0 for w, h in page.plots), page.plots
    assert (tmp_path / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "dag-test-token" not in json.dumps(summary)


def test_stage_results_reach_xcom_compacted():
    """Summaries and validation results stay in the store; XCom (and the task log) gets scalars and sizes."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("nightly_audit_module", REPO / "dags" / "nightly_audit.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = {"status": "violations", "run_id": "r1", "violations": 3, "ratio": 0.5, "gx": None,
              "findings": [{"check": "x"}] * 4, "counts": {"a": 1, "b": 2}}
    assert module.compact(result) == {"status": "violations", "run_id": "r1", "violations": 3, "ratio": 0.5,
                                      "gx": None, "findings": 4, "counts": 2}
    assert module.compact([1, 2]) == [1, 2]
