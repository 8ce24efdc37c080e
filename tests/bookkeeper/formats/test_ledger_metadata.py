"""Ledger-metadata znodes v1/v2/v3: real test vectors, round trips, bad input, redaction."""
from __future__ import annotations

import base64
from pathlib import Path

import pytest

from audit.systems.bookkeeper.domain.model import CLOSED, IN_RECOVERY, OPEN, LedgerMetadata, Segment
from audit.systems.bookkeeper.formats import wire
from audit.systems.bookkeeper.formats.ledger_metadata import (
    decode_znode, encode_znode, ledger_id_from_znode_path, redact_password)
from audit.systems.bookkeeper.formats.proto.DataFormats_pb2 import LedgerMetadataFormat
from audit.errors import PayloadError

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"


def _vector(version: int) -> bytes:
    return base64.b64decode((REAL / f"bk-ledgermetadata-znode-v{version}.b64").read_text())


def _md(**over) -> LedgerMetadata:
    base = dict(ledger_id=42, format_version=3, ensemble_size=3, write_quorum_size=2, ack_quorum_size=2,
                state=CLOSED, last_entry_id=250, length=123456,
                segments=(Segment(0, ("bk1:3181", "bk2:3181", "bk3:3181")),
                          Segment(100, ("bk1:3181", "bk4:3181", "bk3:3181"))),
                digest_type="CRC32C", has_password=True, ctime=1700000000000, ctoken=77,
                custom_metadata={"application": b"pulsar", "pulsar/managed-ledger": b"public/default/persistent/t",
                                 "bin": b"\x00\xff\n\"'"})
    base.update(over)
    return LedgerMetadata(**base)


# ---------------------------------------------------------------- real test vectors (see .src.txt)
def test_v2_vector_every_field():
    md = decode_znode(_vector(2), "vec2", ledger_id=5)
    assert md.ledger_id == 5 and md.format_version == 2
    assert md.write_quorum_size == 2          # quorumSize: 2
    assert md.ensemble_size == 3              # ensembleSize: 3
    assert md.length == 0                     # length: 0
    assert md.last_entry_id == -1             # lastEntryId: -1
    assert md.state == IN_RECOVERY            # state: IN_RECOVERY
    assert md.segments == (Segment(0, ("192.0.2.1:1234", "192.0.2.2:1234", "192.0.2.3:1234")),)
    assert md.digest_type == "CRC32"          # digestType: CRC32
    assert md.has_password                    # password: "passwd" (value itself is dropped)
    assert md.ack_quorum_size == 2            # ackQuorumSize: 2
    assert md.ctime is None and md.ctoken is None and dict(md.custom_metadata) == {}


def test_v3_vector_every_field():
    data = _vector(3)
    assert data[len(b"BookieMetadataFormatVersion\t3\n")] == 0x60  # varint length 96
    md = decode_znode(data, "vec3")
    assert md.ledger_id is None and md.format_version == 3
    assert (md.write_quorum_size, md.ensemble_size, md.length, md.last_entry_id) == (2, 3, 0, -1)
    assert md.state == OPEN
    assert md.segments == (Segment(0, ("192.0.2.1:3181", "192.0.2.2:3181", "192.0.2.3:3181")),)
    assert md.digest_type == "CRC32C" and md.has_password
    assert md.ack_quorum_size == 1            # Qa < Qw
    assert md.ctime == -1 and md.ctoken == 0


@pytest.mark.parametrize("version,password", [(2, b"passwd"), (3, b"foobar")])
def test_encode_reproduces_vector_bytes(version, password):
    data = _vector(version)
    assert encode_znode(decode_znode(data, "vec"), version, password) == data


# ---------------------------------------------------------------- round trips
@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("state", [OPEN, IN_RECOVERY, CLOSED])
def test_round_trip_v2_v3(version, state):
    md = _md(format_version=version, state=state, ctoken=None if version == 2 else 77,
             last_entry_id=250 if state == CLOSED else -1, length=123456 if state == CLOSED else 0)
    data = encode_znode(md, version, b"secret")
    assert decode_znode(data, "rt", ledger_id=42) == md


def test_v2_drops_ctoken_like_bookkeeper():
    md = decode_znode(encode_znode(_md(format_version=2), 2), "rt", 42)
    assert md.ctoken is None and md.ctime == 1700000000000


def test_v1_text_layout_and_round_trip():
    md = LedgerMetadata(9, 1, 3, 2, 2, CLOSED, 17, 900,
                        (Segment(0, ("a:1", "b:1", "c:1")), Segment(10, ("a:1", "d:1", "c:1"))))
    data = encode_znode(md, 1)
    assert data == b"BookieMetadataFormatVersion\t1\n2\n3\n900\n0\ta:1\tb:1\tc:1\n10\ta:1\td:1\tc:1\n17\tCLOSED"
    assert decode_znode(data, "v1", 9) == md


