"""A system plugs in without touching shared code: the minimal "demo" system (tests/demo_system.py), registered at
run time, goes through `replaudit run` and through the nightly DAG (`dag.test`), and its one finding reaches the
findings table, GX, the summary, the HTML report, the terminal text and the alert route."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from audit.cli.main import EXIT_VIOLATIONS, main
from tests.demo_system import CHECK, registered
from tests.http_receiver import receiver_factory  # noqa: F401  (fixture)

REPO = Path(__file__).resolve().parents[1]


def _estate(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "estate.yaml"
    path.write_text(f"""
estate: plug
store: {{uri: "file://{tmp_path / 'store'}"}}
spark: {{master: "local[2]"}}
thresholds: {{demo_total_max: 3}}
alerts:
  routes:
    - {{name: ops, kind: webhook, url: "{url}", min_severity: major}}
systems:
  demo:
    - {{name: d-over, source: lab, total: 5}}
    - {{name: d-ok, source: lab, total: 2}}
""")
    return path


def _published(estate: Path, run_id: str) -> tuple[dict, Path]:
    from audit.config.estate import load_estate
    from audit.store import open_store
    from audit.store.run import read_manifest

    est = load_estate(estate)
    manifest = read_manifest(open_store(est.store.uri), est.name, run_id)
    return manifest["summary"], Path(est.store.uri[len("file://"):]) / manifest["prefix"]


def _check_run(estate: Path, run_id: str, receiver) -> None:
    summary, attempt = _published(estate, run_id)
    rows = ds.dataset(str(attempt / "findings" / "violations")).to_table().to_pylist()
    assert [(r["system"], r["cluster"], r["check"], r["entry_count"]) for r in rows] == [("demo", "d-over", CHECK, 5)]
    assert summary["status"] == "violations" and summary["counts"]["by_check"] == {CHECK: 1}
    assert summary["demo"] == {"findings": 1}                                   # the system's own section
    assert summary["lab"]["injected"] == summary["lab"]["detected"] == 1 and summary["lab"]["false_alarms"] == 0
    failed = summary["validation"]["failed_expectations"]
    assert [(f["suite"], f["check"]) for f in failed if f["check"] == CHECK] == [("demo_totals", CHECK)]
    html = (attempt / "reports" / "report.html").read_text()
    assert 'id="demo"' in html and "d-over" in html
    (posted,) = receiver.requests
    assert [(v["system"], v["check"]) for v in posted["body"]["violations"]] == [("demo", CHECK)]


def test_a_registered_system_runs_through_replaudit_run(tmp_path, receiver_factory, capsys):
    receiver = receiver_factory()
    estate = _estate(tmp_path, receiver.url)
    with registered():
        assert main(["run", "--estate", str(estate), "--run-id", "r1"]) == EXIT_VIOLATIONS
        assert "demo: 1 finding(s)" in capsys.readouterr().out
        _check_run(estate, "r1", receiver)


@pytest.fixture(scope="module")
def airflow_db():
    home = Path(os.environ["AIRFLOW_HOME"])
    if not (home / "airflow.db").exists():
        subprocess.run([str(Path(sys.executable).with_name("airflow")), "db", "migrate"], check=True,
                       stdout=subprocess.DEVNULL, env=dict(os.environ))
    return home


def test_a_registered_system_runs_through_the_dag(airflow_db, tmp_path, receiver_factory):
    from airflow.dag_processing.dagbag import DagBag

    receiver = receiver_factory()
    estate = _estate(tmp_path, receiver.url)
    with registered():
        dag = DagBag(dag_folder=str(REPO / "dags")).dags["replaudit_nightly_audit"]
        dag_run = dag.test(run_conf={"estate_file": str(estate)})
        assert str(dag_run.state) in ("success", "DagRunState.SUCCESS"), dag_run.state
        states = {(ti.task_id, ti.map_index): str(ti.state) for ti in dag_run.get_task_instances()}
        # normalize and audit are mapped per declared system: one instance each for the one system here
        mapped = sorted(k for k in states if k[0] in ("normalize", "audit"))
        assert mapped == [("audit", 0), ("normalize", 0)], states
        assert all(states[k].endswith("success") for k in mapped), states
        _check_run(estate, dag_run.run_id, receiver)


def test_a_failing_system_is_not_covered_and_hides_no_other_finding(tmp_path, receiver_factory, capsys):
    """The demo system's audit job crashes; BookKeeper's findings still reach the summary and the alert, and the
    run says what it could not cover."""
    from dataclasses import replace

    from tests.demo_system import SYSTEM

    def broken(*args, **kwargs):
        raise RuntimeError("demo audit broke")

    receiver = receiver_factory()
    estate = _estate(tmp_path, receiver.url)
    estate.write_text(estate.read_text() + """
  bookkeeper:
    - {name: bk-a, source: lab, lab: {seed: 5, ledgers: 24}}
""")
    with registered(replace(SYSTEM, pipeline=replace(SYSTEM.pipeline, audit=broken))):
        assert main(["run", "--estate", str(estate), "--run-id", "r1"]) == EXIT_VIOLATIONS
        summary, _ = _published(estate, "r1")
    assert {"system": "demo", "cluster": "*", "source": "audit job", "what": "audit of demo",
            "error": "RuntimeError: demo audit broke"} in summary["coverage_gaps"]
    assert summary["complete"] is False
    assert set(summary["counts"]["by_system"]) == {"bookkeeper"} and summary["counts"]["total"] > 0
    (posted,) = receiver.requests
    told = {(v["system"], v["check"] == "audit_incomplete") for v in posted["body"]["violations"]}
    # BookKeeper's findings, and the demo system's failed job as its own "audit incomplete" alert
    # (the BookKeeper lab's own sources not covered are alerted too)
    assert ("bookkeeper", False) in told and ("demo", True) in told and ("demo", False) not in told
