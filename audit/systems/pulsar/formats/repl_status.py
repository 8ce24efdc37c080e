"""replicatedSubscriptionStatus (GET .../subscription/{sub}/replicatedSubscriptionStatus, docs/formats/pulsar.md §2.4):
a `Map<String, Boolean>` from (partition) topic name to "replicated subscriptions enabled"."""
from __future__ import annotations

from audit.errors import PayloadError
from audit.systems.pulsar.formats import jsonbody as jb

EXPECTED = "an object of topic name -> true/false"


def decode_replicated_status(data: bytes, source: str) -> dict[str, bool]:
    doc = jb.load_json(data, source)
    if not isinstance(doc, dict):
        raise PayloadError(source, jb.ROOT, EXPECTED, doc)
    for topic, value in doc.items():
        if not isinstance(value, bool):
            raise PayloadError(source, topic, "true or false", value)
    return dict(doc)


def looks_like_status(doc: object) -> bool:
    """Non-empty, topic-name keys, boolean values: cheap enough for sniffing."""
    return bool(doc) and isinstance(doc, dict) and all(
        isinstance(k, str) and "://" in k and isinstance(v, bool) for k, v in doc.items())
