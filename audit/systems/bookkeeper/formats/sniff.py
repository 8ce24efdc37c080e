"""BookKeeper entries for audit.formats.inspect: recognise and describe each native payload."""
from __future__ import annotations

import base64
import dataclasses
import json
import struct

from audit.systems.bookkeeper.domain.model import LedgerMetadata
from audit.systems.bookkeeper.formats import availability, ledger_metadata, protocol
from audit.errors import PayloadError


def text_or_base64(value: bytes) -> str:
    try:
        text = value.decode("utf-8")
        if text.isprintable():
            return text
    except UnicodeDecodeError:
        pass
    return "base64:" + base64.b64encode(value).decode()  # BookKeeper's toString convention


def metadata_dict(md: LedgerMetadata) -> dict:
    out = dataclasses.asdict(md)
    out["segments"] = [{"first_entry_id": s.first_entry_id, "ensemble": list(s.ensemble)} for s in md.segments]
    out["custom_metadata"] = {k: text_or_base64(v) for k, v in md.custom_metadata.items()}
    return out


# -- ledger-metadata znode ------------------------------------------------------------------
def _sniff_znode(data: bytes, name: str) -> bool:
    return ledger_metadata.has_header(data)


def _decode_znode(data: bytes, name: str) -> dict:
    md = ledger_metadata.decode_znode(data, name, ledger_metadata.ledger_id_from_znode_path(name))
    return metadata_dict(md)


# -- admin HTTP JSON --------------------------------------------------------------------------
def _sniff_admin_json(data: bytes, name: str) -> bool:
    if not data.lstrip()[:1] == b"{":
        return False
    try:
        doc = json.loads(data)
    except ValueError:
        return False
    return bool(doc) and isinstance(doc, dict) and all(
        k.isdigit() and isinstance(v, dict) and ("allEnsembles" in v or "ensembleSize" in v) for k, v in doc.items())


def _decode_admin_json(data: bytes, name: str) -> dict:
    return {"ledgers": [metadata_dict(md) for md in ledger_metadata.decode_admin_json(data, name)]}


# -- AvailabilityOfEntriesOfLedger --------------------------------------------------------------
def _sniff_availability(data: bytes, name: str) -> bool:
    if len(data) < availability.HEADER_SIZE or (len(data) - availability.HEADER_SIZE) % availability.GROUP_SIZE:
        return False
    version, count = struct.unpack_from(">ii", data)
    return version == availability.VERSION and \
        count == (len(data) - availability.HEADER_SIZE) // availability.GROUP_SIZE


def _groups_dict(groups) -> dict:
    return {"groups": [dataclasses.asdict(g) for g in groups], "entry_count": availability.count_entries(groups)}


def _decode_availability(data: bytes, name: str) -> dict:
    return _groups_dict(availability.decode(data, name))


# -- bookie v3 Response to GetListOfEntriesOfLedger --------------------------------------------
def _response_body(data: bytes, name: str) -> bytes | None:
    """The Response body, accepting it bare or with its 4-byte frame length."""
    candidates = [data]
    if len(data) >= 4 and struct.unpack_from(">i", data)[0] == len(data) - 4:
        candidates.insert(0, data[4:])
    for body in candidates:
        try:
            protocol.decode_response(body, name)
            return body
        except PayloadError:
            continue
    return None


def _sniff_response(data: bytes, name: str) -> bool:
    return data[:1] in (b"\x0a", b"\x00") and _response_body(data, name) is not None


def _decode_response(data: bytes, name: str) -> dict:
    body = _response_body(data, name)
    if body is None:
        raise PayloadError(name, "Response", "a GetListOfEntriesOfLedger response")
    answer = protocol.decode_response(body, name)
    out = {"status": answer.status, "ledger_id": answer.ledger_id, "txn_id": answer.txn_id, "framed": body is not data}
    if answer.availability is not None:
        out.update(_groups_dict(availability.decode(answer.availability, f"{name}#availabilityOfEntriesOfLedger")))
    return out


SNIFFERS = [
    ("bookkeeper.ledger_metadata_znode", _sniff_znode, _decode_znode),
    ("bookkeeper.ledger_metadata_admin_json", _sniff_admin_json, _decode_admin_json),
    ("bookkeeper.entries_of_ledger_response", _sniff_response, _decode_response),
    ("bookkeeper.availability_of_entries", _sniff_availability, _decode_availability),
]
