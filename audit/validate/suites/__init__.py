"""Which GX suites a run has: the shared violations suite, which gates on severity whatever check produced a
finding, and each system's own (System.suites(), defined in suites/<system>.py next to this file).

`expectations/gx/` is generated from them for every registered system by
`python -m audit.validate.suites <expectations dir>` and committed; a test keeps the two in step. A system
registered at run time need not be in the committed project: gx_runner adds its suites to the run's scratch copy.
"""
from __future__ import annotations

import sys
from typing import Iterable, Sequence

from audit.contracts import SEVERITIES, System
from audit.validate.spec import ANY_CHECK, ExpectationSpec, SuiteSpec, unexpected_rows

_GATES = {"critical": "no critical finding (data lost)", "major": "no major finding (data at risk)",
          "minor": "no minor finding (under-replicated, placement)",
          "warning": "no warning (e.g. a ledger left open too long)"}

# Over findings/violations of every system: one expectation per severity, most severe first.
VIOLATIONS = SuiteSpec("violations", "violations", tuple(
    ExpectationSpec("UnexpectedRowsExpectation", unexpected_rows(f"severity = '{s}'"), ANY_CHECK, s, _GATES[s])
    for s in SEVERITIES))
SHARED: tuple[SuiteSpec, ...] = (VIOLATIONS,)


def suites_for(systems: Iterable[System]) -> tuple[SuiteSpec, ...]:
    """The shared suite and the suites of `systems`. Order (the order of the outcome and of the generated
    project): the suites that apply to every run (no `applies_when`) before those that apply only when their
    tables are handed over; within each, system by system in the order given, then the shared suite."""
    specs = [spec for system in systems for spec in system.validation.suites()] + list(SHARED)
    seen: dict[str, SuiteSpec] = {}
    for spec in specs:
        if not isinstance(spec, SuiteSpec):
            raise TypeError(f"a system's suites() must return SuiteSpecs, got {type(spec).__name__}")
        if spec.name in seen:
            raise ValueError(f"two GX suites are named {spec.name!r}: suite names must be unique across systems")
        seen[spec.name] = spec
    return tuple(sorted(specs, key=lambda spec: bool(spec.applies_when)))


def all_suites() -> tuple[SuiteSpec, ...]:
    """The suites of every registered system (audit.systems.all_systems()) and the shared one."""
    from audit.systems import all_systems

    return suites_for(all_systems())


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m audit.validate.suites <expectations dir>`: regenerate <dir>/gx for every registered system."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m audit.validate.suites <expectations dir>", file=sys.stderr)
        return 2
    from pyspark.sql import SparkSession

    from audit.validate.project import build_project

    build_project(args[0], SparkSession.builder.master("local[1]").getOrCreate(), all_suites())
    return 0
