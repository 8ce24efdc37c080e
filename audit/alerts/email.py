"""An e-mail route through Airflow's own SMTP notifier (apache-airflow-providers-smtp `SmtpNotifier`): the SMTP
server, its login and password, TLS and retries come from the Airflow connection the route names
(`smtp_conn_id`, default `smtp_default`), never from the estate file. One message per run that has notices at or
above the route's min_severity."""
from __future__ import annotations

import html
import logging
from collections import Counter
from typing import Any, Mapping

from audit.alerts.http import FAILED, SENT, AlertResult, redacted, selected
from audit.systems import meaning

log = logging.getLogger("replaudit.alerts")
ROWS = 50


def subject(summary: Mapping[str, Any], rows: list[Mapping[str, Any]]) -> str:
    kinds = Counter(r.get("notice") or "?" for r in rows)
    told = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    return f"[replaudit {summary.get('estate')}] {told} (run {summary.get('run_id')})"


def body(summary: Mapping[str, Any], rows: list[Mapping[str, Any]]) -> str:
    """HTML: one table row per notice, with what its check means; every value escaped."""
    cols = ("notice", "severity", "system", "cluster", "check", "subject", "entry_count", "message")
    head = "".join(f"<th>{c}</th>" for c in cols) + "<th>what it means</th>"
    lines = "".join("<tr>" + "".join(f"<td>{html.escape(str(r.get(c, '')))}</td>" for c in cols)
                    + f"<td>{html.escape(meaning(r.get('system'), str(r.get('check'))))}</td></tr>"
                    for r in rows[:ROWS])
    more = f"<p>and {len(rows) - ROWS} more</p>" if len(rows) > ROWS else ""
    report = (summary.get("run") or {}).get("report_location")
    link = f"<p>Report: {html.escape(str(report))}</p>" if report else ""
    return (f"<p>replaudit {html.escape(str(summary.get('estate')))}, run {html.escape(str(summary.get('run_id')))}"
            f"</p><table border=\"1\"><tr>{head}</tr>{lines}</table>{more}{link}")


def send_email(route: Any, summary: Mapping[str, Any], notices: list[Mapping[str, Any]], secrets: Any,
               **_: Any) -> AlertResult:
    from airflow.providers.smtp.notifications.smtp import SmtpNotifier

    rows, result = selected(route.name, route.min_severity, notices)
    if not rows:
        return result
    notifier = SmtpNotifier(to=list(route.to), from_email=route.from_email, subject=subject(summary, rows),
                            html_content=body(summary, rows), smtp_conn_id=route.smtp_conn_id)
    result.attempts = 1
    try:
        notifier.notify({})
    except Exception as exc:      # delivery problems never stop the run; the hook's messages name no password
        result.status, result.error = FAILED, redacted(f"{type(exc).__name__}: {exc}", secrets)
        log.error("alert route %s: %s", route.name, result.error)
        return result
    result.status, result.sent_violations = SENT, min(len(rows), ROWS)
    return result

