"""The Pulsar normalize job (spark_jobs/run.py --system pulsar --stage normalize) over a raw folder written with the
project's encoders and the real stats-internal fixtures."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from audit.systems.pulsar.formats import markers
from audit.systems.pulsar.formats.entry import encode_entry_line, encode_gap_line
from audit.systems.pulsar.formats.read_instant import encode_read_instant
from audit.systems.pulsar.transforms import normalize as T
import pyarrow.dataset as ds

from spark_jobs import run

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
T0 = 1_709_287_200_123
ORDERS = "persistent://t/ns/orders"
E = "raw/pulsar/east/topics/t/ns/"


def _cur(mdp, rp, ranges="[]", **props):
    return {"markDeletePosition": mdp, "readPosition": rp, "individuallyDeletedMessages": ranges, "state": "Open",
            "properties": props}


STATS_INTERNAL = {
    "entriesAddedCounter": 8, "numberOfEntries": 8, "totalSize": 800, "currentLedgerEntries": 3,
    "currentLedgerSize": 300, "lastLedgerCreatedTimestamp": "2024-03-01T10:00:00Z", "pendingAddEntriesCount": 0,
    "lastConfirmedEntry": "8:2", "state": "LedgerOpened",
    "ledgers": [{"ledgerId": 5, "entries": 5, "size": 500}, {"ledgerId": 8, "entries": 0, "size": 0}],
    "cursors": {"orders sub": _cur("5:1", "5:4", "[(5:2..5:3]]", **{"pulsar.replicated.subscription": 1}),
                "plain": _cur("8:-1", "8:0"), "pulsar.repl.west": _cur("8:2", "8:3")}}
CONSUMER = {"msgOutCounter": 30, "consumerName": "c-1", "lastConsumedTimestamp": T0 + 9}
STATS = {"msgRateIn": 1.5, "publishers": [],
         "subscriptions": {"orders sub": {"isReplicated": True, "isDurable": True, "msgOutCounter": 42,
                                          "lastConsumedTimestamp": T0 + 9,
                                          "consumers": [CONSUMER, {**CONSUMER, "msgOutCounter": 12}]},
                           "plain": {"isReplicated": True, "isDurable": True, "msgOutCounter": 0,
                                     "lastConsumedTimestamp": 0, "consumers": []},  # a standby's
                           "drained": {"isReplicated": True, "isDurable": True, "msgOutCounter": 7,
                                       "lastConsumedTimestamp": 0, "consumers": []},  # its consumers left
                           "only-in-stats": {"isReplicated": False, "isDurable": False}},
         "replication": {"west": {"connected": True, "replicationBacklog": 0, "replicationDelayInSeconds": 1,
                                  "msgRateOut": 2.5}}}


def _write(root: Path, key: str, data: bytes) -> None:
    p = root / key
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)


def _raw(root: Path) -> Path:
    raw = root / "raw"
    o = "pulsar/east/topics/t/ns/orders/"
    _write(raw, o + "stats-internal.json", json.dumps(STATS_INTERNAL).encode())
    _write(raw, o + "stats.json", json.dumps(STATS).encode())
    # when each read happened (.read.json), and the reread of the cursors after every cluster was collected
    _write(raw, o + "stats-internal.json.read.json", encode_read_instant("http://b/internalStats", T0, T0 + 40))
    reread = {**STATS_INTERNAL, "cursors": {**STATS_INTERNAL["cursors"], "orders sub": _cur("8:0", "8:1")}}
    _write(raw, o + "rereads/1/stats-internal.json", json.dumps(reread).encode())
    _write(raw, o + "rereads/1/stats-internal.json.read.json", encode_read_instant(None, T0 + 60_000, T0 + 60_030))
    _write(raw, o + "stats.json.read.json", b'{"requested_at_ms": 5, "answered_at_ms": 4}')
    _write(raw, o + "subscriptions/orders%20sub/replicated-status.json", json.dumps({ORDERS: True}).encode())
    _write(raw, o + "subscriptions/ghost/replicated-status.json", json.dumps({ORDERS: False}).encode())
    _write(raw, o + "dump.json", json.dumps({"topic": ORDERS, "from": "5:1", "to": "8:2", "complete": False}).encode())
    snap = markers.encode_snapshot("s-1", (5, 1), {"west": (30, 4)})
    bad = encode_entry_line(5, 4, b"x").replace(b'"5:4"', b'"5:9"')
    _write(raw, o + "dump/5/2-4.jsonl", encode_entry_line(5, 2, snap, producer_name="pulsar.marker", sequence_id=0,
                                                          replicate_to=["east"], marker_type=12)
           + encode_gap_line(5, 3, 404, "404 Entry not found") + bad)
    _write(raw, o + "dump/8/0-2.jsonl", encode_entry_line(8, 0, b"a", producer_name="p-east", sequence_id=1,
                                                          publish_time_ms=T0)
           + encode_entry_line(8, 1, b"bb", producer_name="p-west", sequence_id=7, publish_time_ms=T0 + 1,
                               replicated_from="west", properties={"__MSG_PROP_REPL_SOURCE_POSITION": "30:5"}))
    # a position of a different topic filed under orders (ledger 77 is not one of orders' ledgers)
    _write(raw, o + "dump/77/0-0.jsonl", encode_entry_line(77, 0, b"z", producer_name="p-east", sequence_id=9))
    # the message TTL: the applied one, a namespace's from a broker without that GET, one that sets none, and one
    # of a topic nothing else was collected for (no topic row of its own)
    _write(raw, o + "message-ttl.json", b"60")
    _write(raw, o + "message-ttl.json.read.json", encode_read_instant("http://b/messageTTL?applied=true", T0, T0 + 2))
    _write(raw, "pulsar/east/topics/t/ns/txlog/namespace-message-ttl.json", b"30")
    _write(raw, "pulsar/east/topics/t/ns/legacy/namespace-message-ttl.json", b"")
    _write(raw, "pulsar/east/topics/t/ns/ttl-only/message-ttl.json", b"5")
    _write(raw, "pulsar/east/topics/t/ns/txlog/stats-internal.json",
           (REAL / "pulsar-stats-internal-01.json").read_bytes())
    _write(raw, "pulsar/east/topics/t/ns/txlog/stats.json", (REAL / "pulsar-stats-replication-07.json").read_bytes())
    shell = (REAL / "pulsar-stats-internal-08.txt").read_text()
    _write(raw, "pulsar/east/topics/t/ns/legacy/stats-internal.json",
           re.search(r"^\{.*?^\}", shell, re.S | re.M).group(0).encode())
    _write(raw, "pulsar/east/topics/t/ns/broken/stats-internal.json", b'{"lastConfirmedEntry": "1:2", "ledgers": []}')
    _write(raw, "pulsar/east/topics/t/ns/broken/stats.json", b"<html><title>502 Bad Gateway</title></html>")
    _write(raw, "pulsar/east/topics/t/ns/empty/stats-internal.json", b"")
    _write(raw, "pulsar/east/collection.json", b"{}")
    _write(raw, "pulsar/east/stray.txt", b"?")
    resp = markers.encode_snapshot_response("s-1", "west", 30, 4)
    _write(raw, "pulsar/west/topics/t/ns/orders/dump/30/4-4.jsonl",
           encode_entry_line(30, 4, resp, producer_name="pulsar.marker", sequence_id=0, replicate_to=["east"],
                             marker_type=11, replicated_from=None))
    _write(raw, "bookkeeper/bk-a/collection.json", b"{}")  # another system: not Pulsar's to judge
    return raw


@pytest.fixture(scope="module")
def out(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("attempt")
    raw, tables = _raw(root), root / "tables"
    spark.createDataFrame([("bookkeeper", "bk-a", "raw/bookkeeper/bk-a/x", "ledger-metadata-znode", "bad")],
                          T.QUARANTINE).write.parquet(str(tables / "quarantine" / "system=bookkeeper"))
    counts = run.run_stage(spark, "pulsar", "normalize", str(raw), str(tables))
    return counts, {name: _rows(tables / name) for name in list(T.SCHEMAS)}


def _rows(path) -> list[dict]:
    """A table folder, a shared one's system=<name> folders included."""
    return ds.dataset(str(path), format="parquet").to_table().to_pylist()


