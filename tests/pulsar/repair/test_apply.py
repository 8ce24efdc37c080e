"""The approved Pulsar repair calls (audit/systems/pulsar/repair/apply.py) against loopback servers: the admin REST fake
(lab/pulsar/admin_server.py ScriptedAdmin), whose resetcursor moves the cursor it serves, and a real `websockets`
server standing in for the broker's WebSocket consumer endpoint, which decodes every ack frame on its own (wire
format of MessageIdData) and applies it to the fake's cursor. Actions run as the shared runner runs them:
check, run, verify."""
from __future__ import annotations

import base64
import json
import threading
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from websockets.sync.server import serve

from audit import systems
from audit.config.model import SecretRef
from audit.systems.pulsar.config import PulsarCluster
from audit.config.secrets import SecretResolver
from audit.systems.pulsar.repair.apply import actions, encode_message_id, websocket_base
from audit.repair.common import RepairInputError
from audit.systems.pulsar.repair.plan import plan_subscription_repairs
from lab.pulsar.admin_server import ScriptedAdmin
from tests.pulsar.collect.recorded import orders_topic
from tests.pulsar.repair.test_repair_plan import row

TOPIC = "persistent://acme/orders/orders"
SUB = "orders-sub"           # in the fake: markDeletePosition 10:1, individually deleted (10:2..10:3]
TOKEN = "tok-3b1f-SECRET"
RESET_PATH = "/admin/v2/persistent/acme/orders/orders/subscription/orders-sub/resetcursor"


