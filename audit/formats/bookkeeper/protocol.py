"""Bookie protocol v3 framing for GetListOfEntriesOfLedger (BP-34).

On the wire every v3 message is a 4-byte big-endian length followed by exactly that many bytes of
a `Request`/`Response` protobuf -- no other header (BookieProtoEncoding.serializeProtobuf; the
Netty pipeline strips the length with a LengthFieldBasedFrameDecoder). The bookie answers with a
header echoing our txnId, the overall status, and a GetListOfEntriesOfLedgerResponse whose
availabilityOfEntriesOfLedger bytes are decoded by availability.py."""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import BinaryIO

from google.protobuf.message import DecodeError

from audit.formats.bookkeeper.proto import BookkeeperProtocol_pb2 as pb
from audit.formats.errors import PayloadError

FRAME_LENGTH = struct.Struct(">i")
# Bookies refuse frames above nettyMaxFrameSizeBytes (5 MiB by default); allow more when reading
# so a large answer is still decoded rather than cut off.
DEFAULT_MAX_FRAME = 64 * 1024 * 1024
UINT64_MAX = 2**64 - 1


@dataclass(frozen=True)
class EntriesOfLedgerAnswer:
    status: str                 # StatusCode name: "EOK", "ENOLEDGER", "EIO", "EBADREQ", ...
    ledger_id: int | None       # None only when the bookie did not include the operation's response
    availability: bytes | None  # AvailabilityOfEntriesOfLedger bytes, present on EOK
    txn_id: int


@dataclass(frozen=True)
class EntriesOfLedgerRequest:
    ledger_id: int
    txn_id: int


def frame(body: bytes) -> bytes:
    return FRAME_LENGTH.pack(len(body)) + body


def encode_request_body(ledger_id: int, txn_id: int) -> bytes:
    if not 0 <= txn_id <= UINT64_MAX:
        raise ValueError(f"txn_id must fit uint64, got {txn_id}")
    req = pb.Request()
    req.header.version = pb.VERSION_THREE
    req.header.operation = pb.GET_LIST_OF_ENTRIES_OF_LEDGER
    req.header.txnId = txn_id
    req.getListOfEntriesOfLedgerRequest.ledgerId = ledger_id
    return req.SerializeToString()


def encode_request(ledger_id: int, txn_id: int) -> bytes:
    """The framed request, ready to write to a bookie socket."""
    return frame(encode_request_body(ledger_id, txn_id))


def _parse(cls, body: bytes, source: str):
    msg = cls()
    try:
        msg.MergeFromString(body)
    except DecodeError as e:
        raise PayloadError(source, cls.DESCRIPTOR.name, "a bookie protocol v3 protobuf", str(e)) from None
    missing = msg.FindInitializationErrors()
    if missing:
        raise PayloadError(source, f"{cls.DESCRIPTOR.name}.{missing[0]}",
                           "required fields present (missing: " + ", ".join(missing) + ")")
    return msg


def _check_operation(msg, message: str, source: str) -> None:
    if msg.header.operation != pb.GET_LIST_OF_ENTRIES_OF_LEDGER:
        raise PayloadError(source, f"{message}.header.operation", "GET_LIST_OF_ENTRIES_OF_LEDGER",
                           pb.OperationType.Name(msg.header.operation))


def decode_request(body: bytes, source: str = "request") -> EntriesOfLedgerRequest:
    req = _parse(pb.Request, body, source)
    _check_operation(req, "Request", source)
    if not req.HasField("getListOfEntriesOfLedgerRequest"):
        raise PayloadError(source, "Request.getListOfEntriesOfLedgerRequest", "present")
    return EntriesOfLedgerRequest(req.getListOfEntriesOfLedgerRequest.ledgerId, req.header.txnId)


def decode_response(body: bytes, source: str) -> EntriesOfLedgerAnswer:
    """Decode a Response body (without the length prefix). An old bookie that does not know the
    operation answers EBADREQ without an operation response: ledger_id is then None."""
    resp = _parse(pb.Response, body, source)
    _check_operation(resp, "Response", source)
    if not resp.HasField("getListOfEntriesOfLedgerResponse"):
        return EntriesOfLedgerAnswer(pb.StatusCode.Name(resp.status), None, None, resp.header.txnId)
    inner = resp.getListOfEntriesOfLedgerResponse
    availability = inner.availabilityOfEntriesOfLedger if inner.HasField("availabilityOfEntriesOfLedger") else None
    return EntriesOfLedgerAnswer(pb.StatusCode.Name(inner.status), inner.ledgerId, availability, resp.header.txnId)


def encode_response(txn_id: int, ledger_id: int, status: str, availability_bytes: bytes | None) -> bytes:
    """A bookie's answer body (unframed), as GetListOfEntriesOfLedgerProcessorV3 builds it: the
    overall status equals the operation status."""
    code = pb.StatusCode.Value(status)
    resp = pb.Response(status=code)
    resp.header.version = pb.VERSION_THREE
    resp.header.operation = pb.GET_LIST_OF_ENTRIES_OF_LEDGER
    resp.header.txnId = txn_id
    inner = resp.getListOfEntriesOfLedgerResponse
    inner.status = code
    inner.ledgerId = ledger_id
    if availability_bytes is not None:
        inner.availabilityOfEntriesOfLedger = availability_bytes
    return resp.SerializeToString()


def split_frame(data: bytes, source: str, max_frame: int = DEFAULT_MAX_FRAME) -> tuple[bytes, bytes]:
    """-> (first frame's body, remaining bytes). Raises PayloadError if the frame is incomplete."""
    if len(data) < FRAME_LENGTH.size:
        raise PayloadError(source, "frame length", "4 bytes", f"{len(data)} bytes")
    (size,) = FRAME_LENGTH.unpack_from(data)
    if not 0 <= size <= max_frame:
        raise PayloadError(source, "frame length", f"0..{max_frame}", size)
    end = FRAME_LENGTH.size + size
    if len(data) < end:
        raise PayloadError(source, "frame", f"{size} bytes", f"{len(data) - FRAME_LENGTH.size} bytes (truncated)")
    return data[FRAME_LENGTH.size:end], data[end:]


def read_frame(stream: BinaryIO | bytes, source: str = "bookie", max_frame: int = DEFAULT_MAX_FRAME) -> bytes:
    """One frame's body from bytes (must be exactly one frame) or from a binary file-like object
    such as `socket.makefile("rb")` (reads exactly one frame; blocking per the socket timeout)."""
    if isinstance(stream, (bytes, bytearray, memoryview)):
        body, rest = split_frame(bytes(stream), source, max_frame)
        if rest:
            raise PayloadError(source, "frame", "exactly one frame", f"{len(rest)} trailing bytes")
        return body
    prefix = _read_exactly(stream, FRAME_LENGTH.size, source, "frame length")
    (size,) = FRAME_LENGTH.unpack(prefix)
    if not 0 <= size <= max_frame:
        raise PayloadError(source, "frame length", f"0..{max_frame}", size)
    return _read_exactly(stream, size, source, "frame")


def _read_exactly(stream: BinaryIO, n: int, source: str, field: str) -> bytes:
    chunks, remaining = [], n
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            raise PayloadError(source, field, f"{n} bytes", f"{n - remaining} bytes before end of stream")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)