def test_topics(out):
    got = {(r["cluster"], r["topic"]): tuple(r[c] for c in T.TOPICS.fieldNames()[2:]) for r in out[1]["pulsar_topics"]}
    assert got == {
        ("east", ORDERS): ("LedgerOpened", 8, 2, 8, 5, 1, 8, 2, False, 60, None, E + "orders/stats-internal.json"),
        ("east", "persistent://t/ns/txlog"): ("LedgerOpened", 13, 2, 3, *[None] * 5, None, 30,
                                              E + "txlog/stats-internal.json"),
        ("east", "persistent://t/ns/legacy"): ("LedgerOpened", 0, 8, 9, *[None] * 7, E + "legacy/stats-internal.json")}


def test_ledgers_take_open_counts_from_current_ledger(out):
    got = sorted((r["topic"][len("persistent://t/ns/"):], r["ledger_id"], r["entries"], r["size"], r["is_open"])
                 for r in out[1]["pulsar_ledgers"])
    assert got == [("legacy", 0, 9, 441, True), ("orders", 5, 5, 500, False), ("orders", 8, 3, 300, True),
                   ("txlog", 13, 3, 63, True)]


def test_cursors(out):
    got = {r["cursor"]: (r["kind"], r["remote_cluster"], r["replicated"], r["mark_delete_ledger"],
                         r["mark_delete_entry"], r["read_ledger"], r["read_entry"], r["individually_deleted"],
                         r["state"]) for r in out[1]["pulsar_cursors"] if r["read"] == 0}
    assert got == {
        "orders sub": ("subscription", None, True, 5, 1, 5, 4,
                       [{"from_ledger": 5, "from_entry": 2, "to_ledger": 5, "to_entry": 3}], "Open"),
        "plain": ("subscription", None, True, 8, -1, 8, 0, [], "Open"),  # isReplicated in stats
        "pulsar.repl.west": ("replicator", "west", False, 8, 2, 8, 3, [], "Open"),
        "transaction.subscription": ("subscription", None, False, 13, 2, 13, 3, [], "Open")}


