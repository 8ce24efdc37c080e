"""info-internal, topic stats and replicatedSubscriptionStatus bodies; the inspect sniffers for every kind."""
from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from audit.systems.pulsar.domain.positions import Position
from audit.formats import inspect
from audit.errors import PayloadError
from audit.systems.pulsar.formats import markers
from audit.systems.pulsar.formats.entry import encode_entry_line, encode_gap_line
from audit.systems.pulsar.formats.info_internal import InfoLedger, decode_info_internal
from audit.systems.pulsar.formats.repl_status import decode_replicated_status
from audit.systems.pulsar.formats.stats import decode_topic_stats

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
SRC = "raw/pulsar/east/topics/t/ns/x/stats.json"

INFO = {"version": 12, "creationDate": "2024-03-01T10:00:00.1Z", "modificationDate": "2024-03-01T11:00:00Z",
        "ledgers": [{"ledgerId": 5, "entries": 12, "size": 900, "timestamp": 1709287200123, "isOffloaded": False},
                    {"ledgerId": 8}],
        "cursors": {"sub": {"version": 3, "creationDate": "x", "modificationDate": "y", "cursorsLedgerId": 21,
                            "markDelete": {"ledgerId": 5, "entryId": 3},
                            "individualDeletedMessages": [{"from": {"ledgerId": 5, "entryId": 4},
                                                           "to": {"ledgerId": 5, "entryId": 6}},
                                                          {"from": {"ledgerId": 5, "entryId": 11},
                                                           "to": {"ledgerId": 8, "entryId": 0}}],
                            "properties": {"pulsar.replicated.subscription": 1}}},
        "properties": {"k": "v"}}


def test_info_internal_ranges_are_open_closed():
    info = decode_info_internal(json.dumps(INFO).encode(), SRC)
    assert info.ledgers == (InfoLedger(5, 12, 900, 1709287200123, False), InfoLedger(8, None, None, None, None))
    c = info.cursors["sub"]
    assert (c.mark_delete, c.cursors_ledger_id, dict(c.properties)) == (Position(5, 3), 21,
                                                                         {"pulsar.replicated.subscription": 1})
    assert c.individually_deleted.to_string() == "[(5:4..5:6],(5:11..8:0]]"
    assert Position(5, 4) not in c.individually_deleted and Position(5, 5) in c.individually_deleted


def test_info_internal_real_08():
    text = (REAL / "pulsar-stats-internal-08.txt").read_text()
    body = re.findall(r"^\{.*?^\}", text, re.S | re.M)[1]
    info = decode_info_internal(body.encode(), "08")
    assert (info.version, info.ledgers, dict(info.cursors)) == (1, (InfoLedger(0, None, None, None, None),), {})
    assert info.creation_date == "2018-10-04T12:41:38.587Z"


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d["cursors"]["sub"]["individualDeletedMessages"][0].update(to={"ledgerId": 5, "entryId": 4}),
     "cursors.sub.individualDeletedMessages[0]"),
    (lambda d: d["cursors"]["sub"].update(markDelete={"ledgerId": 5}), "cursors.sub.markDelete.entryId"),
    (lambda d: d["cursors"]["sub"].update(markDelete="5:3"), "cursors.sub.markDelete"),
    (lambda d: d["ledgers"][1].update(entries="0"), "ledgers[1].entries"),
])
def test_info_internal_bad_fields(mutate, field):
    doc = json.loads(json.dumps(INFO))
    mutate(doc)
    with pytest.raises(PayloadError) as e:
        decode_info_internal(json.dumps(doc).encode(), SRC)
    assert e.value.field == field


def test_stats_real_07_disconnected_replicator():
    ts = decode_topic_stats((REAL / "pulsar-stats-replication-07.json").read_bytes(), "07")
    r = ts.replication["jp-west"]
    assert (r.connected, r.replication_backlog, r.replication_delay_s, r.msg_rate_out, r.outbound_connection) == (
        False, 6258001, 0, 0.0, None)
    assert r.inbound_connection == "/xxx.xxx.xxx.xxx:40710" and ts.publishers == 0 and dict(ts.subscriptions) == {}


def test_stats_real_05_subscription_fragment():
    text = (REAL / "pulsar-stats-vs-internal-05.fragment.txt").read_text()
    frag = text.split("stats:", 1)[1].split("stats-internal:", 1)[0].strip().rstrip(",")
    ts = decode_topic_stats(('{"subscriptions": {' + frag + "}}}").encode(), "05")  # braces cut off as published
    s = ts.subscriptions["sub-1"]
    assert (s.msg_backlog, s.is_replicated, s.is_durable) == (1150, None, None)
    # cut off before `consumers`/`lastConsumedTimestamp`, no msgOutCounter: consumption unknown, not "unused"
    assert (s.consumers, s.msg_out_counter, s.last_consumed_ms, s.consumed_here) == (None, None, None, None)


def _consumer(name: str, out: int, last: int) -> dict:
    return {"msgRateOut": 0.0, "msgOutCounter": out, "consumerName": name, "availablePermits": 1000,
            "unackedMessages": 0, "lastAckedTimestamp": last, "lastConsumedTimestamp": last,
            "address": "/10.0.0.1:40000", "connectedSince": "2025-10-09T08:51:20.5Z"}


