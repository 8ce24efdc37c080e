"""Bookie admin HTTP ledger metadata: `GET /api/v1/ledger/metadata/?ledger_id=N` (docs/formats/bookkeeper.md §1.5).

Answer = `{"<ledgerId>": <LedgerMetadata as a Jackson bean>}`; byte[] values (password,
customMetadata) are base64 strings, bookies are `{"id": "host:port"}` (BookKeeper >= 4.12) or the
older `{"hostname": h, "port": p}`. Digest types use the client API names (MAC, not HMAC); they are
normalised to the protobuf names used for znodes so both sources compare equal."""
from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from audit.systems.bookkeeper.domain.model import CLOSED, IN_RECOVERY, INVALID_ENTRY_ID, OPEN, LedgerMetadata, Segment
from audit.errors import PayloadError

_STATES = (OPEN, IN_RECOVERY, CLOSED)
_DIGESTS = {"CRC32": "CRC32", "MAC": "HMAC", "HMAC": "HMAC", "CRC32C": "CRC32C", "DUMMY": "DUMMY"}


def _load(obj_or_bytes: Any, source: str) -> Any:
    if isinstance(obj_or_bytes, (bytes, bytearray, str)):
        try:
            return json.loads(obj_or_bytes)
        except (ValueError, UnicodeDecodeError) as e:
            raise PayloadError(source, "json", "a JSON document", str(e)) from None
    return obj_or_bytes


def _require_dict(value: Any, source: str, field: str) -> dict:
    if not isinstance(value, dict):
        raise PayloadError(source, field, "a JSON object", value)
    return value


