"""A fake Pulsar admin REST API on loopback (a real ThreadingHTTPServer), serving recorded response shapes.

Bodies of stats-internal and stats come from the real outputs in tests/fixtures/real (or shapes built
the same way); per-entry answers carry the headers a broker sends for GET .../ledger/{L}/entry/{E}
(PersistentTopicsBase.generateResponseWithEntry): X-Pulsar-Message-ID, -producer-name, -sequence-id,
-publish-time, -replicated-from, one X-Pulsar-replicated-to line per cluster, -marker-type and one
X-Pulsar-PROPERTY-<key> per property.

Scriptable per path (regular expressions matched against the request path):
- `script(pattern, answers)`: the next len(answers) matching requests get these answers, in order;
- `slow(pattern)`: matching requests wait on an Event (set at close) and so outlive the client's timeout;
- `hold_first_wave(n)`: entry requests wait until n are in flight at once (proves the client's concurrency);
- a token: requests without `Authorization: Bearer <token>` get 401.
It records every request path and the most requests it ever had in flight.

One POST, for the repair tests: `.../subscription/{sub}/resetcursor` moves the cursor its internalStats serves,
the body read as the broker's Jackson reads ResetCursorData (unknown keys ignored, `excluded` honoured; see
lab/pulsar/admin_server.py). Every POST is recorded in `posts` (path, body, Authorization header), and
`acknowledge(topic, sub, positions)` applies individual acks to a served cursor (the WebSocket fake's side).
"""
from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

from audit.systems.pulsar.formats.timefmt import format_time_ms

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
OCTET = "application/octet-stream"
JSON = "application/json"
_TOPIC = re.compile(r"^/admin/v2/persistent/([^/]+)/([^/]+)/([^/]+)(/.*)?$")
_NAMESPACE = re.compile(r"^/admin/v2/persistent/([^/]+)/([^/]+)(/partitioned)?$")
_NAMESPACE_TTL = re.compile(r"^/admin/v2/namespaces/([^/]+)/([^/]+)/messageTTL$")
_ENTRY = re.compile(r"^/ledger/(\d+)/entry/(\d+)$")


def real_body(name: str) -> bytes:
    """A fixture's bytes; for the .txt captures, the first JSON object in them exactly as printed."""
    data = (REAL / name).read_bytes()
    if name.endswith(".json"):
        return data
    text = data.decode()
    start = text.index("{")
    _, end = json.JSONDecoder().raw_decode(text, start)
    return text[start:end].encode()


@dataclass
class Answer:
    status: int = 200
    body: bytes = b""
    content_type: str | None = JSON
    headers: list[tuple[str, str]] = field(default_factory=list)
    echo_auth: bool = False  # put the request's Authorization header into the body (a leaky proxy page)


def reason(status: int, text: str) -> Answer:
    return Answer(status, json.dumps({"reason": text}).encode())


def html(status: int, title: str) -> Answer:
    return Answer(status, f"<html><head><title>{title}</title></head><body><h1>{title}</h1></body></html>"
                  .encode(), "text/html; charset=utf-8")


TOPIC_NOT_FOUND = reason(404, "Topic not found")
MESSAGE_NOT_FOUND = reason(404, "Message not found")


def entry(ledger: int, entry_id: int, body: bytes, *, producer: str = "orders-producer", sequence_id: int = 0,
          publish_ms: int = 1_700_000_000_000, replicated_from: str | None = None,
          replicate_to: tuple[str, ...] = (), marker_type: int | None = None,
          properties: dict[str, str] | None = None) -> Answer:
    headers = [("X-Pulsar-Message-ID", f"{ledger}:{entry_id}"), ("X-Pulsar-publish-time", format_time_ms(publish_ms)),
               ("X-Pulsar-producer-name", producer), ("X-Pulsar-sequence-id", str(sequence_id))]
    if replicated_from is not None:
        headers.append(("X-Pulsar-replicated-from", replicated_from))
    headers += [("X-Pulsar-replicated-to", c) for c in replicate_to]
    if marker_type is not None:
        headers.append(("X-Pulsar-marker-type", str(marker_type)))
    headers += [(f"X-Pulsar-PROPERTY-{k}", v) for k, v in (properties or {}).items()]
    return Answer(200, body, OCTET, headers)


def plain_entry(ledger: int, entry_id: int) -> Answer:
    """What any position without a scripted answer holds: a local data message."""
    return entry(ledger, entry_id, f"payload {ledger}:{entry_id}".encode(), sequence_id=ledger * 1000 + entry_id)


@dataclass
class FakeTopic:
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