def test_v1_in_recovery_and_open():
    rec = decode_znode(b"BookieMetadataFormatVersion\t1\n3\n3\n0\n0\ta:1\tb:1\tc:1\n-102\tCLOSED", "v1")
    assert rec.state == IN_RECOVERY and rec.last_entry_id == -1
    assert rec.ack_quorum_size == rec.write_quorum_size == 3 and not rec.has_password and rec.digest_type is None
    assert encode_znode(rec, 1) == b"BookieMetadataFormatVersion\t1\n3\n3\n0\n0\ta:1\tb:1\tc:1\n-102\tCLOSED"
    opened = decode_znode(b"BookieMetadataFormatVersion\t1\n2\n2\n0\n0\ta:1\tb:1\n", "v1")
    assert opened.state == OPEN and opened.last_entry_id == -1 and opened.segments == (Segment(0, ("a:1", "b:1")),)


def test_v2_without_ack_quorum_means_write_quorum():
    text = (b"BookieMetadataFormatVersion\t2\nquorumSize: 3\nensembleSize: 5\nlength: 10\nlastEntryId: 4\n"
            b"state: CLOSED\nsegment {\n  ensembleMember: \"h:1\"\n  firstEntryId: 0\n}\n")
    md = decode_znode(text, "v2")
    assert md.ack_quorum_size == 3 and md.state == CLOSED and md.last_entry_id == 4
    assert md.digest_type is None and not md.has_password


# ---------------------------------------------------------------- bad input
def _raises(data: bytes, field_part: str, source: str = "zk:/ledgers/00/0000/L0001") -> PayloadError:
    with pytest.raises(PayloadError) as ei:
        decode_znode(data, source)
    err = ei.value
    assert err.source == source and field_part in err.field and source in str(err)
    return err


@pytest.mark.parametrize("cut", [1, 10, 50])
def test_truncated_v3(cut):
    err = _raises(_vector(3)[:-cut], "LedgerMetadataFormat")
    assert "truncated" in str(err.got)


def test_truncated_header_and_length_prefix():
    _raises(b"BookieMetadataFormatVersion\t3", "header")
    _raises(b"BookieMetadata", "header")
    _raises(b"BookieMetadataFormatVersion\t3\n", "length prefix")
    _raises(b"BookieMetadataFormatVersion\t3\n\x80\x80", "length prefix")


def test_unknown_format_version():
    err = _raises(b"BookieMetadataFormatVersion\t9\nwhatever", "header")
    assert err.got == 9 and "(1, 2, 3)" in err.expected


def test_not_a_znode():
    _raises(b"quorumSize: 2\n", "header")
    _raises(b"BookieMetadataFormatVersion\tx\n", "header")


def test_missing_required_fields_are_named():
    _raises(b"BookieMetadataFormatVersion\t2\nquorumSize: 2\nlength: 0\nstate: OPEN\n", "ensembleSize")
    body = LedgerMetadataFormat(quorumSize=2, ensembleSize=2, length=0).SerializePartialToString()
    body += LedgerMetadataFormat(
        segment=[LedgerMetadataFormat.Segment(ensembleMember=["a:1"])]).SerializePartialToString()
    data = b"BookieMetadataFormatVersion\t3\n" + wire.encode_varint(len(body)) + body
    # state has a default but is required: the stored bytes lack it, as do the segment's firstEntryId
    _raises(data, "state")


def test_v2_garbage_and_unknown_field():
    _raises(b"BookieMetadataFormatVersion\t2\nquorumSize: two\n", "LedgerMetadataFormat")
    _raises(b"BookieMetadataFormatVersion\t2\nquorumSize: 2\nbogus: 1\n", "LedgerMetadataFormat")


def test_v3_garbage_and_trailing_bytes():
    _raises(b"BookieMetadataFormatVersion\t3\n\x05\xff\xff\xff\xff\xff", "LedgerMetadataFormat")
    err = _raises(_vector(3) + b"\x00", "LedgerMetadataFormat")
    assert "trailing" in str(err.got)


def test_closed_without_last_entry_and_unsorted_segments():
    closed = LedgerMetadataFormat(quorumSize=2, ensembleSize=2, length=5, state=LedgerMetadataFormat.CLOSED)
    body = closed.SerializeToString()
    _raises(b"BookieMetadataFormatVersion\t3\n" + wire.encode_varint(len(body)) + body, "lastEntryId")
    md = _md(segments=(Segment(5, ("a:1",)), Segment(5, ("b:1",))))
    _raises(encode_znode(md, 3), "segment.firstEntryId")
    _raises(b"BookieMetadataFormatVersion\t1\n2\n2\n0\n5\ta:1\n3\tb:1\n", "segment.firstEntryId")