def _get_int(bean: dict, key: str, source: str, prefix: str, default: Any = ...) -> int | None:
    if key not in bean or bean[key] is None:
        if default is ...:
            raise PayloadError(source, prefix + key, "an integer")
        return default
    value = bean[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise PayloadError(source, prefix + key, "an integer", value)
    return value


def _bookie(member: Any, source: str, field: str) -> str:
    if isinstance(member, str):
        return member
    if isinstance(member, dict):
        if isinstance(member.get("id"), str):
            return member["id"]
        if isinstance(member.get("hostname"), str) and isinstance(member.get("port"), int):
            return f"{member['hostname']}:{member['port']}"
    raise PayloadError(source, field, '{"id": "host:port"} or {"hostname": h, "port": p}', member)


def _b64(value: Any, source: str, field: str) -> bytes:
    if not isinstance(value, str):
        raise PayloadError(source, field, "a base64 string", value)
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise PayloadError(source, field, "a base64 string", value) from None


def _decode_bean(ledger_id: int, bean: dict, source: str) -> LedgerMetadata:
    p = f"{ledger_id}."
    version = _get_int(bean, "metadataFormatVersion", source, p)
    state = bean.get("state")
    if state is None and isinstance(bean.get("closed"), bool):
        state = CLOSED if bean["closed"] else OPEN  # oldest beans only say closed: true/false
    if state not in _STATES:
        raise PayloadError(source, p + "state", "OPEN, IN_RECOVERY or CLOSED", state)
    ensembles = bean.get("allEnsembles", bean.get("ensembles"))
    ensembles = _require_dict(ensembles, source, p + "allEnsembles")
    segments = []
    for key, members in ensembles.items():
        try:
            first = int(key)
        except ValueError:
            raise PayloadError(source, p + "allEnsembles", "entry-id keys", key) from None
        if not isinstance(members, list):
            raise PayloadError(source, f"{p}allEnsembles.{key}", "a list of bookies", members)
        segments.append(Segment(first, tuple(_bookie(m, source, f"{p}allEnsembles.{key}") for m in members)))
    segments.sort(key=lambda s: s.first_entry_id)  # a TreeMap in BookKeeper; JSON order is not a contract
    # hasPassword is not a bean property of current BookKeeper; every v2/v3 writer stores a
    # (possibly empty) password, v1 never does (LedgerMetadataSerDe.serializePassword).
    has_password = bean["hasPassword"] if isinstance(bean.get("hasPassword"), bool) else version >= 2
    digest = bean.get("digestType")
    if has_password:
        if digest not in _DIGESTS:
            raise PayloadError(source, p + "digestType", "CRC32, MAC, CRC32C or DUMMY", digest)
        digest = _DIGESTS[digest]
    else:
        digest = None
    custom = _require_dict(bean.get("customMetadata") or {}, source, p + "customMetadata")
    write_quorum = _get_int(bean, "writeQuorumSize", source, p)
    return LedgerMetadata(
        ledger_id=ledger_id,
        format_version=version,
        ensemble_size=_get_int(bean, "ensembleSize", source, p),
        write_quorum_size=write_quorum,
        ack_quorum_size=_get_int(bean, "ackQuorumSize", source, p, write_quorum),
        state=state,
        last_entry_id=_get_int(bean, "lastEntryId", source, p, INVALID_ENTRY_ID),
        length=_get_int(bean, "length", source, p, 0),
        segments=tuple(segments),
        digest_type=digest,
        has_password=has_password,
        ctime=_get_int(bean, "ctime", source, p, None),
        ctoken=_get_int(bean, "ctoken", source, p, _get_int(bean, "cToken", source, p, None)),
        custom_metadata={k: _b64(v, source, f"{p}customMetadata.{k}") for k, v in custom.items()},
    )


def decode_admin_json(obj_or_bytes: Any, source: str) -> list[LedgerMetadata]:
    """All ledgers of one answer, in the answer's order."""
    doc = _require_dict(_load(obj_or_bytes, source), source, "(root)")
    out = []
    for key, bean in doc.items():
        try:
            ledger_id = int(key)
        except ValueError:
            raise PayloadError(source, "(root)", "ledger-id keys", key) from None
        out.append(_decode_bean(ledger_id, _require_dict(bean, source, key), source))
    return out


def redact_admin_json(obj_or_bytes: Any, source: str) -> bytes:
    """The answer with every ledger's `password` emptied. Bytes in -> the same bytes except the
    password values; a parsed object in -> compact JSON."""
    doc = _require_dict(_load(obj_or_bytes, source), source, "(root)")
    before = decode_admin_json(doc, source)
    if not isinstance(obj_or_bytes, (bytes, bytearray, str)):
        redacted_doc = {k: ({**v, "password": ""} if v.get("password") is not None else v) for k, v in doc.items()}
        return json.dumps(redacted_doc, separators=(",", ":")).encode()
    raw = obj_or_bytes.encode() if isinstance(obj_or_bytes, str) else bytes(obj_or_bytes)
    redacted = _blank_depth2_key(raw, b"password", source)
    after_doc = json.loads(redacted)
    if decode_admin_json(after_doc, source) != before or any(
            bean.get("password") not in (None, "") for bean in after_doc.values()):
        raise PayloadError(source, "password", "a password this redactor can locate", "an unrecognised layout")
    return redacted


def _blank_depth2_key(raw: bytes, key: bytes, source: str) -> bytes:
    """Replace the string value of `key` in objects at depth 2 ({"N": {key: ...}}) by ""."""
    out, stack, i, copied = [], [], 0, 0
    expecting_key = False
    target = b'"' + key + b'"'
    while i < len(raw):
        c = raw[i:i + 1]
        if c == b'"':
            end = _json_string_end(raw, i, source)
            if len(stack) == 2 and expecting_key and raw[i:end] == target:
                j = _skip_ws(raw, end)
                if raw[j:j + 1] != b":":
                    raise PayloadError(source, "password", "':' after the key", raw[j:j + 1])
                j = _skip_ws(raw, j + 1)
                if raw[j:j + 1] == b'"':
                    out.append(raw[copied:j])
                    out.append(b'""')
                    copied = end = _json_string_end(raw, j, source)
                elif not raw.startswith(b"null", j):
                    raise PayloadError(source, "password", "a base64 string or null", raw[j:j + 20])
            expecting_key = False
            i = end
        elif c in (b"{", b"["):
            stack.append(c)
            expecting_key = c == b"{"
            i += 1
        elif c in (b"}", b"]"):
            if stack:
                stack.pop()
            i += 1
        elif c == b",":
            expecting_key = bool(stack) and stack[-1] == b"{"
            i += 1
        else:
            i += 1
    out.append(raw[copied:])
    return b"".join(out)


def _json_string_end(raw: bytes, i: int, source: str) -> int:
    j = i + 1
    while j < len(raw):
        if raw[j] == 0x5C:  # backslash
            j += 2
        elif raw[j] == 0x22:
            return j + 1
        else:
            j += 1
    raise PayloadError(source, "json", "a terminated string", raw[i:i + 20])


def _skip_ws(raw: bytes, i: int) -> int:
    while i < len(raw) and raw[i] in b" \t\r\n":
        i += 1
    return i
