"""`replaudit import --system pulsar`: every file the admin collector writes (collector.py, dump.py), taken by hand
or by the collector elsewhere, into raw/pulsar/<cluster>/, the collector's own layout (docs/pulsar/contracts.md):

  per topic  T/stats-internal.json   --kind stats-internal   (pulsar-admin topics stats-internal)
             T/stats.json            --kind stats            (pulsar-admin topics stats)
             T/subscriptions/<sub>/replicated-status.json    --kind replicated-status --subscription S
             T/dump/<L>/<first>-<last>.jsonl                 --kind dump (a folder of <L>/<first>-<last>.jsonl)
             T/dump.json             --kind dump-window      (the dump window and its outcome)
             T/message-ttl.json      --kind message-ttl      (pulsar-admin topics get-message-ttl --applied)
             T/namespace-message-ttl.json  --kind namespace-message-ttl   (pulsar-admin namespaces
                                                               get-message-ttl: brokers without the topic GET)
             the whole folder T      --kind topic-folder     (also the `.read.json` read instants beside
                                                               stats-internal.json, stats.json,
                                                               replicated-status.json and the TTL files, and the
                                                               rereads T/rereads/<n>/stats-internal.json[.read.json])
  per cluster collection.json        --kind collection-report
             broker-version.txt      --kind broker-version   (pulsar-admin brokers version, or curl of
                                                               /admin/v2/brokers/version)
             the whole folder raw/pulsar/<cluster>/          --kind cluster-folder (topics/..., collection.json,
                                                               broker-version.txt, reread.json)

Every file is decoded before it is stored, with the decoder normalize uses (strictly: a dump chunk must hold one
line per position of its key); a file that does not decode is rejected with the reason (file, field, what was
expected) and nothing of it is stored. Evidence is never replaced: a key already stored in the run (an import into
an existing run carries that run's evidence) or stored twice by one import is rejected too."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable
from urllib.parse import quote

from audit.collectors.base import ImportJob
from audit.contracts import ImportKind, ImportOption
from audit.errors import PayloadError
from audit.systems.pulsar.formats.message_ttl import MESSAGE_TTL_KEY as MESSAGE_TTL_FILE
from audit.systems.pulsar.formats.message_ttl import NAMESPACE_MESSAGE_TTL_KEY as NAMESPACE_MESSAGE_TTL_FILE

TOPIC = ImportOption("topic", "persistent://tenant/namespace/topic, for Pulsar kinds")
SUBSCRIPTION = ImportOption("subscription", "subscription name, for replicated-status")
SYSTEM = "pulsar"
BROKER_VERSION_FILE = "broker-version.txt"   # collector.py BROKER_VERSION_KEY (not imported: no HTTP stack here)
REREAD_REPORT_FILE = "reread.json"           # pipeline.py REREAD_KEY: the reread stage's report of the cluster
TOPIC_FILES = ("stats-internal.json, stats.json, dump.json, subscriptions/<percent-encoded subscription>/"
               "replicated-status.json, message-ttl.json, namespace-message-ttl.json, dump/<ledgerId>/"
               "<firstEntryId>-<lastEntryId>.jsonl, rereads/<n>/stats-internal.json, or <one of the JSON bodies but "
               "dump.json>.read.json")
_REREAD = re.compile(r"rereads/[1-9][0-9]*/stats-internal\.json")


def topic_folder(topic: str | None) -> str:
    """`persistent://t/ns/x` -> `topics/t/ns/x`."""
    from audit.systems.pulsar.collect.discovery import parse_topic

    try:
        if not isinstance(topic, str) or any(c.isspace() for c in topic):
            raise ValueError(topic)
        return parse_topic(topic).folder
    except ValueError:
        raise ValueError(f"--topic {topic!r}: expected persistent://tenant/namespace/topic") from None


# -- validators: (data, source, topic, below) -> None, raising PayloadError -----------------------------------
def _stats_internal(data: bytes, source: str, topic: str, below: str) -> None:
    from audit.systems.pulsar.formats.stats_internal import decode_stats_internal

    decode_stats_internal(data, source)


def _stats(data: bytes, source: str, topic: str, below: str) -> None:
    from audit.systems.pulsar.formats.stats import decode_topic_stats

    decode_topic_stats(data, source)


def _status(data: bytes, source: str, topic: str, below: str) -> None:
    from audit.systems.pulsar.formats.repl_status import decode_replicated_status

    for name in decode_replicated_status(data, source):
        # the broker names the topic asked about, or each partition of it
        if name != topic and not name.startswith(topic + "-partition-"):
            raise PayloadError(source, name, f"{topic!r} or one of its partitions (the topic imported for)", name)


def _chunk(data: bytes, source: str, topic: str, below: str) -> None:
    from audit.systems.pulsar.formats.dump_chunk import decode_chunk_file

    decode_chunk_file(data, source, below.removeprefix("dump/"))


def _window(data: bytes, source: str, topic: str, below: str) -> None:
    from audit.systems.pulsar.formats.dump_window import decode_dump_window

    decode_dump_window(data, source, topic)


def _message_ttl(data: bytes, source: str, topic: str, below: str) -> None:
    from audit.systems.pulsar.formats.message_ttl import decode_message_ttl

    decode_message_ttl(data, source)


def _read_instant(data: bytes, source: str, topic: str, below: str) -> None:
    from audit.systems.pulsar.formats.read_instant import decode_read_instant

    decode_read_instant(data, source)


def _collection(data: bytes, source: str, cluster: str) -> None:
    """The CollectionReport (audit/collectors/base.py) of this system and cluster."""
    from audit.systems.pulsar.formats import jsonbody as jb

    doc = jb.load_object(data, source)
    for key, want in (("system", SYSTEM), ("cluster", cluster)):
        if doc.get(key) != want:
            raise PayloadError(source, key, f"{want!r} (the --system / --cluster imported for)", doc.get(key))
    counts = jb.obj(doc, "counts", source, "", "an object of name -> integer", required=False) or {}
    for name in counts:
        jb.integer(counts, name, source, "counts", required=True)
    gaps = doc.get("gaps", [])
    if not isinstance(gaps, list):
        raise PayloadError(source, "gaps", "a list of {source, what, error}", gaps)
    for i, gap in enumerate(gaps):
        if not isinstance(gap, dict):
            raise PayloadError(source, f"gaps[{i}]", "an object {source, what, error}", gap)
        for key in ("source", "what", "error"):
            jb.string(gap, key, source, f"gaps[{i}]", required=True)


def _broker_version(data: bytes, source: str) -> None:
    from audit.systems.pulsar.formats.broker_version import decode_broker_version

    decode_broker_version(data, source)


# -- layout ---------------------------------------------------------------------------------------------------
def _classify(below: str) -> Callable | None:
    """The validator of a path below a topic folder, or None when the collector writes no such file."""
    from audit.systems.pulsar.formats.read_instant import READ_SUFFIX

    parts = below.split("/")
    if below.endswith(READ_SUFFIX):   # a read instant, beside a body that has one (not a dump or dump.json)
        body = below.removesuffix(READ_SUFFIX)
        return _read_instant if _classify(body) in (_stats_internal, _stats, _status, _message_ttl) else None
    if below == "stats-internal.json" or _REREAD.fullmatch(below):
        return _stats_internal
    if below == "stats.json":
        return _stats
    if below == "dump.json":
        return _window
    if below in (MESSAGE_TTL_FILE, NAMESPACE_MESSAGE_TTL_FILE):
        return _message_ttl
    if len(parts) == 3 and parts[0] == "subscriptions" and parts[1] and parts[2] == "replicated-status.json":
        return _status
    if len(parts) == 3 and parts[0] == "dump" and parts[2].endswith(".jsonl"):
        return _chunk
    return None


class _Import(ImportJob):
    def __init__(self, put, cluster: str):
        super().__init__(put, SYSTEM, cluster)

    def topic_file(self, path: Path, topic: str, folder: str, below: str) -> None:
        check = _classify(below)
        if check is None:
            self.reject(path, f"{path}: {below!r} is not a file the collector writes in a topic folder; expected "
                              + TOPIC_FILES)
            return
        self.store(path, f"{folder}/{below}", lambda data, source: check(data, source, topic, below))


def _one_file(kind: str, files: list) -> tuple[Path, str]:
    if len(files) != 1:
        raise ValueError(f"import --kind {kind}: expected exactly one file, got {len(files)}")
    return files[0]


def _store_file(kind: str, below: Callable[[dict], str]):
    """A kind that is one file of a topic folder (`below(options)`: its path in the folder)."""
    def store(put, cluster: str, files: list[tuple[Path, str]], options: dict) -> dict:
        topic = options.get("topic")
        folder = topic_folder(topic)
        where = below(options)
        path, _ = _one_file(kind, files)
        job = _Import(put, cluster)
        job.topic_file(path, topic, folder, where)
        return job.result()
    return store


def _status_path(options: dict) -> str:
    if not options.get("subscription"):
        raise ValueError("import --kind replicated-status: give --subscription")
    return f"subscriptions/{quote(options['subscription'], safe='')}/replicated-status.json"


def _store_dump(put, cluster: str, files: list[tuple[Path, str]], options: dict) -> dict:
    topic = options.get("topic")
    folder = topic_folder(topic)
    job = _Import(put, cluster)
    for path, rel in files:
        job.topic_file(path, topic, folder, "dump/" + rel.removeprefix("dump/"))
    return job.result()


def _store_topic_folder(put, cluster: str, files: list[tuple[Path, str]], options: dict) -> dict:
    topic = options.get("topic")
    folder = topic_folder(topic)
    job = _Import(put, cluster)
    for path, rel in files:
        job.topic_file(path, topic, folder, rel)
    return job.result()


def _store_collection(put, cluster: str, files: list[tuple[Path, str]], options: dict) -> dict:
    path, _ = _one_file("collection-report", files)
    job = _Import(put, cluster)
    job.store(path, "collection.json", lambda data, source: _collection(data, source, cluster))
    return job.result()


def _store_broker_version(put, cluster: str, files: list[tuple[Path, str]], options: dict) -> dict:
    path, _ = _one_file("broker-version", files)
    job = _Import(put, cluster)
    job.store(path, BROKER_VERSION_FILE, _broker_version)
    return job.result()


def _store_cluster_folder(put, cluster: str, files: list[tuple[Path, str]], options: dict) -> dict:
    job = _Import(put, cluster)
    for path, rel in files:
        parts = rel.split("/")
        if rel == "collection.json":
            job.store(path, rel, lambda data, source: _collection(data, source, cluster))
        elif rel == BROKER_VERSION_FILE:
            job.store(path, rel, _broker_version)
        elif rel == REREAD_REPORT_FILE:   # the same CollectionReport shape, written by the reread stage
            job.store(path, rel, lambda data, source: _collection(data, source, cluster))
        elif len(parts) >= 5 and parts[0] == "topics" and all(parts[1:4]):
            topic = "persistent://" + "/".join(parts[1:4])   # the folder spells the topic as is
            job.topic_file(path, topic, topic_folder(topic), "/".join(parts[4:]))
        else:
            job.reject(path, f"{path}: {rel!r} is not a file the collector writes for a cluster; expected "
                             f"collection.json, {BROKER_VERSION_FILE}, {REREAD_REPORT_FILE} or "
                             f"topics/<tenant>/<namespace>/<topic>/<file> ({TOPIC_FILES})")
    return job.result()


KINDS = {
    "stats-internal": ImportKind("pulsar-admin topics stats-internal JSON",
                                 _store_file("stats-internal", lambda o: "stats-internal.json"), (TOPIC,)),
    "stats": ImportKind("pulsar-admin topics stats JSON", _store_file("stats", lambda o: "stats.json"), (TOPIC,)),
    "replicated-status": ImportKind("replicated subscription status JSON",
                                    _store_file("replicated-status", _status_path), (TOPIC, SUBSCRIPTION)),
    "dump": ImportKind("per-entry dump chunks (<ledgerId>/<first>-<last>.jsonl)", _store_dump, (TOPIC,)),
    "dump-window": ImportKind("the dump window and its outcome (the collector's dump.json)",
                              _store_file("dump-window", lambda o: "dump.json"), (TOPIC,)),
    "message-ttl": ImportKind("the topic's applied message TTL in seconds (pulsar-admin topics get-message-ttl "
                              "--applied, or GET .../messageTTL?applied=true)",
                              _store_file("message-ttl", lambda o: MESSAGE_TTL_FILE), (TOPIC,)),
    "namespace-message-ttl": ImportKind("the topic's namespace message TTL in seconds, from a broker without the "
                                        "topic-level GET (pulsar-admin namespaces get-message-ttl)",
                                        _store_file("namespace-message-ttl", lambda o: NAMESPACE_MESSAGE_TTL_FILE),
                                        (TOPIC,)),
    "topic-folder": ImportKind("a topic folder as the collector writes it (stats-internal.json, stats.json, "
                               "subscriptions/, message-ttl.json, dump/, dump.json, rereads/, *.read.json)",
                               _store_topic_folder, (TOPIC,)),
    "collection-report": ImportKind("the collector's collection.json of this cluster", _store_collection),
    "broker-version": ImportKind("the cluster's broker version as GET /admin/v2/brokers/version answers it "
                                 "(bare text, e.g. 3.0.12)", _store_broker_version),
    "cluster-folder": ImportKind("a cluster folder as the collector writes it (raw/pulsar/<cluster>/: topics/..., "
                                 "collection.json, broker-version.txt, reread.json)", _store_cluster_folder),
}
