"""Read-only client for the Pulsar admin REST API (`/admin/v2/...`, GET only).

Every call returns an AdminResponse; remote failures (HTTP errors, timeouts, refused connections) are values,
never exceptions, so callers turn them into coverage gaps. Error texts pass through `redact` before anyone sees
them: a proxy page may echo the request, bearer token included.

- Bearer token on every request, redirects included: brokers answer 307 to the broker owning the topic, and
  requests would drop the Authorization header on a cross-host redirect, so redirects are followed here.
- A topic that moves between brokers (unload, bundle split, broker restart) answers 404 "Topic not found",
  503, or a 307 without a usable Location for a while: those answers are retried with exponential backoff,
  a bounded number of times. The sleep is injectable so tests never wait.
- Repeated response headers stay separate (`X-Pulsar-replicated-to` once per cluster): they are read from the
  urllib3 header list, not from requests' merged view.
"""
from __future__ import annotations

import logging
import re
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import Callable

import requests
from requests.adapters import HTTPAdapter

from audit.collectors.http import root_cause

log = logging.getLogger(__name__)

PERSISTENT = "/admin/v2/persistent"
BODY_EXCERPT = 200  # characters of an error body kept in error texts (docs/pulsar/contracts.md)
MAX_REDIRECTS = 5
PULSAR_HEADER_PREFIX = "x-pulsar-"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
# "Topic not found", "Partitioned Topic not found", "Topic persistent://... does not exist": the topic is
# (for now) not served here. "Message not found" (a deleted ledger) is not in this family.
_TOPIC_MISSING = re.compile(rb"topic\b[^\"]{0,200}?\b(not found|does not exist)", re.IGNORECASE)


def quote(part: str) -> str:
    """One path segment, percent-encoded as the broker's @Encoded path parameters expect."""
    return urllib.parse.quote(part, safe="")


def is_html(content_type: str | None) -> bool:
    return (content_type or "").split(";")[0].strip().lower() == "text/html"


def excerpt(body: bytes) -> str:
    text = " ".join(body.decode("utf-8", "replace").split())
    return text[:BODY_EXCERPT]


