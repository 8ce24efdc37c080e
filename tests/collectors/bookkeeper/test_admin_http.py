"""Ledger metadata over a bookie's HTTP admin API, against a local HTTP server speaking its JSON."""
from __future__ import annotations

import base64
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from audit.collectors.base import DirSink
from audit.collectors.bookkeeper.admin_http import collect_ledger_metadata_http, list_ledger_ids
from audit.formats.bookkeeper.admin_json import decode_admin_json
from audit.lab.loopback import unused_loopback_port

PASSWORD_B64 = base64.b64encode(b"http-ledger-pw").decode()


def bean(ledger_id: int) -> dict:
    # Keys as BookKeeper's Jackson bean serialises LedgerMetadataImpl (docs/formats/bookkeeper.md §1.5).
    return {"metadataFormatVersion": 3, "ensembleSize": 2, "writeQuorumSize": 2, "ackQuorumSize": 2,
            "lastEntryId": 9, "length": 1000, "digestType": "CRC32C", "password": PASSWORD_B64,
            "state": "CLOSED", "closed": True, "ctime": 1700000000000, "ctoken": 0,
            "customMetadata": {"application": base64.b64encode(b"pulsar").decode()},
            "allEnsembles": {"0": [{"id": "bk1:3181"}, {"id": "bk2:3181"}]}}


class _AdminHandler(BaseHTTPRequestHandler):
    ledgers: set[int] = set()

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        query = urllib.parse.parse_qs(url.query)
        if url.path == "/api/v1/ledger/list/":
            page = int(query["page"][0])
            ids = sorted(self.ledgers)[(page - 1) * 100: page * 100]
            return self._send(200, json.dumps({str(i): None for i in ids}).encode())
        lid = int(query["ledger_id"][0])
        if lid == 13:
            return self._send(200, b'{"13": {"password": "cGFzcw==", "ensembleSize": "x"')  # cut short
        if lid == 14:
            return self._send(200, json.dumps({"15": bean(15)}).encode())  # answers another ledger
        if lid not in self.ledgers:
            return self._send(404, b"ledger not found")
        self._send(200, json.dumps({str(lid): bean(lid)}, indent=2).encode())

    def _send(self, code: int, body: bytes):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def admin_url():
    _AdminHandler.ledgers = set(range(1, 251)) | {13, 14}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _AdminHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def test_lists_all_pages(admin_url):
    assert list_ledger_ids(admin_url, timeout_s=5) == list(range(1, 251))


def test_metadata_is_stored_redacted_and_failures_are_gaps(admin_url, tmp_path):
    report = collect_ledger_metadata_http(admin_url, [1, 2, 13, 14, 999], DirSink(tmp_path), timeout_s=5,
                                          cluster="bk-a")
    stored = sorted(p.name for p in (tmp_path / "ledger-metadata-http").iterdir())
    assert stored == ["1.json", "2.json"]
    data = (tmp_path / "ledger-metadata-http" / "1.json").read_bytes()
    assert PASSWORD_B64.encode() not in data
    (md,) = decode_admin_json(data, "t")
    assert (md.ledger_id, md.state, md.segments[0].ensemble) == (1, "CLOSED", ("bk1:3181", "bk2:3181"))
    gaps = {urllib.parse.parse_qs(urllib.parse.urlparse(g.source).query)["ledger_id"][0]: g.error
            for g in report.gaps}
    assert set(gaps) == {"13", "14", "999"}
    assert gaps["999"].startswith("HTTP 404")
    assert "not stored" in gaps["13"] and "not stored" in gaps["14"]
    assert report.counts == {"http_ledgers_stored": 2, "http_errors": 1, "http_undecodable": 2}


def test_unreachable_admin_endpoint_is_a_gap(tmp_path):
    port = unused_loopback_port()
    report = collect_ledger_metadata_http(f"http://127.0.0.1:{port}", [1], DirSink(tmp_path), timeout_s=2)
    assert len(report.gaps) == 1 and report.gaps[0].error.startswith("unreachable")
    with pytest.raises(RuntimeError, match="unreachable"):
        list_ledger_ids(f"http://127.0.0.1:{port}", timeout_s=2)
