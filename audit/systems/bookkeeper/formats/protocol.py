"""Bookie protocol v3 framing for GetListOfEntriesOfLedger (docs/formats/bookkeeper.md §1.7) and plain entry reads
(READ_ENTRY, §1.10).

On the wire every v3 message is a 4-byte big-endian length followed by exactly that many bytes of
a `Request`/`Response` protobuf -- no other header (BookieProtoEncoding.serializeProtobuf; the
Netty pipeline strips the length with a LengthFieldBasedFrameDecoder). The bookie answers with a
header echoing our txnId, the overall status, and the operation's response: a
GetListOfEntriesOfLedgerResponse whose availabilityOfEntriesOfLedger bytes are decoded by
availability.py, or a ReadResponse (status, ledgerId, entryId, body). Answers to both operations may
share a connection: decode_any_response dispatches on header.operation.

Reads are sent the way LedgerChecker sends them (FLAG_NONE): no fencing flag, no masterKey, priority 0,
so they go to the bookie's ordinary read thread pool and never fence a ledger (ReadEntryProcessorV3).
Entry bodies are never kept: an answer records status and ids only."""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import BinaryIO

from google.protobuf.message import DecodeError

from audit.systems.bookkeeper.formats.proto import BookkeeperProtocol_pb2 as pb
from audit.errors import PayloadError

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


@dataclass(frozen=True)
class ReadEntryAnswer:
    status: str                 # ReadResponse status: "EOK", "ENOENTRY", "ENOLEDGER", "EIO", ...
    ledger_id: int | None       # None only when the bookie did not include a ReadResponse (EBADREQ)
    entry_id: int | None
    txn_id: int


@dataclass(frozen=True)
class ReadEntryRequest:
    ledger_id: int
    entry_id: int
    txn_id: int
    fence: bool                 # FENCE_LEDGER flag set (the audit never sends it)
    has_master_key: bool


def frame(body: bytes) -> bytes:
    return FRAME_LENGTH.pack(len(body)) + body


def _message(cls, operation: int, txn_id: int, **fields):
    """A v3 Request or Response with its BKPacketHeader filled in."""
    if not 0 <= txn_id <= UINT64_MAX:
        raise ValueError(f"txn_id must fit uint64, got {txn_id}")
    msg = cls(**fields)
    msg.header.version = pb.VERSION_THREE
    msg.header.operation = operation
    msg.header.txnId = txn_id
    return msg


def encode_request_body(ledger_id: int, txn_id: int) -> bytes:
    req = _message(pb.Request, pb.GET_LIST_OF_ENTRIES_OF_LEDGER, txn_id)
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
    if msg.IsInitialized():  # the cheap check first: read probes decode many small answers
        return msg
    missing = msg.FindInitializationErrors()
    if missing:
        raise PayloadError(source, f"{cls.DESCRIPTOR.name}.{missing[0]}",
                           "required fields present (missing: " + ", ".join(missing) + ")")
    return msg


def _check_operation(msg, message: str, source: str, expected: int = pb.GET_LIST_OF_ENTRIES_OF_LEDGER) -> None:
    if msg.header.operation != expected:
        raise PayloadError(source, f"{message}.header.operation", pb.OperationType.Name(expected),
                           pb.OperationType.Name(msg.header.operation))


def decode_request(body: bytes, source: str = "request") -> EntriesOfLedgerRequest:
    req = _parse(pb.Request, body, source)
    _check_operation(req, "Request", source)
    return _entries_of_ledger_request(req, source)


def _entries_of_ledger_request(req, source: str) -> EntriesOfLedgerRequest:
    if not req.HasField("getListOfEntriesOfLedgerRequest"):
        raise PayloadError(source, "Request.getListOfEntriesOfLedgerRequest", "present")
    return EntriesOfLedgerRequest(req.getListOfEntriesOfLedgerRequest.ledgerId, req.header.txnId)


def _read_entry_request(req, source: str) -> ReadEntryRequest:
    if not req.HasField("readRequest"):
        raise PayloadError(source, "Request.readRequest", "present")
    r = req.readRequest
    fence = r.HasField("flag") and r.flag == pb.ReadRequest.FENCE_LEDGER
    return ReadEntryRequest(r.ledgerId, r.entryId, req.header.txnId, fence, r.HasField("masterKey"))


def decode_any_request(body: bytes, source: str = "request") -> EntriesOfLedgerRequest | ReadEntryRequest:
    """A Request of either operation (the server side of a connection carrying both)."""
    req = _parse(pb.Request, body, source)
    if req.header.operation == pb.READ_ENTRY:
        return _read_entry_request(req, source)
    _check_operation(req, "Request", source)
    return _entries_of_ledger_request(req, source)


def decode_response(body: bytes, source: str) -> EntriesOfLedgerAnswer:
    """Decode a Response body (without the length prefix). An old bookie that does not know the
    operation answers EBADREQ without an operation response: ledger_id is then None."""
    resp = _parse(pb.Response, body, source)
    _check_operation(resp, "Response", source)
    return _entries_of_ledger_answer(resp)


