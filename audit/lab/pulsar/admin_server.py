"""One lab cluster's Pulsar admin REST API on loopback, so the real admin collector can run against the lab.

    with serve_pulsar_admin(world, "east", token="s3cret") as base_url:
        requests.get(base_url + "/admin/v2/persistent/lab/geo", headers={"Authorization": "Bearer s3cret"})

Answers (GET only), with the bodies and headers a broker sends (audit/lab/pulsar/payloads.py):
  /admin/v2/persistent/{tenant}/{ns}                      topics (partitions listed one by one)
  /admin/v2/persistent/{tenant}/{ns}/partitioned          partitioned topics
  /admin/v2/namespaces/{tenant}/{ns}/topics               every topic of the namespace
  /admin/v2/persistent/{t}/{ns}/{topic}/partitions        {"partitions": n}
  /admin/v2/persistent/{t}/{ns}/{topic}/internalStats     stats-internal
  /admin/v2/persistent/{t}/{ns}/{topic}/stats             stats
  /admin/v2/persistent/{t}/{ns}/{topic}/subscription/{sub}/replicatedSubscriptionStatus
  /admin/v2/persistent/{t}/{ns}/{topic}/ledger/{l}/entry/{e}   the entry: body + X-Pulsar-* headers
With a token, every request must carry `Authorization: Bearer <token>` (401 and Jetty's HTML page otherwise).
`entry_errors` maps (ledgerId, entryId) to an HTTP status to answer instead of the entry (coverage-gap tests)."""
from __future__ import annotations

import contextlib
import hmac
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator, Mapping

from audit.lab.pulsar.payloads import OCTET_STREAM, entry_headers, jackson, replicated_status, stats_internal, \
    topic_stats
from audit.lab.pulsar.runner import UnknownLabCluster
from audit.lab.pulsar.builder import World

JSON = "application/json"
_JETTY_PAGE = ("<html>\n<head>\n<meta http-equiv=\"Content-Type\" content=\"text/html;charset=ISO-8859-1\"/>\n"
               "<title>Error {code} {msg}</title>\n</head>\n<body><h2>HTTP ERROR {code} {msg}</h2>\n<table>\n"
               "<tr><th>URI:</th><td>{uri}</td></tr>\n<tr><th>STATUS:</th><td>{code}</td></tr>\n"
               "<tr><th>MESSAGE:</th><td>{msg}</td></tr>\n</table>\n\n</body>\n</html>\n")


class _Admin:
    """Routing over one cluster's view of the world (read-only, so safe from many threads)."""

    def __init__(self, world: World, cluster: str, entry_errors: Mapping[tuple[int, int], int]):
        self.world, self.cluster, self.entry_errors = world, cluster, dict(entry_errors)
        self.topics = {t.name: t for t in world.topics_of(cluster)}

    def _namespace_topics(self, tenant: str, ns: str) -> list[str] | None:
        prefix = f"persistent://{tenant}/{ns}/"
        names = sorted(n for n in self.topics if n.startswith(prefix))
        known = any(n.startswith(prefix) for c in self.world.cluster_names for n in self.world.clusters[c].topics)
        return names if known else None

    def route(self, parts: list[str]) -> tuple[int, str, bytes, list[tuple[str, str]]]:
        if parts[:3] == ["admin", "v2", "namespaces"] and len(parts) == 6 and parts[5] == "topics":
            names = self._namespace_topics(parts[3], parts[4])
            return self._list(names)
        if parts[:3] != ["admin", "v2", "persistent"] or len(parts) < 5:
            return _error(404, "Not Found")
        tenant, ns = parts[3], parts[4]
        if len(parts) == 5:
            return self._list(self._namespace_topics(tenant, ns))
        if len(parts) == 6 and parts[5] == "partitioned":
            names = self._namespace_topics(tenant, ns)
            prefix = f"persistent://{tenant}/{ns}/"
            return self._list(None if names is None else
                              sorted(n for n in self.world.partitioned if n.startswith(prefix)))
        name = f"persistent://{tenant}/{ns}/{parts[5]}"
        rest = parts[6:]
        if rest == ["partitions"]:
            return 200, JSON, jackson({"partitions": self.world.partitioned.get(name, 0)}), []
        topic = self.topics.get(name)
        if topic is None:
            return _error(404, "Topic not found")
        if rest == ["internalStats"]:
            return 200, JSON, jackson(stats_internal(topic)), []
        if rest == ["stats"]:
            return 200, JSON, jackson(topic_stats(topic, self.world.as_of_ms)), []
        if len(rest) == 3 and rest[0] == "subscription" and rest[2] == "replicatedSubscriptionStatus":
            if rest[1] not in topic.subscriptions:
                return _error(404, "Subscription not found")
            return 200, JSON, jackson(replicated_status(topic, rest[1])), []
        if len(rest) == 4 and rest[0] == "ledger" and rest[2] == "entry":
            return self._entry(topic, rest[1], rest[3])
        return _error(404, "Not Found")

    def _list(self, names: list[str] | None):
        if names is None:
            return _error(404, "Namespace does not exist")
        return 200, JSON, jackson(names), []

    def _entry(self, topic, ledger: str, entry: str):
        try:
            pos = (int(ledger), int(entry))
        except ValueError:
            return _error(400, "Invalid ledger or entry id")
        if pos in self.entry_errors:
            return _error(self.entry_errors[pos], "Injected failure reading the entry")
        idx = topic.ml.floor_index(pos)
        if idx < 0 or topic.ml.positions[idx] != pos or not topic.ml.readable(idx):
            return _error(404, "Message not found")
        e = topic.ml.entries[idx]
        return 200, OCTET_STREAM, e.payload, entry_headers(e)


def _error(status: int, reason: str):
    return status, JSON, jackson({"reason": reason}), []


def _handler(admin: _Admin, token: str | None):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def version_string(self) -> str:
            return "Jetty(9.4.56.v20240826)"

        def log_message(self, format: str, *args) -> None:  # the lab stays quiet
            pass

        def _send(self, status: int, ctype: str, body: bytes, headers: list[tuple[str, str]]) -> None:
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _authorized(self) -> bool:
            if token is None:
                return True
            got = self.headers.get("Authorization", "")
            return hmac.compare_digest(got.encode(), f"Bearer {token}".encode())

        def do_GET(self) -> None:
            path = urllib.parse.urlsplit(self.path).path
            if not self._authorized():
                page = _JETTY_PAGE.format(code=401, msg="Authentication required", uri=path)
                self._send(401, "text/html;charset=iso-8859-1", page.encode("latin-1"), [])
                return
            parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")]
            self._send(*admin.route(parts))

        def _not_allowed(self) -> None:
            self._send(405, JSON, jackson({"reason": "Method Not Allowed"}), [("Allow", "GET")])

        do_POST = do_PUT = do_DELETE = do_PATCH = _not_allowed

    return Handler


@contextlib.contextmanager
def serve_pulsar_admin(world: World, cluster_name: str, token: str | None = None,
                       entry_errors: Mapping[tuple[int, int], int] | None = None) -> Iterator[str]:
    """Yields the base URL (http://127.0.0.1:<port>); the server stops when the block ends."""
    if cluster_name not in world.clusters:
        raise UnknownLabCluster(cluster_name, world.cluster_names)
    admin = _Admin(world, cluster_name, entry_errors or {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(admin, token))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              name=f"pulsar-lab-admin-{cluster_name}", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