def test_every_read_of_the_cursors_with_its_instant(out):
    got = sorted((r["topic"][len("persistent://t/ns/"):], r["read"], r["cursor"], r["mark_delete_ledger"],
                  r["mark_delete_entry"], r["read_requested_ms"], r["read_answered_ms"])
                 for r in out[1]["pulsar_cursors"] if r["topic"] == ORDERS)
    assert got == [("orders", 0, "orders sub", 5, 1, T0, T0 + 40), ("orders", 0, "plain", 8, -1, T0, T0 + 40),
                   ("orders", 0, "pulsar.repl.west", 8, 2, T0, T0 + 40),
                   ("orders", 1, "orders sub", 8, 0, T0 + 60_000, T0 + 60_030),
                   ("orders", 1, "plain", 8, -1, T0 + 60_000, T0 + 60_030),
                   ("orders", 1, "pulsar.repl.west", 8, 2, T0 + 60_000, T0 + 60_030)]
    txlog = {r["read"]: (r["read_requested_ms"], r["read_answered_ms"]) for r in out[1]["pulsar_cursors"]
             if r["topic"] == "persistent://t/ns/txlog"}
    assert txlog == {0: (None, None)}   # no .read.json: the instant is unknown, never invented


def test_entries(out):
    got = {(r["cluster"], r["ledger_id"], r["entry_id"]): r for r in out[1]["pulsar_entries"]}
    assert sorted(got) == [("east", 5, 2), ("east", 8, 0), ("east", 8, 1), ("west", 30, 4)]
    snap = got[("east", 5, 2)]
    assert (snap["marker_type"], snap["snapshot_id"], snap["marker_local_ledger"], snap["marker_local_entry"],
            snap["marker_clusters"], snap["replicate_to"], snap["producer_name"]) == (
        12, "s-1", 5, 1, [{"cluster": "west", "ledger_id": 30, "entry_id": 4}], ["east"], "pulsar.marker")
    copy = got[("east", 8, 1)]
    assert (copy["replicated_from"], copy["source_position_ledger"], copy["source_position_entry"],
            copy["sequence_id"], copy["publish_time_ms"], copy["marker_type"], copy["replicate_to"]) == (
        "west", 30, 5, 7, T0 + 1, None, None)
    assert got[("east", 8, 0)]["source_key"] == E + "orders/dump/8/0-2.jsonl"
    assert got[("west", 30, 4)]["marker_clusters"] == [{"cluster": "west", "ledger_id": 30, "entry_id": 4}]


