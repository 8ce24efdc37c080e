"""MirrorMaker 2 offset-sync and checkpoint records, their formatter text, and the internal topic names.

Docs: docs/formats/kafka.md §9 (the records §9.1, the formatters' text, a println of toString, §9.2, the topic
names of the replication policy §9.3), with the releases compared.

Both records are Kafka protocol `Struct`s: STRING = int16 length (negative or past the end is an error) + UTF-8
(decoded as Java's String does, malformed bytes replaced), INT32/INT64 big-endian, fields in schema order,
bytes after the last field ignored (Schema.read never checks). OffsetSync key `{topic, partition}` names the
UPSTREAM partition; value `{upstreamOffset INT64, offset INT64}` without a version. Checkpoint key `{group, topic,
partition}` names the DOWNSTREAM (renamed) partition; value = header `{version INT16}` + v0 `{upstreamOffset,
offset, metadata STRING}`. Kafka reads any version as v0 (`assert version == 0` only fires with -ea); this decoder
rejects a version other than 0 instead of guessing its layout."""
from __future__ import annotations

import base64
import re
import struct
from typing import NamedTuple

from audit.errors import PayloadError

CHECKPOINT_VERSION = 0  # Checkpoint.VERSION
_TEXT_START = 60


class OffsetSync(NamedTuple):
    topic: str              # upstream topic
    partition: int
    upstream_offset: int
    downstream_offset: int


class Checkpoint(NamedTuple):
    group: str
    topic: str              # downstream (renamed) topic, e.g. "source.orders"
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str


class _Reader:
    def __init__(self, data: bytes, source: str, part: str):
        self.data, self.source, self.part, self.pos = data, source, part, 0

    def _take(self, n: int, field: str, what: str) -> bytes:
        if self.pos + n > len(self.data):
            raise PayloadError(self.source, f"{self.part}@{self.pos}.{field}", f"{what} ({n} bytes)",
                               f"{len(self.data) - self.pos} bytes left")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def int16(self, field: str) -> int:
        return struct.unpack(">h", self._take(2, field, "INT16"))[0]

    def int32(self, field: str) -> int:
        return struct.unpack(">i", self._take(4, field, "INT32"))[0]

    def int64(self, field: str) -> int:
        return struct.unpack(">q", self._take(8, field, "INT64"))[0]

    def string(self, field: str) -> str:
        at = self.pos
        length = self.int16(field)
        if length < 0:
            raise PayloadError(self.source, f"{self.part}@{at}.{field}", "a STRING length >= 0", length)
        return self._take(length, field, "STRING bytes").decode("utf-8", errors="replace")


def _string(value: str, field: str) -> bytes:
    raw = value.encode("utf-8")
    if len(raw) > 0x7FFF:  # Type.STRING.write refuses it too
        raise ValueError(f"{field}: {len(raw)} UTF-8 bytes, more than a STRING holds (32767)")
    return struct.pack(">h", len(raw)) + raw


def decode_offset_sync(key: bytes, value: bytes, source: str) -> OffsetSync:
    k, v = _Reader(key, source, "key"), _Reader(value, source, "value")
    topic, partition = k.string("topic"), k.int32("partition")
    return OffsetSync(topic, partition, v.int64("upstreamOffset"), v.int64("offset"))


def encode_offset_sync(sync: OffsetSync) -> tuple[bytes, bytes]:
    """(key, value) exactly as OffsetSync.recordKey/recordValue write them."""
    return (_string(sync.topic, "topic") + struct.pack(">i", sync.partition),
            struct.pack(">qq", sync.upstream_offset, sync.downstream_offset))


def decode_checkpoint(key: bytes, value: bytes, source: str) -> Checkpoint:
    v = _Reader(value, source, "value")
    version = v.int16("version")
    if version != CHECKPOINT_VERSION:
        raise PayloadError(source, "value@0.version", f"checkpoint value version {CHECKPOINT_VERSION} "
                           "(the only one; Kafka would read another as v0 unless run with -ea)", version)
    upstream, downstream, metadata = v.int64("upstreamOffset"), v.int64("offset"), v.string("metadata")
    k = _Reader(key, source, "key")
    group, topic, partition = k.string("group"), k.string("topic"), k.int32("partition")
    return Checkpoint(group, topic, partition, upstream, downstream, metadata)