class FakePulsarAdmin:
    def __init__(self, token: str | None = None):
        self.token = token
        self.broker_version = b"3.0.12"   # BrokersBase#version: bare text under a JSON Content-Type
        self.namespaces: dict[str, list[str]] = {}  # "t/ns" -> persistent topic list
        self.partitioned: dict[str, list[str]] = {}  # "t/ns" -> partitioned parents
        self.namespace_ttl: dict[str, Answer] = {}  # "t/ns" -> GET /admin/v2/namespaces/{t}/{ns}/messageTTL
        self.topics: dict[str, FakeTopic] = {}  # "t/ns/local" -> topic
        self.requests: list[str] = []
        self.posts: list[dict] = []   # {"path", "body" (bytes), "authorization"} of every POST
        self.unauthorized: list[str] = []
        self.max_in_flight = 0
        self.release = threading.Event()
        self._scripts: list[tuple[re.Pattern, list[Answer]]] = []
        self._slow: list[re.Pattern] = []
        self._hold = 0
        self._in_flight = 0
        self._cond = threading.Condition()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        # A short poll interval: shutdown() waits up to one interval.
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    # -- scripting --------------------------------------------------------------------------
    def add_topic(self, name: str, topic: FakeTopic) -> FakeTopic:
        self.topics[name.removeprefix("persistent://")] = topic
        return topic

    def script(self, pattern: str, answers: list[Answer]) -> None:
        with self._cond:
            self._scripts.append((re.compile(pattern), list(answers)))

    def slow(self, pattern: str) -> None:
        self._slow.append(re.compile(pattern))

    def hold_first_wave(self, n: int) -> None:
        self._hold = n

    def reset_cursor(self, path: str, body: bytes) -> Answer:
        """PersistentTopicsBase.internalResetCursorOnPosition (batchIndex -1): seek to L:E, or to the entry after it
        when `excluded`; the markDeletePosition becomes the entry before the seek position, the individually
        deleted ranges are cleared; 204 No Content."""
        from lab.pulsar.admin_server import reset_cursor_data

        m = _TOPIC.match(path)
        sub = re.fullmatch(r"/subscription/([^/]+)/resetcursor", (m[4] or "") if m else "")
        topic = self.topics.get("/".join(unquote(g) for g in m.group(1, 2, 3))) if m else None
        if sub is None:
            return reason(405, "Method Not Allowed")
        if topic is None:
            return TOPIC_NOT_FOUND
        try:
            ledger, entry_id, excluded = reset_cursor_data(json.loads(body or b"{}"))
        except ValueError as e:
            return reason(400, f"Invalid ResetCursorData: {e}")
        with self._cond:
            doc, cursors = topic.cursors()
            cursor = cursors.get(unquote(sub[1]))
            if cursor is None:
                return reason(404, "Subscription not found")
            seek = (ledger, entry_id + 1) if excluded else (ledger, entry_id)
            cursor["markDeletePosition"] = "%d:%d" % topic.previous(doc, *seek)
            cursor["readPosition"] = "%d:%d" % seek
            cursor["individuallyDeletedMessages"] = "[]"
            topic.serve(doc)
        return Answer(204, b"", None)

    def acknowledge(self, topic_name: str, sub: str, positions: list[tuple[int, int]]) -> None:
        """Individual acks as the cursor records them: each position joins individuallyDeletedMessages (default
        spelling, ranges within a ledger) and the markDeletePosition moves over an acked run right after it."""
        from audit.systems.pulsar.domain.positions import Position
        from audit.systems.pulsar.domain.rangeset import AckRanges, parse_individually_deleted

        with self._cond:
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
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    # -- answering --------------------------------------------------------------------------
    def _scripted(self, path: str) -> Answer | None:
        with self._cond:
            for pattern, answers in self._scripts:
                if answers and pattern.search(path):
                    return answers.pop(0)
        return None

    def answer(self, path: str) -> Answer:
        scripted = self._scripted(path)
        if scripted is not None:
            return scripted
        if path == "/admin/v2/brokers/version":
            return Answer(200, self.broker_version)
        m = _NAMESPACE_TTL.match(path)
        if m:
            return self.namespace_ttl.get(f"{unquote(m[1])}/{unquote(m[2])}", reason(404, "Namespace does not exist"))
        m = _NAMESPACE.match(path)
        if m:
            ns = f"{unquote(m[1])}/{unquote(m[2])}"
            table = self.partitioned if m[3] else self.namespaces
            return Answer(200, json.dumps(table[ns]).encode()) if ns in table else reason(404, "Namespace does not exist")
        m = _TOPIC.match(path)
        topic = self.topics.get("/".join(unquote(g) for g in m.group(1, 2, 3))) if m else None
        if topic is None:
            return TOPIC_NOT_FOUND
        rest = m[4] or ""
        if rest == "/partitions":
            return Answer(200, json.dumps({"partitions": topic.partitions}).encode())
        if rest == "/internalStats":
            return topic.stats_internal
        if rest == "/stats":
            return topic.stats
        if rest == "/messageTTL":
            return topic.message_ttl
        sub = re.fullmatch(r"/subscription/([^/]+)/replicatedSubscriptionStatus", rest)
        if sub:
            return topic.replicated_status.get(unquote(sub[1]), reason(404, "Subscription not found"))
        e = _ENTRY.match(rest)
        if e:
            return topic.entry(int(e[1]), int(e[2]))
        return reason(404, "Not found")

    def _enter(self, path: str) -> None:
        with self._cond:
            self.requests.append(path)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            self._cond.notify_all()
            if self._hold and "/ledger/" in path:
                if self._cond.wait_for(lambda: self._in_flight >= self._hold or not self._hold, timeout=5):
                    self._hold = 0  # first wave seen at full width: later requests pass freely

    def _leave(self) -> None:
        with self._cond:
            self._in_flight -= 1

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a broker's Jetty does
            disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

            def do_GET(self):
                path = self.path.split("?")[0]
                fake._enter(path)
                try:
                    auth = self.headers.get("Authorization")
                    if fake.token is not None and auth != f"Bearer {fake.token}":
                        fake.unauthorized.append(path)
                        ans = reason(401, "HTTP 401 Unauthorized")
                    else:
                        ans = fake.answer(path)
                    if any(p.search(path) for p in fake._slow):
                        fake.release.wait(10)
                    self._send(ans, auth)
                finally:
                    fake._leave()

            def do_POST(self):
                path = self.path.split("?")[0]
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                fake._enter(path)
                try:
                    auth = self.headers.get("Authorization")
                    with fake._cond:
                        fake.posts.append({"path": path, "body": body, "authorization": auth,
                                           "content_type": self.headers.get("Content-Type")})
                    if fake.token is not None and auth != f"Bearer {fake.token}":
                        fake.unauthorized.append(path)
                        ans = reason(401, "HTTP 401 Unauthorized")
                    else:
                        ans = fake._scripted(path) or fake.reset_cursor(path, body)
                    self._send(ans, auth)
                finally:
                    fake._leave()

            def _send(self, ans: Answer, auth: str | None):
                body = ans.body
                if ans.echo_auth:
                    body += f"<pre>request header Authorization: {auth}</pre>".encode()
                try:
                    self.send_response(ans.status)
                    if ans.content_type:
                        self.send_header("Content-Type", ans.content_type)
                    for name, value in ans.headers:
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def log_message(self, *args):
                pass

        return Handler


