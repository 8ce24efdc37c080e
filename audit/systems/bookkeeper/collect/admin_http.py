"""Ledger metadata through a bookie's admin HTTP API (docs/formats/bookkeeper.md §1.5), for clusters whose
ZooKeeper the auditor may not reach. Read-only GETs, in three steps:

1. `/api/v1/ledger/list` -> {"<id>": null, ...}: every ledger id (ListLedgerService without print_metadata
   ignores `page` and answers the whole list, so this is one request). Its count bounds step 2.
2. `/api/v1/ledger/list?print_metadata=true&decode_meta=true&page=P`, P = 1, 2, ...: the metadata of one page,
   as the Jackson bean GetLedgerMetaService answers (decode_meta=true; without it a value is the stored form read
   as UTF-8, mangled for format 3). ListLedgerService counts ledgers from 1 and page P keeps those numbered
   (P-1)*100 .. (P-1)*100+99, so page 1 holds 99 and later pages 100; a page past the end is {}. A page with
   fewer than it can hold is the last one. A page holding more than it can, or nothing new, means the service
   did not page (it answers everything then): paging stops there instead of asking the same list again.
   Each page is stored redacted as `ledger-metadata-http/list-page-<P>.json`.
3. `/api/v1/ledger/metadata?ledger_id=N` for every listed ledger no page delivered (a page failed: one ledger of
   it deleted meanwhile makes the bookie answer 500 for the whole page; the list shifted; a bookie before 4.11
   ignores decode_meta), stored redacted as `ledger-metadata-http/<N>.json`. A ledger that fails there and is
   gone from a second listing was deleted meanwhile (counted, not a gap).

Nothing is stored unless redact_admin_json succeeded: an answer it cannot redact may hold a password.
"""
from __future__ import annotations

import json
import threading
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import requests
from requests.adapters import HTTPAdapter

from audit.collectors.base import CollectionReport, RawSink
from audit.collectors.http import root_cause
from audit.errors import PayloadError

SYSTEM = "bookkeeper"
HTTP_PREFIX = "ledger-metadata-http/"
LIST_LEDGER = "/api/v1/ledger/list"       # HttpRouter.LIST_LEDGER
GET_LEDGER_META = "/api/v1/ledger/metadata"  # HttpRouter.GET_LEDGER_META
LIST_LEDGER_BATCH_SIZE = 100  # ListLedgerService.LIST_LEDGER_BATCH_SIZE
WHAT = "ledger metadata (admin HTTP)"
ERROR_EXCERPT = 200  # characters of an error body kept in a gap


def page_capacity(page: int) -> int:
    """Ledgers page `page` (from 1) holds when the list goes on past it: ListLedgerService's bounds
    (P-1)*100 .. (P-1)*100+99 over a count that starts at 1 leave 99 for page 1."""
    return LIST_LEDGER_BATCH_SIZE - 1 if page == 1 else LIST_LEDGER_BATCH_SIZE


def pages_for(count: int) -> int:
    """Pages ListLedgerService needs for `count` ledgers (the last one may be full)."""
    if count <= 0:
        return 0
    rest = max(0, count - page_capacity(1))
    return 1 + -(-rest // LIST_LEDGER_BATCH_SIZE)


class HttpFailure(Exception):
    """No usable answer: the text says why (status and body excerpt, or the transport error)."""


class AdminHttp:
    """GETs against one bookie's admin HTTP server (requests, one pooled session)."""

    def __init__(self, base_url: str, connect_timeout_s: float, request_timeout_s: float, pool_size: int = 8):
        self.base_url = base_url.rstrip("/")
        self._timeout = (connect_timeout_s, request_timeout_s)
        self._session = requests.Session()
        adapter = HTTPAdapter(pool_maxsize=pool_size, max_retries=0)
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)
        self.requests_sent = 0
        self._lock = threading.Lock()  # the per-ledger step GETs from a thread pool

    def url(self, path: str, **params: Any) -> str:
        return self.base_url + path + ("?" + urllib.parse.urlencode(params) if params else "")

    def get(self, url: str) -> bytes:
        with self._lock:
            self.requests_sent += 1
        try:
            r = self._session.get(url, timeout=self._timeout)
        except requests.Timeout as e:
            connect_s, request_s = self._timeout
            if isinstance(e, requests.ConnectTimeout):
                raise HttpFailure(f"no answer within {connect_s:g} s (connect timeout)") from None
            raise HttpFailure(f"no answer within {request_s:g} s (read timeout)") from None
        except requests.RequestException as e:
            raise HttpFailure(f"unreachable: {root_cause(e)}") from None
        if r.status_code != 200:
            text = " ".join(r.content.decode("utf-8", "replace").split())[:ERROR_EXCERPT]
            raise HttpFailure(f"HTTP {r.status_code}: {text}" if text else f"HTTP {r.status_code}")
        return r.content

    def close(self) -> None:
        self._session.close()


