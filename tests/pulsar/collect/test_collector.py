"""PulsarCollector end to end against the loopback fake admin API, into a DirSink."""
import base64
import itertools
import json
import logging

import pytest

from audit.collectors.base import DirSink
from audit.systems.pulsar.collect.collector import PulsarCollector, PulsarConfigError
from audit.config.model import SecretRef, Timeouts
from audit.systems.pulsar.config import PulsarCluster, PulsarDump
from audit.config.secrets import SecretError, SecretResolver
from audit.systems.pulsar.formats.read_instant import encode_read_instant
from audit.systems.pulsar.formats.entry import EntryGap, EntryRecord, decode_entry_line
from lab.pulsar.admin_server import Answer, ScriptedAdmin, html, reason
from tests.pulsar.collect.recorded import ORDERS_STATS_INTERNAL, ORDERS_WINDOW, orders_stats, real_body, standard_estate

TOKEN = "tok-3f9a-very-secret"
ORDERS = "topics/acme/orders/orders/"
ORDERS_ENTRY = "/admin/v2/persistent/acme/orders/orders/ledger/"
WHAT = "topic entries"


@pytest.fixture
def fake():
    f = ScriptedAdmin(TOKEN)
    standard_estate(f)
    yield f
    f.close()


def cluster(fake, **kw):
    fields = dict(name="east", source="admin", admin_url=fake.url, token=SecretRef(env="PULSAR_EAST_TOKEN"),
                  namespaces=("acme/orders",), topics=(),
                  dump=PulsarDump(concurrency=4, chunk_entries=2, max_entries_per_topic=1000),
                  timeouts=Timeouts(connect_s=2.0, request_s=2.0))
    fields.update(kw)
    return PulsarCluster(**fields)


def run(fake, root, sink=None, collector=None, **kw):
    collector = collector or PulsarCollector(sleep=lambda s: None)
    return collector.collect(cluster(fake, **kw), sink or DirSink(root), SecretResolver(environ={
        "PULSAR_EAST_TOKEN": TOKEN}))


def files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def expected_line(ledger, entry_id, ans):
    """A read line exactly as docs/pulsar/contracts.md shows it, built from what the fake sent."""
    headers = {}
    for name, value in ans.headers:
        headers.setdefault(name, []).append(value)
    doc = {"ledger_id": ledger, "entry_id": entry_id, "status": 200, "content_type": "application/octet-stream",
           "headers": {k: v[0] if len(v) == 1 else v for k, v in headers.items()},
           "body_b64": base64.b64encode(ans.body).decode()}
    return json.dumps(doc, separators=(",", ":")).encode() + b"\n"


def gap_line(ledger, entry_id, status, error, content_type):
    return json.dumps({"ledger_id": ledger, "entry_id": entry_id, "status": status, "error": error,
                       "content_type": content_type}, separators=(",", ":")).encode() + b"\n"


