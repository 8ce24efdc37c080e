"""A bookie's admin HTTP server for tests, on 127.0.0.1:0 in its own thread: the ledger list and metadata
endpoints as BookKeeper serves them (bookkeeper-server/.../server/http/service/ListLedgerService.java and
GetLedgerMetaService.java, commit 9590a97f67; docs/formats/bookkeeper.md §1.5).

ListLedgerService, as implemented there:
- without print_metadata=true every request answers {"<id>": null, ...} for all ledgers, `page` ignored;
- with it, ledgers are counted from 1 in listing order and page P >= 1 keeps those numbered
  (P-1)*100 .. (P-1)*100+99 (page 1: 1..99); no page or P <= 0 keeps all; values are the metadata bean
  (decode_meta=true) or the stored form as a string;
- a ledger whose metadata read fails (deleted after the listing) fails the whole request: HTTP 500.
Modes: "real"; "before_4_11" (decode_meta ignored: values are strings, as before apache/bookkeeper#2311);
"unpaged" (every list request answers the whole list with null values: `page` and print_metadata ignored).
"""
from __future__ import annotations

import base64
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LIST_LEDGER_BATCH_SIZE = 100
PASSWORD_B64 = base64.b64encode(b"http-ledger-pw").decode()


def bean(ledger_id: int, ensemble: tuple[str, ...] = ("bk1:3181", "bk2:3181")) -> dict:
    """LedgerMetadataImpl as Jackson serializes it (the bean getters; docs/formats/bookkeeper.md §1.5)."""
    return {"ledgerId": ledger_id, "metadataFormatVersion": 3, "ensembleSize": len(ensemble),
            "writeQuorumSize": len(ensemble), "ackQuorumSize": len(ensemble), "lastEntryId": 9, "length": 1000,
            "digestType": "CRC32C", "password": PASSWORD_B64, "state": "CLOSED", "closed": True,
            "ctime": 1700000000000, "ctoken": 0,
            "customMetadata": {"application": base64.b64encode(b"pulsar").decode()},
            "allEnsembles": {"0": [{"id": b} for b in ensemble]}}


class FakeAdminHttp:
    def __init__(self, ledgers: dict[int, dict], mode: str = "real"):
        if mode not in ("real", "before_4_11", "unpaged"):
            raise ValueError(f"mode: expected real|before_4_11|unpaged, got {mode!r}")
        self.ledgers = dict(ledgers)  # ledger id -> bean, listed in id order (LedgerRangeIterator)
        self.mode = mode
        self.vanishing: set[int] = set()  # listed by the next list request that reads them, then deleted
        self.requests: list[str] = []  # path?query of every request, in arrival order
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def list_answer(self, params: dict[str, str]) -> tuple[int, object]:
        ids = sorted(self.ledgers)
        print_meta = params.get("print_metadata") == "true" and self.mode != "unpaged"
        if not print_meta:
            return 200, {str(i): None for i in ids}
        decode = params.get("decode_meta", "false") == "true" and self.mode == "real"
        page = int(params["page"]) if "page" in params else -1
        start = end = 0
        if page > 0:
            start = (page - 1) * LIST_LEDGER_BATCH_SIZE
            end = start + LIST_LEDGER_BATCH_SIZE - 1
        kept = [lid for index, lid in enumerate(ids, start=1) if end == 0 or start <= index <= end]
        gone = self.vanishing & set(kept)
        if gone:  # readLedgerMetadata fails: the handler throws, Vert.x answers 500
            self.vanishing -= gone
            for lid in gone:
                del self.ledgers[lid]
            return 500, "Internal Server Error"
        return 200, {str(lid): self.ledgers[lid] if decode else f"BookieMetadataFormatVersion\t3\n..{lid}.."
                     for lid in kept}

    def meta_answer(self, params: dict[str, str]) -> tuple[int, object]:
        lid = int(params["ledger_id"])
        if lid not in self.ledgers:
            return 500, "Internal Server Error"
        return 200, {str(lid): self.ledgers[lid]}

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                url = urllib.parse.urlparse(self.path)
                params = dict(urllib.parse.parse_qsl(url.query))
                with fake._lock:
                    fake.requests.append(self.path)
                    if url.path == "/api/v1/ledger/list":
                        code, doc = fake.list_answer(params)
                    elif url.path == "/api/v1/ledger/metadata":
                        code, doc = fake.meta_answer(params)
                    else:
                        code, doc = 404, "Resource not found"
                body = (json.dumps(doc, indent=2) if code == 200 else doc).encode()  # JsonUtil pretty-prints
                self.send_response(code)
                self.send_header("Content-Type", "application/json" if code == 200 else "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        return Handler

    def __enter__(self) -> "FakeAdminHttp":
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        # A short poll interval: shutdown() waits for the serving loop to notice (0.5 s by default).
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="fake-admin-http",
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
