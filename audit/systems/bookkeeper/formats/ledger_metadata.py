"""Ledger-metadata znode values: decode, encode and password redaction (docs/formats/bookkeeper.md §1.1-1.2).

Znode = `BookieMetadataFormatVersion\\t<n>\\n` + body, where the body is
v1 plain text, v2 protobuf TextFormat of LedgerMetadataFormat, or v3 varint32-delimited binary.
Decoding keeps what is stored (e.g. a non-CLOSED ledger's stored length) so invariant checks can
see it; the password is reduced to `has_password`. Admin-HTTP JSON lives in admin_json.py and is
re-exported here."""
from __future__ import annotations

import re

from google.protobuf import text_format
from google.protobuf.message import DecodeError

from audit.systems.bookkeeper.domain.model import CLOSED, IN_RECOVERY, INVALID_ENTRY_ID, OPEN, LedgerMetadata, Segment
from audit.systems.bookkeeper.formats import wire
from audit.systems.bookkeeper.formats.admin_json import decode_admin_json, redact_admin_json  # noqa: F401 (re-export)
from audit.systems.bookkeeper.formats.proto.DataFormats_pb2 import LedgerMetadataFormat
from audit.systems.bookkeeper.formats.textformat_redact import blank_top_level_string
from audit.errors import PayloadError

HEADER_KEY = b"BookieMetadataFormatVersion\t"
MAX_VERSION_DIGITS = 10  # LedgerMetadataSerDe.MAX_VERSION_DIGITS
SUPPORTED_VERSIONS = (1, 2, 3)
V1_CLOSED_TAG = "CLOSED"
V1_IN_RECOVERY_ENTRY_ID = -102  # how v1 marks IN_RECOVERY (LedgerMetadataSerDe)
_PASSWORD_FIELD = 8
_INT_RE = re.compile(r"[+-]?\d+")
_STATE_NAMES = {1: OPEN, 2: IN_RECOVERY, 3: CLOSED}
_STATE_NUMBERS = {v: k for k, v in _STATE_NAMES.items()}


# ---------------------------------------------------------------------------------------- header
def has_header(data: bytes) -> bool:
    return data.startswith(HEADER_KEY)


def read_header(data: bytes, source: str) -> tuple[int, int]:
    """-> (format version, offset of the body)."""
    if not data.startswith(HEADER_KEY):
        raise PayloadError(source, "header", "'BookieMetadataFormatVersion\\t<n>\\n'", data[: len(HEADER_KEY)])
    start = len(HEADER_KEY)
    newline = data.find(b"\n", start, start + MAX_VERSION_DIGITS + 1)
    if newline < 0:
        raise PayloadError(source, "header", f"a version of at most {MAX_VERSION_DIGITS} digits ending in \\n",
                           data[start: start + MAX_VERSION_DIGITS + 1])
    digits = data[start:newline]
    if not digits.isdigit():
        raise PayloadError(source, "header", "decimal version digits", digits)
    return int(digits), newline + 1


def _header(version: int) -> bytes:
    return HEADER_KEY + str(version).encode() + b"\n"


# ---------------------------------------------------------------------------------------- decode
def decode_znode(data: bytes, source: str, ledger_id: int | None = None) -> LedgerMetadata:
    """Decode a ledger-metadata znode value of format version 1, 2 or 3."""
    version, offset = read_header(data, source)
    if version == 1:
        return _decode_v1(data[offset:], source, ledger_id)
    if version in (2, 3):
        return _from_format(_parse_format(data, version, offset, source), version, source, ledger_id)
    raise PayloadError(source, "header", f"format version in {SUPPORTED_VERSIONS}", version)


def _parse_format(data: bytes, version: int, offset: int, source: str) -> LedgerMetadataFormat:
    fmt = LedgerMetadataFormat()
    if version == 3:
        body, _ = _v3_body(data, offset, source)
        try:
            fmt.MergeFromString(body)
        except DecodeError as e:
            raise PayloadError(source, "LedgerMetadataFormat", "a binary protobuf message", str(e)) from None
    else:
        try:
            text = data[offset:].decode("utf-8")
            text_format.Parse(text, fmt)
        except UnicodeDecodeError as e:
            raise PayloadError(source, "LedgerMetadataFormat", "UTF-8 TextFormat", str(e)) from None
        except text_format.ParseError as e:
            raise PayloadError(source, "LedgerMetadataFormat", "protobuf TextFormat", str(e)) from None
    missing = fmt.FindInitializationErrors()
    if missing:
        raise PayloadError(source, missing[0], "required fields present (missing: " + ", ".join(missing) + ")")
    return fmt


