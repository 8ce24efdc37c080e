"""A real HTTP receiver on loopback that records webhook posts (alerts, DAG end-to-end tests)."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class Receiver:
    """Records every request; answers with the scripted statuses, then 200."""

    def __init__(self, statuses=(), hang: bool = False):
        self.requests = []
        self.statuses = list(statuses)
        self.release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append({"path": self.path, "headers": dict(self.headers), "body": json.loads(body)})
                if hang:
                    receiver.release.wait(10)
                code = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(code)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def receiver_factory():
    made = []

    def make(**kw):
        made.append(Receiver(**kw))
        return made[-1]
    yield make
    for r in made:
        r.close()


