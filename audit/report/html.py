"""The human report: one self-contained HTML page (no external CSS, JS or images). Every value from the
run goes through html.escape -- subjects and messages come from cluster metadata. The shared parts (status,
counts, findings, coverage, Great Expectations, lab scorecard) are drawn here; each system's report section adds
its own fragment (`ReportSection.html`), built with `_e` / `_table` from this module."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

from audit.contracts import SEVERITIES, System
from audit.report.fragments import esc, table

MAX_FINDINGS_PER_CLUSTER = 500   # beyond this the page points to findings/violations
STYLE = """
body{font-family:sans-serif;margin:24px;color:#222;max-width:1100px}
table{border-collapse:collapse;margin:8px 0 16px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;
vertical-align:top}th{background:#f3f3f3}.status{display:inline-block;padding:2px 10px;border-radius:4px;color:#fff}
.clean{background:#27ae60}.violations{background:#c0392b}.incomplete{background:#d68910}
.sev-critical{color:#922b21;font-weight:bold}.sev-major{color:#c0392b}.sev-minor{color:#b9770e}
.sev-warning{color:#555}.num{text-align:right}.muted{color:#777}
"""


def render_html(summary: Mapping[str, Any], violations: list[Mapping[str, Any]],
                systems: Sequence[System] | None = None, *, data_docs_href: str = "data_docs/index.html") -> str:
    """`systems`: the run's systems, whose report sections add their fragments (in this order) after the
    coverage (None: every registered system). `data_docs_href`: link to GX Data Docs relative to the report."""
    if systems is None:
        from audit.systems import all_systems

        systems = all_systems()
    status = str(summary.get("status", "incomplete"))
    title = f"replaudit report: {summary.get('estate')} run {summary.get('run_id')}"
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{esc(title)}</title>"
             f"<style>{STYLE}</style></head><body>",
             f"<h1>{esc(title)}</h1>",
             f"<p>Status: <span class=\"status {esc(status)}\" id=\"status\">{esc(status)}</span></p>"]
    run = summary.get("run") or {}
    if run.get("kind") == "incident":
        parts.append(_scope_section(run.get("scope") or {}))
    parts.append(_counts_section(summary, systems))
    parts.append(_findings_section(violations))
    parts.append(_gaps_section(summary.get("coverage_gaps") or []))
    for system in systems:
        fragment = system.report.html(summary, violations)
        if fragment:
            parts.append(fragment)
    if summary.get("history"):
        parts.append(_history_section(summary["history"]))
    parts.append(_validation_section(summary.get("validation") or {}, data_docs_href))
    if summary.get("lab"):
        parts.append(_lab_section(summary["lab"]))
    parts.append("</body></html>")
    return "\n".join(parts)


def _meaning_by_check(check: str, systems: Sequence[System]) -> str:
    """A count by check has no system column: the run's system whose table holds the check."""
    return next((s.checks[check].meaning for s in systems if check in s.checks), "")


def _counts_section(summary: Mapping[str, Any], systems: Sequence[System]) -> str:
    counts = summary.get("counts") or {}
    by_cluster = counts.get("by_cluster") or {}
    rows = [[c, *(sev.get(s, 0) for s in SEVERITIES), sum(sev.values())] for c, sev in by_cluster.items()]
    out = [f"<h2>Findings: {esc(counts.get('total', 0))}</h2>"]
    out.append(table(["cluster", *SEVERITIES, "total"], rows) if rows else "<p>No findings.</p>")
    if counts.get("by_check"):
        out.append(table(["check", "findings", "what it means"],
                          [[c, n, _meaning_by_check(c, systems)] for c, n in counts["by_check"].items()]))
    return "\n".join(out)


def _scope_section(scope: Mapping[str, Any]) -> str:
    """An incident check: exactly what it was asked to cover, and what of the estate it left out."""
    def listed(key: str, everything: str) -> str:
        return esc(", ".join(map(str, scope.get(key) or ())) or everything)

    window = scope.get("window_ms")
    rows = [["systems", listed("systems", "all declared")], ["clusters", listed("clusters", "all of them")],
            ["subjects", listed("subjects", "everything")],
            ["window", esc(f"the last {window // 1000} s" if window else "none")],
            ["deep", esc("yes" if scope.get("deep") else "no")],
            ["not covered (not asked)", listed("not_asked", "nothing")]]
    return '<h2 id="incident">Incident check</h2>' + table(["scope", "value"], rows, frozenset({1}))


def _day(ms: Any) -> str:
    """A first-seen instant as a UTC date and time ("" when unknown)."""
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _findings_section(violations: list[Mapping[str, Any]]) -> str:
    if not violations:
        return ""
    from audit.systems import meaning
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for v in violations:
        groups.setdefault((str(v.get("system")), str(v.get("cluster"))), []).append(v)
    out = ["<h2>Findings by cluster</h2>"]
    for (system, cluster), items in sorted(groups.items()):
        items = sorted(items, key=lambda v: (rank.get(v.get("severity"), 99), str(v.get("check")),
                                             -(v.get("entry_count") or 0), str(v.get("subject"))))
        out.append(f"<h3>{esc(system)} / {esc(cluster)}</h3>")
        shown = items[:MAX_FINDINGS_PER_CLUSTER]
        seen = any(v.get("first_seen_ms") is not None for v in shown)
        rows = [[f'<span class="sev-{esc(v.get("severity"))}">{esc(v.get("severity"))}</span>',
                 f'<span title="{esc(meaning(system, str(v.get("check"))))}">{esc(v.get("check"))}</span>',
                 v.get("subject"), v.get("entry_count"), v.get("message")]
                + ([_day(v.get("first_seen_ms"))] if seen else []) for v in shown]
        out.append(table(["severity", "check", "subject", "entries", "message"] + (["first seen"] if seen else []),
                          rows, frozenset({0, 1})))
        if len(items) > len(shown):
            out.append(f'<p class="muted">{len(items) - len(shown)} more in findings/violations.</p>')
    return "\n".join(out)


def _gaps_section(gaps: list[Mapping[str, Any]]) -> str:
    if not gaps:
        return "<h2>Coverage</h2><p>Everything configured was audited.</p>"
    rows = [[g.get("system"), g.get("cluster"), g.get("source"), g.get("what"), g.get("error")] for g in gaps]
    return (f"<h2>Coverage gaps: {len(gaps)}</h2><p>These could not be audited; their findings may be missing."
            f"</p>" + table(["system", "cluster", "source", "what", "error"], rows))


def _plot(values: list, width: int = 320, height: int = 60) -> str:
    """An inline SVG line of `values` (None: no value that run), oldest left; every run one step."""
    known = [v for v in values if v is not None]
    if not known:
        return ""
    low, high = min(known), max(known)
    span = (high - low) or 1.0
    step = width / max(1, len(values) - 1)
    xy = [(i * step, height - 4 - (v - low) / span * (height - 8)) for i, v in enumerate(values) if v is not None]
    points = " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
    last_x, last_y = xy[-1]      # tonight, marked (and visible when it is the only run)
    return (f'<svg class="plot" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">'
            f'<polyline fill="none" stroke="#2a6f97" stroke-width="2" points="{points}"/>'
            f'<circle cx="{last_x:.1f}" cy="{last_y:.1f}" r="3" fill="#2a6f97"/></svg>')


def _history_section(history: Mapping[str, Any]) -> str:
    """Each tracked metric over the last runs (audit/history/trend.py), tonight rightmost."""
    runs = history.get("runs") or []
    out = [f"<h2>History: the last {len(runs)} run(s)</h2><table><tr><th>metric</th><th>tonight</th>"
           "<th>lowest</th><th>highest</th><th>runs, oldest first</th></tr>"]
    for name, values in (history.get("metrics") or {}).items():
        known = [v for v in values if v is not None]
        last = values[-1] if values else None
        out.append(f'<tr id="history-{esc(name)}"><td>{esc(name)}</td><td>{esc("-" if last is None else f"{last:g}")}'
                   f'</td><td>{esc(f"{min(known):g}" if known else "-")}</td>'
                   f'<td>{esc(f"{max(known):g}" if known else "-")}</td><td>{_plot(values)}</td></tr>')
    out.append("</table>")
    return "".join(out)


def _validation_section(gx: Mapping[str, Any], docs_href: str) -> str:
    out = ["<h2>Great Expectations</h2>"]
    suites = gx.get("suites") or []
    if not suites:
        out.append("<p>Validation did not run.</p>")
        return "\n".join(out)
    out.append(table(["suite", "status", "error"], [[s.get("name"), s.get("status"), s.get("error")]
                                                      for s in suites]))
    failed = gx.get("failed_expectations") or []
    if failed:
        out.append(table(["suite", "check", "severity", "expectation", "unexpected"],
                          [[f.get("suite"), f.get("check"), f.get("severity"), f.get("expectation_type"),
                            f.get("unexpected_count")] for f in failed]))
    if gx.get("docs_index"):
        out.append(f'<p><a id="data-docs" href="{esc(docs_href)}">Data Docs</a></p>')
    return "\n".join(out)


def _lab_section(lab: Mapping[str, Any]) -> str:
    kinds = ("injected", "detected", "wrong_count", "missed", "false_alarms")
    out = [f"<h2>Lab scorecard</h2><p>{esc(lab.get('faults'))} faults injected in "
           f"{esc(', '.join(lab.get('clusters') or []))}; expected findings vs. this run.</p>",
           table(["", *kinds], [["all", *(lab.get(k, 0) for k in kinds)],
                                *([c, *(v.get(k, 0) for k in kinds)]
                                  for c, v in (lab.get("by_check") or {}).items())])]
    for name, key in (("Wrong counts", "wrong_count_items"), ("Missed", "missed_items"),
                      ("False alarms", "false_alarm_items")):
        items = lab.get(key) or []
        if items:
            cols = sorted({k for i in items for k in i})
            out.append(f"<h3>{name}</h3>" + table(cols, [[i.get(c) for c in cols] for i in items]))
    return "\n".join(out)
