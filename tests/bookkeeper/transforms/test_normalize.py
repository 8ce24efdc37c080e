"""normalize_bookkeeper over a raw folder written with the project's own encoders."""
import json

import pytest

from audit.systems.bookkeeper.domain.model import CLOSED, OPEN
from audit.systems.bookkeeper.formats.availability import encode_entries
from audit.systems.bookkeeper.formats.ledger_metadata import encode_znode
from audit.systems.bookkeeper.formats.protocol import encode_response
from audit.systems.bookkeeper.transforms import normalize as T
from tests.bookkeeper.domain.cases import ledger

PULSAR = {"application": b"pulsar", "pulsar/managed-ledger": b"public/default/persistent/t1", "bin": b"\x00\xff"}


def _write(root, key, data):
    p = root / key
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    raw = tmp_path_factory.mktemp("attempt") / "raw"
    c = raw / "bookkeeper" / "bk-a"
    md1 = ledger({0: ["bk1:3181", "bk2:3181"]}, 9, Qw=2, Qa=2, ledger_id=1, custom_metadata=PULSAR)
    md_big = ledger({0: ["bk1:3181", "bk2:3181"]}, -1, ledger_id=4_294_967_297, state=OPEN, ctime=123)
    md7 = ledger({0: ["bk1:3181", "bk2:3181"]}, 3, ledger_id=7)
    _write(c, "ledger-metadata/00/0000/L0001", encode_znode(md1))                       # hierarchical 2-4-4
    _write(c, "ledger-metadata/000/0000/0042/9496/L7297", encode_znode(md_big))         # long 3-4-4-4-4
    _write(c, "ledger-metadata/L0000000007", encode_znode(md7, version=2))              # flat
    _write(c, "ledger-metadata/00/0000/L0008", b"BookieMetadataFormatVersion\t3\n\xff\xff")  # corrupt
    _write(c, "ledger-metadata/idgen/ID-0000000001", b"")                              # not a ledger node
    _write(c, "entries-of-ledger/bk1:3181/1.pb", encode_response(1, 1, "EOK", encode_entries(range(10))))
    _write(c, "entries-of-ledger/bk2:3181/1.pb", encode_response(2, 1, "ENOLEDGER", None))
    _write(c, "entries-of-ledger/bk1:3181/7.pb", encode_response(3, 8, "EOK", encode_entries([0])))  # wrong id
    _write(c, "entries-of-ledger/bk2:3181/7.error.json",
           json.dumps({"error": "timeout", "message": "no answer in 30 s"}).encode())
    _write(c, "bookies/available.json", json.dumps(
        {"available": ["bk1:3181"], "readonly": ["bk2:3181"],
         "cookies": ["bk1:3181", "bk2:3181", "bk9:3181"]}).encode())
    _write(c, "bookies/racks.json", json.dumps({"bk1:3181": "/dc/r1"}).encode())
    _write(c, "collection.json", b"{}")
    _write(c, "stray.txt", b"?")
    _write(raw, "_lab/bk-a/ground_truth.json", b"{}")                                   # not BookKeeper's
    out = T.normalize(spark, str(raw))
    return {name: [r.asDict(recursive=True) for r in df.collect()] for name, df in out.items()} | {
        "schemas": {name: df.schema for name, df in out.items()}}


def test_ledgers(tables):
    rows = {r["ledger_id"]: r for r in tables["bk_ledgers"]}
    assert sorted(rows) == [1, 7, 4_294_967_297]
    r1 = rows[1]
    assert (r1["cluster"], r1["state"], r1["ensemble_size"], r1["write_quorum"], r1["ack_quorum"], r1["last_entry_id"],
            r1["format_version"]) == ("bk-a", CLOSED, 2, 2, 2, 9, 3)
    assert r1["source_key"] == "raw/bookkeeper/bk-a/ledger-metadata/00/0000/L0001"
    assert r1["owner_topic"] == "public/default/persistent/t1"
    assert r1["custom_metadata"]["bin"] == "base64:AP8="
    assert r1["segments"] == [{"first_entry_id": 0, "ensemble": ["bk1:3181", "bk2:3181"]}]
    assert (rows[4_294_967_297]["state"], rows[4_294_967_297]["ctime"]) == (OPEN, 123)
    assert rows[7]["format_version"] == 2


def test_entry_availability(tables):
    rows = {(r["bookie"], r["ledger_id"]): r for r in tables["bk_entry_availability"]}
    ok = rows[("bk1:3181", 1)]
    assert ok["status"] == "ok" and ok["groups"] == [
        {"first_sequence_start": 0, "last_sequence_start": 0, "sequence_size": 10, "sequence_period": 0}]
    assert rows[("bk2:3181", 1)]["status"] == "no_such_ledger"
    assert rows[("bk1:3181", 7)]["status"] == "error" and "ledgerId" in rows[("bk1:3181", 7)]["error"]
    assert (rows[("bk2:3181", 7)]["status"], rows[("bk2:3181", 7)]["error"]) == ("unavailable",
                                                                                 "timeout: no answer in 30 s")
    assert len(rows) == 4


def test_bookies(tables):
    assert sorted((r["bookie"], r["state"], r["rack"]) for r in tables["bk_bookies"]) == [
        ("bk1:3181", "available", "/dc/r1"), ("bk2:3181", "readonly", None), ("bk9:3181", "registered", None)]


def test_quarantine_names_every_bad_payload(tables):
    got = sorted((r["source_key"].split("bk-a/")[1], r["payload_kind"]) for r in tables["quarantine"])
    assert got == [("entries-of-ledger/bk1:3181/7.pb", "entries-of-ledger"),
                   ("ledger-metadata/00/0000/L0008", "ledger-metadata-znode"),
                   ("ledger-metadata/idgen/ID-0000000001", "ledger-metadata-znode"),
                   ("stray.txt", "unknown")]
    assert all(r["reason"] and r["system"] == "bookkeeper" and r["cluster"] == "bk-a" for r in tables["quarantine"])


def test_schemas_follow_the_contract(tables):
    s = tables["schemas"]
    assert [f.name for f in s["bk_ledgers"].fields] == T.LEDGERS.fieldNames()
    assert s["bk_entry_availability"].simpleString() == T.AVAILABILITY.simpleString()
    assert s["bk_bookies"].simpleString() == T.BOOKIES.simpleString()
    assert s["quarantine"].simpleString() == T.QUARANTINE.simpleString()
