"""Reading the admin API's JSON bodies: one place that turns every shape problem into a PayloadError.

Field paths are dotted from the document root (`cursors.sub-a.markDeletePosition`) so a quarantine reason
says exactly which value was wrong."""
from __future__ import annotations

import json
import re
from typing import Any

from audit.errors import MISSING, PayloadError
from audit.systems.pulsar.domain.positions import Position, parse_position

ROOT = "<root>"
_TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def looks_like_html(data: bytes) -> bool:
    return data.lstrip()[:1] == b"<"


def _html_hint(data: bytes) -> str:
    # A proxy or login page instead of the broker's answer: its title is what an operator recognises.
    m = _TITLE.search(data[:4096])
    text = (m.group(1) if m else data.lstrip()[:60]).decode("utf-8", "replace")
    return " ".join(text.split())[:60]


def load_json(data: bytes, source: str) -> Any:
    if looks_like_html(data):
        raise PayloadError(source, ROOT, f"a JSON object (got an HTML page: {_html_hint(data)})", data[:40])
    try:
        return json.loads(data)
    except UnicodeDecodeError as e:
        raise PayloadError(source, ROOT, f"UTF-8 JSON ({e.reason} at byte {e.start})", data[:40]) from None
    except ValueError as e:  # json.JSONDecodeError: truncated or not JSON at all
        where = f" at line {e.lineno} column {e.colno}" if isinstance(e, json.JSONDecodeError) else ""
        raise PayloadError(source, ROOT, f"a complete JSON document ({getattr(e, 'msg', e)}{where})",
                           data[-40:]) from None


def load_object(data: bytes, source: str) -> dict:
    doc = load_json(data, source)
    if not isinstance(doc, dict):
        raise PayloadError(source, ROOT, "a JSON object", doc)
    return doc


def join(path: str, key: str) -> str:
    return key if path in ("", ROOT) else f"{path}.{key}"


def obj(doc: dict, key: str, source: str, path: str, expected: str, required: bool = True) -> dict | None:
    value = doc.get(key, MISSING)
    if value is MISSING or value is None:
        if required:
            raise PayloadError(source, join(path, key), expected, value)
        return None
    if not isinstance(value, dict):
        raise PayloadError(source, join(path, key), expected, value)
    return value


def _typed(doc: dict, key: str, source: str, path: str, kinds: tuple, expected: str, required: bool):
    value = doc.get(key, MISSING)
    if value is MISSING or value is None:
        if required:
            raise PayloadError(source, join(path, key), expected, value)
        return None
    # bool is an int subclass in Python; JSON true is never a count.
    if not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool)):
        raise PayloadError(source, join(path, key), expected, value)
    return value


def integer(doc: dict, key: str, source: str, path: str, required: bool = False) -> int | None:
    return _typed(doc, key, source, path, (int,), "an integer", required)


def number(doc: dict, key: str, source: str, path: str, required: bool = False) -> float | None:
    value = _typed(doc, key, source, path, (int, float), "a number", required)
    return None if value is None else float(value)


def boolean(doc: dict, key: str, source: str, path: str, required: bool = False) -> bool | None:
    return _typed(doc, key, source, path, (bool,), "true or false", required)


def string(doc: dict, key: str, source: str, path: str, required: bool = False) -> str | None:
    return _typed(doc, key, source, path, (str,), "a string", required)


def position(doc: dict, key: str, source: str, path: str, required: bool = True) -> Position | None:
    value = doc.get(key, MISSING)
    if (value is MISSING or value is None) and not required:
        return None
    return parse_position(value, source, join(path, key))