def decode_read_response(body: bytes, source: str) -> ReadEntryAnswer:
    """Decode a READ_ENTRY Response body: status and ids; the entry body is dropped."""
    resp = _parse(pb.Response, body, source)
    _check_operation(resp, "Response", source, pb.READ_ENTRY)
    return _read_entry_answer(resp)


def decode_any_response(body: bytes, source: str) -> EntriesOfLedgerAnswer | ReadEntryAnswer:
    """A Response of either operation, told apart by header.operation (answers to both may share a
    connection); any other operation is a PayloadError."""
    resp = _parse(pb.Response, body, source)
    if resp.header.operation == pb.READ_ENTRY:
        return _read_entry_answer(resp)
    _check_operation(resp, "Response", source)
    return _entries_of_ledger_answer(resp)


def _read_entry_answer(resp) -> ReadEntryAnswer:
    # A bookie that cannot parse the request answers EBADREQ with no ReadResponse.
    if not resp.HasField("readResponse"):
        return ReadEntryAnswer(pb.StatusCode.Name(resp.status), None, None, resp.header.txnId)
    r = resp.readResponse
    return ReadEntryAnswer(pb.StatusCode.Name(r.status), r.ledgerId, r.entryId, resp.header.txnId)


def _entries_of_ledger_answer(resp) -> EntriesOfLedgerAnswer:
    if not resp.HasField("getListOfEntriesOfLedgerResponse"):
        return EntriesOfLedgerAnswer(pb.StatusCode.Name(resp.status), None, None, resp.header.txnId)
    inner = resp.getListOfEntriesOfLedgerResponse
    availability = inner.availabilityOfEntriesOfLedger if inner.HasField("availabilityOfEntriesOfLedger") else None
    return EntriesOfLedgerAnswer(pb.StatusCode.Name(inner.status), inner.ledgerId, availability, resp.header.txnId)


def encode_response(txn_id: int, ledger_id: int, status: str, availability_bytes: bytes | None) -> bytes:
    """A bookie's answer body (unframed), as GetListOfEntriesOfLedgerProcessorV3 builds it: the
    overall status equals the operation status."""
    code = pb.StatusCode.Value(status)
    resp = _message(pb.Response, pb.GET_LIST_OF_ENTRIES_OF_LEDGER, txn_id, status=code)
    inner = resp.getListOfEntriesOfLedgerResponse
    inner.status = code
    inner.ledgerId = ledger_id
    if availability_bytes is not None:
        inner.availabilityOfEntriesOfLedger = availability_bytes
    return resp.SerializeToString()


def encode_read_request_body(ledger_id: int, entry_id: int, txn_id: int) -> bytes:
    """A plain READ_ENTRY request: no flag, no masterKey, no previousLAC (not a long poll)."""
    req = _message(pb.Request, pb.READ_ENTRY, txn_id)
    req.readRequest.ledgerId = ledger_id
    req.readRequest.entryId = entry_id
    return req.SerializeToString()


def encode_read_request(ledger_id: int, entry_id: int, txn_id: int) -> bytes:
    """The framed READ_ENTRY request, ready to write to a bookie socket."""
    return frame(encode_read_request_body(ledger_id, entry_id, txn_id))


def encode_read_response(txn_id: int, ledger_id: int, entry_id: int, status: str, body: bytes | None = None) -> bytes:
    """A bookie's answer to a read (unframed), as ReadEntryProcessorV3.sendResponse builds it: the overall
    status equals the ReadResponse status; `body` only with EOK."""
    code = pb.StatusCode.Value(status)
    resp = _message(pb.Response, pb.READ_ENTRY, txn_id, status=code)
    r = resp.readResponse
    r.status, r.ledgerId, r.entryId = code, ledger_id, entry_id
    if body is not None:
        r.body = body
    return resp.SerializeToString()


class FrameSplitter:
    """Frames of a byte stream read in chunks of any size: `feed(chunk)` -> the bodies completed by it.
    Reading big chunks instead of two exact reads per frame keeps many small answers cheap."""

    def __init__(self, source: str, max_frame: int = DEFAULT_MAX_FRAME):
        self.source, self.max_frame = source, max_frame
        self._buf = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        buf = self._buf
        buf += chunk
        out, pos, n = [], 0, len(buf)
        while n - pos >= FRAME_LENGTH.size:
            (size,) = FRAME_LENGTH.unpack_from(buf, pos)
            if not 0 <= size <= self.max_frame:
                raise PayloadError(self.source, "frame length", f"0..{self.max_frame}", size)
            end = pos + FRAME_LENGTH.size + size
            if end > n:
                break
            out.append(bytes(buf[pos + FRAME_LENGTH.size:end]))
            pos = end
        del buf[:pos]
        return out

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame held back."""
        return len(self._buf)


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