def _v3_body(data: bytes, offset: int, source: str) -> tuple[bytes, int]:
    """The delimited message of a v3 znode -> (message bytes, offset of the message)."""
    # Java reads a varint32 (at most 5 bytes) with readRawVarint32.
    size, start = wire.read_varint(data, offset, source, "length prefix", max_bytes=5)
    if size > 0x7FFFFFFF:
        raise PayloadError(source, "length prefix", "a non-negative int32", size)
    end = start + size
    if end > len(data):
        raise PayloadError(source, "LedgerMetadataFormat", f"{size} bytes after the length prefix",
                           f"{len(data) - start} bytes (truncated)")
    if end < len(data):
        raise PayloadError(source, "LedgerMetadataFormat", f"{size} bytes after the length prefix",
                           f"{len(data) - end} trailing bytes")
    return data[start:end], start


def _from_format(fmt: LedgerMetadataFormat, version: int, source: str, ledger_id: int | None) -> LedgerMetadata:
    state = _STATE_NAMES[fmt.state]
    if state == CLOSED and not fmt.HasField("lastEntryId"):
        raise PayloadError(source, "lastEntryId", "present when state is CLOSED")
    segments = []
    for seg in fmt.segment:
        if segments and seg.firstEntryId <= segments[-1].first_entry_id:
            raise PayloadError(source, "segment.firstEntryId",
                               f"greater than the previous segment's {segments[-1].first_entry_id}",
                               seg.firstEntryId)
        segments.append(Segment(seg.firstEntryId, tuple(seg.ensembleMember)))
    return LedgerMetadata(
        ledger_id=ledger_id,
        format_version=version,
        ensemble_size=fmt.ensembleSize,
        write_quorum_size=fmt.quorumSize,
        ack_quorum_size=fmt.ackQuorumSize if fmt.HasField("ackQuorumSize") else fmt.quorumSize,
        state=state,
        last_entry_id=fmt.lastEntryId if fmt.HasField("lastEntryId") else INVALID_ENTRY_ID,
        length=fmt.length,
        segments=tuple(segments),
        digest_type=LedgerMetadataFormat.DigestType.Name(fmt.digestType) if fmt.HasField("digestType") else None,
        has_password=fmt.HasField("password"),
        ctime=fmt.ctime if fmt.HasField("ctime") else None,
        ctoken=fmt.cToken if fmt.HasField("cToken") else None,
        custom_metadata={e.key: e.value for e in fmt.customMetadata},
    )


def _int(text: str, source: str, field: str) -> int:
    if not _INT_RE.fullmatch(text):
        raise PayloadError(source, field, "an integer", text)
    return int(text)


def _decode_v1(body: bytes, source: str, ledger_id: int | None) -> LedgerMetadata:
    try:
        lines = body.decode("utf-8").split("\n")
    except UnicodeDecodeError as e:
        raise PayloadError(source, "v1 text", "UTF-8", str(e)) from None
    if lines and lines[-1] == "":
        lines.pop()  # segment lines end with \n
    if len(lines) < 3:
        raise PayloadError(source, ["quorumSize", "ensembleSize", "length"][len(lines)], "a line", "end of data")
    quorum = _int(lines[0], source, "quorumSize")
    ensemble_size = _int(lines[1], source, "ensembleSize")
    length = _int(lines[2], source, "length")
    state, last_entry_id, segments = OPEN, INVALID_ENTRY_ID, []
    for n, line in enumerate(lines[3:], start=4):
        parts = line.split("\t")
        if len(parts) < 2:
            raise PayloadError(source, f"line {n}", "'<firstEntryId>\\t<bookie>...' or '<lastEntryId>\\tCLOSED'", line)
        if parts[1] == V1_CLOSED_TAG:
            if n != len(lines):
                raise PayloadError(source, f"line {n}", "the CLOSED line to be the last line", lines[n:])
            closed_id = _int(parts[0], source, "lastEntryId")
            if closed_id == V1_IN_RECOVERY_ENTRY_ID:
                state = IN_RECOVERY
            else:
                state, last_entry_id = CLOSED, closed_id
            break
        first = _int(parts[0], source, "segment.firstEntryId")
        if segments and first <= segments[-1].first_entry_id:
            raise PayloadError(source, "segment.firstEntryId",
                               f"greater than the previous segment's {segments[-1].first_entry_id}", first)
        segments.append(Segment(first, tuple(parts[1:])))
    return LedgerMetadata(ledger_id, 1, ensemble_size, quorum, quorum, state, last_entry_id, length, tuple(segments))


