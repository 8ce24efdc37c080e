"""GX suites as data: what a system's `suites()` returns (audit.contracts.System.suites) and what the shared
suite is made of. Nothing here names a system.

Every expectation carries meta {"check": <check id>, "severity": <severity>} so that a failed expectation can be
traced to the check it guards (a system's checks table, audit.contracts.Check). Meta check "*" (ANY_CHECK) means
"any check": the shared violations suite gates on severity, whatever produced the finding."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from audit.contracts import SEVERITIES, Check

ANY_CHECK = "*"


@dataclass(frozen=True)
class ExpectationSpec:
    gx_type: str                 # class name in great_expectations.expectations
    kwargs: dict[str, Any]
    check: str
    severity: str
    description: str

    def __post_init__(self):
        if self.severity not in SEVERITIES:
            raise ValueError(f"expectation {self.description!r}: severity: expected one of {SEVERITIES}, "
                             f"got {self.severity!r}")

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


def expect(gx_type: str, kwargs: dict[str, Any], check: str, checks: Mapping[str, Check],
           description: str) -> ExpectationSpec:
    """An expectation guarding `check`, with the severity the checks table gives it (KeyError: not in the table)."""
    return ExpectationSpec(gx_type, kwargs, check, checks[check].severity, description)


def unexpected_rows(where: str) -> dict[str, Any]:
    """kwargs of an UnexpectedRowsExpectation failing on the rows that match the SQL condition `where`."""
    return {"unexpected_rows_query": f"SELECT * FROM {{batch}} WHERE {where}"}


def sql_list(values: Iterable[str]) -> str:
    """'a', 'b', ... for an SQL IN (...) list (values are check ids and the like: no quote in them)."""
    values = list(values)
    if any("'" in v for v in values):
        raise ValueError(f"a quote in an SQL literal: {values}")
    return ", ".join(f"'{v}'" for v in values)
