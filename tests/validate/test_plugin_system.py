"""A system registered at run time gets GX without committed files: its SuiteSpec is added to the run's scratch
copy of the project, run over its table like the committed suites, and reported in the same outcome."""
import hashlib
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic import BaseModel

from audit import systems
from audit.contracts import Check, Pipeline, ReportSection, System, SystemConfig, Validation
from audit.validate.gx_runner import applicable_suites, run_validations
from audit.validate.spec import SuiteSpec, expect

PROJECT = Path(__file__).resolve().parents[2] / "expectations"
VIOLATIONS = ("run_id string, system string, cluster string, check string, severity string, subject string, "
              "entry_count long, message string, evidence string")
LAG = "partition string, lag long"

CHECKS = {"demo.lag": Check("major", "a partition lags its leader by more than 10 messages")}
LAG_SUITE = SuiteSpec("demo_lag", "demo_lag", (
    expect("ExpectColumnValuesToBeBetween", {"column": "lag", "min_value": 0, "max_value": 10}, "demo.lag", CHECKS,
           "no partition lags more than 10 messages"),
), applies_when=("demo_lag",))


class DemoCluster(BaseModel):
    name: str


def _unused(*args, **kwargs):
    raise AssertionError("validate must not call this")


DEMO = System(
    name="demo", title="Demo", checks=CHECKS, config=SystemConfig(DemoCluster),
    pipeline=Pipeline(collect=_unused, normalize=_unused, audit=_unused),
    report=ReportSection(summary=_unused, html=_unused, text=_unused, truth_key=_unused,
                         claims=_unused, truth_item=_unused),
    validation=Validation(lambda: (LAG_SUITE,), {"demo_lag": ("metrics", "demo_lag")}))


@pytest.fixture
def demo():
    systems.register(DEMO)
    try:
        yield DEMO
    finally:
        systems.unregister(DEMO.name)


def _tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "uncommitted" not in p.parts}


def test_a_system_registered_at_run_time_gets_its_suite_run(spark, tmp_path, demo):
    assert not list(PROJECT.rglob("demo_lag*")), "the demo suite must not be committed"
    before = _tree_digest(PROJECT)
    tables = {"violations": spark.createDataFrame([], VIOLATIONS),
              "demo_lag": spark.createDataFrame([("p0", 3), ("p1", 42), ("p2", 11), ("p3", 10)], LAG)}
    outcome = run_validations(spark, tables, PROJECT, tmp_path)   # systems=None: every registered one
    suites = {s.name: s for s in outcome.suites}
    assert "demo_lag" in suites and suites["violations"].status == "passed"
    lag = suites["demo_lag"]
    assert (lag.status, lag.table, lag.error) == ("failed", "demo_lag", None)
    (e,) = lag.expectations
    assert (e.check, e.severity, e.description) == ("demo.lag", "major", "no partition lags more than 10 messages")
    assert (e.success, e.unexpected_count, sorted(e.sample)) == (False, 2, [11, 42])
    assert ("demo_lag", e) in outcome.failed_expectations() and not outcome.success
    assert "demo_lag" in (tmp_path / "index.html").read_text()      # in the run's Data Docs too
    assert _tree_digest(PROJECT) == before                          # nothing written to the committed project


def test_only_the_given_systems_and_the_shared_suite_run(spark, tmp_path):
    """systems=[...] (what the pipeline passes: the estate's systems): no other system's suite, and a plug-in
    system need not even be registered."""
    tables = {"violations": spark.createDataFrame([], VIOLATIONS),
              "demo_lag": spark.createDataFrame([("p0", 0), ("p1", 10)], LAG)}
    outcome = run_validations(spark, tables, PROJECT, tmp_path, systems=[DEMO])
    assert [(s.name, s.status) for s in outcome.suites] == [("violations", "passed"), ("demo_lag", "passed")]
    assert outcome.success and outcome.complete


def test_a_suite_gx_cannot_build_is_an_error_and_the_others_run(spark, tmp_path):
    broken = SuiteSpec("demo_broken", "demo_lag", (
        expect("ExpectNoSuchThing", {"column": "lag"}, "demo.lag", CHECKS, "cannot be built"),))
    system = replace(DEMO, validation=replace(DEMO.validation, suites=lambda: (LAG_SUITE, broken)))
    tables = {"violations": spark.createDataFrame([], VIOLATIONS),
              "demo_lag": spark.createDataFrame([("p0", 0)], LAG)}
    outcome = run_validations(spark, tables, PROJECT, tmp_path, systems=[system])
    status = {s.name: (s.status, s.error) for s in outcome.suites}
    assert status["violations"] == ("passed", None) and status["demo_lag"] == ("passed", None)
    assert status["demo_broken"][0] == "error" and "ExpectNoSuchThing" in status["demo_broken"][1]
    assert not outcome.complete


def test_a_plugin_suite_applies_only_with_its_table(demo):
    names = [s.name for s in applicable_suites({"violations": 1})]
    assert "demo_lag" not in names and "violations" in names
    assert "demo_lag" in [s.name for s in applicable_suites({"violations": 1, "demo_lag": 1})]
