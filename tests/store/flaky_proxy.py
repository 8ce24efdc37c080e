"""A tiny HTTP proxy on loopback in front of the S3 server that answers the next N requests with an error.

It makes retry tests real: botocore sees a genuine 503 over a socket, not a stubbed response.
"""
from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
              "proxy-connection", "content-length"}
SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
             b"<Message>Please reduce your request rate.</Message></Error>")


class FlakyProxy:
    def __init__(self, upstream: str):
        target = urlsplit(upstream)
        self._upstream = (target.hostname, target.port)
        self._lock = threading.Lock()
        self._failures_left = 0
        self._status = 503
        self.log: list[tuple[str, str, int]] = []  # (method, path, status) as answered
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def fail_next(self, count: int, status: int = 503) -> None:
        with self._lock:
            self._failures_left, self._status = count, status

    def start(self) -> "FlakyProxy":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def _take_failure(self) -> int | None:
        with self._lock:
            if self._failures_left > 0:
                self._failures_left -= 1
                return self._status
            return None

    def _handler(proxy):  # noqa: N805 -- the closure gives the handler class its proxy
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, and 100-continue handled by the base class

            def log_message(self, *args):  # quiet test output
                pass

            def _forward(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                status = proxy._take_failure()
                if status is not None:
                    proxy.log.append((self.command, self.path, status))  # before answering: no race
                    self.send_response(status)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(SLOW_DOWN)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(SLOW_DOWN)
                    return
                conn = http.client.HTTPConnection(*proxy._upstream, timeout=30)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                    if body is not None:
                        headers["Content-Length"] = str(len(body))
                    conn.request(self.command, self.path, body=body, headers=headers)
                    answer = conn.getresponse()
                    data = answer.read()
                    proxy.log.append((self.command, self.path, answer.status))
                    self.send_response(answer.status)
                    for key, value in answer.getheaders():
                        if key.lower() not in HOP_BY_HOP:
                            self.send_header(key, value)
                    upstream_length = answer.getheader("Content-Length")
                    length_out = upstream_length if self.command == "HEAD" and upstream_length else str(len(data))
                    self.send_header("Content-Length", length_out)
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    conn.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        return Handler
