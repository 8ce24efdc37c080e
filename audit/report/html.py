"""The human report: one self-contained HTML page (no external CSS, JS or images). Every value from the
run goes through html.escape -- subjects and messages come from cluster metadata."""
from __future__ import annotations

from html import escape
from typing import Any, Iterable, Mapping

from audit.report.svg import bar_chart, grouped_bar_chart
from audit.report.summary import SEVERITIES

MAX_FINDINGS_PER_CLUSTER = 500   # beyond this the page points to findings/violations
STYLE = """
body{font-family:sans-serif;margin:24px;color:#222;max-width:1100px}
table{border-collapse:collapse;margin:8px 0 16px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;
vertical-align:top}th{background:#f3f3f3}.status{display:inline-block;padding:2px 10px;border-radius:4px;color:#fff}
.clean{background:#27ae60}.violations{background:#c0392b}.incomplete{background:#d68910}
.sev-critical{color:#922b21;font-weight:bold}.sev-major{color:#c0392b}.sev-minor{color:#b9770e}
.sev-warning{color:#555}.num{text-align:right}.muted{color:#777}
"""


def _e(v: Any) -> str:
    return "" if v is None else escape(str(v), quote=True)


def _table(headers: Iterable[str], rows: Iterable[Iterable[Any]], raw_cols: frozenset[int] = frozenset()) -> str:
    """`raw_cols`: indexes of cells that are already HTML (built here from escaped parts)."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c if i in raw_cols else _e(c)}</td>" for i, c in enumerate(r)) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(summary: Mapping[str, Any], violations: list[Mapping[str, Any]], replica_histogram: Mapping[int, int],
                *, data_docs_href: str = "data_docs/index.html", min_ack_quorum: int | None = None) -> str:
    """`replica_histogram`: least replica count -> number of audited ledgers. `data_docs_href`: link to GX
    Data Docs relative to the report. Bars below `min_ack_quorum` (when given) are drawn as alarms."""
    status = str(summary.get("status", "incomplete"))
    title = f"replaudit report: {summary.get('estate')} run {summary.get('run_id')}"
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{_e(title)}</title>"
             f"<style>{STYLE}</style></head><body>",
             f"<h1>{_e(title)}</h1>",
             f"<p>Status: <span class=\"status {_e(status)}\" id=\"status\">{_e(status)}</span></p>"]
    parts.append(_counts_section(summary))
    parts.append(_findings_section(violations))
    parts.append(_gaps_section(summary.get("coverage_gaps") or []))
    parts.append(_replicas_section(replica_histogram, min_ack_quorum))
    if summary.get("pulsar"):
        parts.append(_pulsar_section(summary["pulsar"]))
    parts.append(_validation_section(summary.get("validation") or {}, data_docs_href))
    if summary.get("lab"):
        parts.append(_lab_section(summary["lab"]))
    parts.append("</body></html>")
    return "\n".join(parts)


def _counts_section(summary: Mapping[str, Any]) -> str:
    counts = summary.get("counts") or {}
    by_cluster = counts.get("by_cluster") or {}
    rows = [[c, *(sev.get(s, 0) for s in SEVERITIES), sum(sev.values())] for c, sev in by_cluster.items()]
    out = [f"<h2>Findings: {_e(counts.get('total', 0))}</h2>"]
    out.append(_table(["cluster", *SEVERITIES, "total"], rows) if rows else "<p>No findings.</p>")
    if counts.get("by_check"):
        out.append(_table(["check", "findings"], counts["by_check"].items()))
    return "\n".join(out)


def _findings_section(violations: list[Mapping[str, Any]]) -> str:
    if not violations:
        return ""
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for v in violations:
        groups.setdefault((str(v.get("system")), str(v.get("cluster"))), []).append(v)
    out = ["<h2>Findings by cluster</h2>"]
    for (system, cluster), items in sorted(groups.items()):
        items = sorted(items, key=lambda v: (rank.get(v.get("severity"), 99), str(v.get("check")),
                                             -(v.get("entry_count") or 0), str(v.get("subject"))))
        out.append(f"<h3>{_e(system)} / {_e(cluster)}</h3>")
        shown = items[:MAX_FINDINGS_PER_CLUSTER]
        rows = [[f'<span class="sev-{_e(v.get("severity"))}">{_e(v.get("severity"))}</span>', v.get("check"),
                 v.get("subject"), v.get("entry_count"), v.get("message")] for v in shown]
        out.append(_table(["severity", "check", "subject", "entries", "message"], rows, frozenset({0})))
        if len(items) > len(shown):
            out.append(f'<p class="muted">{len(items) - len(shown)} more in findings/violations.</p>')
    return "\n".join(out)


def _gaps_section(gaps: list[Mapping[str, Any]]) -> str:
    if not gaps:
        return "<h2>Coverage</h2><p>Everything configured was audited.</p>"
    rows = [[g.get("system"), g.get("cluster"), g.get("source"), g.get("what"), g.get("error")] for g in gaps]
    return (f"<h2>Coverage gaps: {len(gaps)}</h2><p>These could not be audited; their findings may be missing."
            f"</p>" + _table(["system", "cluster", "source", "what", "error"], rows))


def _replicas_section(histogram: Mapping[int, int], min_ack_quorum: int | None) -> str:
    chart = bar_chart({int(k): int(v) for k, v in histogram.items()}, "Least replica count per ledger",
                      "least replicas", "ledgers", highlight_below=min_ack_quorum)
    return f"<h2>Replica counts</h2><figure id=\"replica-histogram\">{chart}</figure>"


def _pulsar_section(pulsar: Mapping[str, Any]) -> str:
    """Failover per cluster pair (totals, top subscriptions, a redelivered/skipped chart) and snapshot health."""
    pairs = pulsar.get("pairs") or {}
    out = ["<h2>Pulsar failover</h2>"]
    keys = ("subscriptions", "compared", "redelivered", "skipped", "lost", "incomplete")
    out.append(_table(["source -> target", *keys], [[name, *(p.get(k) for k in keys)] for name, p in pairs.items()])
               if pairs else "<p>No replicated subscription pair was audited.</p>")
    for n, (name, p) in enumerate(pairs.items()):
        top = p.get("top") or []
        if not top:
            continue
        out.append(f"<h3>{_e(name)}: subscriptions by redelivered + skipped</h3>")
        out.append(_table(["topic", "subscription", "redelivered", "skipped", "lost"],
                          [[t["topic"], t["subscription"], t["redelivered"], t["skipped"], t["lost"]] for t in top]))
        labels = [f'{str(t["topic"]).rsplit("/", 1)[-1]} {t["subscription"]}' for t in top]
        chart = grouped_bar_chart(labels, {"redelivered": [t["redelivered"] for t in top],
                                           "skipped": [t["skipped"] for t in top]},
                                  f"Redelivered and skipped messages, {name}", "messages")
        out.append(f'<figure class="pulsar-failover" id="pulsar-failover-{n}">{chart}</figure>')
    snaps = pulsar.get("snapshots") or {}
    if snaps:
        keys = ("health", "requests", "snapshots", "updates", "timed_out", "newest_snapshot_age_s",
                "replicated_subscriptions")
        out.append("<h3>Replicated-subscription snapshots</h3>")
        out.append(_table(["cluster", "topic", *keys], [[c, topic, *(v.get(k) for k in keys)]
                                                        for c, topics in snaps.items() for topic, v in topics.items()]))
    return "\n".join(out)


def _validation_section(gx: Mapping[str, Any], docs_href: str) -> str:
    out = ["<h2>Great Expectations</h2>"]
    suites = gx.get("suites") or []
    if not suites:
        out.append("<p>Validation did not run.</p>")
        return "\n".join(out)
    out.append(_table(["suite", "status", "error"], [[s.get("name"), s.get("status"), s.get("error")]
                                                      for s in suites]))
    failed = gx.get("failed_expectations") or []
    if failed:
        out.append(_table(["suite", "check", "severity", "expectation", "unexpected"],
                          [[f.get("suite"), f.get("check"), f.get("severity"), f.get("expectation_type"),
                            f.get("unexpected_count")] for f in failed]))
    if gx.get("docs_index"):
        out.append(f'<p><a id="data-docs" href="{_e(docs_href)}">Data Docs</a></p>')
    return "\n".join(out)


def _lab_section(lab: Mapping[str, Any]) -> str:
    kinds = ("injected", "detected", "wrong_count", "missed", "false_alarms")
    out = [f"<h2>Lab scorecard</h2><p>{_e(lab.get('faults'))} faults injected in "
           f"{_e(', '.join(lab.get('clusters') or []))}; expected findings vs. this run.</p>",
           _table(["", *kinds], [["all", *(lab.get(k, 0) for k in kinds)],
                                 *([c, *(v.get(k, 0) for k in kinds)] for c, v in (lab.get("by_check") or {}).items())])]
    for name, key in (("Wrong counts", "wrong_count_items"), ("Missed", "missed_items"),
                      ("False alarms", "false_alarm_items")):
        items = lab.get(key) or []
        if items:
            cols = sorted({k for i in items for k in i})
            out.append(f"<h3>{name}</h3>" + _table(cols, [[i.get(c) for c in cols] for i in items]))
    fo = lab.get("failover")
    if fo:
        kinds = ("expected", "matched", "mismatched", "missing", "unexpected")
        out.append("<h3>Pulsar failover counts</h3>" + _table(kinds, [[fo.get(k, 0) for k in kinds]]))
        counts = ("redelivered", "skipped", "lost")
        rows = [[i["topic"], i["subscription"], f'{i["source_cluster"]}->{i["target_cluster"]}', kind,
                 *(f'{(i.get("got") or {}).get(c)} (expected {i["expected"][c]})' if kind == "mismatched"
                   else (i.get("expected") or {}).get(c, i.get(c)) for c in counts)]
                for kind in ("mismatched", "missing", "unexpected") for i in fo.get(f"{kind}_items") or []]
        if rows:
            out.append(_table(["topic", "subscription", "pair", "outcome", *counts], rows))
    return "\n".join(out)
