"""The Pulsar admin REST API on loopback: one request handling (routes, auth, the per-broker-version answers, the
reset-cursor POST) over two sources of what the broker holds.

- `serve_pulsar_admin` (LabAdmin): one lab cluster's view of a simulated world, so the real admin collector can
  run against the lab. It answers with the world as it is now (the end of the simulation, at as_of), what
  emit.emit_cluster writes too; the pipeline's lab collection instead writes what each cluster's collection read
  at its own instant (reads.py).

      with serve_pulsar_admin(world, "east", token="s3cret") as base_url:
          requests.get(base_url + "/admin/v2/persistent/lab/geo", headers={"Authorization": "Bearer s3cret"})

- `ScriptedAdmin`: recorded answers the collector's and the repair's tests set per topic (ScriptedTopic, Answer),
  with test scripting on top: `script(pattern, answers)` (the next len(answers) requests whose path matches get
  these answers, in order), `slow(pattern)` (matching requests wait on `release`, set at close, and so outlive
  the client's timeout), `hold_first_wave(n)` (entry requests wait until n are in flight at once: proves the
  client's concurrency); it records every request path (`requests`), every POST (`posts`: path, body,
  Authorization and Content-Type), the refused ones (`unauthorized`) and the most requests it had in flight;
  `acknowledge(topic, sub, positions)` applies individual acks to a served cursor (the WebSocket fake's side).

Answers GETs with the bodies and headers a broker sends (lab/pulsar/payloads.py for the lab), and one POST:
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
  /admin/v2/brokers/version                               the broker version (the lab cluster's configured one)
  POST .../subscription/{sub}/resetcursor                 ResetCursorData body, applied as the broker does
                                                          (reset_cursor_data, AdminServer.post)
With a token, every request must carry `Authorization: Bearer <token>` (401 otherwise: Jetty's HTML page from the
lab, the recorded JSON reason from ScriptedAdmin).
Old brokers, by the broker version (the lab cluster's `broker_versions` entry, ScriptedAdmin.broker_version):
before 2.9 the entry answer carries only the headers of the time (no producer name, sequence id, replicated-from/-to
or marker type: apache/pulsar#11443); before 2.10 a GET of replicatedSubscriptionStatus answers 405 (2.7.3 on: only
its POST, apache/pulsar#10790) or Jetty's 404 page (apache/pulsar#12891 added the GET); before 2.7 GET
.../messageTTL is Jetty's 404 page, before 2.11 it answers 405 (topic level policies disabled by default), and
before 2.8 an unset namespace TTL reads 0, not 204 (payloads.py topic_ttl_resource, namespace_ttl_answer).
The lab's `entry_errors` maps (ledgerId, entryId) to an HTTP status to answer instead of the entry (coverage-gap
tests)."""
from __future__ import annotations

import bisect
import contextlib
import dataclasses
import hmac
import json
import re
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator, Mapping

from audit.systems.pulsar.domain.positions import Position
from audit.systems.pulsar.domain.rangeset import AckRanges, parse_individually_deleted
from audit.systems.pulsar.domain.snapshot_cache import version_tuple
from audit.systems.pulsar.formats.timefmt import format_time_ms
from lab.pulsar.builder import World
from lab.pulsar.payloads import OCTET_STREAM, TOPIC_POLICIES_OFF, TTL_DISABLED, TTL_MISSING, entry_headers, \
    jackson, namespace_ttl_answer, replicated_status, stats_internal, topic_stats, topic_ttl_resource, \
    topic_ttl_value
from lab.pulsar.runner import UnknownLabCluster

JSON = "application/json"
JETTY_HTML = "text/html;charset=iso-8859-1"
_JETTY_PAGE = ("<html>\n<head>\n<meta http-equiv=\"Content-Type\" content=\"text/html;charset=ISO-8859-1\"/>\n"
               "<title>Error {code} {msg}</title>\n</head>\n<body><h2>HTTP ERROR {code} {msg}</h2>\n<table>\n"
               "<tr><th>URI:</th><td>{uri}</td></tr>\n<tr><th>STATUS:</th><td>{code}</td></tr>\n"
               "<tr><th>MESSAGE:</th><td>{msg}</td></tr>\n</table>\n\n</body>\n</html>\n")
