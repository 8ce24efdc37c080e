"""One lab cluster's Pulsar admin REST API on loopback, so the real admin collector can run against the lab. It
answers with the world as it is now (the end of the simulation, at as_of), what emit.emit_cluster writes too; the
pipeline's lab collection instead writes what each cluster's collection read at its own instant (reads.py).

    with serve_pulsar_admin(world, "east", token="s3cret") as base_url:
        requests.get(base_url + "/admin/v2/persistent/lab/geo", headers={"Authorization": "Bearer s3cret"})

Answers GETs with the bodies and headers a broker sends (lab/pulsar/payloads.py), and one POST:
  /admin/v2/persistent/{tenant}/{ns}                      topics (partitions listed one by one)
  /admin/v2/persistent/{tenant}/{ns}/partitioned          partitioned topics
  /admin/v2/namespaces/{tenant}/{ns}/topics               every topic of the namespace
  /admin/v2/persistent/{t}/{ns}/{topic}/partitions        {"partitions": n}
  /admin/v2/persistent/{t}/{ns}/{topic}/internalStats     stats-internal
  /admin/v2/persistent/{t}/{ns}/{topic}/stats             stats
  /admin/v2/persistent/{t}/{ns}/{topic}/subscription/{sub}/replicatedSubscriptionStatus
  /admin/v2/persistent/{t}/{ns}/{topic}/ledger/{l}/entry/{e}   the entry: body + X-Pulsar-* headers
  /admin/v2/persistent/{t}/{ns}/{topic}/messageTTL[?applied=true]   the topic's TTL (the lab sets none per topic)
  /admin/v2/namespaces/{tenant}/{ns}/messageTTL           the namespace's TTL (the lab's `message_ttl_s`)
  /admin/v2/brokers/version                               the lab cluster's configured broker version
  POST .../subscription/{sub}/resetcursor                 ResetCursorData body, applied as the broker does
                                                          (reset_cursor below): the repair plan's tests
With a token, every request must carry `Authorization: Bearer <token>` (401 and Jetty's HTML page otherwise).
Old brokers, by the cluster's `broker_versions` entry (lab config): before 2.9 the entry answer carries only
the headers of the time (no producer name, sequence id, replicated-from/-to or marker type: apache/pulsar#11443);
before 2.10 a GET of replicatedSubscriptionStatus answers 405 (2.7.3 on: only its POST, apache/pulsar#10790) or
Jetty's 404 page (apache/pulsar#12891 added the GET); before 2.7 GET .../messageTTL is Jetty's 404 page, before 2.11
it answers 405 (topic level policies disabled by default), and before 2.8 an unset namespace TTL reads 0, not 204
(payloads.py topic_ttl_answer, namespace_ttl_answer).
`entry_errors` maps (ledgerId, entryId) to an HTTP status to answer instead of the entry (coverage-gap tests)."""
from __future__ import annotations

import bisect
import contextlib
import hmac
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator, Mapping

from lab.pulsar.payloads import OCTET_STREAM, entry_headers, jackson, namespace_ttl_answer, replicated_status, \
    stats_internal, topic_stats, topic_ttl_answer
from lab.pulsar.runner import UnknownLabCluster
from audit.systems.pulsar.domain.snapshot_cache import version_tuple
from lab.pulsar.builder import World

JSON = "application/json"
_JETTY_PAGE = ("<html>\n<head>\n<meta http-equiv=\"Content-Type\" content=\"text/html;charset=ISO-8859-1\"/>\n"
               "<title>Error {code} {msg}</title>\n</head>\n<body><h2>HTTP ERROR {code} {msg}</h2>\n<table>\n"
               "<tr><th>URI:</th><td>{uri}</td></tr>\n<tr><th>STATUS:</th><td>{code}</td></tr>\n"
               "<tr><th>MESSAGE:</th><td>{msg}</td></tr>\n</table>\n\n</body>\n</html>\n")


def reset_cursor_data(doc: object) -> tuple[int, int, bool]:
    """(ledgerId, entryId, excluded) as the broker's Jackson reads a ResetCursorData body: Lombok's accessors
    of `boolean isExcluded` make the property `excluded`; the broker's ObjectMapper ignores unknown properties
    (ObjectMapperFactory), so "isExcluded" is dropped silently and the flag stays false."""
    if not isinstance(doc, dict):
        raise ValueError("a JSON object (ResetCursorData)")
    ids = []
    for key in ("ledgerId", "entryId"):
        v = doc.get(key, 0)
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"{key}: a long")
        ids.append(v)
    excluded = doc.get("excluded", False)
    if isinstance(excluded, str) and excluded in ("true", "false"):
        excluded = excluded == "true"          # Jackson coerces the scalar
    if not isinstance(excluded, bool):
        raise ValueError("excluded: a boolean")
    return ids[0], ids[1], excluded


_BEFORE_11443 = {"x-pulsar-message-id", "x-pulsar-publish-time", "x-pulsar-event-time",
                 "x-pulsar-num-batch-message"}


