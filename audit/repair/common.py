"""What every system's dry-run repair planner shares: the input error, the plan id, the error item.

A system's `plan_run(outputs) -> (plans, errors)` (System.plan_repairs) reads what it needs from the staged run
(audit.contracts.RunOutputs) and returns dry-run plans -- dicts with at least "system", "cluster", "dry_run"
and "plan_id" -- and one error item per input it could not plan from (`error_item`)."""
from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping


class RepairInputError(ValueError):
    """`source` names the input (e.g. "fragments[3]"), `field` the key, `expected` what it should hold."""

    def __init__(self, source: str, field: str, expected: str):
        self.source, self.field, self.expected = source, field, expected
        super().__init__(f"{source}: {field}: expected {expected}")


def plan_id(plan: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of the plan without its "plan_id": the same findings give the same id."""
    body = {k: v for k, v in plan.items() if k != "plan_id"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def error_item(system: str, exc: RepairInputError, **where: Any) -> dict[str, Any]:
    """{"status": "error", "system", **where, "field", "expected", "error"}: an input no plan could be made from."""
    return {"status": "error", "system": system, **where, "field": exc.field, "expected": exc.expected,
            "error": str(exc)}


def plans_in_file(doc: Mapping[str, Any]) -> list[dict]:
    """Every plan of a run's reports/repair_plan.json, every system's, in system-name order (the layout
    audit.report.build.repair_plan_file writes)."""
    found = doc.get("systems") if isinstance(doc.get("systems"), Mapping) else {}
    return [p for _, part in sorted(found.items()) if isinstance(part, Mapping) and isinstance(part.get("plans"), list)
            for p in part["plans"] if isinstance(p, dict) and "plan_id" in p]
