"""A few lines for a terminal: status, counts, each system's lines (its report section's `text`), coverage,
Great Expectations, lab scorecard, where the report is."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from audit.contracts import System


def render_text(summary: Mapping[str, Any], systems: Sequence[System] | None = None) -> str:
    """`systems`: the run's systems, whose report sections add their lines (in this order) after the counts;
    None: every registered system (a section whose part is not in the summary adds nothing)."""
    if systems is None:
        from audit.systems import all_systems

        systems = all_systems()
    lines = [f"replaudit: estate {summary.get('estate')} run {summary.get('run_id')}: {summary.get('status')}"]
    run = summary.get("run") or {}
    if run.get("kind") == "incident":
        scope = run.get("scope") or {}
        lines.append("  incident check: " + "; ".join(
            f"{k} {', '.join(map(str, scope.get(k) or ())) or 'all'}" for k in ("systems", "clusters", "subjects"))
            + (f"; not asked: {', '.join(scope['not_asked'])}" if scope.get("not_asked") else ""))
    counts = summary.get("counts") or {}
    for sev, n in sorted((counts.get("by_severity") or {}).items()):
        lines.append(f"  {sev:<9} {n}")
    for check, n in sorted((counts.get("by_check") or {}).items()):
        # no system beside a count by check: the run's system whose table holds it
        meaning = next((s.checks[check].meaning for s in systems if check in s.checks), "")
        lines.append(f"  {check:<36} {n}" + (f"  ({meaning})" if meaning else ""))
    for system in systems:
        lines += system.report.text(summary)
    gaps = summary.get("coverage_gaps") or []
    if gaps:
        lines.append(f"  not covered: {len(gaps)} source(s), e.g. {gaps[0].get('source')}: {gaps[0].get('error')}")
    failed = (summary.get("validation") or {}).get("failed_expectations") or []
    lines.append(f"  Great Expectations: {len(failed)} failed expectation(s)")
    lab = summary.get("lab")
    if lab:
        lines.append(f"  lab: injected {lab.get('injected')}, detected {lab.get('detected')}, "
                     f"wrong count {lab.get('wrong_count')}, missed {lab.get('missed')}, "
                     f"false alarms {lab.get('false_alarms')}")
        per_cluster = lab.get("by_cluster") or {}
        if len(per_cluster) > 1:
            for cluster, c in per_cluster.items():
                seed = "" if c.get("seed") is None else f" (seed {c['seed']})"
                lines.append(f"    {cluster}{seed}: injected {c['injected']}, detected {c['detected']}, wrong count "
                             f"{c['wrong_count']}, missed {c['missed']}, false alarms {c['false_alarms']}")
    alerts = summary.get("alerts") or {}
    if alerts.get("notices") is not None:      # `replaudit run`: the alert stage's notices and routes
        told = ", ".join(f"{n} {kind}" for kind, n in sorted(alerts["notices"].items())) or "nothing new to tell"
        routes = ", ".join(f"{r['route']} {r['status']}" for r in alerts.get("routes") or [])
        lines.append(f"  alerts: {told}" + (f" (routes: {routes})" if routes else ""))
    run = summary.get("run") or {}
    if run.get("report_location"):
        lines.append(f"  report: {run['report_location']}")
    return "\n".join(lines)
