"""A message TTL as the admin API answers it (docs/formats/pulsar.md §2.14): messageTTLInSeconds, 0 = none.

    T/message-ttl.json            GET /admin/v2/persistent/{t}/{ns}/{topic}/messageTTL?applied=true
    T/namespace-message-ttl.json  GET /admin/v2/namespaces/{t}/{ns}/messageTTL (brokers without the topic-level GET)

Jersey writes the Integer entity as a bare JSON number (`60`). A null entity (a namespace that sets no TTL, since
2.8.0) is 204 No Content, stored as an empty body; `pulsar-admin ... get-message-ttl` prints
it as `null`. Both mean "not set here", never "no TTL"."""
from __future__ import annotations

import json

from audit.errors import PayloadError

MESSAGE_TTL_KEY = "message-ttl.json"
NAMESPACE_MESSAGE_TTL_KEY = "namespace-message-ttl.json"
_EXPECTED = "messageTTLInSeconds: an integer >= 0, or nothing / null (not set)"


def decode_message_ttl(data: bytes, source: str) -> int | None:
    """Seconds (0 = no TTL), or None when the answer sets none."""
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise PayloadError(source, "body", _EXPECTED, data[:40]) from None
    if text in ("", "null"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        raise PayloadError(source, "body", _EXPECTED, text) from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:   # the broker refuses < 0 (412)
        raise PayloadError(source, "body", _EXPECTED, value)
    return value