def encode_checkpoint(cp: Checkpoint) -> tuple[bytes, bytes]:
    """(key, value) exactly as Checkpoint.recordKey/recordValue (version 0) write them."""
    key = _string(cp.group, "group") + _string(cp.topic, "topic") + struct.pack(">i", cp.partition)
    value = struct.pack(">hqq", CHECKPOINT_VERSION, cp.upstream_offset, cp.downstream_offset) + \
        _string(cp.metadata, "metadata")
    return key, value


# -- formatter text (OffsetSyncFormatter / CheckpointFormatter: one toString per line) --------------------------
_SYNC_LINE = re.compile(r"OffsetSync\{topicPartition=(.+)-(\d+), upstreamOffset=(-?\d+), downstreamOffset=(-?\d+)\}")
# `metatadata=` is Checkpoint.toString's spelling up to 3.5 (fixed in 3.6.0, docs/formats/kafka.md §9.2)
_CHECKPOINT_HEAD = re.compile(r"Checkpoint\{consumerGroupId=(.*?), topicPartition=(.+)-(\d+), "
                              r"upstreamOffset=(-?\d+), downstreamOffset=(-?\d+), meta(?:ta)?data=")


def parse_offset_sync_line(line: str, source: str) -> OffsetSync:
    m = _SYNC_LINE.fullmatch(line.strip())
    if m is None:
        raise PayloadError(source, "line", "OffsetSync{topicPartition=<t>-<p>, upstreamOffset=<n>, "
                           "downstreamOffset=<n>}", line[:_TEXT_START])
    return OffsetSync(m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)))


def parse_checkpoint_line(line: str, source: str) -> Checkpoint:
    text = line.rstrip("\r\n")
    m = _CHECKPOINT_HEAD.match(text)
    if m is None or not text.endswith("}"):
        raise PayloadError(source, "line", "Checkpoint{consumerGroupId=<g>, topicPartition=<t>-<p>, upstreamOffset="
                           "<n>, downstreamOffset=<n>, metadata=<m>}", text[:_TEXT_START])
    return Checkpoint(m.group(1), m.group(2), int(m.group(3)), int(m.group(4)), int(m.group(5)),
                      text[m.end():-1])


