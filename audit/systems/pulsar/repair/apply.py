"""The approved side of a Pulsar repair plan (audit/systems/pulsar/repair/plan.py): its calls as RepairActions, in
order.

1. `reset_cursor`: the plan's POST .../subscription/{sub}/resetcursor with its body as planned (`excluded`),
   on the estate's admin URL of the plan's cluster. Check: stats-internal shows the cursor where the audit saw
   it; verify: where the plan says it lands (`reset_landed`, empty individually-deleted ranges).
2. `acknowledge_individually` (when the plan lists positions): one WebSocket consumer session on the broker's
   web service port (`webSocketServiceEnabled=true` on the brokers), `/ws/v2/consumer/persistent/{t}/{ns}/{topic}
   /{sub}`, one `{"messageId": base64(MessageIdData)}` text frame per position, then a close (the proxy's consumer
   close sends what it still holds). Check: the cursor is where the reset left it; verify: every position is
   at or below the markDeletePosition or inside individuallyDeletedMessages.
Every read is live (AdminClient, the collector's GET client); the token goes in a Bearer header and never into
`request`, results or prechecks. Upstream facts: docs/formats/pulsar.md "Repair calls"."""
from __future__ import annotations

import base64
import json
import re
import ssl
import time
import urllib.parse
from typing import Any, Callable, Mapping


from audit.systems.pulsar.collect.admin_client import AdminClient, AdminResponse, quote
from audit.systems.pulsar.collect.discovery import parse_topic
from audit.contracts import Precheck, RepairAction
from audit.systems.pulsar.domain.positions import Position
from audit.systems.pulsar.formats.stats_internal import StatsInternal, decode_stats_internal
from audit.repair.common import RepairInputError
from audit.systems.pulsar.repair.plan import format_position, position_field, required_text, reset_landed

_PLACEHOLDER = re.compile(r"<admin url of [^>]*>")
WS_CONSUMER = "/ws/v2/consumer/persistent"
# Shared: acks from a second consumer do not need the others gone; receiverQueueSize 0 and pullMode: the session
# asks the broker for no message at all (older proxies ignore pullMode: what they push back is never acked and
# returns to the subscription on close).
WS_QUERY = {"subscriptionType": "Shared", "receiverQueueSize": "0", "pullMode": "true"}
VERIFY_READS = 10           # acks reach the cursor asynchronously (the client's grouping, the close)
VERIFY_DELAY_S = 0.5
SHOWN = 20                  # positions named in a precheck that does not hold


