"""BookKeeper's GX suite over metrics/bk_ledger_replicas (one row per ledger, docs/bookkeeper/contracts.md).
Severities come from the BookKeeper checks table (audit.systems.bookkeeper.domain.checks), like the findings' own."""
from __future__ import annotations

from audit.systems.bookkeeper.domain.checks import CHECKS, VALIDATION_CHECKS
from audit.validate.spec import SuiteSpec, expect, unexpected_rows

_CHECKS = {**CHECKS, **VALIDATION_CHECKS}
REPLICA_COLUMNS = ("cluster", "ledger_id", "state", "audited", "least_replicas", "entries", "entries_lost",
                   "entries_below_ack_quorum", "entries_below_write_quorum", "unavailable_bookies",
                   "ack_quorum", "write_quorum")

BK_LEDGER_REPLICAS = SuiteSpec("bk_ledger_replicas", "bk_ledger_replicas", (
    expect("ExpectTableColumnsToMatchSet", {"column_set": list(REPLICA_COLUMNS), "exact_match": False},
           "bk.metrics_schema", _CHECKS,
           "metrics/bk_ledger_replicas has every column the other expectations read"),
    expect("ExpectColumnValuesToBeBetween", {"column": "entries_lost", "min_value": 0, "max_value": 0},
           "bk.entries_lost", _CHECKS, "no audited ledger has an entry without any replica"),
    expect("ExpectColumnValuesToBeBetween", {"column": "entries_below_ack_quorum", "min_value": 0, "max_value": 0},
           "bk.entries_below_ack_quorum", _CHECKS, "no entry has fewer replicas than the ack quorum"),
    expect("ExpectColumnValuesToBeBetween",
           {"column": "entries_below_write_quorum", "min_value": 0, "max_value": 0},
           "bk.entries_below_write_quorum", _CHECKS, "no entry has fewer replicas than the write quorum"),
    # Qa and Qw are per ledger, so the least replica count is compared row by row. An audited ledger
    # without entries has nothing to replicate and is skipped.
    expect("UnexpectedRowsExpectation", unexpected_rows("audited AND entries > 0 AND least_replicas < ack_quorum"),
           "bk.entries_below_ack_quorum", _CHECKS, "every audited ledger keeps at least Qa replicas of each entry"),
    expect("UnexpectedRowsExpectation",
           unexpected_rows("audited AND entries > 0 AND least_replicas < write_quorum"),
           "bk.entries_below_write_quorum", _CHECKS, "every audited ledger keeps Qw replicas of each entry"),
))

SUITES: tuple[SuiteSpec, ...] = (BK_LEDGER_REPLICAS,)
