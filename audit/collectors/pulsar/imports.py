"""`replaudit import --system pulsar`: `pulsar-admin topics stats-internal | stats |
get-replicated-subscription-status` outputs and dump chunks (a folder laid out as <ledgerId>/<first>-<last>.jsonl)
into raw/pulsar/<cluster>/topics/..., the folder the admin collector itself keeps a topic's evidence in
(docs/pulsar/contracts.md, raw layout)."""
from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from audit.contracts import ImportKind, ImportOption

TOPIC = ImportOption("topic", "persistent://tenant/namespace/topic, for Pulsar kinds")
SUBSCRIPTION = ImportOption("subscription", "subscription name, for replicated-status")


def topic_folder(topic: str | None) -> str:
    """`persistent://t/ns/x` -> `topics/t/ns/x`."""
    from audit.collectors.pulsar.discovery import parse_topic

    try:
        if not isinstance(topic, str) or any(c.isspace() for c in topic):
            raise ValueError(topic)
        return parse_topic(topic).folder
    except ValueError:
        raise ValueError(f"--topic {topic!r}: expected persistent://tenant/namespace/topic") from None


def _store(kind: str, file_name: str | None):
    """`file_name`: the one file of the kind inside the topic folder; None: a folder of dump chunks."""
    def store(put, cluster: str, files: list[tuple[Path, str]], options: dict) -> dict:
        folder = topic_folder(options.get("topic"))
        if kind == "replicated-status":
            if not options.get("subscription"):
                raise ValueError("import --kind replicated-status: give --subscription")
            folder += "/subscriptions/" + quote(options["subscription"], safe="")
        if file_name is not None and len(files) != 1:
            raise ValueError(f"import --kind {kind}: expected exactly one file, got {len(files)}")
        stored = []
        for path, rel in files:
            key = f"{folder}/" + (f"dump/{rel}" if file_name is None else file_name)
            put(key, path.read_bytes())
            stored.append(key)
        return {"stored": stored, "rejected": []}
    return store


KINDS = {
    "stats-internal": ImportKind("pulsar-admin topics stats-internal JSON", _store("stats-internal",
                                                                                   "stats-internal.json"), (TOPIC,)),
    "stats": ImportKind("pulsar-admin topics stats JSON", _store("stats", "stats.json"), (TOPIC,)),
    "replicated-status": ImportKind("replicated subscription status JSON",
                                    _store("replicated-status", "replicated-status.json"), (TOPIC, SUBSCRIPTION)),
    "dump": ImportKind("per-entry dump chunks (<ledgerId>/<first>-<last>.jsonl)", _store("dump", None), (TOPIC,)),
}