def parse_formatter_text(data: bytes | str, source: str, *, strict: bool = False) -> dict:
    """Console-consumer output with either formatter: `{"offset_syncs": [OffsetSync], "checkpoints":
    [Checkpoint], "unparsed": [{"line", "text", "error"}]}`. A checkpoint's metadata may hold line breaks, so a
    line that starts a checkpoint but does not end with "}" takes the following lines until one does. Other lines
    (a pasted command, a cut last line) are listed in "unparsed", or raise in strict mode."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    out: dict = {"offset_syncs": [], "checkpoints": [], "unparsed": []}
    lines = [raw.rstrip("\r") for raw in text.split("\n")]
    n = 0
    while n < len(lines):
        start, line = n + 1, lines[n]
        n += 1
        try:
            if line.startswith("OffsetSync{"):
                out["offset_syncs"].append(parse_offset_sync_line(line, f"{source}:{start}"))
            elif line.startswith("Checkpoint{"):
                if _CHECKPOINT_HEAD.match(line):
                    while not line.endswith("}") and n < len(lines):
                        line, n = line + "\n" + lines[n], n + 1
                out["checkpoints"].append(parse_checkpoint_line(line, f"{source}:{start}"))
            elif line.strip():
                raise PayloadError(f"{source}:{start}", "line", "an OffsetSync{...} or Checkpoint{...} line",
                                   line[:_TEXT_START])
        except PayloadError as e:
            if strict:
                raise
            out["unparsed"].append({"line": start, "text": line[:_TEXT_START], "error": str(e)})
    return out


def looks_like_formatter_text(text: str) -> bool:
    return re.search(r"^(OffsetSync\{topicPartition=|Checkpoint\{consumerGroupId=)", text, re.M) is not None


# -- topic names (DefaultReplicationPolicy) -----------------------------------------------------------------------
def remote_topic(source_alias: str, topic: str, separator: str = ".") -> str:
    """formatRemoteTopic: the name a mirrored topic gets downstream."""
    return source_alias + separator + topic


def topic_source(topic: str, separator: str = ".") -> str | None:
    """topicSource: the alias before the first separator; None for a topic that is not remote. Mirrors Java's
    Pattern.split, which drops trailing empty strings ("a." is not remote, ".a" has source "")."""
    parts = topic.split(separator)
    while parts and parts[-1] == "":
        parts.pop()
    return parts[0] if len(parts) >= 2 else None


def upstream_topic(topic: str, separator: str = ".") -> str | None:
    source = topic_source(topic, separator)
    return None if source is None else topic[len(source) + len(separator):]


def original_topic(topic: str, separator: str = ".") -> str:
    """ReplicationPolicy.originalTopic: strip every alias (A.B.t -> t)."""
    while (up := upstream_topic(topic, separator)) is not None and up != topic:
        topic = up
    return topic


def internal_separator(separator: str, version: tuple[int, int], separator_enabled: bool = True) -> str:
    """The separator of the internal topic names: always "." before 3.1; the configured one from 3.1; from 3.6 "."
    again when replication.policy.internal.topic.separator.enabled=false (docs/formats/kafka.md §9.3)."""
    if version < (3, 1) or (version >= (3, 6) and not separator_enabled):
        return "."
    return separator


def offset_syncs_topic(cluster_alias: str, internal_sep: str = ".") -> str:
    """`mm2-offset-syncs.<alias>.internal`; the alias is the TARGET cluster's (the topic lives in the source
    cluster unless offset-syncs.topic.location=target)."""
    return "mm2-offset-syncs" + internal_sep + cluster_alias + internal_sep + "internal"


def checkpoints_topic(source_alias: str, internal_sep: str = ".") -> str:
    """`<source alias>.checkpoints.internal`, in the target cluster."""
    return source_alias + internal_sep + "checkpoints" + internal_sep + "internal"


def offset_syncs_alias(topic: str, internal_sep: str = ".") -> str | None:
    """The alias inside an offset-syncs topic name, None if the name is not one."""
    head, tail = "mm2-offset-syncs" + internal_sep, internal_sep + "internal"
    if topic.startswith(head) and topic.endswith(tail) and len(topic) > len(head) + len(tail):
        return topic[len(head):-len(tail)]
    return None


def checkpoints_alias(topic: str, internal_sep: str = ".") -> str | None:
    """The source alias of a checkpoints topic name, None if the name is not one (isCheckpointsTopic)."""
    suffix = internal_sep + "checkpoints" + internal_sep + "internal"
    return topic[:-len(suffix)] if topic.endswith(suffix) and len(topic) > len(suffix) else None


# -- the collector's dump of one internal topic (raw/kafka/<cluster>/mm2/<src>/{offset-syncs,checkpoints}.json) -----
def decode_records_dump(doc, source: str) -> dict:
    """Decode every record of a `{"topic", "records": [{"partition", "offset", "timestamp", "key_b64",
    "value_b64"}], ...}` dump; the topic name says which record type it holds. A record that does not decode is
    listed in "errors" (naming its partition and offset) and the others are still decoded. Each decoded record
    is `{"record_partition", "record_offset", "record_timestamp", **OffsetSync or Checkpoint fields}`."""
    if not isinstance(doc, dict) or not isinstance(doc.get("topic"), str) or not isinstance(doc.get("records"), list):
        raise PayloadError(source, "json", 'an object with "topic" (string) and "records" (list)', doc)
    topic = doc["topic"]
    if topic.startswith("mm2-offset-syncs"):
        record_type, decode = "offset-sync", decode_offset_sync
    elif "checkpoints" in topic:
        record_type, decode = "checkpoint", decode_checkpoint
    else:
        raise PayloadError(source, "topic", "an offset-syncs (mm2-offset-syncs...) or checkpoints topic name", topic)
    out: dict = {"topic": topic, "record_type": record_type, "records": [], "errors": []}
    for i, rec in enumerate(doc["records"]):
        where = f"{source}:records[{i}]"
        try:
            if not isinstance(rec, dict) or not isinstance(rec.get("key_b64"), str) or \
                    not isinstance(rec.get("value_b64"), str):
                raise PayloadError(where, "key_b64/value_b64", "base64 strings (a record with key and value)", rec)
            where = f"{source}:partition {rec.get('partition')} offset {rec.get('offset')}"
            decoded = decode(base64.b64decode(rec["key_b64"], validate=True),
                             base64.b64decode(rec["value_b64"], validate=True), where)
        except PayloadError as e:
            out["errors"].append(str(e))
            continue
        except ValueError as e:
            out["errors"].append(f"{where}: base64: {e}")
            continue
        # the record's own place in the internal topic, apart from the partition the record is about
        out["records"].append({"record_partition": rec.get("partition"), "record_offset": rec.get("offset"),
                               "record_timestamp": rec.get("timestamp"), **decoded._asdict()})
    return out
