"""A Slack-compatible incoming webhook route (Slack, Mattermost, Rocket.Chat accept `{"text": ...}` with Slack's
mrkdwn): one message per run that has notices at or above the route's min_severity. The webhook URL is a secret:
give it as `url_from` (a secret reference), so it never sits in the estate file."""
from __future__ import annotations

import time
from typing import Any, Callable, Mapping

from audit.alerts.http import AlertResult, http_route, post_json, selected

MARK = {"new": ":rotating_light: new", "worse": ":arrow_up: worse", "reminder": ":repeat: still firing",
        "resolved": ":white_check_mark: resolved"}
LINES = 20


def message(summary: Mapping[str, Any], rows: list[Mapping[str, Any]]) -> str:
    head = f"*replaudit {summary.get('estate')}* run `{summary.get('run_id')}`: {len(rows)} notice(s)"
    lines = [f"• {MARK.get(r.get('notice'), r.get('notice'))} [{r['severity']}] {r['system']}/{r['cluster']} "
             f"`{r['check']}` {r['subject']}: {r.get('message') or ''} ({r.get('entry_count')})" for r in rows[:LINES]]
    if len(rows) > LINES:
        lines.append(f"… and {len(rows) - LINES} more")
    report = (summary.get("run") or {}).get("report_location")
    return "\n".join([head, *lines] + ([f"report: {report}"] if report else []))


def post_message(route: Any, summary: Mapping[str, Any], notices: list[Mapping[str, Any]], secrets: Any, *,
                 retries: int = 3, backoff_s: float = 0.5, sleep: Callable[[float], None] = time.sleep,
                 **_: Any) -> AlertResult:
    r = http_route(route)
    rows, result = selected(r.name, r.min_severity, notices)
    if not rows:
        return result
    result.sent_violations = min(len(rows), LINES)
    return post_json(r, {"text": message(summary, rows)}, secrets, result, retries=retries, backoff_s=backoff_s,
                     sleep=sleep)
