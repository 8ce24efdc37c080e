"""Assemble a run's reports from what the earlier stages staged: summary.json, report.html, repair_plan.json.

Reads small Parquet outputs with pyarrow (no Spark needed: audit/tables.py), the GX outcome
(reports/validation.json), the collectors' coverage (raw/<system>/<cluster>/collection.json and reread.json), the
failed jobs (reports/stages/*.json) and, for the lab, its ground truth. Everything a system adds -- its summary
keys, HTML fragment, lab scorecard rules and dry-run repair plans -- comes from the declared systems' records
(audit.contracts.System): nothing here names a system.

repair_plan.json holds each declared system's plans and errors under its name (repair_plan_file)."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from audit.findings import fingerprint
from audit.contracts import RunOutputs, System
from audit.history.metrics import run_gauges
from audit.history.trend import trends
from audit.report.html import render_html
from audit.report.summary import build_summary
from audit.tables import file_rows, is_data_file, read_rows
from audit.timeutil import now_ms

def _coverage(root: Path) -> list[dict]:
    gaps = []
    for f in sorted([*(root / "raw").glob("*/*/collection.json"), *(root / "raw").glob("*/*/reread.json")]):
        report = json.loads(f.read_text())
        gaps += [{"system": report["system"], "cluster": report["cluster"], **g} for g in report.get("gaps", [])]
    for q in read_rows(root / "tables" / "quarantine"):
        gaps.append({"system": q.get("system"), "cluster": q.get("cluster"), "source": q.get("source_key"),
                     "what": q.get("payload_kind"), "error": q.get("reason")})
    gaps += _failed_stages(root)
    return gaps


def _failed_stages(root: Path) -> list[dict]:
    """reports/stages/<stage>-<system>.json ({"system", "stage", "error"}), written by the pipeline when a
    system's normalize or audit job failed: nothing of that system was audited past that stage."""
    gaps = []
    for f in sorted((root / "reports" / "stages").glob("*.json")):
        try:
            failure = json.loads(f.read_text())
        except ValueError as exc:
            failure = {"error": f"{f.name}: unreadable failure record ({exc})"}
        if not isinstance(failure, dict):
            failure = {"error": f"{f.name}: unreadable failure record (not a JSON object)"}
        stage, _, system = f.stem.partition("-")
        system, stage = failure.get("system") or system or "*", failure.get("stage") or stage
        gaps.append({"system": system, "cluster": "*", "source": f"{stage} job", "what": f"{stage} of {system}",
                     "error": failure.get("error")})
    return gaps


def _ground_truth(root: Path) -> dict[str, Any]:
    return {f.parent.name: json.loads(f.read_text())
            for f in sorted((root / "raw" / "_lab").glob("*/ground_truth.json"))}


def repair_plans(systems: Sequence[System], outputs: RunOutputs) -> dict[str, tuple[list[dict], list[dict]]]:
    """System name -> (plans, errors) of its `repair.plan` (systems without a planner are left out)."""
    return {s.name: tuple(s.repair.plan(outputs)) for s in systems if s.repair is not None}


def repair_plan_file(planned: dict[str, tuple[list[dict], list[dict]]]) -> dict[str, Any]:
    """The content of reports/repair_plan.json: {"dry_run": true, "systems": {<name>: {"plans", "errors"}}}, one
    entry per declared system with a planner (empty lists when it planned nothing)."""
    return {"dry_run": True, "systems": {name: {"plans": list(plans), "errors": list(errors)}
                                         for name, (plans, errors) in planned.items()}}


def plan_summary(system: str, plan: dict) -> dict[str, Any]:
    """A plan in summary["repair_plans"]: its system and its top-level scalar fields (cluster, plan_id, dry_run
    and whatever names the plan's subject), without "status"."""
    return {"system": system, **{k: v for k, v in plan.items() if k not in ("system", "status")
                                 and isinstance(v, (str, int, float, bool))}}


def build_run_report(root: Path, *, estate: str, run_id: str, attempt_id: str, report_prefix: str,
                     systems: Sequence[System], estate_config: Any = None, history: Sequence | None = None,
                     at_ms: int | None = None, first_seen: Mapping[str, int] | None = None,
                     incident: Mapping[str, Any] | None = None) -> dict:
    """`root`: the staged attempt folder. `estate`: the estate's name. `systems`: the declared systems, in order.
    `estate_config`: the loaded estate, handed to the systems as RunOutputs.estate (e.g. their clusters' admin URLs).
    `history`: the earlier runs' metrics (audit.history.store.recent), plotted with tonight's (summary["history"]).
    `first_seen`: fingerprint -> first seen (ms) of the findings still firing after the previous run (its alert
    state): each finding shows when it was first seen (tonight when unknown) and summary["findings_new"] counts
    tonight's new ones. `incident`: an incident check's scope (audit.contracts.Scope.to_json() plus "not_asked"):
    the run is marked `kind: incident` and the report says what it covered."""
    root = Path(root)
    violations = read_rows(root / "findings" / "violations")
    outputs = RunOutputs(root=root, violations=violations, estate=estate_config)
    validation_file = root / "reports" / "validation.json"
    validation = json.loads(validation_file.read_text()) if validation_file.exists() else None
    truth = _ground_truth(root)
    run_meta = {"estate": estate, "run_id": run_id, "attempt_id": attempt_id,
                "report_location": report_prefix + "report.html", "report_prefix": report_prefix,
                "kind": "incident" if incident else "nightly"}
    if incident:
        run_meta["scope"] = dict(incident)
    gaps = _coverage(root) + [g for s in systems if s.report.coverage for g in s.report.coverage(outputs)]
    summary = build_summary(run_meta, violations, gaps, validation, truth or None, systems=systems, outputs=outputs)
    planned = repair_plans(systems, outputs)
    summary["repair_plans"] = [plan_summary(name, p) for name, (plans, _) in planned.items() for p in plans]
    now = at_ms if at_ms is not None else now_ms()
    if first_seen is not None:
        for v in violations:
            v["first_seen_ms"] = first_seen.get(fingerprint(v["system"], v["cluster"], v["check"],
                                                            str(v.get("subject") or "")), now)
        summary["findings_new"] = sum(v["first_seen_ms"] == now for v in violations)
    if history is not None:
        summary["history"] = trends(history, run_gauges(summary, violations, time.time()), run_id, now)
    errors = [{"system": name, "error": e.get("error")} for name, (_, errs) in planned.items() for e in errs]
    if errors:
        summary["repair_errors"] = errors
    reports = root / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    (reports / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True, default=str))
    (reports / "repair_plan.json").write_text(json.dumps(repair_plan_file(planned), indent=1, sort_keys=True,
                                                         default=str))
    (reports / "report.html").write_text(render_html(summary, violations, systems))
    return summary


def load_violations(store, writer) -> list[dict]:
    """The published run's violations (for alerting after the manifest is written): every Parquet file under
    findings/violations/, at any depth (one folder per system), with read_rows' rules."""
    import io

    prefix = writer.key("findings", "violations") + "/"
    out = []
    for key in store.list(prefix):
        parts = key[len(prefix):].split("/")
        if is_data_file(parts):
            out += file_rows(io.BytesIO(store.get(key)), parts[:-1])
    return out