def _message_id_class():
    """Pulsar's MessageIdData message (proto2, docs/formats/pulsar.md §2.13), the four fields the ack needs, in a
    private pool so it never clashes with another copy of the message."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fd = descriptor_pb2.FileDescriptorProto(name="replaudit/pulsar/message_id.proto", package="replaudit.pulsar",
                                            syntax="proto2")
    msg = fd.message_type.add(name="MessageIdData")
    f = descriptor_pb2.FieldDescriptorProto
    for name, number, kind, label, default in (("ledgerId", 1, f.TYPE_UINT64, f.LABEL_REQUIRED, None),
                                               ("entryId", 2, f.TYPE_UINT64, f.LABEL_REQUIRED, None),
                                               ("partition", 3, f.TYPE_INT32, f.LABEL_OPTIONAL, "-1"),
                                               ("batch_index", 4, f.TYPE_INT32, f.LABEL_OPTIONAL, "-1")):
        field = msg.field.add(name=name, number=number, type=kind, label=label)
        if default is not None:
            field.default_value = default
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("replaudit.pulsar.MessageIdData"))


MessageIdData = _message_id_class()


def encode_message_id(ledger_id: int, entry_id: int) -> str:
    """Base64 of MessageIdData{ledgerId, entryId}: partition and batch_index left unset (-1), as the Java client
    writes a plain id (MessageIdImpl.writeMessageIdData): the whole entry, on the topic the session names."""
    return base64.b64encode(MessageIdData(ledgerId=ledger_id, entryId=entry_id).SerializeToString()).decode()


def ack_frame(position: tuple[int, int]) -> str:
    return json.dumps({"messageId": encode_message_id(*position)})


def websocket_base(admin_url: str) -> str:
    """ws:// or wss:// on the admin URL's host and port: the broker serves the WebSocket API on its web service."""
    parts = urllib.parse.urlsplit(admin_url)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme)
    if scheme is None:
        raise ValueError(f"an http(s) admin URL, got {admin_url!r}")
    return urllib.parse.urlunsplit((scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


def actions(plan: Mapping, cluster: Any, secrets: Any, *, websocket_url: str | None = None,
            sleep: Callable[[float], None] = time.sleep) -> list[RepairAction]:
    """The plan's calls, in order. RepairInputError for a plan that cannot be applied (status, missing or bad field,
    a truncated acknowledgement list, a cluster without an admin URL). `websocket_url` replaces the WebSocket base
    derived from the admin URL (a separate WebSocket proxy); `sleep` paces the acknowledgement verify's rereads."""
    src = f"pulsar plan {plan.get('plan_id')}" if isinstance(plan, Mapping) else "pulsar plan"
    if not isinstance(plan, Mapping):
        raise RepairInputError(src, "(plan)", "a mapping (a saved Pulsar repair plan)")
    if plan.get("status") != "planned":
        raise RepairInputError(src, "status", f"'planned', got {plan.get('status')!r}")
    if plan.get("system") != "pulsar":
        raise RepairInputError(src, "system", f"'pulsar', got {plan.get('system')!r}")
    topic, sub, name = (required_text(plan, src, key) for key in ("topic", "subscription", "cluster"))
    try:
        topic_name = parse_topic(topic)
    except ValueError:
        raise RepairInputError(src, "topic", "a persistent topic 'persistent://tenant/namespace/topic'") from None
    if name != cluster.name:
        raise RepairInputError(src, "cluster", f"the cluster the actions run on ({cluster.name!r}), got {name!r}")
    if not getattr(cluster, "admin_url", None):
        raise RepairInputError(f"cluster {cluster.name}", "admin_url",
                               "the admin REST URL of a real cluster: a lab cluster has nothing to repair")
    pre = plan.get("preconditions")
    if not isinstance(pre, Mapping):
        raise RepairInputError(src, "preconditions", "a mapping")
    seen = position_field(pre.get("target_mark_delete_position"), src,
                          "preconditions.target_mark_delete_position")
    steps = plan.get("steps")
    if not isinstance(steps, list) or not steps or not all(isinstance(s, Mapping) for s in steps):
        raise RepairInputError(src, "steps", "a list of step mappings")
    by_action = {s.get("action"): s for s in steps}
    reset = by_action.get("reset_cursor")
    if reset is None:
        raise RepairInputError(src, "steps", "a reset_cursor step")
    cursor = _Cursor(cluster, secrets, topic_name.path("/internalStats"), sub)
    out = [_reset_action(src, reset, cursor, topic, sub, seen, topic_name.path(
        f"/subscription/{quote(sub)}/resetcursor"))]
    acks = by_action.get("acknowledge_individually")
    if acks is not None:
        positions = _ack_positions(src, acks)
        if positions:
            base = (websocket_url or websocket_base(cluster.admin_url)).rstrip("/")
            url = (f"{base}{WS_CONSUMER}/{quote(topic_name.tenant)}/{quote(topic_name.namespace)}/"
                   f"{quote(topic_name.local)}/{quote(sub)}?{urllib.parse.urlencode(WS_QUERY)}")
            after = position_field(reset.get("to"), src, "steps[reset_cursor].to")
            out.append(_ack_action(cursor, url, topic, sub, after, positions, sleep))
    return out


# -- plan fields ---------------------------------------------------------------------------------------------------
def _ack_positions(src: str, step: Mapping) -> list[tuple[int, int]]:
    total, listed = step.get("positions_total"), step.get("positions_listed")
    for key, value in (("positions_total", total), ("positions_listed", listed)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise RepairInputError(src, f"steps[acknowledge_individually].{key}", "a non-negative integer")
    if total == 0:
        return []
    if listed < total:
        raise RepairInputError(src, "steps[acknowledge_individually].positions_listed",
                               f"all {total} positions (the audit listed {listed}): a partial list cannot be "
                               f"applied; re-run the audit once the window is complete")
    chunks = step.get("chunks")
    if not isinstance(chunks, list):
        raise RepairInputError(src, "steps[acknowledge_individually].chunks", "a list of chunks")
    out = []
    for i, chunk in enumerate(chunks):
        items = chunk.get("positions") if isinstance(chunk, Mapping) else chunk
        if not isinstance(items, list):
            raise RepairInputError(src, f"steps[acknowledge_individually].chunks[{i}]", "a list of 'L:E' positions")
        out += [position_field(p, src, f"steps[acknowledge_individually].chunks[{i}]") for p in items]
    if len(out) != listed or len(set(out)) != len(out):
        raise RepairInputError(src, "steps[acknowledge_individually].chunks",
                               f"{listed} distinct positions (positions_listed), got {len(out)}")
    return out


# -- the cluster ---------------------------------------------------------------------------------------------------
class _Client(AdminClient):
    """The collector's client (Bearer on every hop, redacted errors) plus the one POST a reset needs."""

    def post_json(self, path: str, body: Mapping[str, Any]) -> AdminResponse:
        return self._follow(self.url(path), "POST", json.dumps(body).encode())


class _Cursor:
    """Live reads of one subscription's cursor, and the cluster's calls. The token is resolved at the first call
    (a missing secret fails that call, inside the runner's log), never stored in what an action returns."""

    def __init__(self, cluster: Any, secrets: Any, stats_path: str, sub: str):
        self.cluster, self.secrets, self.stats_path, self.sub = cluster, secrets, stats_path, sub
        self._token: str | None = None

    def token(self) -> str | None:
        if self.cluster.token is not None and self._token is None:
            self._token = self.secrets.resolve(self.cluster.token)
        return self._token

    def client(self) -> _Client:
        timeouts = self.cluster.timeouts
        return _Client(self.cluster.admin_url, self.token(), connect_timeout_s=timeouts.connect_s,
                       request_timeout_s=timeouts.request_s, verify=self.cluster.tls_verify, pool_size=1,
                       redact=self.secrets.redact)

    def read(self) -> StatsInternal:
        client = self.client()
        try:
            resp = client.get(self.stats_path)
        finally:
            client.close()
        if resp.error is not None:
            raise RuntimeError(f"{resp.url}: {resp.error}")
        return decode_stats_internal(resp.body, self.secrets.redact(resp.url))

    def state(self) -> tuple[dict, Any, list[tuple[int, int]]]:
        """(observed, the cursor or None, the topic's (ledgerId, entries))."""
        si = self.read()
        c = si.cursors.get(self.sub)
        ledgers = [(lg.ledger_id, lg.entries) for lg in si.ledgers]
        if c is None:
            return {"subscription": None, "cursors": sorted(si.cursors)}, None, ledgers
        return ({"mark_delete_position": str(c.mark_delete),
                 "individually_deleted": c.individually_deleted.to_string()}, c, ledgers)

    def post(self, path: str, body: Mapping[str, Any]) -> dict:
        client = self.client()
        try:
            resp = client.post_json(path, body)
        finally:
            client.close()
        if not 200 <= resp.status < 300:
            raise RuntimeError(f"{resp.url}: {resp.error or f'HTTP {resp.status}'}")
        return {"status": resp.status, "url": self.secrets.redact(resp.url)}

    def websocket(self, url: str):
        from websockets.sync.client import connect

        token = self.token()
        ctx = None
        if url.startswith("wss:"):
            ctx = ssl.create_default_context()
            if not self.cluster.tls_verify:
                ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        timeouts = self.cluster.timeouts
        return connect(url, additional_headers={"Authorization": f"Bearer {token}"} if token else None, ssl=ctx,
                       open_timeout=timeouts.connect_s, close_timeout=timeouts.request_s, compression=None)


# -- the actions ---------------------------------------------------------------------------------------------------
def _reset_action(src: str, step: Mapping, cursor: _Cursor, topic: str, sub: str, seen: tuple[int, int],
                  path: str) -> RepairAction:
    to = position_field(step.get("to"), src, "steps[reset_cursor].to")
    http = step.get("http")
    if not isinstance(http, Mapping) or http.get("method") != "POST" or not isinstance(http.get("body"), Mapping):
        raise RepairInputError(src, "steps[reset_cursor].http", "{method: POST, url, body}")
    url = http.get("url")
    if not isinstance(url, str) or not url.endswith(path):
        raise RepairInputError(src, "steps[reset_cursor].http.url", f"<admin url>{path}, got {url!r}")
    body = dict(http["body"])
    # The body decides where the cursor lands: anything but `excluded: true` at `to` would not land there.
    if (body.get("ledgerId"), body.get("entryId"), body.get("excluded")) != (to[0], to[1], True):
        raise RepairInputError(src, "steps[reset_cursor].http.body",
                               f"ledgerId {to[0]}, entryId {to[1]} and excluded true (the step's `to`)")
    real_url = cursor.cluster.admin_url.rstrip("/") + path    # the estate's admin URL, not the plan's placeholder

    def check() -> Precheck:
        observed, _, _ = cursor.state()
        return Precheck(observed.get("mark_delete_position") == format_position(seen), observed,
                        {"mark_delete_position": format_position(seen)})

    def verify() -> Precheck:
        observed, c, ledgers = cursor.state()
        holds = c is not None and reset_landed(format_position(to), str(c.mark_delete), ledgers) \
            and len(c.individually_deleted) == 0
        return Precheck(holds, observed, {"mark_delete_position": format_position(to), "individually_deleted": "[]",
                                          "equivalent": (step.get("post_check") or {}).get("equivalent")})

    return RepairAction(name="reset_cursor", target=f"{topic} subscription {sub}",
                        request={"method": "POST", "url": real_url, "body": body,
                                 "headers": {"Content-Type": "application/json"}},
                        check=check, run=lambda: cursor.post(path, body), verify=verify)


def _ack_action(cursor: _Cursor, url: str, topic: str, sub: str, after: tuple[int, int],
                positions: list[tuple[int, int]], sleep: Callable[[float], None]) -> RepairAction:
    def check() -> Precheck:
        observed, c, ledgers = cursor.state()
        holds = c is not None and reset_landed(format_position(after), str(c.mark_delete), ledgers)
        return Precheck(holds, observed, {"mark_delete_position": format_position(after)})

    def run() -> dict:
        from websockets.exceptions import InvalidStatus

        sent = 0
        try:
            with cursor.websocket(url) as ws:
                for pos in positions:
                    ws.send(ack_frame(pos))
                    sent += 1
        except InvalidStatus as e:   # a broker without the WebSocket service answers the upgrade with a 404
            raise RuntimeError(f"{url}: the WebSocket upgrade was refused with HTTP {e.response.status_code} "
                               f"(webSocketServiceEnabled=true on the brokers? the token?)") from None
        return {"frames_sent": sent, "url": url, "first": format_position(positions[0]),
                "last": format_position(positions[-1])}

    def judge() -> Precheck:
        observed, c, _ = cursor.state()
        missing = positions if c is None else \
            [p for p in positions if not (Position(*p) <= c.mark_delete or Position(*p) in c.individually_deleted)]
        return Precheck(not missing, {**observed, "not_acknowledged": len(missing),
                                      "first_not_acknowledged": [format_position(p) for p in missing[:SHOWN]]},
                        {"acknowledged": len(positions), "first": format_position(positions[0]),
                         "last": format_position(positions[-1])})

    def verify() -> Precheck:
        seen = judge()
        for _ in range(VERIFY_READS - 1):
            if seen.holds:
                break
            sleep(VERIFY_DELAY_S)
            seen = judge()
        return seen

    frame = '{"messageId": "<base64 of MessageIdData{ledgerId, entryId}>"}'
    return RepairAction(name="acknowledge_individually", target=f"{topic} subscription {sub}",
                        request={"method": "WEBSOCKET", "url": url, "frame": frame, "count": len(positions),
                                 "positions": [format_position(p) for p in positions]},
                        check=check, run=run, verify=verify, after_previous=True)
