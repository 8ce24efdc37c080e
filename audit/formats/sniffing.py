"""What the systems' `inspect` sniffers share."""
from __future__ import annotations

import json


def json_object(data: bytes, max_bytes: int) -> dict | None:
    """`data` as a JSON object, or None when it is not one (or is bigger than `max_bytes`: never json-parse a
    large file just to sniff it). Never raises."""
    if data.lstrip()[:1] != b"{" or len(data) > max_bytes:
        return None
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None
