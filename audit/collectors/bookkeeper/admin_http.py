"""Ledger metadata through a bookie's HTTP admin API (docs/formats/bookkeeper.md §1.5), for clusters whose ZooKeeper the
auditor may not reach. Read-only GETs:
- `/api/v1/ledger/list/?page=P` -> {"<id>": null, ...}, pages of 100 (LIST_LEDGER_BATCH_SIZE);
- `/api/v1/ledger/metadata/?ledger_id=N` -> {"N": <LedgerMetadata bean>}, stored redacted as
  `ledger-metadata-http/<N>.json`. An answer that cannot be redacted is not stored (it may hold a password).
"""
from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable

from audit.collectors.base import CollectionReport, RawSink
from audit.formats.errors import PayloadError

SYSTEM = "bookkeeper"
HTTP_PREFIX = "ledger-metadata-http/"
LIST_PAGE_SIZE = 100
WHAT = "ledger metadata (admin HTTP)"


class _HttpFailure(Exception):
    pass


def _get(url: str, timeout_s: float) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return resp.read()
    except urllib.error.HTTPError as e:
        raise _HttpFailure(f"HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, OSError) as e:  # refused, DNS, timeout
        raise _HttpFailure(f"unreachable: {getattr(e, 'reason', e)}") from None


def list_ledger_ids(base_url: str, timeout_s: float = 30.0, max_pages: int = 1_000_000) -> list[int]:
    """Every ledger id the bookie's metadata store lists. Raises PayloadError / RuntimeError on failure:
    without the list there is nothing to collect, so the caller records one gap."""
    ids: list[int] = []
    for page in range(1, max_pages + 1):
        url = f"{base_url.rstrip('/')}/api/v1/ledger/list/?page={page}"
        try:
            doc = json.loads(_get(url, timeout_s))
        except _HttpFailure as e:
            raise RuntimeError(f"{url}: {e}") from None
        except ValueError as e:
            raise PayloadError(url, "(root)", "a JSON object of ledger ids", str(e)) from None
        if not isinstance(doc, dict) or not all(k.lstrip("-").isdigit() for k in doc):
            raise PayloadError(url, "(root)", "a JSON object keyed by ledger id", doc)
        ids.extend(int(k) for k in doc)
        if len(doc) < LIST_PAGE_SIZE:
            break
    return sorted(set(ids))


def collect_ledger_metadata_http(base_url: str, ledger_ids: Iterable[int], sink: RawSink, *,
                                 timeout_s: float = 30.0, parallel: int = 16,
                                 cluster: str = "") -> CollectionReport:
    from audit.formats.bookkeeper.admin_json import decode_admin_json, redact_admin_json

    report = CollectionReport(SYSTEM, cluster)
    base = base_url.rstrip("/")

    def fetch(ledger_id: int) -> tuple[int, str, bytes | None, str | None]:
        url = f"{base}/api/v1/ledger/metadata/?{urllib.parse.urlencode({'ledger_id': ledger_id})}"
        try:
            return ledger_id, url, _get(url, timeout_s), None
        except _HttpFailure as e:
            return ledger_id, url, None, str(e)

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        for ledger_id, url, body, error in pool.map(fetch, ledger_ids):
            if error is not None:
                report.count("http_errors")
                report.gap(url, WHAT, error)
                continue
            try:
                redacted = redact_admin_json(body, url)
            except PayloadError as e:
                report.count("http_undecodable")
                report.gap(url, WHAT, f"not stored, password redaction impossible: {e}")
                continue
            answered = [md.ledger_id for md in decode_admin_json(redacted, url)]
            if answered != [ledger_id]:
                report.count("http_undecodable")
                report.gap(url, WHAT, f"not stored: asked for ledger {ledger_id}, answer holds {answered}")
                continue
            sink.put(f"{HTTP_PREFIX}{ledger_id}.json", redacted)
            report.count("http_ledgers_stored")
    return report
