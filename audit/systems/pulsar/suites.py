"""Pulsar's GX suites (docs/pulsar/contracts.md): metrics/pulsar_failover, and the Pulsar findings in
findings/violations. Both run only when the pipeline hands over metrics/pulsar_failover. Check ids and severities
come from the Pulsar checks table (audit.systems.pulsar.domain.checks), like the findings' own."""
from __future__ import annotations

from audit.systems.pulsar.domain.checks import CHECKS, SYSTEM, VALIDATION_CHECKS
from audit.validate.spec import SuiteSpec, expect, sql_list, unexpected_rows

_CHECKS = {**CHECKS, **VALIDATION_CHECKS}
PULSAR = ("pulsar_failover",)
FAILOVER_COLUMNS = ("topic", "subscription", "source_cluster", "target_cluster", "source_mdp", "target_mdp",
                    "expected_target_mdp", "exact_target_mdp", "window_from", "window_to", "compared",
                    "only_on_source", "only_on_target", "redelivered", "skipped", "lost", "to_acknowledge",
                    "to_acknowledge_count", "complete", "redelivery_beyond_tolerance", "unsettled",
                    "after_source_window")
FAILOVER_COUNTS = ("compared", "only_on_source", "only_on_target", "redelivered", "skipped", "lost",
                   "to_acknowledge_count", "redelivery_beyond_tolerance", "unsettled", "after_source_window")
FAILOVER_POSITIONS = ("source_mdp", "target_mdp", "expected_target_mdp", "exact_target_mdp", "window_from",
                      "window_to")
POSITION_REGEX = r"^\d+:(-1|\d+)$"   # broker position L:E (entry -1 = before entry 0 of L)
TO_ACKNOWLEDGE_MAX = 10_000
PAIR_CHECKS = ("pulsar.failover_loss", "pulsar.failover_skip", "pulsar.failover_redelivery",
               "pulsar.target_cursor_ahead")   # findings about one subscription between two clusters
COUNTED_CHECKS = ("pulsar.failover_loss", "pulsar.failover_skip", "pulsar.failover_redelivery")

_ACKS = "from_json(to_acknowledge, 'array<string>')"

PULSAR_FAILOVER = SuiteSpec("pulsar_failover", "pulsar_failover", (
    expect("ExpectTableColumnsToMatchSet", {"column_set": list(FAILOVER_COLUMNS), "exact_match": False},
           "pulsar.metrics_schema", _CHECKS, "metrics/pulsar_failover has every column the other expectations read"),
    *(expect("ExpectColumnValuesToNotBeNull", {"column": c}, "pulsar.metrics_schema", _CHECKS,
             f"every failover row has {c}")
      for c in ("topic", "subscription", "source_cluster", "target_cluster", "source_mdp", "target_mdp",
                "exact_target_mdp")),
    *(expect("ExpectColumnValuesToBeBetween", {"column": c, "min_value": 0}, "pulsar.metrics_consistency", _CHECKS,
             f"{c} is never negative") for c in FAILOVER_COUNTS),
    *(expect("ExpectColumnValuesToMatchRegex", {"column": c, "regex": POSITION_REGEX},
             "pulsar.metrics_consistency", _CHECKS, f"{c} is a broker position 'ledgerId:entryId'")
      for c in FAILOVER_POSITIONS),
    # lost is the part of skipped the source never dispatched; both count messages of the compared window.
    expect("UnexpectedRowsExpectation", unexpected_rows("lost > skipped"), "pulsar.metrics_consistency", _CHECKS,
           "lost messages are a subset of the skipped ones"),
    expect("UnexpectedRowsExpectation", unexpected_rows("redelivered + skipped + coalesce(unsettled, 0) > compared"),
           "pulsar.metrics_consistency", _CHECKS,
           "redelivered, skipped and unsettled messages are among the compared ones (disjoint: acked on one side, "
           "or acked on the source between its reads)"),
    expect("UnexpectedRowsExpectation",
           unexpected_rows(f"(to_acknowledge IS NULL AND to_acknowledge_count > 0) OR "
                           f"(to_acknowledge IS NOT NULL AND {_ACKS} IS NULL) OR "
                           f"size({_ACKS}) > least(to_acknowledge_count, {TO_ACKNOWLEDGE_MAX})"),
           "pulsar.metrics_consistency", _CHECKS,
           "to_acknowledge is a JSON list of at most 10,000 positions, never more than to_acknowledge_count"),
    expect("ExpectColumnValuesToBeBetween", {"column": "lost", "min_value": 0, "max_value": 0},
           "pulsar.failover_loss", _CHECKS, "a failover loses no message"),
    expect("ExpectColumnValuesToBeBetween", {"column": "skipped", "min_value": 0, "max_value": 0},
           "pulsar.failover_skip", _CHECKS, "a failover skips no message"),
    # Replicated subscriptions redeliver by design (the target follows one snapshot behind, docs/formats/pulsar.md
    # §2.6): only redeliveries beyond what the snapshots explain and the namespace's tolerance are a violation
    expect("ExpectColumnValuesToBeBetween", {"column": "redelivery_beyond_tolerance", "min_value": 0,
                                             "max_value": 0},
           "pulsar.failover_redelivery", _CHECKS,
           "a failover redelivers no message beyond what PIP-33 explains and the namespace tolerates"),
), applies_when=PULSAR)

# check id -> its severity, as SQL (`check` is quoted: CHECK is an SQL keyword)
_SEVERITY_OF = " ".join(f"WHEN '{c}' THEN '{k.severity}'" for c, k in sorted(CHECKS.items()))
PULSAR_VIOLATIONS = SuiteSpec("pulsar_violations", "violations", (
    expect("UnexpectedRowsExpectation",
           unexpected_rows(f"system = '{SYSTEM}' AND (CASE `check` {_SEVERITY_OF} END IS NULL "
                           f"OR severity <> CASE `check` {_SEVERITY_OF} END)"),
           "pulsar.findings_schema", _CHECKS,
           "every Pulsar finding uses a contract check id with the contract severity"),
    expect("UnexpectedRowsExpectation",
           unexpected_rows(f"system = '{SYSTEM}' AND (get_json_object(evidence, '$.topic') IS NULL OR "
                           f"(`check` IN ({sql_list(PAIR_CHECKS)}) AND "
                           "(get_json_object(evidence, '$.subscription') IS NULL OR "
                           "get_json_object(evidence, '$.target_cluster') IS NULL)))"),
           "pulsar.findings_schema", _CHECKS,
           "Pulsar evidence names the topic, and the subscription and target cluster of failover findings"),
    expect("UnexpectedRowsExpectation",
           unexpected_rows(f"`check` IN ({sql_list(COUNTED_CHECKS)}) AND coalesce(entry_count, 0) <= 0"),
           "pulsar.findings_schema", _CHECKS, "a failover finding counts at least one message"),
    # one per check of the table, with its severity: the run fails on any Pulsar finding at that severity
    *(expect("UnexpectedRowsExpectation", unexpected_rows(f"`check` = '{c}'"), c, CHECKS, f"no {c} finding")
      for c in CHECKS),
), applies_when=PULSAR)

SUITES: tuple[SuiteSpec, ...] = (PULSAR_FAILOVER, PULSAR_VIOLATIONS)