def test_full_collection_raw_keys_and_bytes(fake, tmp_path):
    clock = itertools.count(1000)   # every read instant is the next tick: the order of the reads, exactly
    report = run(fake, tmp_path, collector=PulsarCollector(sleep=lambda s: None, now_ms=clock.__next__))
    got = files(tmp_path)
    partition_keys = [f"topics/acme/orders/payments-partition-{i}/{k}" for i in range(2) for k in
                      ["dump.json", "dump/0/0-1.jsonl", "dump/0/2-3.jsonl", "dump/0/4-5.jsonl", "dump/0/6-7.jsonl",
                       "dump/0/8-8.jsonl", "message-ttl.json", "message-ttl.json.read.json", "stats-internal.json",
                       "stats-internal.json.read.json", "stats.json", "stats.json.read.json"]]
    assert sorted(got) == sorted(["broker-version.txt", "collection.json"] + [ORDERS + k for k in [
        "dump.json", "dump/10/2-3.jsonl", "dump/10/4-4.jsonl", "dump/12/0-1.jsonl", "dump/12/2-3.jsonl",
        "message-ttl.json", "message-ttl.json.read.json",
        "stats-internal.json", "stats-internal.json.read.json", "stats.json", "stats.json.read.json",
        "subscriptions/audit%2Fsub%201/replicated-status.json",
        "subscriptions/audit%2Fsub%201/replicated-status.json.read.json",
        "subscriptions/orders-sub/replicated-status.json",
        "subscriptions/orders-sub/replicated-status.json.read.json"]] + partition_keys)
    base = fake.url + "/admin/v2/persistent/acme/orders/orders"
    assert got[ORDERS + "stats-internal.json.read.json"] == encode_read_instant(base + "/internalStats", 1000, 1001)
    assert got[ORDERS + "stats.json.read.json"] == encode_read_instant(base + "/stats", 1002, 1003)
    assert got[ORDERS + "subscriptions/audit%2Fsub%201/replicated-status.json.read.json"] == encode_read_instant(
        base + "/subscription/audit%2Fsub%201/replicatedSubscriptionStatus", 1004, 1005)
    assert got[ORDERS + "message-ttl.json"] == b"0"   # the applied TTL, as the broker sent it
    assert got[ORDERS + "message-ttl.json.read.json"] == encode_read_instant(base + "/messageTTL?applied=true",
                                                                              1008, 1009)
    assert got["broker-version.txt"] == b"3.0.12"   # as the broker sent it: bare text, once per cluster
    assert fake.paths(r"^/admin/v2/brokers/version$") == ["/admin/v2/brokers/version"]
    assert got[ORDERS + "stats-internal.json"] == ORDERS_STATS_INTERNAL
    assert got[ORDERS + "stats.json"] == orders_stats()
    assert got[ORDERS + "subscriptions/orders-sub/replicated-status.json"] == \
        b'{"persistent://acme/orders/orders":true}'
    assert got["topics/acme/orders/payments-partition-1/stats-internal.json"] == \
        real_body("pulsar-stats-internal-08.txt")
    topic = fake.topics["acme/orders/orders"]
    assert got[ORDERS + "dump/10/4-4.jsonl"] == (
        b'{"ledger_id":10,"entry_id":4,"status":200,"content_type":"application/octet-stream","headers":'
        b'{"X-Pulsar-Message-ID":"10:4","X-Pulsar-publish-time":"2023-11-14T22:13:20Z","X-Pulsar-producer-name":'
        b'"orders-producer","X-Pulsar-sequence-id":"4","X-Pulsar-replicated-to":["west","north"]},'
        b'"body_b64":"bG9jYWwgb3JkZXIgNA=="}\n')
    dump = b"".join(got[ORDERS + f"dump/{k}.jsonl"] for k in ("10/2-3", "10/4-4", "12/0-1", "12/2-3"))
    assert dump == b"".join(expected_line(l, e, topic.entry(l, e)) for l, e in ORDERS_WINDOW)
    records = [decode_entry_line(line, "t") for line in dump.splitlines()]
    assert all(isinstance(r, EntryRecord) for r in records)
    assert (records[0].replicated_from, str(records[0].source_position)) == ("west", "5:7")
    assert (records[1].marker_type, records[1].marker["snapshot_id"]) == (10, "snap-1")
    assert records[3].replicate_to == ("west",)
    assert json.loads(got[ORDERS + "dump.json"]) == {
        "topic": "persistent://acme/orders/orders", "from": "10:1", "to": "12:3", "from_cursor": "orders-sub",
        "basis": "smallest markDeletePosition: subscription cursor orders-sub",
        "ledgers": [{"ledger_id": 10, "entries": 3}, {"ledger_id": 12, "entries": 4}],
        "entries_expected": 7, "entries_read": 7, "entries_failed": 0, "entries_not_fetched": 0,
        "complete": True, "reason": "every position in the window was read",
        "read_started_at_ms": 1010, "read_finished_at_ms": 1017}   # 4 chunks, one tick before and after each
    assert report.gaps == []
    assert report.counts == {
        "topics_discovered": 3, "topics_collected": 3, "topics_dumped": 3, "keys_stored": 12, "entries_read": 25,
        "entries_failed": 0, "entries_not_fetched": 0, "entries_from_reader": 0, "chunks_written": 14,
        "chunks_resumed": 0, "http_requests": 40, "http_retries": 0}
    assert len(fake.requests) == 40 and fake.unauthorized == []
    assert got["collection.json"] == report.to_json().encode()


