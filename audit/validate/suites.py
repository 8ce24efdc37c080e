"""The GX suites of replaudit, as data. `expectations/gx/` is generated from this file by
`python -m audit.validate.suites <expectations dir>` and committed; a test keeps the two in step.

Every expectation carries meta {"check": <check id>, "severity": <severity>} so that a failed
expectation can be traced to the finding it guards. Meta check "*" means "any check" (the
violations suite gates on severity, whatever produced the finding)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DATASOURCE = "replaudit_spark"
BATCH_DEFINITION = "whole_dataframe"  # the DataFrame is handed over at run time
ANY_CHECK = "*"
# GX's own failure severity (shown in Data Docs) for each of ours.
GX_SEVERITY = {"critical": "critical", "major": "critical", "minor": "warning", "warning": "info"}


@dataclass(frozen=True)
class ExpectationSpec:
    gx_type: str                 # class name in great_expectations.expectations
    kwargs: dict[str, Any]
    check: str
    severity: str
    description: str

    @property
    def meta(self) -> dict[str, str]:
        return {"check": self.check, "severity": self.severity}


@dataclass(frozen=True)
class SuiteSpec:
    name: str      # suite, data asset, validation definition and checkpoint all share this name
    table: str     # key of the `tables` handed to run_validations (findings/violations -> "violations")
    expectations: tuple[ExpectationSpec, ...] = field(default_factory=tuple)


REPLICA_COLUMNS = ("cluster", "ledger_id", "state", "audited", "least_replicas", "entries", "entries_lost",
                   "entries_below_ack_quorum", "entries_below_write_quorum", "unavailable_bookies",
                   "ack_quorum", "write_quorum")


def _rows(where: str) -> dict[str, Any]:
    return {"unexpected_rows_query": f"SELECT * FROM {{batch}} WHERE {where}"}


BK_LEDGER_REPLICAS = SuiteSpec("bk_ledger_replicas", "bk_ledger_replicas", (
    ExpectationSpec("ExpectTableColumnsToMatchSet", {"column_set": list(REPLICA_COLUMNS), "exact_match": False},
                    "bk.metrics_schema", "major",
                    "metrics/bk_ledger_replicas has every column the other expectations read"),
    ExpectationSpec("ExpectColumnValuesToBeBetween", {"column": "entries_lost", "min_value": 0, "max_value": 0},
                    "bk.entries_lost", "critical", "no audited ledger has an entry without any replica"),
    ExpectationSpec("ExpectColumnValuesToBeBetween",
                    {"column": "entries_below_ack_quorum", "min_value": 0, "max_value": 0},
                    "bk.entries_below_ack_quorum", "major", "no entry has fewer replicas than the ack quorum"),
    ExpectationSpec("ExpectColumnValuesToBeBetween",
                    {"column": "entries_below_write_quorum", "min_value": 0, "max_value": 0},
                    "bk.entries_below_write_quorum", "minor", "no entry has fewer replicas than the write quorum"),
    # Qa and Qw are per ledger, so the least replica count is compared row by row. An audited ledger
    # without entries has nothing to replicate and is skipped.
    ExpectationSpec("UnexpectedRowsExpectation",
                    _rows("audited AND entries > 0 AND least_replicas < ack_quorum"),
                    "bk.entries_below_ack_quorum", "major",
                    "every audited ledger keeps at least Qa replicas of each entry"),
    ExpectationSpec("UnexpectedRowsExpectation",
                    _rows("audited AND entries > 0 AND least_replicas < write_quorum"),
                    "bk.entries_below_write_quorum", "minor",
                    "every audited ledger keeps Qw replicas of each entry"),
))

VIOLATIONS = SuiteSpec("violations", "violations", (
    ExpectationSpec("UnexpectedRowsExpectation", _rows("severity = 'critical'"), ANY_CHECK, "critical",
                    "no critical finding (data lost)"),
    ExpectationSpec("UnexpectedRowsExpectation", _rows("severity = 'major'"), ANY_CHECK, "major",
                    "no major finding (data at risk)"),
    ExpectationSpec("UnexpectedRowsExpectation", _rows("severity = 'minor'"), ANY_CHECK, "minor",
                    "no minor finding (under-replicated, placement)"),
    ExpectationSpec("UnexpectedRowsExpectation", _rows("severity = 'warning'"), ANY_CHECK, "warning",
                    "no warning (e.g. a ledger left open too long)"),
))

SUITES: tuple[SuiteSpec, ...] = (BK_LEDGER_REPLICAS, VIOLATIONS)


def build_project(expectations_dir, spark) -> None:
    """(Re)write the file context under `expectations_dir/gx` from SUITES. Maintainer tool: it needs a
    SparkSession because GX starts one when a Spark datasource is added."""
    import shutil
    import tempfile
    from pathlib import Path

    import great_expectations as gx
    import great_expectations.expectations as gxe
    from great_expectations.data_context.types.base import ProgressBarsConfig

    target = Path(expectations_dir) / "gx"
    with tempfile.TemporaryDirectory() as tmp:
        ctx = gx.get_context(mode="file", project_root_dir=tmp)
        ctx.enable_analytics(False)
        ctx.variables.progress_bars = ProgressBarsConfig(globally=False)  # batch logs, not a terminal
        ctx.variables.save()
        for site in list(ctx.get_config().data_docs_sites or {}):
            ctx.delete_data_docs_site(site)  # the run adds its own site, pointing into the run's reports/
        ds = ctx.data_sources.add_spark(name=DATASOURCE)
        for spec in SUITES:
            bd = ds.add_dataframe_asset(name=spec.name).add_batch_definition_whole_dataframe(BATCH_DEFINITION)
            suite = ctx.suites.add(gx.ExpectationSuite(name=spec.name, meta={"table": spec.table}))
            for e in spec.expectations:
                suite.add_expectation(getattr(gxe, e.gx_type)(**e.kwargs, meta=e.meta, description=e.description,
                                                              severity=GX_SEVERITY[e.severity]))
            vd = ctx.validation_definitions.add(gx.ValidationDefinition(name=spec.name, data=bd, suite=suite))
            ctx.checkpoints.add(gx.Checkpoint(name=spec.name, validation_definitions=[vd], actions=[],
                                              result_format={"result_format": "COMPLETE"}))
        for old in target.iterdir() if target.exists() else ():
            if old.name != "uncommitted":
                shutil.rmtree(old) if old.is_dir() else old.unlink()
        target.mkdir(parents=True, exist_ok=True)
        for item in (Path(tmp) / "gx").iterdir():
            if item.name not in ("uncommitted",):
                dest = target / item.name
                shutil.copytree(item, dest) if item.is_dir() else shutil.copy2(item, dest)


if __name__ == "__main__":
    import sys

    from pyspark.sql import SparkSession

    build_project(sys.argv[1], SparkSession.builder.master("local[1]").getOrCreate())
