"""Bookie protocol v3 READ_ENTRY messages, the dispatcher for connections carrying both operations, and
frames read in chunks."""
from __future__ import annotations

import pytest

from audit.systems.bookkeeper.formats.proto import BookkeeperProtocol_pb2 as pb
from audit.systems.bookkeeper.formats.protocol import (
    EntriesOfLedgerAnswer, EntriesOfLedgerRequest, FrameSplitter, ReadEntryAnswer, ReadEntryRequest,
    decode_any_request, decode_any_response, decode_read_response, decode_response, encode_read_request,
    encode_read_request_body, encode_read_response, encode_request_body, encode_response, frame)
from audit.errors import PayloadError


def test_schema_numbers_match_bookkeeper():
    assert pb.READ_ENTRY == 1
    assert pb.Request.DESCRIPTOR.fields_by_name["readRequest"].number == 100
    assert pb.Response.DESCRIPTOR.fields_by_name["readResponse"].number == 100
    req = pb.ReadRequest.DESCRIPTOR.fields_by_name
    assert {n: req[n].number for n in req} == {"flag": 100, "ledgerId": 1, "entryId": 2, "masterKey": 3,
                                               "previousLAC": 4, "timeOut": 5}
    assert pb.ReadRequest.FENCE_LEDGER == 1
    resp = pb.ReadResponse.DESCRIPTOR.fields_by_name
    assert {n: resp[n].number for n in resp} == {"status": 1, "ledgerId": 2, "entryId": 3, "body": 4, "maxLAC": 5,
                                                 "lacUpdateTimestamp": 6}


def test_read_request_bytes_hand_encoded_without_flag_or_master_key():
    # header{version=3, operation=1, txnId=7} = 0a 06 08 03 10 01 18 07;
    # field 100 (tag 802 = a2 06), length 4, {ledgerId=5, entryId=9} = 08 05 10 09
    body = bytes.fromhex("0a06" "0803" "1001" "1807" "a206" "04" "0805" "1009")
    assert encode_read_request(5, 9, 7) == b"\x00\x00\x00\x0f" + body  # 15 bytes
    assert decode_any_request(body) == ReadEntryRequest(5, 9, 7, fence=False, has_master_key=False)
    with pytest.raises(ValueError):
        encode_read_request_body(1, 0, -1)


def test_read_response_round_trip_drops_the_body():
    body = encode_read_response(3, 2**40, 17, "EOK", b"payload")
    assert decode_read_response(body, "s") == ReadEntryAnswer("EOK", 2**40, 17, 3)
    parsed = pb.Response.FromString(body)
    assert parsed.status == pb.EOK and parsed.readResponse.body == b"payload"  # overall status = read status
    for status in ("ENOENTRY", "ENOLEDGER", "EIO"):
        assert decode_read_response(encode_read_response(1, 2, 3, status), "s").status == status


def test_ebadreq_without_read_response():
    resp = pb.Response(status=pb.EBADREQ)
    resp.header.version, resp.header.operation, resp.header.txnId = pb.VERSION_THREE, pb.READ_ENTRY, 4
    assert decode_read_response(resp.SerializeToString(), "s") == ReadEntryAnswer("EBADREQ", None, None, 4)


def test_dispatch_by_operation():
    listing = encode_response(1, 5, "ENOLEDGER", None)
    read = encode_read_response(2, 5, 0, "ENOENTRY")
    assert decode_any_response(listing, "s") == EntriesOfLedgerAnswer("ENOLEDGER", 5, None, 1)
    assert decode_any_response(read, "s") == ReadEntryAnswer("ENOENTRY", 5, 0, 2)
    assert decode_any_request(encode_request_body(5, 1)) == EntriesOfLedgerRequest(5, 1)
    with pytest.raises(PayloadError):
        decode_response(read, "s")  # the single-operation decoders still check the operation
    with pytest.raises(PayloadError):
        decode_read_response(listing, "s")
    other = pb.Response(status=pb.EOK)
    other.header.version, other.header.operation, other.header.txnId = pb.VERSION_THREE, pb.ADD_ENTRY, 1
    with pytest.raises(PayloadError):
        decode_any_response(other.SerializeToString(), "s")


def test_fence_read_is_recognised_server_side():
    req = pb.Request()
    req.header.version, req.header.operation, req.header.txnId = pb.VERSION_THREE, pb.READ_ENTRY, 1
    req.readRequest.ledgerId, req.readRequest.entryId = 1, 0
    req.readRequest.flag, req.readRequest.masterKey = pb.ReadRequest.FENCE_LEDGER, b"pw"
    assert decode_any_request(req.SerializeToString()) == ReadEntryRequest(1, 0, 1, fence=True, has_master_key=True)


def test_frame_splitter_takes_chunks_of_any_size():
    bodies = [encode_read_response(i, 1, i, "EOK", b"x" * i) for i in range(50)]
    stream = b"".join(frame(b) for b in bodies)
    for size in (1, 3, 17, len(stream)):
        splitter, out = FrameSplitter("s"), []
        for i in range(0, len(stream), size):
            out += splitter.feed(stream[i:i + size])
        assert out == bodies and splitter.pending == 0
    with pytest.raises(PayloadError):
        FrameSplitter("s", max_frame=10).feed(frame(b"y" * 11))