def test_entry_gaps(out):
    got = sorted((r["ledger_id"], r["entry_id"], r["status"], r["error"].split(":")[0])
                 for r in out[1]["pulsar_entry_gaps"])
    assert got == [(5, 3, 404, "404 Entry not found"), (5, 4, 200, "undecodable line"),
                   (8, 2, 0, "no line in the dump chunk")]


def test_replication_and_subscriptions(out):
    assert sorted(tuple(r.values()) for r in out[1]["pulsar_replication"]) == [
        ("east", ORDERS, "west", True, 0, 1, 2.5, E + "orders/stats.json"),
        ("east", "persistent://t/ns/txlog", "jp-west", False, 6258001, 0, 0.0, E + "txlog/stats.json")]  # real -07
    assert T.SUBSCRIPTIONS.fieldNames() == [
        "cluster", "topic", "subscription", "is_replicated", "is_durable", "replicated_status", "consumers",
        "msg_out_counter", "last_consumed_ms", "consumed_here", "source_key"]
    got = {r["subscription"]: (r["is_replicated"], r["is_durable"],
                               r["replicated_status"] and dict(r["replicated_status"]), r["source_key"])
           for r in out[1]["pulsar_subscriptions"]}
    assert got == {"orders sub": (True, True, {ORDERS: True}, E + "orders/stats.json"),
                   "plain": (True, True, None, E + "orders/stats.json"),
                   "drained": (True, True, None, E + "orders/stats.json"),
                   "only-in-stats": (False, False, None, E + "orders/stats.json"),
                   "ghost": (None, None, {ORDERS: False}, E + "orders/subscriptions/ghost/replicated-status.json")}
    # real -07 has `"subscriptions" : { }`: no subscription rows for txlog
    assert {r["topic"] for r in out[1]["pulsar_subscriptions"]} == {ORDERS}


def test_subscription_consumption_evidence(out):
    got = {r["subscription"]: (r["consumers"], r["msg_out_counter"], r["last_consumed_ms"], r["consumed_here"])
           for r in out[1]["pulsar_subscriptions"]}
    assert got == {"orders sub": (2, 42, T0 + 9, True), "plain": (0, 0, 0, False), "drained": (0, 7, 0, True),
                   "only-in-stats": (None, None, None, None),  # an old broker: no counters, no consumers key
                   "ghost": (None, None, None, None)}  # no stats entry at all


def test_quarantine_keeps_bookkeeper_rows_and_names_source_and_field(out):
    counts, tables = out
    rows = sorted((r["system"], r["source_key"], r["payload_kind"]) for r in tables["quarantine"])
    assert rows == [("bookkeeper", "raw/bookkeeper/bk-a/x", "ledger-metadata-znode"),
                    ("pulsar", "raw/pulsar/east/stray.txt", "unknown"),
                    ("pulsar", E + "broken/stats-internal.json", "stats-internal"),
                    ("pulsar", E + "broken/stats.json", "stats"),
                    ("pulsar", E + "empty/stats-internal.json", "stats-internal"),
                    ("pulsar", E + "orders/dump/5/2-4.jsonl", "dump-chunk"),
                    ("pulsar", E + "orders/dump/77/0-0.jsonl", "dump-chunk"),
                    ("pulsar", E + "orders/dump/8/0-2.jsonl", "dump-chunk"),
                    ("pulsar", E + "orders/stats.json.read.json", "read-instant"),
                    # west's chunk has no dump.json beside it: not covered, by name
                    ("pulsar", "raw/pulsar/west/topics/t/ns/orders/dump/30/4-4.jsonl", "dump-window")]
    reasons = {r["source_key"]: r["reason"] for r in tables["quarantine"]}
    assert reasons[E + "broken/stats-internal.json"] == (
        E + "broken/stats-internal.json: field cursors: expected an object of cursor name -> cursor stats, got nothing")
    assert reasons[E + "broken/stats.json"].startswith(
        E + "broken/stats.json: field <root>: expected a JSON object (got an HTML page: 502 Bad Gateway)")
    assert reasons[E + "orders/dump/5/2-4.jsonl"] == (
        E + "orders/dump/5/2-4.jsonl:line 3: field headers.X-Pulsar-Message-ID: expected '5:4' (the position "
            "asked for), got '5:9'")
    assert reasons[E + "orders/dump/77/0-0.jsonl"] == (
        E + "orders/dump/77/0-0.jsonl: field ledger_id: expected a ledger of persistent://t/ns/orders (its "
            "stats-internal ledgers), got position 77:0 -- a position from a different topic")
    assert reasons[E + "orders/stats.json.read.json"] == (
        E + "orders/stats.json.read.json: field answered_at_ms: expected at or after requested_at_ms (5), got 4")
    # Pulsar's own quarantine rows
    assert counts["quarantine"] == 9 and counts["pulsar_entries"] == 4 and counts["pulsar_topics"] == 3


