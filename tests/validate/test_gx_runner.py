"""The committed GX project run over small Spark DataFrames: violations fail with the right counts, a clean
run passes, broken input is reported per suite, Data Docs land in the run's folder, the repo is untouched."""
import hashlib
import json
from pathlib import Path

import pytest

from audit.validate.gx_runner import ValidationSetupError, run_validations
from audit.validate.suites import all_suites

REPO = Path(__file__).resolve().parents[2]
PROJECT = REPO / "expectations"
REPLICAS = ("cluster string, ledger_id long, state string, audited boolean, least_replicas int, entries long, "
            "entries_lost long, entries_below_ack_quorum long, entries_below_write_quorum long, "
            "unavailable_bookies int, ack_quorum int, write_quorum int")
VIOLATIONS = ("run_id string, system string, cluster string, check string, severity string, subject string, "
              "entry_count long, message string, evidence string")
HEALTHY = [("bk-a", 1, "CLOSED", True, 3, 100, 0, 0, 0, 0, 2, 3),
           ("bk-a", 2, "OPEN", False, None, None, None, None, None, 0, 2, 3),   # not audited: tail is moving
           ("bk-a", 3, "CLOSED", True, 2, 0, 0, 0, 0, 0, 2, 2)]                # empty ledger
BROKEN = [("bk-a", 10, "CLOSED", True, 0, 100, 7, 40, 100, 1, 2, 3),   # lost entries
          ("bk-a", 11, "CLOSED", True, 1, 100, 0, 25, 100, 1, 2, 3),   # below Qa, nothing lost
          ("bk-a", 12, "CLOSED", True, 2, 100, 0, 0, 50, 1, 2, 3)]     # below Qw only


def _violation(check, severity, ledger, count):
    return ("r1", "bookkeeper", "bk-a", check, severity, f"ledger {ledger}", count, "m", "{}")


def _tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "uncommitted" not in p.parts}


def _by_check(suite):
    out = {}
    for e in suite.expectations:
        out.setdefault((e.check, e.expectation_type), e)
    return out


@pytest.fixture(scope="module")
def broken_run(spark, tmp_path_factory):
    before = _tree_digest(PROJECT)
    docs = tmp_path_factory.mktemp("run") / "reports" / "data_docs"
    metrics = spark.createDataFrame(HEALTHY + BROKEN, REPLICAS)
    violations = spark.createDataFrame([_violation("bk.entries_lost", "critical", 10, 7),
                                        _violation("bk.entries_below_ack_quorum", "major", 10, 40),
                                        _violation("bk.entries_below_ack_quorum", "major", 11, 25),
                                        _violation("bk.entries_below_write_quorum", "minor", 12, 50)], VIOLATIONS)
    outcome = run_validations(spark, {"bk_ledger_replicas": metrics, "violations": violations}, PROJECT, docs)
    return outcome, docs, before


def test_violations_fail_with_unexpected_counts(broken_run):
    outcome, _, _ = broken_run
    assert not outcome.success and outcome.complete
    replicas, violations = outcome.suites
    assert (replicas.name, replicas.status, violations.status) == ("bk_ledger_replicas", "failed", "failed")
    got = {(e.check, e.expectation_type): (e.success, e.unexpected_count) for e in replicas.expectations}
    assert got == {
        ("bk.metrics_schema", "expect_table_columns_to_match_set"): (True, 0),
        ("bk.entries_lost", "expect_column_values_to_be_between"): (False, 1),
        ("bk.entries_below_ack_quorum", "expect_column_values_to_be_between"): (False, 2),
        ("bk.entries_below_write_quorum", "expect_column_values_to_be_between"): (False, 3),
        ("bk.entries_below_ack_quorum", "unexpected_rows_expectation"): (False, 2),
        ("bk.entries_below_write_quorum", "unexpected_rows_expectation"): (False, 3),
    }
    below_qa = _by_check(replicas)[("bk.entries_below_ack_quorum", "unexpected_rows_expectation")]
    assert sorted(r["ledger_id"] for r in below_qa.sample) == [10, 11]
    sev = {e.severity: (e.success, e.unexpected_count) for e in violations.expectations}
    assert sev == {"critical": (False, 1), "major": (False, 2), "minor": (False, 1), "warning": (True, 0)}
    assert {e.check for e in violations.expectations} == {"*"}


