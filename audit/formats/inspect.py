"""Sniff a native payload, decode it, and describe it as a JSON-able dict with a "kind" key.

Each system contributes (kind, sniff, decode) entries to SNIFFERS; the first whose sniff() accepts
the bytes decodes them. sniff() must be cheap and must not raise; decode() raises PayloadError for a
payload that looked right but is broken (e.g. a truncated znode). A payload no sniffer accepts is
retried once as base64 text (the `.b64` fixtures and debug logs carry payloads that way)."""
from __future__ import annotations

import base64
import binascii
import re
from pathlib import Path
from typing import Callable, NamedTuple

from audit.formats.errors import PayloadError


class Sniffer(NamedTuple):
    kind: str
    sniff: Callable[[bytes, str], bool]
    decode: Callable[[bytes, str], dict]


SNIFFERS: list[Sniffer] = []
_BASE64_TEXT = re.compile(rb"[A-Za-z0-9+/\s]+={0,2}\s*")


def register(kind: str, sniff: Callable[[bytes, str], bool], decode: Callable[[bytes, str], dict]) -> None:
    if any(s.kind == kind for s in SNIFFERS):
        raise ValueError(f"sniffer {kind!r} already registered")
    SNIFFERS.append(Sniffer(kind, sniff, decode))


def _decode_known(data: bytes, name: str) -> dict | None:
    for s in SNIFFERS:
        if s.sniff(data, name):
            out = s.decode(data, name)
            return {"kind": s.kind, "source": name, **out}
    return None


def inspect_bytes(data: bytes, name: str) -> dict:
    found = _decode_known(data, name)
    if found is not None:
        return found
    if data.strip() and _BASE64_TEXT.fullmatch(data):
        try:
            inner = base64.b64decode(b"".join(data.split()), validate=True)
        except (binascii.Error, ValueError):
            inner = None
        if inner:
            inner_name = name[:-4] if name.endswith(".b64") else name
            found = _decode_known(inner, inner_name)
            if found is not None:
                return {**found, "source": name, "base64": True}
    raise PayloadError(name, "payload", "one of: " + ", ".join(s.kind for s in SNIFFERS) + " (or base64 of one)",
                       data[:32])


def inspect_file(path: str | Path) -> dict:
    return inspect_bytes(Path(path).read_bytes(), str(path))


def _register_builtin() -> None:
    from audit.formats.bookkeeper.sniff import SNIFFERS as BOOKKEEPER
    from audit.formats.pulsar.sniff import BY_NAME as PULSAR_BY_NAME, SNIFFERS as PULSAR

    for kind, sniff, decode in PULSAR_BY_NAME + BOOKKEEPER + PULSAR:
        register(kind, sniff, decode)


_register_builtin()
