"""An Alertmanager route: POST /api/v2/alerts (Alertmanager's API v2, `postableAlerts`), so teams keep their own
routing, grouping, silences and inhibition.

Alertmanager dedupes by itself and expects clients to resend what still fires: every run posts EVERY firing signal
(not only tonight's notices) with endsAt = now + the route's `alert_ttl` (a missed night does not resolve it at
once; a run that no longer sees it resolves it), and each resolved one with endsAt = now. Labels are the
fingerprint's fields, so a finding keeps one identity in Alertmanager across nights: alertname (the check),
estate, system, cluster, check, subject; the severity, count, message, what the check means (description), notice
and first/last seen are annotations (a label that changes would make it a new alert). Times are wall-clock:
Alertmanager judges endsAt against its own clock."""
from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any, Callable, Mapping

from audit.alerts.http import AlertResult, http_route, post_json, selected
from audit.systems import meaning
from audit.timeutil import now_ms

PATH = "/api/v2/alerts"


def _rfc3339(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def postable(estate: str, row: Mapping[str, Any], now_ms: int, ttl_s: int) -> dict:
    """One postableAlert of a notice or firing row (audit/alerts/notify.py notice_row)."""
    resolved = row.get("notice") == "resolved"
    labels = {"alertname": row["check"], "estate": estate or "", "system": row["system"] or "-",
              "cluster": row["cluster"] or "-", "check": row["check"], "subject": row["subject"] or "-"}
    annotations = {"severity": row["severity"], "entry_count": str(row.get("entry_count")),
                   "summary": row.get("message") or row["check"], "fingerprint": row.get("fingerprint") or "",
                   "description": meaning(row["system"], row["check"]),
                   "notice": row.get("notice") or "firing",
                   "first_seen": _rfc3339(row["first_seen_ms"]) if row.get("first_seen_ms") else "",
                   "last_seen": _rfc3339(row["last_seen_ms"]) if row.get("last_seen_ms") else ""}
    first = row.get("first_seen_ms") or now_ms
    return {"labels": labels, "annotations": annotations, "startsAt": _rfc3339(min(first, now_ms)),
            "endsAt": _rfc3339(now_ms if resolved else now_ms + ttl_s * 1000)}


def post_alerts(route: Any, summary: Mapping[str, Any], notices: list[Mapping[str, Any]], secrets: Any, *,
                firing: list[Mapping[str, Any]] = (), now_ms: Callable[[], int] = now_ms,
                retries: int = 3, backoff_s: float = 0.5, sleep: Callable[[float], None] = time.sleep,
                **_: Any) -> AlertResult:
    """`notices`: tonight's notices (their resolved ones end now); `firing`: every signal still firing."""
    r = http_route(route)
    rows, result = selected(r.name, r.min_severity,
                            [*firing, *(n for n in notices if n.get("notice") == "resolved")])
    if not rows:
        return result
    now = now_ms()
    payload = [postable(summary.get("estate") or "", row, now, r.alert_ttl_s) for row in rows]
    result.sent_violations = len(payload)
    return post_json(r, payload, secrets, result, path=PATH, retries=retries, backoff_s=backoff_s, sleep=sleep)