def _ledger_map(body: bytes, url: str) -> dict[str, Any]:
    """The list answer: a JSON object keyed by ledger id."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise PayloadError(url, "(root)", "a JSON object keyed by ledger id", str(e)) from None
    if not isinstance(doc, dict) or not all(k.isdigit() for k in doc):
        raise PayloadError(url, "(root)", "a JSON object keyed by ledger id", type(doc).__name__)
    return doc


class _Collection:
    def __init__(self, http: AdminHttp, sink: RawSink, report: CollectionReport, parallel: int,
                 on_ledger: Callable[[Any], None] | None):
        from audit.systems.bookkeeper.formats import admin_json  # lazily: owned by the formats subsystem

        self.json = admin_json
        self.http, self.sink, self.report, self.parallel, self.on_ledger = http, sink, report, parallel, on_ledger
        self.collected: set[int] = set()

    def list_ids(self) -> set[int] | None:
        url = self.http.url(LIST_LEDGER)
        try:
            return {int(k) for k in _ledger_map(self.http.get(url), url)}
        except (HttpFailure, PayloadError) as e:
            self.report.gap(url, WHAT, f"ledger list: {e}")
            return None

    def pages(self, listed: int) -> None:
        for page in range(1, pages_for(listed) + 1):
            url = self.http.url(LIST_LEDGER, print_metadata="true", decode_meta="true", page=page)
            try:
                body = self.http.get(url)
                doc = _ledger_map(body, url)
            except (HttpFailure, PayloadError):
                self.report.count("http_list_pages_failed")  # its ledgers are asked one by one below
                continue
            self.report.count("http_list_pages")
            fresh = {k: v for k, v in doc.items() if int(k) not in self.collected}
            self._store_page(page, url, body, doc, fresh)
            if len(doc) > page_capacity(page) or (doc and not fresh):
                self.report.count("http_list_not_paged")  # answered everything: asking on would loop
                return
            if len(doc) < page_capacity(page):
                return  # the last page

    def _store_page(self, page: int, url: str, body: bytes, doc: dict, fresh: dict) -> None:
        beans = {k: v for k, v in fresh.items() if isinstance(v, dict)}
        if len(beans) < len(fresh):
            # A bookie before 4.11 ignores decode_meta: the value is the stored form (password included).
            self.report.count("http_metadata_not_decoded", len(fresh) - len(beans))
        if not beans:
            return
        try:  # the answer as received when all of it is new metadata; else the new beans only
            redacted = self.json.redact_admin_json(body if len(beans) == len(doc) else beans, url)
        except PayloadError:
            self.report.count("http_list_pages_undecodable")  # its ledgers are asked one by one below
            return
        self._keep(f"{HTTP_PREFIX}list-page-{page:06d}.json", redacted, url)

    def one_by_one(self, ids: list[int]) -> list[tuple[int, str, str]]:
        """GetLedgerMetaService per ledger -> failures (ledger, url, error)."""
        def fetch(ledger_id: int) -> tuple[int, str, bytes | None, str | None]:
            url = self.http.url(GET_LEDGER_META, ledger_id=ledger_id)
            try:
                return ledger_id, url, self.http.get(url), None
            except HttpFailure as e:
                return ledger_id, url, None, str(e)

        failures = []
        with ThreadPoolExecutor(max_workers=self.parallel) as pool:
            for ledger_id, url, body, error in pool.map(fetch, ids):
                if error is None:
                    try:
                        redacted = self.json.redact_admin_json(body, url)
                        answered = [md.ledger_id for md in self.json.decode_admin_json(redacted, url)]
                        if answered != [ledger_id]:
                            error = f"not stored: asked for ledger {ledger_id}, the answer holds {answered}"
                    except PayloadError as e:
                        error = f"not stored, password redaction impossible: {e}"
                if error is not None:
                    failures.append((ledger_id, url, error))
                    continue
                self.report.count("http_ledgers_asked_one_by_one")
                self._keep(f"{HTTP_PREFIX}{ledger_id}.json", redacted, url)
        return failures

    def _keep(self, key: str, redacted: bytes, url: str) -> None:
        self.sink.put(key, redacted)
        for md in self.json.decode_admin_json(redacted, url):
            if md.ledger_id in self.collected:
                continue
            self.collected.add(md.ledger_id)
            self.report.count("http_ledgers_stored")
            if self.on_ledger is not None:
                self.on_ledger(md)


def collect_ledger_metadata_http(base_url: str, sink: RawSink, *, connect_timeout_s: float = 5.0,
                                 request_timeout_s: float = 30.0, cluster: str = "", parallel: int = 8,
                                 on_ledger: Callable[[Any], None] | None = None,
                                 wants: Callable[[int], bool] | None = None) -> CollectionReport:
    """Store the metadata of every ledger the bookie lists under `ledger-metadata-http/`. `on_ledger(md)` gets
    each stored ledger's decoded LedgerMetadata once (e.g. to learn ensembles without re-reading). `wants(ledger
    id)`: only those ledgers, each asked on its own (an incident check: the pages would bring every ledger)."""
    report = CollectionReport(SYSTEM, cluster)
    http = AdminHttp(base_url, connect_timeout_s, request_timeout_s, pool_size=parallel)
    try:
        run = _Collection(http, sink, report, parallel, on_ledger)
        listed = run.list_ids()
        if listed is None:
            return report
        report.count("http_ledgers_listed", len(listed))
        if wants is not None:
            asked = {i for i in listed if wants(i)}
            report.count("http_ledgers_not_in_scope", len(listed) - len(asked))
            listed = asked
        else:
            run.pages(len(listed))
        failures = run.one_by_one(sorted(listed - run.collected))
        if failures:
            # The bookie answers 500 for a deleted ledger as for any failure: a second listing tells them apart.
            still_listed = run.list_ids()
            for ledger_id, url, error in failures:
                if still_listed is not None and ledger_id not in still_listed:
                    report.count("http_ledgers_deleted")
                else:
                    report.count("http_errors")
                    report.gap(url, WHAT, error)
        return report
    finally:
        report.count("http_requests", http.requests_sent)
        http.close()