def test_data_docs_written_to_docs_dir_and_repo_untouched(broken_run):
    outcome, docs, before = broken_run
    assert outcome.docs_index == "index.html"
    index = (docs / "index.html").read_text()
    assert "bk_ledger_replicas" in index and "violations" in index
    assert list((docs / "validations").rglob("*.html")), "no validation result page"
    assert _tree_digest(PROJECT) == before


def test_outcome_round_trips_as_json(broken_run):
    outcome = broken_run[0]
    data = json.loads(json.dumps(outcome.to_json()))
    assert data["success"] is False and data["suites"][0]["expectations"]
    from audit.validate.outcome import ValidationOutcome
    assert ValidationOutcome.from_json(data).to_json() == data


def test_clean_estate_passes(spark, tmp_path):
    metrics = spark.createDataFrame(HEALTHY, REPLICAS)
    violations = spark.createDataFrame([], VIOLATIONS)   # a clean estate has no finding at all
    outcome = run_validations(spark, {"bk_ledger_replicas": metrics, "violations": violations}, PROJECT, tmp_path)
    assert outcome.success, outcome.to_json()
    assert all(e.success and e.unexpected_count == 0 for s in outcome.suites for e in s.expectations)
    assert (tmp_path / "index.html").is_file()


def test_missing_column_is_an_error_and_missing_table_is_skipped(spark, tmp_path):
    no_quorums = spark.createDataFrame([r[:10] for r in HEALTHY], REPLICAS.rsplit(", ack_quorum", 1)[0])
    outcome = run_validations(spark, {"bk_ledger_replicas": no_quorums}, PROJECT, tmp_path)
    replicas, violations = outcome.suites
    assert replicas.status == "error" and "could not be evaluated" in replicas.error
    schema = _by_check(replicas)[("bk.metrics_schema", "expect_table_columns_to_match_set")]
    assert (schema.success, schema.unexpected_count, sorted(schema.sample)) == (False, 2, ["ack_quorum",
                                                                                         "write_quorum"])
    assert violations.status == "skipped" and "'violations'" in violations.error
    assert not outcome.success and not outcome.complete


def test_project_without_context_is_a_clear_error(spark, tmp_path):
    with pytest.raises(ValidationSetupError) as err:
        run_validations(spark, {}, tmp_path, tmp_path / "docs")
    assert err.value.field == "great_expectations.yml" and str(tmp_path) in err.value.source


def test_committed_project_matches_the_suite_specs():
    gx_dir = PROJECT / "gx"
    cfg = (gx_dir / "great_expectations.yml").read_text()
    assert "analytics_enabled: false" in cfg and "data_docs_sites: {}" in cfg
    for spec in all_suites():
        suite = json.loads((gx_dir / "expectations" / f"{spec.name}.json").read_text())
        committed = [(e["type"], e["kwargs"], e["meta"]) for e in suite["expectations"]]
        wanted = [(_snake(e.gx_type), e.kwargs, e.meta) for e in spec.expectations]
        # GX stores 0 as 0.0 and may reorder: compare as multisets with == (0 == 0.0)
        stale = f"{spec.name}: regenerate with python -m audit.validate.suites expectations"
        assert len(committed) == len(wanted), stale
        assert all(w in committed for w in wanted), stale
        assert (gx_dir / "checkpoints" / f"{spec.name}.json").is_file()
        assert (gx_dir / "validation_definitions" / f"{spec.name}.json").is_file()


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")