@dataclass(frozen=True)
class AdminResponse:
    url: str
    status: int  # 0 = no HTTP answer
    content_type: str | None
    body: bytes
    headers: tuple[tuple[str, str], ...]  # every header line as received: name case and repeats kept
    error: str | None = None  # None for a 200; otherwise why there is no usable answer (already redacted)
    topic_moving: bool = False  # the answer says the topic is not served right now (retried before giving up)

    def pulsar_headers(self, redact: Callable[[str], str] = str) -> dict[str, str | list[str]]:
        """Every `X-Pulsar-*` header: a string, or the list of values when the broker sent it more than once."""
        values: dict[str, list[str]] = {}
        names: dict[str, str] = {}
        for name, value in self.headers:
            if name.lower().startswith(PULSAR_HEADER_PREFIX):
                values.setdefault(names.setdefault(name.lower(), name), []).append(redact(value))
        return {name: v[0] if len(v) == 1 else v for name, v in values.items()}


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff for answers meaning "the topic is moving": attempts in all, delays base * 2^i capped at max."""

    attempts: int = 5
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    sleep: Callable[[float], None] = time.sleep

    def delay(self, retry_index: int) -> float:
        return min(self.max_delay_s, self.base_delay_s * (2 ** retry_index))


def _topic_moving(status: int, body: bytes) -> bool:
    if status == 503 or status in _REDIRECTS:
        return True
    return status == 404 and _TOPIC_MISSING.search(body[:2048]) is not None


class _Bearer(requests.auth.AuthBase):
    # An auth object (not a default header) so a ~/.netrc entry can never replace the token.
    def __init__(self, token: str | None):
        self._token = token

    def __call__(self, r):
        if self._token:
            r.headers["Authorization"] = f"Bearer {self._token}"
        return r


class AdminClient:
    """GETs against one cluster's admin URL. Thread-safe; at most `pool_size` connections are open at once."""

    def __init__(self, base_url: str, token: str | None, *, connect_timeout_s: float = 5.0,
                 request_timeout_s: float = 30.0, verify: bool = True, pool_size: int = 8,
                 retry: RetryPolicy | None = None, redact: Callable[[str], str] = str):
        self.base_url = base_url.rstrip("/")
        self.retry = retry or RetryPolicy()
        self.redact = redact
        self._timeout = (connect_timeout_s, request_timeout_s)
        self._session = requests.Session()
        self._session.auth = _Bearer(token)
        self._session.verify = verify
        adapter = HTTPAdapter(pool_connections=4, pool_maxsize=pool_size, max_retries=0, pool_block=True)
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)
        self._lock = threading.Lock()
        self.requests_sent = 0
        self.retries = 0
        self.unauthorized: AdminResponse | None = None  # the first 401: the token is wrong for the whole cluster

    def close(self) -> None:
        self._session.close()

    def url(self, path: str) -> str:
        return self.base_url + path

    def get(self, path: str) -> AdminResponse:
        """GET `path` (below the admin URL); answers meaning "topic moving" are retried with backoff."""
        retry_index = 0
        while True:
            resp = self._follow(self.url(path))
            if not resp.topic_moving or retry_index + 1 >= self.retry.attempts:
                if resp.status == 401 and self.unauthorized is None:
                    self.unauthorized = resp
                return resp
            delay = self.retry.delay(retry_index)
            retry_index += 1
            with self._lock:
                self.retries += 1
            log.info("%s: %s; retry %d/%d in %.1f s", resp.url, resp.error, retry_index,
                     self.retry.attempts - 1, delay)
            self.retry.sleep(delay)

    def _follow(self, url: str, method: str = "GET", body: bytes | None = None) -> AdminResponse:
        """One request, following the broker's 307/308 (which keep the method and body) with the token."""
        headers = {"Content-Type": "application/json"} if body is not None else None
        for _ in range(MAX_REDIRECTS + 1):
            with self._lock:
                self.requests_sent += 1
            try:
                r = self._session.request(method, url, data=body, headers=headers, timeout=self._timeout,
                                          allow_redirects=False)
            except requests.Timeout as e:
                kind = "connect" if isinstance(e, requests.ConnectTimeout) else "read"
                limit = self._timeout[0] if kind == "connect" else self._timeout[1]
                return self._no_answer(url, f"no answer within {limit:g} s ({kind} timeout)")
            except requests.ConnectionError as e:
                return self._no_answer(url, f"connection failed: {root_cause(e)}")
            except requests.RequestException as e:
                return self._no_answer(url, f"request failed: {type(e).__name__}: {root_cause(e)}")
            location = r.headers.get("Location")
            if r.status_code in _REDIRECTS and location:
                target = urllib.parse.urljoin(url, location)
                if url.startswith("https:") and not target.startswith("https:"):
                    # Never send the token in clear text because a redirect asked for it.
                    return self._answer(url, r, f"HTTP {r.status_code}: refused redirect from https to {target}",
                                        moving=False)
                url = target
                continue
            return self._answer(url, r)
        return self._answer(url, r, f"HTTP {r.status_code}: more than {MAX_REDIRECTS} redirects")

    def _no_answer(self, url: str, error: str) -> AdminResponse:
        return AdminResponse(url, 0, None, b"", (), self.redact(error))

    def _answer(self, url: str, r: requests.Response, error: str | None = None,
                moving: bool | None = None) -> AdminResponse:
        body = r.content
        content_type = r.headers.get("Content-Type")
        if error is None and r.status_code != 200:
            text = excerpt(body)
            error = f"HTTP {r.status_code}: {text}" if text else f"HTTP {r.status_code}"
        if moving is None:
            moving = error is not None and _topic_moving(r.status_code, body)
        raw = getattr(r.raw, "headers", None)
        lines = tuple(raw.iteritems()) if hasattr(raw, "iteritems") else tuple(r.headers.items())
        return AdminResponse(url, r.status_code, content_type, body, lines,
                             None if error is None else self.redact(error), moving)