# ---------------------------------------------------------------------------------------- encode
def encode_znode(md: LedgerMetadata, version: int = 3, password: bytes = b"") -> bytes:
    """Serialize like LedgerMetadataSerDe. v1 cannot carry Qa, digest, password, ctime, cToken or
    custom metadata and v2 cannot carry cToken; like BookKeeper these are dropped silently."""
    if password and not md.has_password:
        raise ValueError("password given but md.has_password is False")
    if md.state not in _STATE_NUMBERS:
        raise ValueError(f"unknown state {md.state!r}")
    if version == 1:
        return _header(1) + _encode_v1(md)
    if version not in (2, 3):
        raise ValueError(f"format version must be one of {SUPPORTED_VERSIONS}, got {version}")
    fmt = LedgerMetadataFormat(
        quorumSize=md.write_quorum_size, ensembleSize=md.ensemble_size, length=md.length,
        lastEntryId=md.last_entry_id, state=_STATE_NUMBERS[md.state], ackQuorumSize=md.ack_quorum_size)
    for seg in md.segments:
        fmt.segment.add(firstEntryId=seg.first_entry_id, ensembleMember=list(seg.ensemble))
    if md.digest_type is not None:
        fmt.digestType = LedgerMetadataFormat.DigestType.Value(md.digest_type)
    if md.has_password:
        fmt.password = password
    if md.ctime is not None:
        fmt.ctime = md.ctime
    for key, value in md.custom_metadata.items():
        fmt.customMetadata.add(key=key, value=value)
    if version == 2:
        return _header(2) + text_format.MessageToString(fmt).encode("utf-8")
    if md.ctoken is not None:
        fmt.cToken = md.ctoken
    body = fmt.SerializeToString()
    return _header(3) + wire.encode_varint(len(body)) + body


def _encode_v1(md: LedgerMetadata) -> bytes:
    out = [f"{md.write_quorum_size}\n{md.ensemble_size}\n{md.length}\n"]
    for seg in md.segments:
        out.append("\t".join([str(seg.first_entry_id), *seg.ensemble]) + "\n")
    # The closing line has no trailing newline in BookKeeper's writer.
    if md.state == IN_RECOVERY:
        out.append(f"{V1_IN_RECOVERY_ENTRY_ID}\t{V1_CLOSED_TAG}")
    elif md.state == CLOSED:
        out.append(f"{md.last_entry_id}\t{V1_CLOSED_TAG}")
    return "".join(out).encode("utf-8")


# ---------------------------------------------------------------------------------------- redact
def redact_password(data: bytes, source: str) -> bytes:
    """The znode bytes with the ledger password emptied and every other byte kept.

    The result is checked: it must decode to the same metadata with an empty password, so a
    layout this code does not understand raises PayloadError instead of leaking or corrupting."""
    version, offset = read_header(data, source)
    if version == 1:
        _decode_v1(data[offset:], source, None)  # v1 has no password; still refuse garbage
        return data
    if version == 3:
        body, start = _v3_body(data, offset, source)
        parts, changed = [], False
        for f in wire.iter_fields(body, source, "LedgerMetadataFormat"):
            if f.number == _PASSWORD_FIELD:
                if f.wire_type != wire.LENGTH_DELIMITED:
                    raise PayloadError(source, "password", "a length-delimited field", f"wire type {f.wire_type}")
                parts.append(body[f.start:f.tag_end] + b"\x00")  # same tag, zero length
                changed = True
            else:
                parts.append(body[f.start:f.end])
        new_body = b"".join(parts)
        redacted = data[:offset] + wire.encode_varint(len(new_body)) + new_body if changed else data
    elif version == 2:
        redacted = data[:offset] + blank_top_level_string(data[offset:], "password")
    else:
        raise PayloadError(source, "header", f"format version in {SUPPORTED_VERSIONS}", version)
    _check_redacted(data, redacted, version, offset, source)
    return redacted


def _check_redacted(original: bytes, redacted: bytes, version: int, offset: int, source: str) -> None:
    before = _parse_format(original, version, offset, source)
    _, new_offset = read_header(redacted, source)
    after = _parse_format(redacted, version, new_offset, source)
    if after.password or _from_format(before, version, source, None) != _from_format(after, version, source, None):
        raise PayloadError(source, "password", "a password this redactor can locate", "an unrecognised layout")


# ---------------------------------------------------------------------------------------- paths
_FLAT = re.compile(r"L(\d{10})")
_LEAF4 = re.compile(r"L(\d{4})")


def ledger_id_from_znode_path(path: str) -> int | None:
    """Ledger id encoded in a znode path (flat L%010d, legacy 2-4-4 or long 3-4-4-4-4 hierarchical),
    or None when the path is not a ledger node (docs/formats/bookkeeper.md §1.3)."""
    parts = [p for p in path.split("/") if p]
    if not parts:
        return None
    if m := _FLAT.fullmatch(parts[-1]):
        return int(m.group(1))
    leaf = _LEAF4.fullmatch(parts[-1])
    if not leaf:
        return None
    if len(parts) >= 5 and [len(p) for p in parts[-5:-1]] == [3, 4, 4, 4] and all(p.isdigit() for p in parts[-5:-1]):
        return int("".join(parts[-5:-1]) + leaf.group(1))
    if len(parts) >= 3 and [len(p) for p in parts[-3:-1]] == [2, 4] and all(p.isdigit() for p in parts[-3:-1]):
        return int("".join(parts[-3:-1]) + leaf.group(1))
    return None