_UNKNOWN_VERSION = (99, 0, 0)   # an unparseable version answers as a current broker
ENTRY_HEADERS_SINCE = (2, 9, 0)             # every X-Pulsar-* header of an entry (apache/pulsar#11443)
REPLICATED_STATUS_GET_SINCE = (2, 10, 0)    # GET .../replicatedSubscriptionStatus (apache/pulsar#12891)
REPLICATED_STATUS_POST_SINCE = (2, 7, 3)    # only its POST: a GET answers 405 (apache/pulsar#10790)
_BEFORE_11443 = {"x-pulsar-message-id", "x-pulsar-publish-time", "x-pulsar-event-time",
                 "x-pulsar-num-batch-message"}


@dataclass
class Answer:
    """One HTTP answer: status, body, Content-Type (None: no such header) and further headers in order."""
    status: int = 200
    body: bytes = b""
    content_type: str | None = JSON
    headers: list[tuple[str, str]] = field(default_factory=list)
    echo_auth: bool = False  # put the request's Authorization header into the body (a leaky proxy page)


def jetty_page(status: int, message: str, uri: str) -> Answer:
    """The servlet container's own error page (no resource has the path, or the authentication filter refused)."""
    return Answer(status, _JETTY_PAGE.format(code=status, msg=message, uri=uri).encode("latin-1"), JETTY_HTML)


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


def _path_parts(path: str) -> list[str]:
    return [urllib.parse.unquote(p) for p in path.strip("/").split("/")]


