"""When a stored admin answer was read: `<key>.read.json`, written by replaudit beside the body it describes
(docs/pulsar/contracts.md "Read instants"). Not a broker format: the broker's bodies carry no time of their own
(internalStats has no timestamp), and the audit needs the instant of every read to compare clusters that were
collected minutes apart.

    {"url": "http://broker:8080/admin/v2/persistent/t/ns/topic/internalStats",
     "requested_at_ms": 1764100000000, "answered_at_ms": 1764100000042}

Milliseconds since the epoch on the collecting machine's clock: every read of one reread comes from one process,
so their order is exact; reads of different collection tasks are compared only where minutes separate them.

Rereads (the reread stage, after every cluster is collected) are stored under `rereads/<pass>/` of the topic
folder, the internalStats body as `rereads/<pass>/stats-internal.json` with its own `.read.json`."""
from __future__ import annotations

import json
from dataclasses import dataclass

from audit.errors import MISSING, PayloadError

READ_SUFFIX = ".read.json"
REREADS = "rereads"                  # folder of the rereads inside a topic folder
REREAD_BODY = "stats-internal.json"  # what a reread stores per pass


@dataclass(frozen=True)
class ReadInstant:
    url: str | None
    requested_at_ms: int
    answered_at_ms: int


def encode_read_instant(url: str | None, requested_at_ms: int, answered_at_ms: int) -> bytes:
    return json.dumps({"url": url, "requested_at_ms": int(requested_at_ms),
                       "answered_at_ms": int(answered_at_ms)}, sort_keys=True).encode()


def decode_read_instant(data: bytes, source: str) -> ReadInstant:
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise PayloadError(source, "body", "a JSON object {url, requested_at_ms, answered_at_ms}",
                           data[:40]) from None
    if not isinstance(doc, dict):
        raise PayloadError(source, "body", "a JSON object {url, requested_at_ms, answered_at_ms}", doc)
    values = {}
    for name in ("requested_at_ms", "answered_at_ms"):
        v = doc.get(name, MISSING)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise PayloadError(source, name, "milliseconds since the epoch (a non-negative integer)", v)
        values[name] = v
    if values["answered_at_ms"] < values["requested_at_ms"]:
        raise PayloadError(source, "answered_at_ms", f"at or after requested_at_ms ({values['requested_at_ms']})",
                           values["answered_at_ms"])
    url = doc.get("url")
    if url is not None and not isinstance(url, str):
        raise PayloadError(source, "url", "the URL read, or null", url)
    return ReadInstant(url, values["requested_at_ms"], values["answered_at_ms"])
