"""A generic JSON webhook route: one POST per run with the notices at or above its min_severity (the alert
notices of audit/alerts/notify.py: violations with the lifecycle's `notice`, `fingerprint`, `first_seen_ms`,
`last_seen_ms`). Delivery, retries and secret headers: audit/alerts/http.py."""
from __future__ import annotations

import time
from typing import Any, Callable, Mapping

from audit.alerts.http import AlertResult, http_route, post_json, selected
from audit.contracts import SEVERITIES

DEFAULT_LIMIT = 20
NOTICE_KEYS = ("notice", "fingerprint", "first_seen_ms", "last_seen_ms")

__all__ = ["AlertResult", "DEFAULT_LIMIT", "build_payload", "post_violations"]


def build_payload(route_name: str, summary: Mapping[str, Any], violations: list[Mapping[str, Any]],
                  limit: int) -> dict[str, Any]:
    """The JSON body: run identity, counts of the matching violations, the `limit` most severe ones."""
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    ordered = sorted(violations, key=lambda v: (rank[v["severity"]], -(v.get("entry_count") or 0),
                                                str(v.get("cluster")), str(v.get("check")), str(v.get("subject"))))
    by_sev = {s: 0 for s in SEVERITIES}
    by_check: dict[str, int] = {}
    by_notice: dict[str, int] = {}
    for v in violations:
        by_sev[v["severity"]] += 1
        by_check[v["check"]] = by_check.get(v["check"], 0) + 1
        if v.get("notice"):
            by_notice[v["notice"]] = by_notice.get(v["notice"], 0) + 1
    run = summary.get("run") or {}
    top = [{k: v.get(k) for k in ("system", "cluster", "check", "severity", "subject", "entry_count", "message")
            + (NOTICE_KEYS if v.get("notice") else ())} for v in ordered[:limit]]
    counts = {"total": len(violations), "by_severity": by_sev, "by_check": dict(sorted(by_check.items()))}
    if by_notice:
        counts["by_notice"] = dict(sorted(by_notice.items()))
    return {"estate": summary.get("estate"), "run_id": summary.get("run_id"), "route": route_name,
            "status": summary.get("status"),
            "counts": counts,
            "violations": top, "truncated": max(len(violations) - limit, 0),
            "report": run.get("report_location") or run.get("report_prefix")}


def post_violations(route: Any, summary: Mapping[str, Any], violations: list[Mapping[str, Any]], secrets: Any, *,
                    limit: int = DEFAULT_LIMIT, retries: int = 3, backoff_s: float = 0.5,
                    sleep: Callable[[float], None] = time.sleep, **_: Any) -> AlertResult:
    """`route`: an audit.config.model.AlertRoute or a dict with the same keys. `secrets`: anything with
    .resolve(ref) -> str (and optionally .redact(text)). `retries`: extra attempts after the first."""
    r = http_route(route)
    chosen, result = selected(r.name, r.min_severity, violations)
    if not chosen:
        return result
    payload = build_payload(r.name, summary, chosen, limit)
    result.sent_violations = len(payload["violations"])
    return post_json(r, payload, secrets, result, retries=retries, backoff_s=backoff_s, sleep=sleep)