class AdminServer:
    """The request handling, over what a subclass says the broker holds (the `*_of` methods, `cursor_of` and
    `reset`). Every answer is built holding `lock`, so a GET never sees half a reset. `dumps` spells the JSON
    documents the routes build (lists, {"partitions": n}, {"reason": ...}); the broker's is Jackson's compact
    form. Serves on 127.0.0.1 from start() (or `with`) to close()."""

    dumps: Callable[[Any], bytes] = staticmethod(jackson)

    def __init__(self, token: str | None = None, name: str = "pulsar-admin"):
        self.token = token
        self.name = name
        self.broker_version = b""   # BrokersBase#version: bare text, answered under a JSON Content-Type
        self.lock = threading.RLock()
        self.url = ""
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- what the broker holds: subclasses ------------------------------------------------------------
    def topics_of(self, tenant: str, ns: str, partitioned: bool) -> list[str] | None:
        """The namespace's (partitioned) topic names; None: no such namespace."""
        raise NotImplementedError

    def namespace_ttl_of(self, tenant: str, ns: str) -> Answer | None:
        raise NotImplementedError

    def partitions_of(self, tenant: str, ns: str, local: str) -> int | None:
        """The partition count of a topic; None: no such topic."""
        raise NotImplementedError

    def topic_of(self, tenant: str, ns: str, local: str) -> Any | None:
        raise NotImplementedError

    def internal_stats_of(self, topic: Any) -> Answer:
        raise NotImplementedError

    def stats_of(self, topic: Any) -> Answer:
        raise NotImplementedError

    def ttl_of(self, topic: Any, applied: bool) -> Answer:
        """GET .../messageTTL on a broker with topic policies on."""
        raise NotImplementedError

    def replicated_status_of(self, topic: Any, sub: str) -> Answer | None:
        """None: no such subscription."""
        raise NotImplementedError

    def entry_of(self, topic: Any, position: tuple[int, int]) -> Answer:
        raise NotImplementedError

    def cursor_of(self, topic: Any, sub: str) -> Any | None:
        """The subscription's cursor, for reset(); None: no such subscription."""
        raise NotImplementedError

    def reset(self, topic: Any, cursor: Any, seek: tuple[int, int]) -> None:
        """Move the cursor to read `seek` next: the markDeletePosition becomes the entry before it
        (ManagedLedgerImpl.getPreviousPosition), the individually deleted ranges are cleared."""
        raise NotImplementedError

    # -- test hooks: nothing here (ScriptedAdmin) --------------------------------------------------------
    def _enter(self, method: str, path: str, body: bytes, headers: Mapping[str, str]) -> None:
        """A request arrived (before it is authorized)."""

    def _leave(self) -> None:
        """Its answer was sent, or the client went away."""

    def _scripted(self, path: str) -> Answer | None:
        return None

    def _delay(self, path: str) -> None:
        """Runs between building an answer and sending it."""

    def _refused(self, path: str) -> Answer:
        """The answer to a request without the token: the authentication filter's 401, Jetty's page."""
        return jetty_page(401, "Authentication required", path)

    # -- request handling --------------------------------------------------------------------------------
    def version(self) -> tuple[int, int, int]:
        return version_tuple(self.broker_version.decode("utf-8", "replace")) or _UNKNOWN_VERSION

    def reason(self, status: int, text: str) -> Answer:
        return Answer(status, self.dumps({"reason": text}))

    def not_allowed(self, allow: str) -> Answer:
        """Jersey: the path's resource has no such method."""
        return Answer(405, self.dumps({"reason": "Method Not Allowed"}), JSON, [("Allow", allow)])

    def authorized(self, authorization: str | None) -> bool:
        if self.token is None:
            return True
        return hmac.compare_digest((authorization or "").encode(), f"Bearer {self.token}".encode())

    def answer(self, method: str, target: str, body: bytes, authorization: str | None) -> Answer:
        """The answer to one GET or POST of `target` (path and query, as in the request line)."""
        path, _, query = target.partition("?")
        if not self.authorized(authorization):
            ans = self._refused(path)
        else:
            ans = self._scripted(path)
            if ans is None:
                with self.lock:
                    ans = (self.post(_path_parts(path), body) if method == "POST"
                           else self.route(_path_parts(path), urllib.parse.parse_qs(query)))
        self._delay(path)
        return ans

    def reset_cursor(self, path: str, body: bytes) -> Answer:
        """What a POST of `body` to `path` does, without HTTP (the repair tests move a cursor behind the back)."""
        with self.lock:
            return self.post(_path_parts(path), body)

    def route(self, parts: list[str], query: Mapping[str, list[str]] | None = None) -> Answer:
        """The answer to a GET of /{parts} (path segments, unquoted)."""
        head, rest = parts[:3], parts[3:]
        if parts == ["admin", "v2", "brokers", "version"]:
            return Answer(200, self.broker_version)   # the version string itself, not a JSON document
        if head == ["admin", "v2", "namespaces"] and len(rest) == 3:
            return self._namespace(*rest)
        if head == ["admin", "v2", "persistent"] and len(rest) >= 2:
            return self._persistent(rest, query or {}, parts)
        return self.reason(404, "Not Found")

    def _list(self, names: list[str] | None) -> Answer:
        if names is None:
            return self.reason(404, "Namespace does not exist")
        return Answer(200, self.dumps(names))

    def _namespace(self, tenant: str, ns: str, what: str) -> Answer:
        if what == "topics":
            return self._list(self.topics_of(tenant, ns, partitioned=False))
        if what == "messageTTL":
            ans = self.namespace_ttl_of(tenant, ns)
            return self.reason(404, "Namespace does not exist") if ans is None else ans
        return self.reason(404, "Not Found")

    def _persistent(self, rest: list[str], query: Mapping[str, list[str]], parts: list[str]) -> Answer:
        tenant, ns = rest[0], rest[1]
        if len(rest) == 2:
            return self._list(self.topics_of(tenant, ns, partitioned=False))
        if rest[2:] == ["partitioned"]:
            return self._list(self.topics_of(tenant, ns, partitioned=True))
        local, below = rest[2], rest[3:]
        if below == ["partitions"]:
            n = self.partitions_of(tenant, ns, local)
            return self.reason(404, "Topic not found") if n is None else Answer(200, self.dumps({"partitions": n}))
        topic = self.topic_of(tenant, ns, local)
        if topic is None:
            return self.reason(404, "Topic not found")
        return self._topic(topic, below, query, parts)

    def _topic(self, topic: Any, below: list[str], query: Mapping[str, list[str]], parts: list[str]) -> Answer:
        if below == ["internalStats"]:
            return self.internal_stats_of(topic)
        if below == ["stats"]:
            return self.stats_of(topic)
        if below == ["messageTTL"]:
            return self._topic_ttl(topic, query.get("applied", ["false"])[-1] == "true", parts)
        if len(below) == 3 and below[0] == "subscription" and below[2] == "replicatedSubscriptionStatus":
            return self._replicated_status(topic, below[1], parts)
        if len(below) == 4 and below[0] == "ledger" and below[2] == "entry":
            return self._entry(topic, below[1], below[3])
        return self.reason(404, "Not Found")

    def _topic_ttl(self, topic: Any, applied: bool, parts: list[str]) -> Answer:
        resource = topic_ttl_resource(self.version())
        if resource == TTL_MISSING:
            return jetty_page(404, "Not Found", "/" + "/".join(parts))
        if resource == TTL_DISABLED:
            return self.reason(405, TOPIC_POLICIES_OFF)   # AdminResource.checkTopicLevelPolicyEnable
        return self.ttl_of(topic, applied)

    def _replicated_status(self, topic: Any, sub: str, parts: list[str]) -> Answer:
        version = self.version()
        if version < REPLICATED_STATUS_GET_SINCE:
            if version >= REPLICATED_STATUS_POST_SINCE:
                return self.not_allowed("POST")
            return jetty_page(404, "Not Found", "/" + "/".join(parts))
        ans = self.replicated_status_of(topic, sub)
        return self.reason(404, "Subscription not found") if ans is None else ans

    def _entry(self, topic: Any, ledger: str, entry: str) -> Answer:
        try:
            pos = (int(ledger), int(entry))
        except ValueError:
            return self.reason(400, "Invalid ledger or entry id")
        ans = self.entry_of(topic, pos)
        if self.version() < ENTRY_HEADERS_SINCE:   # only what generateResponseWithEntry sent before #11443
            kept = [(k, v) for k, v in ans.headers if k.lower() in _BEFORE_11443 or k.startswith("X-Pulsar-PROPERTY-")]
            ans = dataclasses.replace(ans, headers=kept)
        return ans

    def post(self, parts: list[str], body: bytes) -> Answer:
        """POST .../subscription/{sub}/resetcursor: PersistentTopicsBase.internalResetCursorOnPosition with
        batchIndex -1: seek to L:E, or to the entry after it when `excluded` (PositionImpl.getNext); 204."""
        if parts[:3] != ["admin", "v2", "persistent"] or len(parts) != 9 or parts[6] != "subscription" \
                or parts[8] != "resetcursor":
            return self.not_allowed("GET")
        topic = self.topic_of(parts[3], parts[4], parts[5])
        if topic is None:
            return self.reason(404, "Topic not found")
        cursor = self.cursor_of(topic, parts[7])
        if cursor is None:
            return self.reason(404, "Subscription not found")
        try:
            ledger_id, entry_id, excluded = reset_cursor_data(json.loads(body or b"{}"))
        except ValueError as e:   # JSONDecodeError is a ValueError
            return self.reason(400, f"Invalid ResetCursorData: {e}")
        self.reset(topic, cursor, (ledger_id, entry_id + 1) if excluded else (ledger_id, entry_id))
        return Answer(204, b"")

    # -- serving ---------------------------------------------------------------------------------------------
    def start(self) -> "AdminServer":
        self._server = _Server(self)
        # A short poll interval: shutdown() waits up to one interval.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name=self.name, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        return self

    def close(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
        self._server = None

    def __enter__(self) -> "AdminServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, admin: AdminServer):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.admin = admin


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"   # keep-alive, as a broker's Jetty does
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

    def version_string(self) -> str:
        return "Jetty(9.4.56.v20240826)"

    def log_message(self, format: str, *args) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._serve(b"")

    def do_POST(self) -> None:
        self._serve(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

    def _serve(self, body: bytes) -> None:
        admin = self.server.admin
        auth = self.headers.get("Authorization")
        admin._enter(self.command, self.path.partition("?")[0], body, self.headers)
        try:
            self._send(admin.answer(self.command, self.path, body, auth), auth)
        finally:
            admin._leave()

    def _not_allowed(self) -> None:
        self._send(self.server.admin.not_allowed("GET"), None)

    do_PUT = do_DELETE = do_PATCH = _not_allowed

    def _send(self, ans: Answer, auth: str | None) -> None:
        body = ans.body
        if ans.echo_auth:
            body += f"<pre>request header Authorization: {auth}</pre>".encode()
        try:
            self.send_response(ans.status)
            for name, value in ans.headers:
                self.send_header(name, value)
            if ans.content_type:
                self.send_header("Content-Type", ans.content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout)


# -- the lab ----------------------------------------------------------------------------------------------------
class LabAdmin(AdminServer):
    """One lab cluster's view of the world."""

    def __init__(self, world: World, cluster: str, token: str | None = None,
                 entry_errors: Mapping[tuple[int, int], int] | None = None):
        if cluster not in world.clusters:
            raise UnknownLabCluster(cluster, world.cluster_names)
        super().__init__(token, name=f"pulsar-lab-admin-{cluster}")
        self.world, self.cluster, self.entry_errors = world, cluster, dict(entry_errors or {})
        self.topics = {t.name: t for t in world.topics_of(cluster)}
        self.broker_version = world.config.broker_version_of(cluster).encode()

    def topics_of(self, tenant: str, ns: str, partitioned: bool) -> list[str] | None:
        prefix = f"persistent://{tenant}/{ns}/"
        if not any(n.startswith(prefix) for c in self.world.cluster_names for n in self.world.clusters[c].topics):
            return None
        return sorted(n for n in (self.world.partitioned if partitioned else self.topics) if n.startswith(prefix))

    def namespace_ttl_of(self, tenant: str, ns: str) -> Answer | None:
        if self.topics_of(tenant, ns, partitioned=False) is None:
            return None
        status, body = namespace_ttl_answer(self.version(), self.world.config.ttl_ms(f"{tenant}/{ns}") // 1000)
        return Answer(status, body)

    def partitions_of(self, tenant: str, ns: str, local: str) -> int:
        return self.world.partitioned.get(f"persistent://{tenant}/{ns}/{local}", 0)

    def topic_of(self, tenant: str, ns: str, local: str):
        return self.topics.get(f"persistent://{tenant}/{ns}/{local}")

    def internal_stats_of(self, topic) -> Answer:
        return Answer(200, jackson(stats_internal(topic)))

    def stats_of(self, topic) -> Answer:
        return Answer(200, jackson(topic_stats(topic, self.world.as_of_ms)))

    def ttl_of(self, topic, applied: bool) -> Answer:
        status, body = topic_ttl_value(topic.settings.message_ttl_ms // 1000, applied)
        return Answer(status, body)

    def replicated_status_of(self, topic, sub: str) -> Answer | None:
        if sub not in topic.subscriptions:
            return None
        return Answer(200, jackson(replicated_status(topic, sub)))

    def entry_of(self, topic, position: tuple[int, int]) -> Answer:
        if position in self.entry_errors:
            return self.reason(self.entry_errors[position], "Injected failure reading the entry")
        idx = topic.ml.floor_index(position)
        if idx < 0 or topic.ml.positions[idx] != position or not topic.ml.readable(idx):
            return self.reason(404, "Message not found")
        e = topic.ml.entries[idx]
        return Answer(200, e.payload, OCTET_STREAM, entry_headers(e))

    def cursor_of(self, topic, sub: str):
        subscription = topic.subscriptions.get(sub)
        return None if subscription is None else subscription.cursor

    def reset(self, topic, cursor, seek: tuple[int, int]) -> None:
        # a seek past a ledger's end moves to the next valid position (ManagedCursorImpl.asyncResetCursor)
        cursor.read_idx = bisect.bisect_left(topic.ml.positions, seek)
        cursor.mdp_idx = cursor.read_idx - 1
        cursor.acked.clear()


@contextlib.contextmanager
def serve_pulsar_admin(world: World, cluster_name: str, token: str | None = None,
                       entry_errors: Mapping[tuple[int, int], int] | None = None) -> Iterator[str]:
    """Yields the base URL (http://127.0.0.1:<port>); the server stops when the block ends."""
    with LabAdmin(world, cluster_name, token, entry_errors) as admin:
        yield admin.url


# -- recorded answers, scripted by tests --------------------------------------------------------------------
def _spaced(doc: Any) -> bytes:
    return json.dumps(doc).encode()


def reason(status: int, text: str) -> Answer:
    """An error answer as ScriptedAdmin spells it (json.dumps: `{"reason": "..."}`)."""
    return Answer(status, _spaced({"reason": text}))


def html(status: int, title: str) -> Answer:
    return Answer(status, f"<html><head><title>{title}</title></head><body><h1>{title}</h1></body></html>"
                  .encode(), "text/html; charset=utf-8")


TOPIC_NOT_FOUND = reason(404, "Topic not found")
MESSAGE_NOT_FOUND = reason(404, "Message not found")


def entry_answer(ledger: int, entry_id: int, body: bytes, *, producer: str = "orders-producer",
                 sequence_id: int = 0, publish_ms: int = 1_700_000_000_000, replicated_from: str | None = None,
                 replicate_to: tuple[str, ...] = (), marker_type: int | None = None,
                 properties: dict[str, str] | None = None) -> Answer:
    """A recorded entry answer: X-Pulsar-Message-ID, -publish-time, -producer-name, -sequence-id,
    -replicated-from, one X-Pulsar-replicated-to line per cluster, -marker-type, one X-Pulsar-PROPERTY-<key>
    per property (the headers the tests pin, in their order; the lab's are payloads.entry_headers)."""
    headers = [("X-Pulsar-Message-ID", f"{ledger}:{entry_id}"), ("X-Pulsar-publish-time", format_time_ms(publish_ms)),
               ("X-Pulsar-producer-name", producer), ("X-Pulsar-sequence-id", str(sequence_id))]
    if replicated_from is not None:
        headers.append(("X-Pulsar-replicated-from", replicated_from))
    headers += [("X-Pulsar-replicated-to", c) for c in replicate_to]
    if marker_type is not None:
        headers.append(("X-Pulsar-marker-type", str(marker_type)))
    headers += [(f"X-Pulsar-PROPERTY-{k}", v) for k, v in (properties or {}).items()]
    return Answer(200, body, OCTET_STREAM, headers)


def plain_entry(ledger: int, entry_id: int) -> Answer:
    """What any position without a scripted answer holds: a local data message."""
    return entry_answer(ledger, entry_id, f"payload {ledger}:{entry_id}".encode(), sequence_id=ledger * 1000 + entry_id)


@dataclass
class ScriptedTopic:
    stats_internal: Answer
    stats: Answer
    replicated_status: dict[str, Answer] = field(default_factory=dict)
    entries: dict[tuple[int, int], Answer] = field(default_factory=dict)
    deleted_ledgers: set[int] = field(default_factory=set)
    partitions: int = 0
    message_ttl: Answer = field(default_factory=lambda: Answer(200, b"0"))   # GET .../messageTTL?applied=true

    def cursors(self) -> tuple[dict, dict]:
        """The served stats-internal, parsed, and its `cursors` object (edited in place by the repair calls)."""
        doc = json.loads(self.stats_internal.body)
        return doc, doc.setdefault("cursors", {})

    def serve(self, doc: dict) -> None:
        self.stats_internal = Answer(200, json.dumps(doc, indent=2).encode())

    def previous(self, doc: dict, ledger: int, entry_id: int) -> tuple[int, int]:
        """ManagedLedgerImpl.getPreviousPosition of L:E: L:E-1, or for E = 0 the last entry of the nearest earlier
        non-empty ledger (L:-1 when there is none)."""
        if entry_id > 0:
            return ledger, entry_id - 1
        for item in reversed([lg for lg in doc.get("ledgers", []) if lg["ledgerId"] < ledger]):
            if item["entries"] > 0:
                return item["ledgerId"], item["entries"] - 1
        return ledger, -1

    def entry(self, ledger: int, entry_id: int) -> Answer:
        if ledger in self.deleted_ledgers:
            return MESSAGE_NOT_FOUND
        return self.entries.get((ledger, entry_id)) or plain_entry(ledger, entry_id)


class ScriptedAdmin(AdminServer):
    """Recorded answers per topic ("t/ns/local" -> ScriptedTopic) and namespace ("t/ns"), with the scripting
    of the module docstring. Serves from construction until close(). Its JSON is json.dumps' (`{"reason": "..."}`)."""

    dumps = staticmethod(_spaced)

    def __init__(self, token: str | None = None):
        super().__init__(token, name="pulsar-scripted-admin")
        self.broker_version = b"3.0.12"
        self.namespaces: dict[str, list[str]] = {}  # "t/ns" -> persistent topic list
        self.partitioned: dict[str, list[str]] = {}  # "t/ns" -> partitioned parents
        self.namespace_ttl: dict[str, Answer] = {}  # "t/ns" -> GET /admin/v2/namespaces/{t}/{ns}/messageTTL
        self.topics: dict[str, ScriptedTopic] = {}  # "t/ns/local" -> topic
        self.requests: list[str] = []
        self.posts: list[dict] = []   # {"path", "body" (bytes), "authorization", "content_type"} of every POST
        self.unauthorized: list[str] = []
        self.max_in_flight = 0
        self.release = threading.Event()
        self._scripts: list[tuple[re.Pattern, list[Answer]]] = []
        self._slow: list[re.Pattern] = []
        self._hold = 0
        self._in_flight = 0
        self._cond = threading.Condition()
        self.start()

    # -- scripting ---------------------------------------------------------------------------------------------
    def add_topic(self, name: str, topic: ScriptedTopic) -> ScriptedTopic:
        self.topics[name.removeprefix("persistent://")] = topic
        return topic

    def script(self, pattern: str, answers: list[Answer]) -> None:
        with self._cond:
            self._scripts.append((re.compile(pattern), list(answers)))

    def slow(self, pattern: str) -> None:
        self._slow.append(re.compile(pattern))

    def hold_first_wave(self, n: int) -> None:
        self._hold = n

    def acknowledge(self, topic_name: str, sub: str, positions: list[tuple[int, int]]) -> None:
        """Individual acks as the cursor records them: each position joins individuallyDeletedMessages (default
        spelling, ranges within a ledger) and the markDeletePosition moves over an acked run right after it."""
        with self.lock:
            topic = self.topics[topic_name.removeprefix("persistent://")]
            doc, cursors = topic.cursors()
            cursor = cursors[sub]
            acked = parse_individually_deleted(cursor.get("individuallyDeletedMessages", "[]"), "fake")
            acked = acked.union(AckRanges((Position(lid, e - 1), Position(lid, e)) for lid, e in positions))
            mdp = Position(*map(int, cursor["markDeletePosition"].split(":")))
            while Position(mdp.ledger_id, mdp.entry_id + 1) in acked:
                mdp = Position(mdp.ledger_id, mdp.entry_id + 1)
            kept = [(max(lo, mdp), hi) for lo, hi in acked if hi > mdp]
            cursor["markDeletePosition"] = str(mdp)
            cursor["individuallyDeletedMessages"] = AckRanges(kept).to_string()
            topic.serve(doc)

    def paths(self, pattern: str) -> list[str]:
        return [p for p in self.requests if re.search(pattern, p)]

    def close(self) -> None:
        self.release.set()
        with self._cond:
            self._hold = 0
            self._cond.notify_all()
        super().close()

    # -- what it holds -------------------------------------------------------------------------------------------
    def topics_of(self, tenant: str, ns: str, partitioned: bool) -> list[str] | None:
        return (self.partitioned if partitioned else self.namespaces).get(f"{tenant}/{ns}")

    def namespace_ttl_of(self, tenant: str, ns: str) -> Answer | None:
        return self.namespace_ttl.get(f"{tenant}/{ns}")

    def partitions_of(self, tenant: str, ns: str, local: str) -> int | None:
        topic = self.topic_of(tenant, ns, local)
        return None if topic is None else topic.partitions

    def topic_of(self, tenant: str, ns: str, local: str) -> ScriptedTopic | None:
        return self.topics.get(f"{tenant}/{ns}/{local}")

    def internal_stats_of(self, topic: ScriptedTopic) -> Answer:
        return topic.stats_internal

    def stats_of(self, topic: ScriptedTopic) -> Answer:
        return topic.stats

    def ttl_of(self, topic: ScriptedTopic, applied: bool) -> Answer:
        return topic.message_ttl

    def replicated_status_of(self, topic: ScriptedTopic, sub: str) -> Answer | None:
        return topic.replicated_status.get(sub)

    def entry_of(self, topic: ScriptedTopic, position: tuple[int, int]) -> Answer:
        return topic.entry(*position)

    def cursor_of(self, topic: ScriptedTopic, sub: str) -> tuple[dict, dict] | None:
        doc, cursors = topic.cursors()
        return None if sub not in cursors else (doc, cursors[sub])

    def reset(self, topic: ScriptedTopic, cursor: tuple[dict, dict], seek: tuple[int, int]) -> None:
        doc, fields = cursor
        fields["markDeletePosition"] = "%d:%d" % topic.previous(doc, *seek)
        fields["readPosition"] = "%d:%d" % seek
        fields["individuallyDeletedMessages"] = "[]"
        topic.serve(doc)

    # -- the test hooks ------------------------------------------------------------------------------------------
    def _enter(self, method: str, path: str, body: bytes, headers: Mapping[str, str]) -> None:
        with self._cond:
            self.requests.append(path)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            if method == "POST":
                self.posts.append({"path": path, "body": body, "authorization": headers.get("Authorization"),
                                   "content_type": headers.get("Content-Type")})
            self._cond.notify_all()
            if self._hold and "/ledger/" in path:
                if self._cond.wait_for(lambda: self._in_flight >= self._hold or not self._hold, timeout=5):
                    self._hold = 0  # first wave seen at full width: later requests pass freely

    def _leave(self) -> None:
        with self._cond:
            self._in_flight -= 1

    def _scripted(self, path: str) -> Answer | None:
        with self._cond:
            for pattern, answers in self._scripts:
                if answers and pattern.search(path):
                    return answers.pop(0)
        return None

    def _delay(self, path: str) -> None:
        if any(p.search(path) for p in self._slow):
            self.release.wait(10)

    def _refused(self, path: str) -> Answer:
        self.unauthorized.append(path)
        return reason(401, "HTTP 401 Unauthorized")