def test_no_pulsar_raw_data_still_writes_every_table_and_replaces_old_pulsar_rows(spark, tmp_path):
    (tmp_path / "raw" / "bookkeeper").mkdir(parents=True)
    old = [("bookkeeper", "bk-a", "raw/bookkeeper/bk-a/x", "k", "bad"),
           ("pulsar", "east", "raw/pulsar/east/y", "k", "old")]
    for system in ("bookkeeper", "pulsar"):
        spark.createDataFrame([r for r in old if r[0] == system], T.QUARANTINE).write.parquet(
            str(tmp_path / "tables" / "quarantine" / f"system={system}"))
    counts = run.run_stage(spark, "pulsar", "normalize", str(tmp_path / "raw"), str(tmp_path / "tables"))
    assert counts == {**{name: 0 for name in T.SCHEMAS}, "quarantine": 0}
    for name, schema in T.SCHEMAS.items():
        assert spark.read.parquet(str(tmp_path / "tables" / name)).schema.fieldNames() == schema.fieldNames()
    assert [r["source_key"] for r in _rows(tmp_path / "tables" / "quarantine")] == [
        "raw/bookkeeper/bk-a/x"]  # a re-run replaces this normalizer's rows and keeps BookKeeper's


def test_main_parses_arguments(tmp_path):
    with pytest.raises(SystemExit):
        run.main(["--system", "pulsar", "--stage", "normalize", "--input", str(tmp_path / "missing"),
                  "--output", str(tmp_path / "t")])


# -- row decoding without Spark -------------------------------------------------------------------
def _decode(key: str, data: bytes) -> list:
    from audit.systems.pulsar.transforms.decode import decode_file

    return decode_file(key, data)


def test_chunk_key_repeated_line_and_window_mismatch():
    bad_key = _decode(E + "orders/dump/5/4-2.jsonl", encode_entry_line(5, 4))
    assert [(t, r["reason"]) for t, r in bad_key] == [("quarantine", E + "orders/dump/5/4-2.jsonl: field key: expected "
                                                       "dump/<ledgerId>/<firstEntryId>-<lastEntryId>.jsonl, got "
                                                       "'dump/5/4-2.jsonl'")]
    twice = _decode(E + "orders/dump/5/0-0.jsonl", encode_entry_line(5, 0) + encode_entry_line(5, 0))
    assert [t for t, _ in twice] == ["pulsar_entries", "quarantine"] and "repeated" in twice[1][1]["reason"]
    stray = _decode(E + "orders/dump/5/0-0.jsonl", encode_entry_line(6, 0))
    assert [t for t, _ in stray] == ["quarantine", "quarantine", "pulsar_entry_gaps"]
    assert "field ledger_id/entry_id: expected a position in 5:0..5:0" in stray[0][1]["reason"]
    window = _decode(E + "orders/dump.json",
                     json.dumps({"topic": "persistent://t/ns/other", "complete": True}).encode())
    assert window[0][0] == "quarantine" and "field topic" in window[0][1]["reason"]


def test_keys_of_other_systems_and_the_collection_report_give_no_rows():
    assert _decode("raw/bookkeeper/bk-a/bookies/available.json", b"{}") == []
    assert _decode("raw/_lab/east/ground_truth.json", b"{}") == []
    assert _decode("raw/pulsar/east/collection.json", b"not even json") == []
