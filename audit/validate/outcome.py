"""What a validation run found, as plain JSON-able values (no GX types): the summary, the report and the
alerts read this, never GX's own result objects."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

PASSED, FAILED, ERROR, SKIPPED = "passed", "failed", "error", "skipped"


@dataclass
class ExpectationOutcome:
    expectation_type: str
    check: str
    severity: str
    description: str
    success: bool
    unexpected_count: int | None = None   # rows (or missing columns) that broke the expectation
    sample: list[Any] = field(default_factory=list)  # a few unexpected rows / values, JSON-able
    exception: str | None = None          # GX could not evaluate it (e.g. a column is missing)


@dataclass
class SuiteOutcome:
    name: str
    table: str
    status: str                           # passed | failed | error | skipped
    error: str | None = None              # why the suite did not run, or ran with errors
    expectations: list[ExpectationOutcome] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return self.status == PASSED


@dataclass
class ValidationOutcome:
    suites: list[SuiteOutcome]
    docs_index: str | None = None         # data docs index, relative to the docs dir given to the run
    duration_s: float = 0.0

    @property
    def success(self) -> bool:
        return bool(self.suites) and all(s.success for s in self.suites)

    @property
    def complete(self) -> bool:
        """Every suite was evaluated (passed or failed on data, not skipped or broken)."""
        return all(s.status in (PASSED, FAILED) for s in self.suites)

    def failed_expectations(self) -> list[tuple[str, ExpectationOutcome]]:
        return [(s.name, e) for s in self.suites for e in s.expectations if not e.success]

    def to_json(self) -> dict[str, Any]:
        return {"success": self.success, "complete": self.complete, "docs_index": self.docs_index,
                "duration_s": round(self.duration_s, 3),
                "suites": [{**asdict(s), "success": s.success} for s in self.suites]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ValidationOutcome":
        suites = []
        for s in data.get("suites", []):
            exps = [ExpectationOutcome(**e) for e in s.get("expectations", [])]
            suites.append(SuiteOutcome(name=s["name"], table=s["table"], status=s["status"],
                                       error=s.get("error"), expectations=exps))
        return cls(suites=suites, docs_index=data.get("docs_index"), duration_s=data.get("duration_s", 0.0))