def test_failed_positions_become_not_read_lines_and_one_gap_per_run(fake, tmp_path):
    topic = fake.topics["acme/orders/orders"]
    topic.entries[(10, 2)] = reason(500, "Internal error")
    topic.entries[(10, 3)] = html(200, "Proxy login")
    topic.deleted_ledgers.add(12)
    fake.slow(r"/orders/ledger/10/entry/4$")
    report = run(fake, tmp_path, timeouts=Timeouts(connect_s=2.0, request_s=0.3))
    got = files(tmp_path)
    not_found = 'HTTP 404: {"reason": "Message not found"}'
    page = "HTML page instead of an entry: <html><head><title>Proxy login</title></head><body><h1>Proxy login</h1>" \
           "</body></html>"
    assert got[ORDERS + "dump/10/2-3.jsonl"] == (
        gap_line(10, 2, 500, 'HTTP 500: {"reason": "Internal error"}', "application/json")
        + gap_line(10, 3, 200, page, "text/html; charset=utf-8"))
    assert got[ORDERS + "dump/10/4-4.jsonl"] == gap_line(10, 4, 0, "no answer within 0.3 s (read timeout)", None)
    assert got[ORDERS + "dump/12/0-1.jsonl"] + got[ORDERS + "dump/12/2-3.jsonl"] == b"".join(
        gap_line(12, e, 404, not_found, "application/json") for e in range(4))
    assert all(isinstance(decode_entry_line(line, "t"), EntryGap)
               for key in got if key.startswith(ORDERS + "dump/") for line in got[key].splitlines())
    url = fake.url + ORDERS_ENTRY
    assert [(g.source, g.what, g.error) for g in report.gaps] == [
        (url + "10/entry/2", WHAT, '10:2 not read: HTTP 500: {"reason": "Internal error"}'),
        (url + "10/entry/3", WHAT, f"10:3 not read: {page}"),
        (url + "10/entry/4", WHAT, "10:4 not read: no answer within 0.3 s (read timeout)"),
        (url + "12/entry/0", WHAT, f"12:0..12:3 (4 positions) not read: {not_found}")]
    summary = json.loads(got[ORDERS + "dump.json"])
    assert (summary["entries_read"], summary["entries_failed"], summary["complete"], summary["reason"]) == (
        0, 7, False, "7 positions not read")
    assert report.counts["entries_read"] == 18 and report.counts["topics_dumped"] == 3  # the partitions went on


@pytest.mark.parametrize("body, error", [
    (html(200, "Login required").body, "field <root>: expected a JSON object (got an HTML page: Login required)"),
    (b'{"lastConfirmedEntry" : "1:2", "ledgers" : [ ]}',
     "field cursors: expected an object of cursor name -> cursor stats, got nothing"),
])
def test_undecodable_stats_internal_is_stored_and_gapped_and_others_go_on(fake, tmp_path, body, error):
    fake.topics["acme/orders/orders"].stats_internal = Answer(200, body, "text/html")
    report = run(fake, tmp_path)
    got = files(tmp_path)
    assert got[ORDERS + "stats-internal.json"] == body
    assert not [k for k in got if k.startswith(ORDERS + "dump")]
    assert ORDERS + "subscriptions/orders-sub/replicated-status.json" in got  # isReplicated in stats still counts
    [gap] = report.gaps
    assert (gap.source, gap.what) == (fake.url + "/admin/v2/persistent/acme/orders/orders/internalStats",
                                      "topic internal stats")
    assert gap.error.startswith(f"stored as received, not decodable: {error}")
    assert report.counts["topics_without_dump"] == 1 and report.counts["topics_dumped"] == 2