class _Admin:
    """Routing over one cluster's view of the world. A reset-cursor POST changes a cursor: every request holds
    the lock, so a GET never sees half a reset."""

    def __init__(self, world: World, cluster: str, entry_errors: Mapping[tuple[int, int], int]):
        self.world, self.cluster, self.entry_errors = world, cluster, dict(entry_errors)
        self.topics = {t.name: t for t in world.topics_of(cluster)}
        self.lock = threading.Lock()
        self.version = version_tuple(world.config.broker_version_of(cluster)) or (99, 0, 0)

    def reset_cursor(self, parts: list[str], body: bytes):
        """PersistentTopicsBase.internalResetCursorOnPosition with batchIndex -1: seek to L:E, or to the entry
        after it when `excluded` (PositionImpl.getNext); a seek past a ledger's end moves to the next valid
        position (ManagedCursorImpl.asyncResetCursor); the markDeletePosition becomes the entry before the new
        readPosition (ManagedLedgerImpl.getPreviousPosition) and the individually-deleted ranges are cleared."""
        if parts[:3] != ["admin", "v2", "persistent"] or len(parts) != 9 or parts[6] != "subscription" \
                or parts[8] != "resetcursor":
            # Jersey: a path whose resource has no POST answers 405
            return 405, JSON, jackson({"reason": "Method Not Allowed"}), [("Allow", "GET")]
        topic = self.topics.get(f"persistent://{parts[3]}/{parts[4]}/{parts[5]}")
        if topic is None:
            return _error(404, "Topic not found")
        sub = topic.subscriptions.get(parts[7])
        if sub is None:
            return _error(404, "Subscription not found")
        try:
            ledger_id, entry_id, excluded = reset_cursor_data(json.loads(body or b"{}"))
        except ValueError as e:   # JSONDecodeError is a ValueError
            return _error(400, f"Invalid ResetCursorData: {e}")
        seek = (ledger_id, entry_id + 1) if excluded else (ledger_id, entry_id)
        cursor = sub.cursor
        cursor.read_idx = bisect.bisect_left(topic.ml.positions, seek)
        cursor.mdp_idx = cursor.read_idx - 1
        cursor.acked.clear()
        return 204, JSON, b"", []

    def _namespace_topics(self, tenant: str, ns: str) -> list[str] | None:
        prefix = f"persistent://{tenant}/{ns}/"
        names = sorted(n for n in self.topics if n.startswith(prefix))
        known = any(n.startswith(prefix) for c in self.world.cluster_names for n in self.world.clusters[c].topics)
        return names if known else None

    def route(self, parts: list[str], query: Mapping[str, list[str]] | None = None
              ) -> tuple[int, str, bytes, list[tuple[str, str]]]:
        if parts == ["admin", "v2", "brokers", "version"]:
            # BrokersBase#version: the version string itself, not a JSON document
            return 200, JSON, self.world.config.broker_version_of(self.cluster).encode(), []
        if parts[:3] == ["admin", "v2", "namespaces"] and len(parts) == 6 and parts[5] == "topics":
            names = self._namespace_topics(parts[3], parts[4])
            return self._list(names)
        if parts[:3] == ["admin", "v2", "namespaces"] and len(parts) == 6 and parts[5] == "messageTTL":
            if self._namespace_topics(parts[3], parts[4]) is None:
                return _error(404, "Namespace does not exist")
            ttl_s = self.world.config.ttl_ms(f"{parts[3]}/{parts[4]}") // 1000
            status, body = namespace_ttl_answer(self.version, ttl_s)
            return status, JSON, body, []
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
        if rest == ["messageTTL"]:
            applied = (query or {}).get("applied", ["false"])[-1] == "true"
            answer = topic_ttl_answer(self.version, topic.settings.message_ttl_ms // 1000, applied)
            if answer is None:
                return _jetty_404(parts)
            return answer[0], JSON, answer[1], []
        if len(rest) == 3 and rest[0] == "subscription" and rest[2] == "replicatedSubscriptionStatus":
            if self.version < (2, 10, 0):   # no GET of the status before apache/pulsar#12891
                if self.version >= (2, 7, 3):
                    return 405, JSON, jackson({"reason": "Method Not Allowed"}), [("Allow", "POST")]
                return _jetty_404(parts)
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
        headers = entry_headers(e)
        if self.version < (2, 9, 0):   # only what generateResponseWithEntry sent before apache/pulsar#11443
            headers = [(k, v) for k, v in headers if k.lower() in _BEFORE_11443 or k.startswith("X-Pulsar-PROPERTY-")]
        return 200, OCTET_STREAM, e.payload, headers


def _error(status: int, reason: str):
    return status, JSON, jackson({"reason": reason}), []


def _jetty_404(parts: list[str]):
    """No resource has the path on this broker version: the servlet container's page."""
    page = _JETTY_PAGE.format(code=404, msg="Not Found", uri="/" + "/".join(parts))
    return 404, "text/html;charset=iso-8859-1", page.encode("latin-1"), []


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

        def _answer(self, route) -> None:
            """Authorize, then answer with route(path parts) under the admin's lock (one request at a time)."""
            url = urllib.parse.urlsplit(self.path)
            path = url.path
            if not self._authorized():
                page = _JETTY_PAGE.format(code=401, msg="Authentication required", uri=path)
                self._send(401, "text/html;charset=iso-8859-1", page.encode("latin-1"), [])
                return
            parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")]
            with admin.lock:
                answer = route(parts, urllib.parse.parse_qs(url.query))
            self._send(*answer)

        def do_GET(self) -> None:
            self._answer(admin.route)

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._answer(lambda parts, query: admin.reset_cursor(parts, body))

        def _not_allowed(self) -> None:
            self._send(405, JSON, jackson({"reason": "Method Not Allowed"}), [("Allow", "GET")])

        do_PUT = do_DELETE = do_PATCH = _not_allowed

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
