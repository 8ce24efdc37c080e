"""Sniffing native payloads into JSON-able descriptions."""
from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from audit.formats import inspect as insp
from audit.systems.bookkeeper.formats import availability
from audit.systems.bookkeeper.formats.protocol import encode_response, frame
from audit.errors import PayloadError

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"


def test_b64_fixture_files():
    v2 = insp.inspect_file(REAL / "bk-ledgermetadata-znode-v2.b64")
    v3 = insp.inspect_file(REAL / "bk-ledgermetadata-znode-v3.b64")
    assert v2["kind"] == v3["kind"] == "bookkeeper.ledger_metadata_znode" and v2["base64"]
    assert (v2["format_version"], v2["state"], v2["digest_type"]) == (2, "IN_RECOVERY", "CRC32")
    assert (v3["format_version"], v3["ack_quorum_size"], v3["ctoken"]) == (3, 1, 0)
    json.dumps(v3)  # JSON-able


def test_raw_znode_file_gets_ledger_id_from_its_path(tmp_path):
    path = tmp_path / "ledger-metadata" / "00" / "0000" / "L0042"
    path.parent.mkdir(parents=True)
    path.write_bytes(base64.b64decode((REAL / "bk-ledgermetadata-znode-v3.b64").read_text()))
    out = insp.inspect_file(path)
    assert out["ledger_id"] == 42 and out["segments"][0]["ensemble"][0] == "192.0.2.1:3181"
    assert "base64" not in out and "foobar" not in json.dumps(out)


def test_admin_json():
    doc = {"5": {"metadataFormatVersion": 3, "ensembleSize": 1, "writeQuorumSize": 1, "ackQuorumSize": 1,
                 "state": "OPEN", "digestType": "CRC32C", "password": "", "ctime": 1, "ctoken": 2,
                 "customMetadata": {"application": base64.b64encode(b"pulsar").decode()},
                 "allEnsembles": {"0": [{"id": "bk1:3181"}]}}}
    out = insp.inspect_bytes(json.dumps(doc).encode(), "http.json")
    assert out["kind"] == "bookkeeper.ledger_metadata_admin_json"
    assert out["ledgers"][0]["ledger_id"] == 5 and out["ledgers"][0]["custom_metadata"] == {"application": "pulsar"}


def test_availability_and_response_bare_framed_and_b64():
    avail = availability.encode_entries([0, 1, 2, 10])
    a = insp.inspect_bytes(avail, "a.bin")
    assert a["kind"] == "bookkeeper.availability_of_entries" and a["entry_count"] == 4
    body = encode_response(7, 99, "EOK", avail)
    for data, framed in ((body, False), (frame(body), True)):
        r = insp.inspect_bytes(data, "7.pb")
        assert r["kind"] == "bookkeeper.entries_of_ledger_response" and r["framed"] is framed
        assert (r["status"], r["ledger_id"], r["txn_id"], r["entry_count"]) == ("EOK", 99, 7, 4)
    r = insp.inspect_bytes(base64.b64encode(encode_response(1, 5, "ENOLEDGER", None)) + b"\n", "x.b64")
    assert r["status"] == "ENOLEDGER" and "groups" not in r and r["base64"]


def test_unknown_and_broken_payloads():
    for data in (b"hello world!", b"", bytes(65), b"\x0a\x02garbage", b"{\"a\": 1}", b"QUJD"):
        with pytest.raises(PayloadError) as ei:
            insp.inspect_bytes(data, "mystery.bin")
        assert ei.value.source == "mystery.bin" and ei.value.field == "payload"
    truncated = base64.b64decode((REAL / "bk-ledgermetadata-znode-v3.b64").read_text())[:-5]
    with pytest.raises(PayloadError) as ei:
        insp.inspect_bytes(truncated, "zk:/ledgers/00/0000/L0001")
    assert ei.value.field == "LedgerMetadataFormat" and ei.value.source == "zk:/ledgers/00/0000/L0001"
    with pytest.raises(PayloadError) as ei:
        insp.inspect_bytes(b"BookieMetadataFormatVersion\t9\n", "zk:/l")
    assert ei.value.field == "header"


def test_registry():
    """A registered system's sniffers join inspect; a kind registered twice is refused."""
    from dataclasses import replace

    from tests.demo_system import SYSTEM, registered

    magic = ("test.magic", lambda d, n: d.startswith(b"MAGIC"), lambda d, n: {"size": len(d)})
    with registered(replace(SYSTEM, pipeline=replace(SYSTEM.pipeline, sniffers=lambda: ((), [magic])))):
        assert insp.inspect_bytes(b"MAGIC!", "m") == {"kind": "test.magic", "source": "m", "size": 6}
    with registered(replace(SYSTEM, pipeline=replace(SYSTEM.pipeline, sniffers=lambda: ((), [magic, magic])))):
        with pytest.raises(ValueError):
            insp.inspect_bytes(b"MAGIC!", "m")
