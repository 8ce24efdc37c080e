"""The GX suites of replaudit, as data. `expectations/gx/` is generated from this file by
`python -m audit.validate.suites <expectations dir>` and committed; a test keeps the two in step.

Every expectation carries meta {"check": <check id>, "severity": <severity>} so that a failed
expectation can be traced to the finding it guards. Meta check "*" means "any check" (the
violations suite gates on severity, whatever produced the finding)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from audit.domain.pulsar.checks import CHECKS as PULSAR_CHECKS  # check id -> severity: the audit's own table

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
    # Tables whose presence makes the suite apply. An estate without that system does not hand them over,
    # and the suite is left out of the outcome (not skipped: nothing is missing).
    applies_when: tuple[str, ...] = ()


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

# -- Pulsar (docs/pulsar-contracts.md): run only when the pipeline hands over metrics/pulsar_failover -------
PULSAR = ("pulsar_failover",)
FAILOVER_COLUMNS = ("topic", "subscription", "source_cluster", "target_cluster", "source_mdp", "target_mdp",
                    "expected_target_mdp", "exact_target_mdp", "window_from", "window_to", "compared",
                    "only_on_source", "only_on_target", "redelivered", "skipped", "lost", "to_acknowledge",
                    "to_acknowledge_count", "complete")
FAILOVER_COUNTS = ("compared", "only_on_source", "only_on_target", "redelivered", "skipped", "lost",
                   "to_acknowledge_count")
FAILOVER_POSITIONS = ("source_mdp", "target_mdp", "expected_target_mdp", "exact_target_mdp", "window_from",
                      "window_to")
POSITION_REGEX = r"^\d+:(-1|\d+)$"   # broker position L:E (entry -1 = before entry 0 of L)
TO_ACKNOWLEDGE_MAX = 10_000
PAIR_CHECKS = ("pulsar.failover_loss", "pulsar.failover_skip", "pulsar.failover_redelivery",
               "pulsar.target_cursor_ahead")   # findings about one subscription between two clusters
COUNTED_CHECKS = ("pulsar.failover_loss", "pulsar.failover_skip", "pulsar.failover_redelivery")


_ACKS = "from_json(to_acknowledge, 'array<string>')"


def _sql_list(values) -> str:
    return ", ".join(f"'{v}'" for v in values)


PULSAR_FAILOVER = SuiteSpec("pulsar_failover", "pulsar_failover", (
    ExpectationSpec("ExpectTableColumnsToMatchSet", {"column_set": list(FAILOVER_COLUMNS), "exact_match": False},
                    "pulsar.metrics_schema", "major",
                    "metrics/pulsar_failover has every column the other expectations read"),
    *(ExpectationSpec("ExpectColumnValuesToNotBeNull", {"column": c}, "pulsar.metrics_schema", "major",
                      f"every failover row has {c}")
      for c in ("topic", "subscription", "source_cluster", "target_cluster", "source_mdp", "target_mdp",
                "exact_target_mdp")),
    *(ExpectationSpec("ExpectColumnValuesToBeBetween", {"column": c, "min_value": 0}, "pulsar.metrics_consistency",
                      "major", f"{c} is never negative") for c in FAILOVER_COUNTS),
    *(ExpectationSpec("ExpectColumnValuesToMatchRegex", {"column": c, "regex": POSITION_REGEX},
                      "pulsar.metrics_consistency", "major", f"{c} is a broker position 'ledgerId:entryId'")
      for c in FAILOVER_POSITIONS),
    # lost is the part of skipped the source never dispatched; both count messages of the compared window.
    ExpectationSpec("UnexpectedRowsExpectation", _rows("lost > skipped"), "pulsar.metrics_consistency", "major",
                    "lost messages are a subset of the skipped ones"),
    ExpectationSpec("UnexpectedRowsExpectation", _rows("redelivered + skipped > compared"),
                    "pulsar.metrics_consistency", "major",
                    "redelivered and skipped messages are among the compared ones (disjoint: acked on one side)"),
    ExpectationSpec("UnexpectedRowsExpectation",
                    _rows(f"(to_acknowledge IS NULL AND to_acknowledge_count > 0) OR "
                          f"(to_acknowledge IS NOT NULL AND {_ACKS} IS NULL) OR "
                          f"size({_ACKS}) > least(to_acknowledge_count, {TO_ACKNOWLEDGE_MAX})"),
                    "pulsar.metrics_consistency", "major",
                    "to_acknowledge is a JSON list of at most 10,000 positions, never more than to_acknowledge_count"),
    ExpectationSpec("ExpectColumnValuesToBeBetween", {"column": "lost", "min_value": 0, "max_value": 0},
                    "pulsar.failover_loss", "critical", "a failover loses no message"),
    ExpectationSpec("ExpectColumnValuesToBeBetween", {"column": "skipped", "min_value": 0, "max_value": 0},
                    "pulsar.failover_skip", "major", "a failover skips no message"),
    ExpectationSpec("ExpectColumnValuesToBeBetween", {"column": "redelivered", "min_value": 0, "max_value": 0},
                    "pulsar.failover_redelivery", "minor", "a failover redelivers no message"),
), applies_when=PULSAR)

_SEVERITY_OF = " ".join(f"WHEN '{c}' THEN '{s}'" for c, s in sorted(PULSAR_CHECKS.items()))
PULSAR_VIOLATIONS = SuiteSpec("pulsar_violations", "violations", (
    # `check` is quoted: CHECK is an SQL keyword.
    ExpectationSpec("UnexpectedRowsExpectation",
                    _rows(f"system = 'pulsar' AND (CASE `check` {_SEVERITY_OF} END IS NULL "
                          f"OR severity <> CASE `check` {_SEVERITY_OF} END)"),
                    "pulsar.findings_schema", "major",
                    "every Pulsar finding uses a contract check id with the contract severity"),
    ExpectationSpec("UnexpectedRowsExpectation",
                    _rows("system = 'pulsar' AND (get_json_object(evidence, '$.topic') IS NULL OR "
                          f"(`check` IN ({_sql_list(PAIR_CHECKS)}) AND "
                          "(get_json_object(evidence, '$.subscription') IS NULL OR "
                          "get_json_object(evidence, '$.target_cluster') IS NULL)))"),
                    "pulsar.findings_schema", "major",
                    "Pulsar evidence names the topic, and the subscription and target cluster of failover findings"),
    ExpectationSpec("UnexpectedRowsExpectation",
                    _rows(f"`check` IN ({_sql_list(COUNTED_CHECKS)}) AND coalesce(entry_count, 0) <= 0"),
                    "pulsar.findings_schema", "major", "a failover finding counts at least one message"),
    *(ExpectationSpec("UnexpectedRowsExpectation", _rows(f"`check` = '{c}'"), c, s, f"no {c} finding")
      for c, s in PULSAR_CHECKS.items()),
), applies_when=PULSAR)

SUITES: tuple[SuiteSpec, ...] = (BK_LEDGER_REPLICAS, VIOLATIONS, PULSAR_FAILOVER, PULSAR_VIOLATIONS)


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
            suite = ctx.suites.add(gx.ExpectationSuite(name=spec.name, meta={
                "table": spec.table, **({"applies_when": list(spec.applies_when)} if spec.applies_when else {})}))
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
