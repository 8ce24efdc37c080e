"""meta.properties (one per log dir) and partition.metadata (one per partition dir) (docs/formats/kafka.md §2).

meta.properties is read the way java.util.Properties.load reads the raw bytes, i.e. ISO-8859-1, and written the
way Properties.store(PrintWriter, "") writes it; a Uuid string is URL-safe base64 without padding, 16 bytes
(docs/formats/kafka.md §2.1). partition.metadata: §2.2.

meta.properties version 0 is the ZooKeeper-era form (`broker.id`, optional `cluster.id`); version 1 is the KRaft
form (`node.id` and `cluster.id` required, optional `directory.id`; §2.1). A cluster migrated from ZooKeeper to
KRaft may keep version 0 files, so `mode` names the form of the file, not how the cluster runs today."""
from __future__ import annotations

import base64
import binascii
import re
import time

from audit.errors import PayloadError
from audit.systems.kafka.formats.checkpoint import java_int, java_lines

_URL_B64 = re.compile(r"[A-Za-z0-9_-]*={0,2}")
_SPACE = " \t\f"                               # Properties: whitespace between key and value
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_COLON_SPACES = re.compile(r":[ \t\n\x0b\f\r]+")  # PartitionMetadataReadBuffer's ":\\s+"
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def parse_uuid(text: str, source: str, field: str) -> str:
    """Uuid.fromString: returns the text unchanged once it is known to decode to 16 bytes."""
    body = text.rstrip("=")
    if len(text) > 24 or not _URL_B64.fullmatch(text) or len(body) % 4 == 1:
        raise PayloadError(source, field, "a URL-safe base64 UUID of at most 24 characters", text)
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except binascii.Error:
        raise PayloadError(source, field, "a URL-safe base64 UUID", text) from None
    if len(raw) != 16:
        raise PayloadError(source, field, "16 bytes once base64-decoded", f"{len(raw)} bytes")
    return text


def _unescape(text: str, source: str) -> str:
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 >= len(text):
            out.append(c if c != "\\" else "")  # a lone final backslash is dropped, as loadConvert does
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2:i + 6]
            if len(digits) != 4 or not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise PayloadError(source, "properties", "a \\uxxxx escape (Malformed \\uxxxx encoding)",
                                   text[i:i + 6])
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


def _logical_lines(text: str) -> list[str]:
    """Properties.LineReader: comments and blank lines skipped, leading blanks trimmed, a line ending in an odd
    number of backslashes continues on the next one (whose leading blanks are trimmed too)."""
    logical, pending = [], None
    for _, raw in java_lines(text):
        line = raw.lstrip(_SPACE)
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        joined = line if pending is None else pending + line
        if trailing % 2 == 1:
            pending = joined[:-1]
            continue
        logical.append(joined)
        pending = None
    if pending is not None:
        logical.append(pending)
    return logical


def load_properties(data: bytes, source: str) -> dict[str, str]:
    """java.util.Properties.load(InputStream): bytes read as ISO-8859-1; the last duplicate key wins."""
    props: dict[str, str] = {}
    for line in _logical_lines(data.decode("latin-1")):
        i, escaped = 0, False
        while i < len(line):
            c = line[i]
            if c in "=:" + _SPACE and not escaped:
                break
            escaped = c == "\\" and not escaped
            i += 1
        key_end = i
        while i < len(line) and line[i] in _SPACE:
            i += 1
        if i < len(line) and line[i] in "=:":
            i += 1
            while i < len(line) and line[i] in _SPACE:
                i += 1
        props[_unescape(line[:key_end], source)] = _unescape(line[i:], source)
    return props


def _required_int(props: dict[str, str], key: str, source: str) -> int:
    # PropertiesUtils.loadRequiredIntProp: Integer.parseInt without trimming.
    if key not in props:
        raise PayloadError(source, key, f"a {key} line (Failed to find {key})")
    value = java_int(props[key])
    if value is None:
        raise PayloadError(source, key, f"{key} as a base-10 int", props[key])
    return value