# -- recorded shapes for the tests ----------------------------------------------------------------------
# stats-internal of a geo-replicated topic on cluster "east" (replicating to and from "west"), printed the way
# the broker's Jackson pretty printer does (" : " separators, fields in the broker's order). Ledger 10 is closed
# with 5 entries; 12 is open (entries 0 in the list, currentLedgerEntries 4, lastConfirmedEntry 12:3).
# Window: replicated subscription orders-sub at 10:1 < replicator pulsar.repl.west at 10:2; local-sub (not
# replicated) at 10:0 does not bound it. So the dump covers 10:2..10:4 and 12:0..12:3.
ORDERS_STATS_INTERNAL = b'''{
  "entriesAddedCounter" : 9,
  "numberOfEntries" : 9,
  "totalSize" : 441,
  "currentLedgerEntries" : 4,
  "currentLedgerSize" : 196,
  "lastLedgerCreatedTimestamp" : "2025-01-31T09:37:46.472Z",
  "waitingCursorsCount" : 1,
  "pendingAddEntriesCount" : 0,
  "lastConfirmedEntry" : "12:3",
  "state" : "LedgerOpened",
  "ledgers" : [ {
    "ledgerId" : 10,
    "entries" : 5,
    "size" : 245,
    "offloaded" : false,
    "underReplicated" : false
  }, {
    "ledgerId" : 12,
    "entries" : 0,
    "size" : 0,
    "offloaded" : false,
    "underReplicated" : false
  } ],
  "cursors" : {
    "local-sub" : {
      "markDeletePosition" : "10:0",
      "readPosition" : "10:1",
      "waitingReadOp" : false,
      "pendingReadOps" : 0,
      "messagesConsumedCounter" : 1,
      "cursorLedger" : 14,
      "cursorLedgerLastEntry" : 2,
      "individuallyDeletedMessages" : "[]",
      "lastLedgerSwitchTimestamp" : "2025-01-31T09:37:46.34Z",
      "state" : "Open",
      "active" : true,
      "numberOfEntriesSinceFirstNotAckedMessage" : 1,
      "totalNonContiguousDeletedMessagesRange" : 0,
      "subscriptionHavePendingRead" : false,
      "subscriptionHavePendingReplayRead" : false,
      "properties" : { }
    },
    "orders-sub" : {
      "markDeletePosition" : "10:1",
      "readPosition" : "10:4",
      "waitingReadOp" : false,
      "pendingReadOps" : 0,
      "messagesConsumedCounter" : 4,
      "cursorLedger" : 15,
      "cursorLedgerLastEntry" : 3,
      "individuallyDeletedMessages" : "[(10:2..10:3]]",
      "lastLedgerSwitchTimestamp" : "2025-01-31T09:37:46.34Z",
      "state" : "Open",
      "active" : true,
      "numberOfEntriesSinceFirstNotAckedMessage" : 3,
      "totalNonContiguousDeletedMessagesRange" : 1,
      "subscriptionHavePendingRead" : false,
      "subscriptionHavePendingReplayRead" : false,
      "properties" : {
        "pulsar.replicated.subscription" : 1
      }
    },
    "pulsar.repl.west" : {
      "markDeletePosition" : "10:2",
      "readPosition" : "12:4",
      "waitingReadOp" : true,
      "pendingReadOps" : 0,
      "messagesConsumedCounter" : 7,
      "cursorLedger" : 16,
      "cursorLedgerLastEntry" : 5,
      "individuallyDeletedMessages" : "[]",
      "lastLedgerSwitchTimestamp" : "2025-01-31T09:37:46.34Z",
      "state" : "Open",
      "active" : true,
      "numberOfEntriesSinceFirstNotAckedMessage" : 1,
      "totalNonContiguousDeletedMessagesRange" : 0,
      "subscriptionHavePendingRead" : false,
      "subscriptionHavePendingReplayRead" : false,
      "properties" : { }
    }
  }
}'''
ORDERS_WINDOW = [(10, 2), (10, 3), (10, 4), (12, 0), (12, 1), (12, 2), (12, 3)]