# Subscription stats as brokers of each vintage write them (key sets of apache/pulsar#759 for 1.x: `consumers`
# without msgOutCounter/lastConsumedTimestamp; #11979 and #21082 for 2.8+/3.x: counters that survive removed
# consumers, a connected consumer that has received nothing).
USAGE = {
    "primary": {"msgOutCounter": 16800, "lastConsumedTimestamp": 1747233767604, "type": "Shared",
                "consumers": [_consumer("5e507", 16000, 1747233767604), _consumer("9c1a2", 800, 1747233753115)]},
    "drained": {"msgOutCounter": 4000, "lastConsumedTimestamp": 0, "consumers": []},
    "idle": {"msgOutCounter": 0, "lastConsumedTimestamp": 0, "consumers": [_consumer("8c7d6b08e1", 0, 0)]},
    "standby": {"msgOutCounter": 0, "lastConsumedTimestamp": 0, "consumers": [], "isReplicated": True},
    "pulsar-1.x": {"msgBacklog": 1219175, "type": "Shared", "consumers": [{"consumerName": "i-09c2"}]},
    "pulsar-1.x-no-consumer": {"msgBacklog": 3, "consumers": []},
}


def test_stats_subscription_consumption_evidence():
    ts = decode_topic_stats(json.dumps({"subscriptions": USAGE}).encode(), SRC)
    got = {n: (s.consumers, s.msg_out_counter, s.last_consumed_ms, s.consumed_here)
           for n, s in ts.subscriptions.items()}
    assert got == {"primary": (2, 16800, 1747233767604, True), "drained": (0, 4000, 0, True),
                   "idle": (1, 0, 0, True), "standby": (0, 0, 0, False), "pulsar-1.x": (1, None, None, True),
                   "pulsar-1.x-no-consumer": (0, None, None, None)}


@pytest.mark.parametrize("sub, field, expected", [
    ({"consumers": {}}, "subscriptions.s.consumers", "a list of consumer stats"),
    ({"msgOutCounter": "12"}, "subscriptions.s.msgOutCounter", "an integer"),
    ({"lastConsumedTimestamp": 1.5}, "subscriptions.s.lastConsumedTimestamp", "an integer"),
])
def test_stats_consumption_evidence_bad_values(sub, field, expected):
    with pytest.raises(PayloadError) as e:
        decode_topic_stats(json.dumps({"subscriptions": {"s": sub}}).encode(), SRC)
    assert (e.value.field, e.value.expected) == (field, expected)


def test_stats_subscription_flags_and_bad_values():
    doc = {"msgRateIn": 1, "subscriptions": {"s": {"isReplicated": True, "isDurable": True, "msgBacklog": 3}},
           "replication": {"west": {"connected": True, "replicationBacklog": 0, "msgRateOut": 2}}}
    ts = decode_topic_stats(json.dumps(doc).encode(), SRC)
    assert (ts.subscriptions["s"].is_replicated, ts.replication["west"].msg_rate_out) == (True, 2.0)
    doc["replication"]["west"]["connected"] = "yes"
    with pytest.raises(PayloadError) as e:
        decode_topic_stats(json.dumps(doc).encode(), SRC)
    assert (e.value.field, e.value.expected) == ("replication.west.connected", "true or false")


def test_replicated_status():
    body = b'{"persistent://t/ns/x-partition-0": true, "persistent://t/ns/x-partition-1": false}'
    assert decode_replicated_status(body, SRC) == {"persistent://t/ns/x-partition-0": True,
                                                   "persistent://t/ns/x-partition-1": False}
    with pytest.raises(PayloadError) as e:
        decode_replicated_status(b'{"persistent://t/ns/x": "true"}', SRC)
    assert e.value.field == "persistent://t/ns/x"
    with pytest.raises(PayloadError) as e:
        decode_replicated_status(b"<html><title>Login</title></html>", SRC)
    assert e.value.expected == "a JSON object (got an HTML page: Login)"


def _kind(data: bytes, name: str) -> str:
    return inspect.inspect_bytes(data, name)["kind"]


def test_inspect_tells_every_kind_apart():
    assert _kind((REAL / "pulsar-stats-internal-01.json").read_bytes(), "a.json") == "pulsar.stats_internal"
    assert _kind((REAL / "pulsar-stats-internal-02.json").read_bytes(), "a.json") == "pulsar.stats_internal"
    assert _kind(b'{"lastConfirmedEntry": "1:2", "ledgers": [], "cursors": {}}', "a") == "pulsar.stats_internal"
    assert _kind(json.dumps(INFO).encode(), "a.json") == "pulsar.info_internal"
    assert _kind((REAL / "pulsar-stats-replication-07.json").read_bytes(), "a.json") == "pulsar.stats"
    assert _kind(b'{"persistent://t/ns/x": true}', "r.json") == "pulsar.replicated_subscription_status"
    chunk = encode_entry_line(7, 0, b"x") + encode_gap_line(7, 1, 404, "not found")
    out = inspect.inspect_bytes(chunk, "dump/7/0-1.jsonl")
    assert (out["kind"], out["read"], out["not_read"]) == ("pulsar.dump_chunk", 1, 1)
    out = inspect.inspect_bytes(markers.encode_update("s", {"west": (1, 2)}), "x/7-3.marker-13.bin")
    assert (out["kind"], out["subscription"]) == ("pulsar.marker", "s")
    out = inspect.inspect_bytes(base64.b64encode(b'{"persistent://t/ns/x": false}'), "r.json.b64")
    assert (out["kind"], out["base64"]) == ("pulsar.replicated_subscription_status", True)


def test_inspect_decode_errors_surface():
    with pytest.raises(PayloadError) as e:
        inspect.inspect_bytes(b'{"lastConfirmedEntry": "1:2", "ledgers": []}', "si.json")
    assert e.value.field == "cursors"
    with pytest.raises(PayloadError):
        inspect.inspect_bytes(b"{}", "empty.json")  # no sniffer claims an empty object