def parse_meta_properties(data: bytes, source: str) -> dict:
    """{"version", "mode": "zookeeper"|"kraft", "broker_id" (v0, None when absent) or "node_id" (v1),
    "cluster_id" (None when a v0 file has none), "directory_id" (None when absent)}."""
    props = load_properties(data, source)
    version = java_int(props.get("version", "0").strip())
    if version is None:
        raise PayloadError(source, "version", "an int (Invalid meta.properties version string)",
                           props.get("version"))
    if version not in (0, 1):
        raise PayloadError(source, "version", "meta.properties version 0 or 1", version)
    result: dict = {"version": version, "mode": "zookeeper" if version == 0 else "kraft"}
    if version == 0:
        result["broker_id"] = _required_int(props, "broker.id", source) if "broker.id" in props else None
    else:
        result["node_id"] = _required_int(props, "node.id", source)
        if "cluster.id" not in props:
            raise PayloadError(source, "cluster.id", "a cluster.id line in a version 1 file")
    result["cluster_id"] = props.get("cluster.id")
    directory = props.get("directory.id")
    result["directory_id"] = None if directory is None else parse_uuid(directory, source, "directory.id")
    return result


def parse_partition_metadata(data: bytes, source: str) -> dict:
    """{"version", "topic_id"}: `version: <n>` then `topic_id: <uuid>`; any version >= 0 is read (downgrade
    compatibility) and the all-zero UUID is refused, as PartitionMetadataReadBuffer does."""
    try:
        lines = [line for _, line in java_lines(data.decode("utf-8"))]
    except UnicodeDecodeError as exc:
        raise PayloadError(source, f"byte {exc.start}", "UTF-8 text") from None
    if not lines:
        raise PayloadError(source, "line 1 version", "'version: <n>'", "an empty file")
    parts = _COLON_SPACES.split(lines[0])
    version = java_int(parts[1]) if len(parts) == 2 else None
    if version is None:
        raise PayloadError(source, "line 1 version", "'version: <n>' (Malformed line)", lines[0])
    if version < 0:
        raise PayloadError(source, "line 1 version", "a version >= 0", version)
    second = lines[1] if len(lines) > 1 else ""
    parts = _COLON_SPACES.split(second)
    if len(parts) != 2:
        raise PayloadError(source, "line 2 topic_id", "'topic_id: <uuid>' (Malformed line)", second)
    topic_id = parse_uuid(parts[1], source, "line 2 topic_id")
    if base64.urlsafe_b64decode(topic_id.rstrip("=") + "==") == bytes(16):
        raise PayloadError(source, "line 2 topic_id", "a topic id other than the zero UUID", topic_id)
    return {"version": version, "topic_id": topic_id}


def encode_partition_metadata(topic_id: str, version: int = 0) -> bytes:
    """PartitionMetadata.encode: no newline after the topic id."""
    parse_uuid(topic_id, "topic_id", "topic_id")
    return f"version: {version}\ntopic_id: {topic_id}".encode("utf-8")


def _store_escape(text: str, is_key: bool) -> str:
    # Properties.saveConvert (escUnicode false: store(Writer) writes non-ASCII characters as they are).
    out = []
    for i, c in enumerate(text):
        if c == " ":
            out.append("\\ " if is_key or i == 0 else " ")
        elif c in "\t\n\r\f":
            out.append("\\" + "tnrf"["\t\n\r\f".index(c)])
        elif c in "=:#!\\":
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def java_date(ms: int) -> str:
    """Date.toString in UTC: `EEE MMM dd HH:mm:ss zzz yyyy`."""
    t = time.gmtime(ms // 1000)
    return (f"{_DAYS[t.tm_wday]} {_MONTHS[t.tm_mon - 1]} {t.tm_mday:02d} "
            f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} UTC {t.tm_year}")


def encode_meta_properties(*, version: int, cluster_id: str | None, broker_id: int | None = None,
                           node_id: int | None = None, directory_id: str | None = None,
                           written_at_ms: int = 0) -> bytes:
    """MetaProperties.toProperties + Properties.store(writer, ""): an empty comment line, the date comment, then
    the keys. JDK 18+ writes keys sorted (§2.1), which is what the real fixture shows; older JDKs write
    them in hash order, which no reader depends on."""
    if version not in (0, 1):
        raise ValueError("meta.properties version is 0 or 1")
    props = {"version": str(version)}
    if cluster_id is not None:
        props["cluster.id"] = cluster_id
    if version == 0:
        if broker_id is not None:
            props["broker.id"] = str(broker_id)
    else:
        if node_id is None or cluster_id is None:
            raise ValueError("a version 1 meta.properties needs node_id and cluster_id")
        props["node.id"] = str(node_id)
    if directory_id is not None:
        props["directory.id"] = parse_uuid(directory_id, "directory_id", "directory.id")
    lines = ["#", f"#{java_date(written_at_ms)}"]
    lines += [f"{_store_escape(k, True)}={_store_escape(v, False)}" for k, v in sorted(props.items())]
    return "".join(line + "\n" for line in lines).encode("utf-8")
