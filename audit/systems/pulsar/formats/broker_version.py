"""GET /admin/v2/brokers/version: the version of the broker that answered (docs/formats/pulsar.md §2.12).

The broker's version resource returns PulsarVersion.getVersion() as a Java String; the resource is declared
`@Produces(application/json)` but Jersey writes a String entity as is, so the body is the bare version text
(`3.0.12`, `4.1.0-SNAPSHOT`), not a JSON document, under a JSON Content-Type. pulsar-admin `brokers version` reads
it as a String and prints it the same way. A body quoted as a JSON string (a proxy or a hand-taken copy that
re-encoded it) is taken too."""
from __future__ import annotations

import json
import re

from audit.errors import PayloadError

# MAJOR.MINOR then anything a build appends (patch, -SNAPSHOT, a vendor's fourth number); the audit decides
# whether the rest says which snapshot cache the broker runs (audit/systems/pulsar/domain/snapshot_cache.py).
_VERSION = re.compile(r"\d+\.\d+[0-9A-Za-z.+\-_]*")


def decode_broker_version(data: bytes, source: str) -> str:
    """The version text of one answer; PayloadError when the body is not a version."""
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise PayloadError(source, "body", "UTF-8 text (the broker's version)", data[:40]) from None
    if text.startswith('"'):
        try:
            text = json.loads(text)
        except ValueError:
            raise PayloadError(source, "body", "a version, bare or as one JSON string", text) from None
        text = text.strip() if isinstance(text, str) else text
    if not isinstance(text, str) or not _VERSION.fullmatch(text):
        raise PayloadError(source, "body", "a broker version such as 3.0.12 (BrokersBase#version)", text)
    return text
