"""HTTP delivery shared by the HTTP routes (webhook.py, alertmanager.py, slack.py): the route's settings, which
notices pass its min_severity, its secret headers, and one POST with retries.

Retries with exponential backoff on connection errors, timeouts and 5xx; a 4xx is final (the request itself is
wrong, resending it cannot help). Never raises for delivery problems: the pipeline goes on and the returned
AlertResult says what happened. Header values come from secret references and appear nowhere else -- not in logs,
not in the result, not in error messages. "Audit incomplete" notices pass every route's min_severity: an audit
that could not see is never filtered out."""
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
class HttpRoute:
    name: str
    url: str
    headers_from: Mapping[str, Any]
    min_severity: str
    timeout_s: float
    url_from: Any = None          # a secret reference to the URL (url then ""), resolved when posting
    alert_ttl_s: int = 2 * 24 * 3600


def http_route(route: Any) -> HttpRoute:
    get = route.get if isinstance(route, Mapping) else (lambda k, d=None: getattr(route, k, d))
    name = get("name") or "?"
    url, url_from = get("url"), get("url_from")
    if url_from is not None and url is None:
        url = ""
    elif not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"alert route {name!r}: url: expected an http:// or https:// URL")
    min_sev = get("min_severity", "warning") or "warning"
    if min_sev not in SEVERITIES:
        raise ValueError(f"alert route {name!r}: min_severity: expected one of {SEVERITIES}, got {min_sev!r}")
    return HttpRoute(name, url, dict(get("headers_from", {}) or {}), min_sev, float(get("timeout_s", 10.0) or 10.0),
                     url_from, int(get("alert_ttl", 2 * 24 * 3600) or 2 * 24 * 3600))


def matching(rows: list[Mapping[str, Any]], min_severity: str) -> list[Mapping[str, Any]]:
    """The notices a route with this min_severity receives (audit incomplete always)."""
    return [v for v in rows if v.get("check") == INCOMPLETE
            or SEVERITIES.index(v["severity"]) <= SEVERITIES.index(min_severity)]


def selected(route_name: str, min_severity: str, rows: list[Mapping[str, Any]]) -> tuple[list, AlertResult]:
    """(the rows a route receives, its result so far: "skipped" with the reason when there is none)."""
    chosen = matching(rows, min_severity)
    result = AlertResult(route=route_name, status=SKIPPED, matching_violations=len(chosen))
    if not chosen:
        result.error = f"no notice at or above {min_severity}"
    return chosen, result


def route_url(r: HttpRoute, secrets: Any) -> str:
    """The route's URL, or the secret its `url_from` names (remembered by the resolver: redacted from every
    message); ValueError when that secret is not an http(s) URL."""
    if r.url:
        return r.url
    url = secrets.resolve(r.url_from)
    if not url.startswith(("http://", "https://")):
        raise ValueError("expected an http:// or https:// URL")
    return url


def post_json(r: HttpRoute, payload: Any, secrets: Any, result: AlertResult, *, path: str = "",
              retries: int = 3, backoff_s: float = 0.5, sleep: Callable[[float], None] = time.sleep) -> AlertResult:
    """POST `payload` as JSON to the route's URL (+ `path`), with the route's secret headers; fills `result`."""
    headers = {"Content-Type": "application/json", "User-Agent": "replaudit"}
    for header, ref in r.headers_from.items():
        try:
            headers[header] = secrets.resolve(ref)
        except Exception as exc:  # the resolver's message names the reference, never a value
            result.status, result.error = FAILED, f"header {header}: {type(exc).__name__}: {redacted(exc, secrets)}"
            log.error("alert route %s: %s", r.name, result.error)
            return result
    try:
        target = route_url(r, secrets)
    except Exception as exc:
        result.status, result.error = FAILED, f"url_from: {type(exc).__name__}: {redacted(exc, secrets)}"
        log.error("alert route %s: %s", r.name, result.error)
        return result
    target = target.rstrip("/") + path if path else target
    body = json.dumps(payload, default=str).encode()
    for attempt in range(retries + 1):
        if attempt:
            sleep(backoff_s * 2 ** (attempt - 1))
        result.attempts = attempt + 1
        status, error, retry = _post_once(target, r.timeout_s, body, headers)
        result.http_status = status
        line = f"attempt {attempt + 1}: " + (f"HTTP {status}" if status else "") + (f" {error}" if error else "")
        result.attempt_log.append(redacted(line.strip(), secrets))
        if error is None:
            result.status, result.error = SENT, None
            log.info("alert route %s: sent %d notices (HTTP %s)", r.name, result.sent_violations, status)
            return result
        result.error = redacted(error, secrets)
        if not retry:
            break
    result.status = FAILED
    log.error("alert route %s: failed after %d attempt(s): %s", r.name, result.attempts, result.error)
    return result


def _post_once(url: str, timeout_s: float, body: bytes, headers: dict[str, str]) -> tuple[int | None, str | None, bool]:
    """-> (http status, error or None, worth retrying)."""
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            resp.read()
            return resp.status, None, False
    except urllib.error.HTTPError as exc:
        exc.close()
        return exc.code, f"{url} answered HTTP {exc.code} {exc.reason}", exc.code >= 500
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, (TimeoutError, socket.timeout)):
            return None, f"{url} did not answer within {timeout_s} s", True
        return None, f"cannot reach {url}: {exc.reason}", True
    except (TimeoutError, socket.timeout):
        return None, f"{url} did not answer within {timeout_s} s", True
    except (ConnectionError, OSError) as exc:
        return None, f"cannot reach {url}: {type(exc).__name__}: {exc}", True


def redacted(text: Any, secrets: Any) -> str:
    """`text` with every secret the resolver handed out replaced."""
    text = str(text)
    redact = getattr(secrets, "redact", None)
    return redact(text) if callable(redact) else text
