"""POST a run's violations (the alert notices of audit/alerts/notify.py: violations with the lifecycle's `notice`,
`fingerprint`, `first_seen_ms`, `last_seen_ms`) to a webhook route. "Audit incomplete" notices pass every route's
min_severity: an audit that could not see is never filtered out.

Retries with exponential backoff on connection errors, timeouts and 5xx; a 4xx is final (the request
itself is wrong, resending it cannot help). Never raises for delivery problems: the pipeline goes on and
the returned AlertResult says what happened. Header values come from secret references and appear
nowhere else -- not in logs, not in the result, not in error messages."""
from __future__ import annotations

import json
import logging
import socket
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping

from audit.alerts.lifecycle import INCOMPLETE
from audit.contracts import SEVERITIES

log = logging.getLogger("replaudit.alerts")
DEFAULT_LIMIT = 20
NOTICE_KEYS = ("notice", "fingerprint", "first_seen_ms", "last_seen_ms")
SENT, SKIPPED, FAILED = "sent", "skipped", "failed"


@dataclass
class AlertResult:
    route: str
    status: str                      # sent | skipped | failed
    attempts: int = 0
    http_status: int | None = None
    sent_violations: int = 0         # violations in the payload
    matching_violations: int = 0     # violations at or above the route's min_severity
    error: str | None = None
    attempt_log: list[str] = field(default_factory=list)   # one line per attempt, no secrets

    @property
    def ok(self) -> bool:
        return self.status != FAILED

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


@dataclass(frozen=True)
class _Route:
    name: str
    url: str
    headers_from: Mapping[str, Any]
    min_severity: str
    timeout_s: float


def _route(route: Any) -> _Route:
    get = route.get if isinstance(route, Mapping) else (lambda k, d=None: getattr(route, k, d))
    name = get("name") or "?"
    url = get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"alert route {name!r}: url: expected an http:// or https:// URL")
    min_sev = get("min_severity", "warning") or "warning"
    if min_sev not in SEVERITIES:
        raise ValueError(f"alert route {name!r}: min_severity: expected one of {SEVERITIES}, got {min_sev!r}")
    return _Route(name, url, dict(get("headers_from", {}) or {}), min_sev, float(get("timeout_s", 10.0) or 10.0))


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
                    sleep: Callable[[float], None] = time.sleep) -> AlertResult:
    """`route`: an audit.config.model.AlertRoute or a dict with the same keys. `secrets`: anything with
    .resolve(ref) -> str (and optionally .redact(text)). `retries`: extra attempts after the first."""
    r = _route(route)
    matching = [v for v in violations if v.get("check") == INCOMPLETE
                or SEVERITIES.index(v["severity"]) <= SEVERITIES.index(r.min_severity)]
    result = AlertResult(route=r.name, status=SKIPPED, matching_violations=len(matching))
    if not matching:
        result.error = f"no violation at or above {r.min_severity}"
        return result
    headers = {"Content-Type": "application/json", "User-Agent": "replaudit"}
    for header, ref in r.headers_from.items():
        try:
            headers[header] = secrets.resolve(ref)
        except Exception as exc:  # the resolver's message names the reference, never a value
            result.status, result.error = FAILED, f"header {header}: {type(exc).__name__}: {_clean(exc, secrets)}"
            log.error("alert route %s: %s", r.name, result.error)
            return result
    payload = build_payload(r.name, summary, matching, limit)
    body = json.dumps(payload, default=str).encode()
    result.sent_violations = len(payload["violations"])
    for attempt in range(retries + 1):
        if attempt:
            sleep(backoff_s * 2 ** (attempt - 1))
        result.attempts = attempt + 1
        status, error, retry = _post_once(r, body, headers)
        result.http_status = status
        line = f"attempt {attempt + 1}: " + (f"HTTP {status}" if status else "") + (f" {error}" if error else "")
        result.attempt_log.append(_clean(line.strip(), secrets))
        if error is None:
            result.status, result.error = SENT, None
            log.info("alert route %s: sent %d violations (HTTP %s)", r.name, result.sent_violations, status)
            return result
        result.error = _clean(error, secrets)
        if not retry:
            break
    result.status = FAILED
    log.error("alert route %s: failed after %d attempt(s): %s", r.name, result.attempts, result.error)
    return result


def _post_once(r: _Route, body: bytes, headers: dict[str, str]) -> tuple[int | None, str | None, bool]:
    """-> (http status, error or None, worth retrying)."""
    req = urllib.request.Request(r.url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=r.timeout_s) as resp:
            resp.read()
            return resp.status, None, False
    except urllib.error.HTTPError as exc:
        exc.close()
        return exc.code, f"{r.url} answered HTTP {exc.code} {exc.reason}", exc.code >= 500
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, (TimeoutError, socket.timeout)):
            return None, f"{r.url} did not answer within {r.timeout_s} s", True
        return None, f"cannot reach {r.url}: {exc.reason}", True
    except (TimeoutError, socket.timeout):
        return None, f"{r.url} did not answer within {r.timeout_s} s", True
    except (ConnectionError, OSError) as exc:
        return None, f"cannot reach {r.url}: {type(exc).__name__}: {exc}", True


def _clean(text: Any, secrets: Any) -> str:
    text = str(text)
    redact = getattr(secrets, "redact", None)
    return redact(text) if callable(redact) else text
