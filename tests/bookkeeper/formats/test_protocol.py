"""Bookie protocol v3 framing and GetListOfEntriesOfLedger messages."""
from __future__ import annotations

import io
import socket

import pytest

from audit.systems.bookkeeper.formats import availability
from audit.systems.bookkeeper.formats.proto import BookkeeperProtocol_pb2 as pb
from audit.systems.bookkeeper.formats.protocol import (
    decode_request, decode_response, encode_request, encode_request_body, encode_response, frame, read_frame,
    split_frame)
from audit.errors import PayloadError


def test_schema_numbers_match_bookkeeper():
    assert pb.GET_LIST_OF_ENTRIES_OF_LEDGER == 11 and pb.VERSION_THREE == 3
    assert {n: pb.StatusCode.Value(n) for n in pb.StatusCode.keys()} == {
        "EOK": 0, "ENOLEDGER": 402, "ENOENTRY": 403, "EBADREQ": 404, "EIO": 501, "EUA": 502, "EBADVERSION": 503,
        "EFENCED": 504, "EREADONLY": 505, "ETOOMANYREQUESTS": 506, "EUNKNOWNLEDGERSTATE": 507}
    assert pb.Request.DESCRIPTOR.fields_by_name["getListOfEntriesOfLedgerRequest"].number == 108
    assert pb.Response.DESCRIPTOR.fields_by_name["getListOfEntriesOfLedgerResponse"].number == 108
    fields = pb.GetListOfEntriesOfLedgerResponse.DESCRIPTOR.fields_by_name
    assert (fields["status"].number, fields["ledgerId"].number,
            fields["availabilityOfEntriesOfLedger"].number) == (1, 2, 3)
    hdr = pb.BKPacketHeader.DESCRIPTOR.fields_by_name
    assert (hdr["version"].number, hdr["operation"].number, hdr["txnId"].number) == (1, 2, 3)


def test_request_bytes_hand_encoded():
    # header{version=3, operation=11, txnId=2} = 0a 06 08 03 10 0b 18 02;
    # field 108 (tag 866 = e2 06), length 2, {ledgerId=1} = 08 01; whole body 13 bytes
    body = bytes.fromhex("0a06" "0803" "100b" "1802" "e206" "02" "0801")
    assert encode_request(1, 2) == b"\x00\x00\x00\x0d" + body
    req = decode_request(body)
    assert (req.ledger_id, req.txn_id) == (1, 2)


def test_request_round_trip_large_ids():
    req = decode_request(encode_request_body(2**62, 2**64 - 1))
    assert (req.ledger_id, req.txn_id) == (2**62, 2**64 - 1)
    with pytest.raises(ValueError):
        encode_request(1, -1)


def test_response_round_trip_ok():
    avail = availability.encode_entries([0, 1, 2, 4])
    ans = decode_response(encode_response(9, 77, "EOK", avail), "bk1")
    assert (ans.status, ans.ledger_id, ans.availability, ans.txn_id) == ("EOK", 77, avail, 9)


def test_response_no_such_ledger_has_no_availability():
    ans = decode_response(encode_response(3, 77, "ENOLEDGER", None), "bk1")
    assert ans.status == "ENOLEDGER" and ans.availability is None and ans.ledger_id == 77


def test_old_bookie_rejects_operation():
    resp = pb.Response(status=pb.EBADREQ)
    resp.header.version, resp.header.operation, resp.header.txnId = (
        pb.VERSION_THREE, pb.GET_LIST_OF_ENTRIES_OF_LEDGER, 4)
    ans = decode_response(resp.SerializeToString(), "old-bookie")
    assert (ans.status, ans.ledger_id, ans.availability, ans.txn_id) == ("EBADREQ", None, None, 4)


@pytest.mark.parametrize("body,field", [
    (b"\xff\xff\xff", "Response"),                       # not protobuf
    (b"garbage that is not a response", "Response"),
    (b"", "Response.header"),                            # required header missing
    (bytes.fromhex("0a0208031000"), "Response.header."),  # header without operation/txnId
])
def test_garbage_response(body, field):
    with pytest.raises(PayloadError) as ei:
        decode_response(body, "raw/bookkeeper/c/entries-of-ledger/bk1/7.pb")
    assert ei.value.field.startswith(field) and ei.value.source.endswith("7.pb")


def test_response_for_other_operation_rejected():
    resp = pb.Response(status=pb.EOK)
    resp.header.version, resp.header.operation, resp.header.txnId = pb.VERSION_THREE, pb.READ_ENTRY, 1
    with pytest.raises(PayloadError) as ei:
        decode_response(resp.SerializeToString(), "s")
    assert ei.value.field == "Response.header.operation" and ei.value.got == "READ_ENTRY"


def test_frames_from_bytes():
    body = encode_response(1, 2, "EOK", availability.encode_entries([0]))
    assert read_frame(frame(body)) == body
    assert split_frame(frame(body) + b"\x00\x00\x00\x00", "s") == (body, b"\x00\x00\x00\x00")
    with pytest.raises(PayloadError):
        read_frame(frame(body) + b"x")
    with pytest.raises(PayloadError) as ei:
        read_frame(frame(body)[:-1], "bk1:3181")
    assert "truncated" in str(ei.value.got) and ei.value.source == "bk1:3181"
    with pytest.raises(PayloadError):
        read_frame(b"\x00\x00")
    with pytest.raises(PayloadError):
        read_frame(frame(body), max_frame=len(body) - 1)
    with pytest.raises(PayloadError):
        read_frame(b"\xff\xff\xff\xff")


def test_frames_over_a_socket():
    a, b = socket.socketpair()
    try:
        bodies = [encode_response(i, 10 + i, "EOK", availability.encode_entries(range(i * 3))) for i in range(3)]
        a.sendall(b"".join(frame(x) for x in bodies))
        a.shutdown(socket.SHUT_WR)
        b.settimeout(5)
        with b.makefile("rb") as stream:
            got = [decode_response(read_frame(stream, "bk"), "bk") for _ in bodies]
            with pytest.raises(PayloadError):
                read_frame(stream, "bk")  # peer closed: end of stream is reported, not hidden
        assert [(g.txn_id, g.ledger_id) for g in got] == [(0, 10), (1, 11), (2, 12)]
        assert availability.count_entries(availability.decode(got[2].availability, "x")) == 6
    finally:
        a.close()
        b.close()


def test_read_frame_from_short_stream():
    with pytest.raises(PayloadError) as ei:
        read_frame(io.BytesIO(b"\x00\x00\x00\x05abc"), "f")
    assert ei.value.field == "frame"
