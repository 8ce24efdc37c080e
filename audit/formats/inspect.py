"""Sniff a native payload, decode it, and describe it as a JSON-able dict with a "kind" key.

Each registered system contributes its sniffers (audit.contracts.Sniffer); the first whose sniff() accepts
the bytes decodes them, those that go by file name alone first. sniff() must be cheap and must not raise;
decode() raises PayloadError for a payload that looked right but is broken (e.g. a truncated znode). A payload
no sniffer accepts is retried once as base64 text (the `.b64` fixtures and debug logs carry payloads that way)."""
from __future__ import annotations

import base64
import binascii
import re
from pathlib import Path

from audit.contracts import Sniffer
from audit.errors import PayloadError

_BASE64_TEXT = re.compile(rb"[A-Za-z0-9+/\s]+={0,2}\s*")


def sniffers() -> list[Sniffer]:
    """Every registered system's sniffers, by-name ones first (a marker's protobuf bytes, say, could pass for another
    system's binary payload)."""
    from audit import systems

    found = []
    for system in systems.all_systems():
        by_name, by_content = system.pipeline.sniffers()
        found += [Sniffer(*s, by_name=True) for s in by_name] + [Sniffer(*s) for s in by_content]
    kinds = [s.kind for s in found]
    duplicate = next((k for k in kinds if kinds.count(k) > 1), None)
    if duplicate:
        raise ValueError(f"sniffer {duplicate!r} registered twice")
    return [s for s in found if s.by_name] + [s for s in found if not s.by_name]


def _decode_known(data: bytes, name: str) -> dict | None:
    for s in sniffers():
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
    raise PayloadError(name, "payload", "one of: " + ", ".join(s.kind for s in sniffers()) + " (or base64 of one)",
                       data[:32])


def inspect_file(path: str | Path) -> dict:
    return inspect_bytes(Path(path).read_bytes(), str(path))
