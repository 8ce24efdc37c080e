"""Admin HTTP `GET /api/v1/ledger/metadata/?ledger_id=N` answers (docs/formats/bookkeeper.md §1.5)."""
from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from audit.systems.bookkeeper.domain.model import CLOSED, OPEN, Segment
from audit.systems.bookkeeper.formats.ledger_metadata import decode_admin_json, decode_znode, redact_admin_json
from audit.errors import PayloadError

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"


def _bean(**over) -> dict:
    bean = {
        "metadataFormatVersion": 3, "ensembleSize": 3, "writeQuorumSize": 2, "ackQuorumSize": 1,
        "ctoken": 0, "ctime": -1, "state": "OPEN", "closed": False, "length": 0, "lastEntryId": -1,
        "digestType": "CRC32C", "password": base64.b64encode(b"foobar").decode(), "customMetadata": {},
        "allEnsembles": {"0": [{"id": "192.0.2.1:3181"}, {"id": "192.0.2.2:3181"}, {"id": "192.0.2.3:3181"}]},
    }
    bean.update(over)
    return bean


def test_same_ledger_via_http_and_znode_decodes_equal():
    """The v3 test vector's ledger, as the admin endpoint would print it."""
    znode = decode_znode(base64.b64decode((REAL / "bk-ledgermetadata-znode-v3.b64").read_text()), "zk", 7)
    [http] = decode_admin_json(json.dumps({"7": _bean()}).encode(), "http:7")
    assert http == znode


def test_closed_ledger_custom_metadata_and_segment_order():
    bean = _bean(state="CLOSED", closed=True, length=13417, lastEntryId=78, digestType="MAC",
                 customMetadata={"application": base64.b64encode(b"pulsar").decode()},
                 allEnsembles={"100": [{"id": "bk3:3181"}, {"id": "bk2:3181"}],
                               "0": [{"id": "bk1:3181"}, {"id": "bk2:3181"}]})
    [md] = decode_admin_json({"12": bean}, "obj")
    assert md.ledger_id == 12 and md.state == CLOSED and (md.last_entry_id, md.length) == (78, 13417)
    assert md.digest_type == "HMAC"  # API name MAC normalised to the znode's protobuf name
    assert md.custom_metadata == {"application": b"pulsar"}
    assert md.segments == (Segment(0, ("bk1:3181", "bk2:3181")), Segment(100, ("bk3:3181", "bk2:3181")))


def test_older_bean_shape_hostname_port():
    bean = _bean(metadataFormatVersion=2, allEnsembles={"0": [{"hostname": "10.0.0.1", "port": 3181}]},
                 hasPassword=False, ctoken=None)
    del bean["ackQuorumSize"]
    [md] = decode_admin_json(json.dumps({"3": bean}), "old")
    assert md.segments == (Segment(0, ("10.0.0.1:3181",)),)
    assert not md.has_password and md.digest_type is None and md.ack_quorum_size == 2 and md.ctoken is None


def test_several_ledgers_in_one_answer():
    mds = decode_admin_json({"1": _bean(), "2": _bean(state="IN_RECOVERY")}, "list")
    assert [m.ledger_id for m in mds] == [1, 2] and mds[0].state == OPEN


@pytest.mark.parametrize("doc,field", [
    (b"{not json", "json"),
    ([], "(root)"),
    ({"x": _bean()}, "(root)"),
    ({"1": None}, "1"),
    ({"1": _bean(ensembleSize=None)}, "1.ensembleSize"),
    ({"1": _bean(writeQuorumSize="2")}, "1.writeQuorumSize"),
    ({"1": _bean(state="DELETED")}, "1.state"),
    ({"1": _bean(digestType="SHA1")}, "1.digestType"),
    ({"1": _bean(customMetadata={"k": "%%%"})}, "1.customMetadata.k"),
    ({"1": _bean(allEnsembles={"0": [{"ip": "x"}]})}, "1.allEnsembles.0"),
    ({"1": _bean(allEnsembles={"first": []})}, "1.allEnsembles"),
    ({"1": _bean(allEnsembles=None)}, "1.allEnsembles"),
])
def test_bad_answers(doc, field):
    with pytest.raises(PayloadError) as ei:
        decode_admin_json(doc, "http://bookie:8000/api/v1/ledger/metadata/?ledger_id=1")
    assert ei.value.field == field and ei.value.source.startswith("http://bookie")


def test_redact_admin_json_bytes_keeps_everything_else():
    bean = _bean(customMetadata={"password": base64.b64encode(b"not-a-secret").decode()})
    raw = json.dumps({"7": bean}, indent=2).encode()
    red = redact_admin_json(raw, "http")
    secret = base64.b64encode(b"foobar")
    assert secret not in red
    assert red == raw.replace(b'"password": "' + secret + b'"', b'"password": ""')
    assert decode_admin_json(red, "http") == decode_admin_json(raw, "http")
    assert decode_admin_json(red, "http")[0].custom_metadata["password"] == b"not-a-secret"


def test_redact_admin_json_object_and_null_password():
    red = redact_admin_json({"7": _bean(), "8": _bean(password=None)}, "obj")
    doc = json.loads(red)
    assert doc["7"]["password"] == "" and doc["8"]["password"] is None