def orders_stats() -> bytes:
    """The real stats of sample -07 with the subscriptions a replicated topic shows (isReplicated)."""
    doc = json.loads(real_body("pulsar-stats-replication-07.json"))
    doc["subscriptions"] = {
        "local-sub": {"msgBacklog": 3, "type": "Shared", "isReplicated": False, "isDurable": True},
        "orders-sub": {"msgBacklog": 5, "type": "Failover", "isReplicated": True, "isDurable": True},
        "audit/sub 1": {"msgBacklog": 0, "type": "Exclusive", "isReplicated": True, "isDurable": True}}
    return json.dumps(doc, indent=2).encode()


def orders_topic(local: str = "orders") -> FakeTopic:
    """The replicated topic above, with the entries a PIP-33 exchange leaves in it."""
    from audit.systems.pulsar.formats.markers import encode_snapshot_request, encode_snapshot_response

    topic = FakeTopic(Answer(200, ORDERS_STATS_INTERNAL), Answer(200, orders_stats()))
    topic.replicated_status = {"orders-sub": Answer(200, f'{{"persistent://acme/orders/{local}":true}}'.encode()),
                               "audit/sub 1": Answer(200, f'{{"persistent://acme/orders/{local}":false}}'.encode())}
    topic.entries = {
        (10, 2): entry(10, 2, b"\x00\xffreplicated", producer="west-producer", sequence_id=41,
                       replicated_from="west", properties={"__MSG_PROP_REPL_SOURCE_POSITION": "5:7"}),
        (10, 3): entry(10, 3, encode_snapshot_request("snap-1", "east"), producer="pulsar.marker", marker_type=10),
        (10, 4): entry(10, 4, b"local order 4", sequence_id=4, replicate_to=("west", "north")),
        (12, 0): entry(12, 0, encode_snapshot_response("snap-9", "east", 12, 0), producer="pulsar.marker",
                       marker_type=11, replicate_to=("west",)),
    }
    return topic


def standard_estate(fake: FakePulsarAdmin) -> None:
    """acme/orders: `orders` (replicated, above), `payments` (partitioned in 2, sample -08 stats-internal per
    partition, only partition 0 in the namespace list), and `audit-log` listed by name only in the estate."""
    fake.namespaces["acme/orders"] = ["persistent://acme/orders/orders", "persistent://acme/orders/payments-partition-0"]
    fake.partitioned["acme/orders"] = ["persistent://acme/orders/payments"]
    fake.add_topic("acme/orders/orders", orders_topic())
    fake.add_topic("acme/orders/payments", FakeTopic(reason(404, "Topic not found"), reason(404, "Topic not found"),
                                                     partitions=2))
    for i in range(2):
        fake.add_topic(f"acme/orders/payments-partition-{i}",
                       FakeTopic(Answer(200, real_body("pulsar-stats-internal-08.txt")),
                                 Answer(200, real_body("pulsar-stats-replication-07.json"))))