def test_token_never_reaches_raw_gaps_or_logs(fake, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    leaky = Answer(500, b"<html>upstream error</html>", "text/html", echo_auth=True)
    fake.topics["acme/orders/orders"].entries[(10, 2)] = leaky
    fake.topics["acme/orders/payments-partition-1"].stats = leaky
    report = run(fake, tmp_path)
    assert fake.unauthorized == []  # the token was sent ...
    assert all(TOKEN.encode() not in data for data in files(tmp_path).values())  # ... and never written
    assert all(TOKEN not in f"{g.source} {g.what} {g.error}" for g in report.gaps)
    assert TOKEN not in caplog.text
    echoed = "HTTP 500: <html>upstream error</html><pre>request header Authorization: Bearer ***</pre>"
    assert json.loads(files(tmp_path)[ORDERS + "dump/10/2-3.jsonl"].splitlines()[0])["error"] == echoed
    assert [g.error for g in report.gaps] == [f"10:2 not read: {echoed}", echoed]
    assert "Bearer ***" in caplog.text  # the gaps are logged, redacted


def test_explicit_partitioned_topic_is_expanded(fake, tmp_path):
    run(fake, tmp_path, namespaces=(), topics=("persistent://acme/orders/payments",))
    assert sorted({k.split("/")[3] for k in files(tmp_path) if k.startswith("topics/")}) == [
        "payments-partition-0", "payments-partition-1"]
    assert fake.requests[:2] == ["/admin/v2/brokers/version", "/admin/v2/persistent/acme/orders/payments/partitions"]


def test_unknown_namespace_is_a_gap(fake, tmp_path):
    report = run(fake, tmp_path, namespaces=("acme/missing",))
    url = fake.url + "/admin/v2/persistent/acme/missing"
    error = 'HTTP 404: {"reason": "Namespace does not exist"}'
    assert [(g.source, g.what, g.error) for g in report.gaps] == [
        (url, "namespace topic list", error), (url + "/partitioned", "namespace partitioned topic list", error)]
    assert sorted(files(tmp_path)) == ["broker-version.txt", "collection.json"]


def test_refused_token_stops_the_collection(fake, tmp_path):
    report = run(fake, tmp_path, token=None)
    error = 'HTTP 401: {"reason": "HTTP 401 Unauthorized"}'
    url = fake.url + "/admin/v2/persistent/acme/orders"
    assert [(g.source, g.what, g.error) for g in report.gaps] == [
        (fake.url + "/admin/v2/brokers/version", "broker version", error),
        (url, "namespace topic list", error), (url + "/partitioned", "namespace partitioned topic list", error),
        (fake.url, "admin API (collection stopped)", error)]
    assert list(files(tmp_path)) == ["collection.json"]


def test_configuration_errors_raise_before_any_request(fake, tmp_path):
    with pytest.raises(SecretError, match="PULSAR_EAST_TOKEN"):
        PulsarCollector().collect(cluster(fake), DirSink(tmp_path), SecretResolver(environ={}))
    with pytest.raises(PulsarConfigError, match="field source"):
        run(fake, tmp_path, source="lab", admin_url=None)
    with pytest.raises(ValueError, match="concurrency"):   # the validated model refuses it: nothing to run
        run(fake, tmp_path, dump=PulsarDump(concurrency=0))
    assert fake.requests == []


def test_a_broker_version_that_cannot_be_fetched_is_a_gap_naming_the_url(fake, tmp_path):
    fake.script(r"^/admin/v2/brokers/version$", [html(404, "Not Found")])
    report = run(fake, tmp_path)
    assert [(g.source, g.what) for g in report.gaps] == [(fake.url + "/admin/v2/brokers/version", "broker version")]
    got = files(tmp_path)
    assert "broker-version.txt" not in got and ORDERS + "stats.json" in got   # the collection went on