def test_v1_bad_lines():
    _raises(b"BookieMetadataFormatVersion\t1\n2\n", "ensembleSize")
    _raises(b"BookieMetadataFormatVersion\t1\n2\n3\n", "length")
    _raises(b"BookieMetadataFormatVersion\t1\n2\nx\n0\n", "ensembleSize")
    _raises(b"BookieMetadataFormatVersion\t1\n2\n2\n0\n0\n", "line 4")
    _raises(b"BookieMetadataFormatVersion\t1\n2\n2\n0\n0\ta:1\n7\tCLOSED\n0\tb:1", "line 5")


# ---------------------------------------------------------------- redaction
@pytest.mark.parametrize("version,secret", [(2, b"passwd"), (3, b"foobar")])
def test_redacted_vectors(version, secret):
    data = _vector(version)
    red = redact_password(data, "vec")
    assert secret not in red and b"passwd" not in red and b"foobar" not in red
    assert decode_znode(red, "vec") == decode_znode(data, "vec")
    assert red != data and len(red) == len(data) - len(secret)


def test_v3_redaction_keeps_unknown_fields_and_order():
    fmt = LedgerMetadataFormat()
    fmt.MergeFromString(encode_znode(_md(), 3, b"s3cr3t")[len(b"BookieMetadataFormatVersion\t3\n") + 2:])
    # a field from a future BookKeeper (99) placed before the password keeps its bytes and position
    unknown = wire.encode_varint((99 << 3) | 2) + b"\x03xyz"
    raw = fmt.SerializeToString()
    pw_at = raw.index(b"B\x06s3cr3t")
    body = raw[:pw_at] + unknown + raw[pw_at:]
    data = b"BookieMetadataFormatVersion\t3\n" + wire.encode_varint(len(body)) + body
    red = redact_password(data, "u")
    red_body = red[len(b"BookieMetadataFormatVersion\t3\n") + len(wire.encode_varint(len(body) - 6)):]
    assert red_body == raw[:pw_at] + unknown + b"B\x00" + raw[pw_at + 8:]
    assert b"s3cr3t" not in red and decode_znode(red, "u") == decode_znode(data, "u")


def test_v3_length_prefix_shrinks_across_varint_boundary():
    big = _md(custom_metadata={"k": b"x" * 100})
    data = encode_znode(big, 3, b"p" * 20)
    size, start = wire.read_varint(data, len(b"BookieMetadataFormatVersion\t3\n"), "t", "len")
    assert size >= 128 and start - len(b"BookieMetadataFormatVersion\t3\n") == 2
    red = redact_password(data, "t")
    assert b"p" * 20 not in red and decode_znode(red, "t") == decode_znode(data, "t")


def test_v2_redaction_only_touches_the_top_level_password():
    text = (b"BookieMetadataFormatVersion\t2\nquorumSize: 2\nensembleSize: 2\nlength: 0\nstate: OPEN\n"
            b"segment {\n  ensembleMember: \"password: 'x'\"\n  firstEntryId: 0\n}\n"
            b"digestType: HMAC\npassword: \"a\\\"b\\303\\251\" 'more'\n"
            b"customMetadata {\n  key: \"password\"\n  value: \"keep\"\n}\n")
    red = redact_password(text, "v2")
    assert red == text.replace(b"password: \"a\\\"b\\303\\251\" 'more'", b'password: ""')
    md = decode_znode(red, "v2")
    assert md.custom_metadata == {"password": b"keep"} and md.segments[0].ensemble == ("password: 'x'",)


def test_v1_redaction_is_identity_and_unknown_version_refused():
    data = encode_znode(LedgerMetadata(1, 1, 2, 2, 2, OPEN, -1, 0, (Segment(0, ("a:1", "b:1")),)), 1)
    assert redact_password(data, "v1") == data
    with pytest.raises(PayloadError) as ei:
        redact_password(b"BookieMetadataFormatVersion\t9\n...", "zk:/x")
    assert ei.value.field == "header" and ei.value.source == "zk:/x"


def test_redaction_without_password_field_is_identity():
    data = encode_znode(_md(has_password=False, digest_type=None), 3)
    assert redact_password(data, "np") == data


# ---------------------------------------------------------------- znode paths
@pytest.mark.parametrize("path,expected", [
    ("/ledgers/00/0000/L0001", 1),
    ("ledger-metadata/00/0012/L3456", 123456),
    ("/ledgers/000/0000/0000/0002/L1474", 21474),
    ("/ledgers/922/3372/0368/5477/L5807", 9223372036854775807),
    ("/ledgers/L0000000042", 42),
    ("/ledgers/00/0000", None),
    ("/ledgers/LAYOUT", None),
    ("/ledgers/0/0000/L0001", None),
])
def test_ledger_id_from_znode_path(path, expected):
    assert ledger_id_from_znode_path(path) == expected