def _varint(data: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = data[i]
        value |= (b & 0x7F) << shift
        i, shift = i + 1, shift + 7
        if not b & 0x80:
            return value, i


def decode_message_id(b64: str) -> dict[int, int]:
    """Field number -> value of a MessageIdData, read from the protobuf wire (varint fields only)."""
    data, i, out = base64.b64decode(b64), 0, {}
    while i < len(data):
        key, i = _varint(data, i)
        assert key & 7 == 0, "MessageIdData's ack fields are varints"
        out[key >> 3], i = _varint(data, i)
    return out


class FakeWebSocketConsumer:
    """/ws/v2/consumer/persistent/{t}/{ns}/{topic}/{sub}: records the handshake and every frame, and acks each
    decoded position on the admin fake's cursor (what the broker's consumer does)."""

    def __init__(self, admin: ScriptedAdmin, token: str | None = None):
        self.admin, self.token = admin, token
        self.sessions: list[dict] = []
        self.frames: list[str] = []
        self.acks: list[dict[int, int]] = []
        self.done = threading.Event()    # a session ended: every frame of it is applied
        self.server = serve(self._handle, "127.0.0.1", 0, process_request=self._authorize, compression=None)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"ws://127.0.0.1:{self.server.socket.getsockname()[1]}"

    def _authorize(self, connection, request):
        auth = request.headers.get("Authorization")
        self.sessions.append({"path": request.path, "authorization": auth})
        if self.token is not None and auth != f"Bearer {self.token}":
            return connection.respond(401, "Unauthorized\n")
        return None

    def _handle(self, connection) -> None:
        parts = urlsplit(connection.request.path).path.split("/")
        assert parts[:5] == ["", "ws", "v2", "consumer", "persistent"] and len(parts) == 9
        topic, sub = f"persistent://{unquote(parts[5])}/{unquote(parts[6])}/{unquote(parts[7])}", unquote(parts[8])
        try:
            for frame in connection:
                self.frames.append(frame)
                fields = decode_message_id(json.loads(frame)["messageId"])
                self.acks.append(fields)
                self.admin.acknowledge(topic, sub, [(fields[1], fields[2])])
        finally:
            self.done.set()

    def wait(self, _delay_s: float) -> None:
        """The verify's pause between reads: here, until the session's acks are applied (as a broker applies
        them after the close, asynchronously)."""
        assert self.done.wait(5), "the WebSocket session did not end"

    def close(self) -> None:
        self.server.shutdown()
        self.thread.join(5)


@pytest.fixture
def admin():
    fake = ScriptedAdmin()
    fake.add_topic(TOPIC, orders_topic())
    yield fake
    fake.close()


@pytest.fixture
def ws(admin):
    server = FakeWebSocketConsumer(admin)
    yield server
    server.close()


def _plan(target_mdp: str, exact: str, acks=(), count=None, admin_url: str | None = None) -> dict:
    (plan,) = plan_subscription_repairs(
        [row(topic=TOPIC, sub=SUB, source="west", target="east", target_mdp=target_mdp, exact=exact, acks=acks,
             count=count, redelivered=1)], cluster_admin_urls={"east": admin_url} if admin_url else None)
    return plan


def _cluster(url: str, **kw) -> PulsarCluster:
    return PulsarCluster(name="east", source="admin", admin_url=url, namespaces=("acme/orders",), **kw)


def _cursor(admin: ScriptedAdmin) -> dict:
    return json.loads(admin.topics["acme/orders/orders"].stats_internal.body)["cursors"][SUB]


def _apply(steps) -> list[tuple]:
    """What the shared runner does: check, stop at the first that does not hold, else run and verify."""
    seen = []
    for a in steps:
        pre = a.check()
        assert pre.holds, (a.name, pre)
        result = a.run()
        post = a.verify()
        seen.append((pre, result, post))
        assert post.holds, (a.name, post)
    return seen


def test_a_cursor_still_where_the_audit_saw_it_is_reset_with_the_plans_exact_body(admin):
    plan = _plan("10:1", "10:3")                         # no admin URL in the plan: the placeholder
    assert plan["steps"][0]["http"]["url"].startswith("<admin url of east>/")
    (reset,) = actions(plan, _cluster(admin.url), SecretResolver(environ={}))
    assert reset.name == "reset_cursor"
    assert reset.request == {"method": "POST", "url": admin.url + RESET_PATH,
                             "body": plan["steps"][0]["http"]["body"],
                             "headers": {"Content-Type": "application/json"}}
    (pre, result, post), = _apply([reset])
    assert pre.observed == {"mark_delete_position": "10:1", "individually_deleted": "[(10:2..10:3]]"}
    assert result == {"status": 204, "url": admin.url + RESET_PATH}
    (sent,) = admin.posts
    assert sent["path"] == RESET_PATH and sent["content_type"] == "application/json"
    assert json.loads(sent["body"]) == {"ledgerId": 10, "entryId": 3, "batchIndex": -1, "partitionIndex": -1,
                                        "excluded": True}
    assert post.observed == {"mark_delete_position": "10:3", "individually_deleted": "[]"}
    assert _cursor(admin)["markDeletePosition"] == "10:3"


def test_a_reset_to_L_minus_1_is_verified_as_the_broker_places_it(admin):
    (reset,) = actions(_plan("10:1", "12:-1"), _cluster(admin.url), SecretResolver(environ={}))
    (_, _, post), = _apply([reset])
    # seek to 12:0; the broker stores the entry before it: the last entry of ledger 10 (5 entries)
    assert post.observed["mark_delete_position"] == "10:4"


def test_a_cursor_that_moved_since_the_audit_does_not_hold(admin):
    (reset,) = actions(_plan("10:0", "10:3"), _cluster(admin.url), SecretResolver(environ={}))
    pre = reset.check()
    assert not pre.holds
    assert pre.observed["mark_delete_position"] == "10:1" and pre.expected == {"mark_delete_position": "10:0"}
    assert admin.posts == []


def test_a_missing_subscription_does_not_hold(admin):
    plan = _plan("10:1", "10:3")
    doc = json.loads(admin.topics["acme/orders/orders"].stats_internal.body)
    del doc["cursors"][SUB]
    admin.topics["acme/orders/orders"].serve(doc)
    (reset,) = actions(plan, _cluster(admin.url), SecretResolver(environ={}))
    pre = reset.check()
    assert not pre.holds and pre.observed["subscription"] is None and SUB not in pre.observed["cursors"]


def test_acks_after_the_reset_reach_the_consumer_endpoint_exactly(admin, ws):
    plan = _plan("10:1", "10:1", acks=("10:3", "12:1"), admin_url=admin.url)
    reset, ack = actions(plan, _cluster(admin.url), SecretResolver(environ={}), websocket_url=ws.url,
                         sleep=ws.wait)
    assert ack.name == "acknowledge_individually" and ack.after_previous
    assert ack.request["positions"] == ["10:3", "12:1"] and ack.request["method"] == "WEBSOCKET"
    (_, _, _), (pre, result, post) = _apply([reset, ack])
    assert pre.observed["mark_delete_position"] == "10:1" and pre.observed["individually_deleted"] == "[]"
    # exactly these positions, whole entries: MessageIdData fields ledgerId (1) and entryId (2), nothing else
    assert ws.acks == [{1: 10, 2: 3}, {1: 12, 2: 1}]
    assert [json.loads(f) for f in ws.frames] == [{"messageId": encode_message_id(10, 3)},
                                                  {"messageId": encode_message_id(12, 1)}]
    (session,) = ws.sessions
    path = urlsplit(session["path"])
    assert path.path == "/ws/v2/consumer/persistent/acme/orders/orders/orders-sub"
    assert parse_qs(path.query) == {"subscriptionType": ["Shared"], "receiverQueueSize": ["0"],
                                    "pullMode": ["true"]}
    assert result["frames_sent"] == 2
    assert post.observed["individually_deleted"] == "[(10:2..10:3],(12:0..12:1]]"
    assert post.observed["not_acknowledged"] == 0


def test_acks_the_cursor_does_not_show_fail_the_verify(admin):
    plan = _plan("10:1", "10:1", acks=("10:3",), admin_url=admin.url)
    waits = []
    _, ack = actions(plan, _cluster(admin.url), SecretResolver(environ={}), sleep=waits.append)
    post = ack.verify()                                    # nothing was sent: 10:3 is acked only by the old range
    assert post.holds                                      # (10:2..10:3] still holds it before the reset
    admin.reset_cursor(RESET_PATH, json.dumps(plan["steps"][0]["http"]["body"]).encode())
    post = ack.verify()
    assert not post.holds and post.observed["first_not_acknowledged"] == ["10:3"] and len(waits) == 9


def test_a_broker_without_the_websocket_service_fails_the_call_with_a_hint(admin):
    plan = _plan("10:1", "10:1", acks=("10:3",), admin_url=admin.url)
    _, ack = actions(plan, _cluster(admin.url), SecretResolver(environ={}))   # ws:// on the admin fake: a 404
    assert ack.request["url"].startswith(admin.url.replace("http:", "ws:") + "/ws/v2/consumer/persistent/")
    with pytest.raises(RuntimeError, match="HTTP 404 .*webSocketServiceEnabled=true"):
        ack.run()


def test_the_token_is_sent_as_bearer_and_never_shown(admin):
    admin.token = TOKEN
    ws = FakeWebSocketConsumer(admin, token=TOKEN)
    try:
        plan = _plan("10:1", "10:1", acks=("10:3",), admin_url=admin.url)
        secrets = SecretResolver(environ={"EAST_TOKEN": TOKEN})
        steps = actions(plan, _cluster(admin.url, token=SecretRef(env="EAST_TOKEN")), secrets,
                        websocket_url=ws.url, sleep=ws.wait)
        seen = _apply(steps)
    finally:
        ws.close()
    assert admin.unauthorized == [] and admin.posts[0]["authorization"] == f"Bearer {TOKEN}"
    assert [s["authorization"] for s in ws.sessions] == [f"Bearer {TOKEN}"]
    shown = json.dumps([[dict(a.request) for a in steps],
                        [[p.observed, p.expected, r, q.observed, q.expected] for p, r, q in seen]])
    assert TOKEN not in shown and "Bearer" not in shown


def test_a_wrong_token_fails_the_call_without_showing_it(admin):
    admin.token = "the-right-one"
    secrets = SecretResolver(environ={"EAST_TOKEN": TOKEN})
    (reset,) = actions(_plan("10:1", "10:3"), _cluster(admin.url, token=SecretRef(env="EAST_TOKEN")), secrets)
    with pytest.raises(RuntimeError, match="HTTP 401") as exc:
        reset.check()
    assert TOKEN not in str(exc.value)


def test_a_lab_cluster_has_nothing_to_repair():
    with pytest.raises(RepairInputError) as exc:
        actions(_plan("10:1", "10:3"), PulsarCluster(name="east", source="lab"), SecretResolver(environ={}))
    assert (exc.value.source, exc.value.field) == ("cluster east", "admin_url")


@pytest.mark.parametrize("change, field", [
    (lambda p: p.update(status="error"), "status"),
    (lambda p: p.pop("topic"), "topic"),
    (lambda p: p.pop("preconditions"), "preconditions"),
    (lambda p: p.update(cluster="west"), "cluster"),
    (lambda p: p["steps"][0]["http"]["body"].update(excluded=False), "steps[reset_cursor].http.body"),
    (lambda p: p["steps"][0]["http"].update(url="http://elsewhere/admin/v2/x"), "steps[reset_cursor].http.url"),
], ids=["status", "missing topic", "missing preconditions", "other cluster", "not excluded", "other url"])
def test_bad_plans_are_refused(change, field):
    plan = _plan("10:1", "10:3")
    change(plan)
    with pytest.raises(RepairInputError) as exc:
        actions(plan, _cluster("http://127.0.0.1:9"), SecretResolver(environ={}))
    assert exc.value.field == field


def test_a_truncated_ack_list_cannot_be_applied():
    plan = _plan("10:1", "10:1", acks=("10:3",), count=5)
    with pytest.raises(RepairInputError, match="a partial list cannot be applied") as exc:
        actions(plan, _cluster("http://127.0.0.1:9"), SecretResolver(environ={}))
    assert exc.value.field.endswith("positions_listed")


def test_the_system_registers_the_actions(admin):
    steps = systems.get("pulsar").repair.actions(_plan("10:1", "10:3"), _cluster(admin.url),
                                                  SecretResolver(environ={}))
    assert [a.name for a in steps] == ["reset_cursor"]


def test_websocket_base_and_message_id_wire():
    assert websocket_base("http://broker:8080") == "ws://broker:8080"
    assert websocket_base("https://broker:8443/") == "wss://broker:8443"
    assert base64.b64decode(encode_message_id(665406, 29)) == bytes([0x08, 0xBE, 0xCE, 0x28, 0x10, 0x1D])
