"""`kafka-log-dirs.sh --describe` output, and the toString of a DescribeLogDirs answer found in client logs.

The tool (docs/formats/kafka.md §8: a Scala command up to 3.5.0, a Java port from 3.6.0), in both versions, prints
two banner lines ("Querying brokers for log directories information", "Received log directory information from
brokers 1,2") and one JSON line `{"version":1,"brokers":[{"broker","logDirs":[{"logDir","error","partitions":
[{"partition":"<topic>-<p>","size","offsetLag","isFuture"}]}]}]}`. The Scala version's small maps keep that key
order; the Java port builds HashMaps, so keys come in hash order: the JSON is parsed, never read by position.
"error" is the exception class name of an offline log dir (Errors.exceptionName() before 2.7, the
ApiException's class name from 2.7), null otherwise. offsetLag is ReplicaManager.getLogEndOffsetLag:
max(HW - LEO, 0) for a current replica, LEO(current) - LEO(future) for a future one, -1
(DescribeLogDirsResponse.INVALID_OFFSET_LAG) when the broker has no online local log for the partition.
Brokers given with --broker-list that do not exist: 3.0-3.5 print `ERROR: The given brokers do not exist from
--broker-list: 5. Current existent brokers: 1,2` on stdout, 3.6+ the same text on stderr (TerseException)."""
from __future__ import annotations

import json
import re

from audit.errors import PayloadError

_QUERYING = "Querying brokers for log directories information"
_RECEIVED = re.compile(r"Received log directory information from brokers ((?:-?\d+(?:,-?\d+)*)?)")
_MISSING = re.compile(r"ERROR: The given brokers do not exist from --broker-list: ([-\d,]*)\. "
                      r"Current existent brokers: ([-\d,]*)")
_TEXT_START = 60


def split_topic_partition(text: str, source: str, field: str) -> tuple[str, int]:
    """TopicPartition.toString is `<topic>-<partition>`; topics may contain '-', so split at the last one."""
    topic, sep, part = text.rpartition("-")
    if not sep or not topic or not re.fullmatch(r"\d+", part):
        raise PayloadError(source, field, "'<topic>-<partition>' (TopicPartition.toString)", text)
    return topic, int(part)


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _typed(value, kind, source: str, field: str):
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if not ok:
        raise PayloadError(source, field, kind.__name__, value)
    return value


def _replica(doc, source: str, field: str) -> dict:
    if not isinstance(doc, dict):
        raise PayloadError(source, field, "an object", doc)
    for key in ("partition", "size", "offsetLag", "isFuture"):
        if key not in doc:
            raise PayloadError(source, f"{field}.{key}", "present")
    topic, partition = split_topic_partition(_typed(doc["partition"], str, source, f"{field}.partition"), source,
                                             f"{field}.partition")
    return {"topic": topic, "partition": partition, "size": _typed(doc["size"], int, source, f"{field}.size"),
            "offset_lag": _typed(doc["offsetLag"], int, source, f"{field}.offsetLag"),
            "is_future": _typed(doc["isFuture"], bool, source, f"{field}.isFuture")}


def _log_dir(doc, source: str, field: str) -> dict:
    if not isinstance(doc, dict) or not {"logDir", "error", "partitions"} <= doc.keys():
        raise PayloadError(source, field, "an object with logDir, error, partitions", doc)
    error = doc["error"]
    if error is not None:
        _typed(error, str, source, f"{field}.error")
    parts = _typed(doc["partitions"], list, source, f"{field}.partitions")
    return {"log_dir": _typed(doc["logDir"], str, source, f"{field}.logDir"), "error": error,
            "partitions": [_replica(p, source, f"{field}.partitions[{i}]") for i, p in enumerate(parts)]}


def decode_log_dirs_json(doc, source: str) -> list[dict]:
    """The JSON line: `[{"broker", "log_dirs": [{"log_dir", "error", "partitions": [{"topic", "partition",
    "size", "offset_lag", "is_future"}]}]}]`."""
    if not isinstance(doc, dict) or doc.get("version") != 1 or not isinstance(doc.get("brokers"), list):
        raise PayloadError(source, "json", '{"version": 1, "brokers": [...]} (the only version ever written)',
                           doc if not isinstance(doc, dict) else {k: doc[k] for k in list(doc)[:2]})
    out = []
    for i, b in enumerate(doc["brokers"]):
        field = f"json.brokers[{i}]"
        if not isinstance(b, dict) or "broker" not in b or not isinstance(b.get("logDirs"), list):
            raise PayloadError(source, field, "an object with broker and logDirs", b)
        out.append({"broker": _typed(b["broker"], int, source, f"{field}.broker"),
                    "log_dirs": [_log_dir(d, source, f"{field}.logDirs[{j}]") for j, d in enumerate(b["logDirs"])]})
    return out


def parse_log_dirs(data: bytes | str, source: str) -> dict:
    """The tool's stdout (optionally with stderr and a pasted command): `{"brokers_queried": [..] | None,
    "brokers": [...] (decode_log_dirs_json), "missing_brokers": [..], "existing_brokers": [..] (from the ERROR
    line, else empty), "other_lines": [{"line", "text"}]}`. Exactly one JSON line is expected unless the tool
    stopped at the ERROR line."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    out: dict = {"brokers_queried": None, "brokers": [], "missing_brokers": [], "existing_brokers": [],
                 "other_lines": []}
    json_lines = []
    for n, raw in enumerate(text.split("\n"), 1):
        line = raw.strip()
        if not line or line == _QUERYING:
            continue
        if m := _RECEIVED.fullmatch(line):
            out["brokers_queried"] = _ints(m.group(1))
        elif m := _MISSING.fullmatch(line):
            out["missing_brokers"], out["existing_brokers"] = _ints(m.group(1)), _ints(m.group(2))
        elif line.startswith("{"):
            json_lines.append((n, line))
        else:
            out["other_lines"].append({"line": n, "text": line[:_TEXT_START]})
    if out["missing_brokers"] and not json_lines:
        return out
    if len(json_lines) != 1:
        raise PayloadError(source, "json", "exactly one JSON line after the banner lines",
                           f"{len(json_lines)} lines starting with '{{'")
    n, line = json_lines[0]
    try:
        doc = json.loads(line)
    except ValueError as e:
        raise PayloadError(source, f"line {n}", f"JSON ({e})", line[:_TEXT_START]) from None
    out["brokers"] = decode_log_dirs_json(doc, source)
    return out


# DescribeLogDirsResponse.LogDirInfo.toString (deprecated since 2.7): (error=NONE, replicas={t-0=(size=0, ...)})
# and admin.LogDirDescription.toString: LogDirDescription(replicaInfos={t-0=ReplicaInfo(size=0, ...)}, error=null...)
_INFO_ERROR = re.compile(r"\(error=([A-Za-z_.$]+), replicas=\{|LogDirDescription\(replicaInfos=\{")
_REPLICA = re.compile(r"([^\s=,{}()]+)=(?:ReplicaInfo)?\(size=(-?\d+), offsetLag=(-?\d+), isFuture=(true|false)\)")
_DESC_ERROR = re.compile(r"\}, error=([A-Za-z0-9_.$]+)")  # ApiException.toString = class name [": " message]


def parse_log_dir_info_text(data: bytes | str, source: str) -> dict:
    """A log dir's DescribeLogDirs answer as its toString appears in client logs (e.g. kafka-rest DEBUG lines):
    `{"log_dir": str | None, "error": str | None, "replicas": [{"topic", "partition", "size", "offset_lag",
    "is_future"}], "truncated": bool}`. Lines are joined without a separator (log viewers wrap mid-word). The log
    dir is taken as the absolute path glued in front of "(error=" when there is one; "truncated" means the text
    ends before the replicas map closes (entries cut off are not reported)."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    text = "".join(line.rstrip("\r") for line in text.split("\n"))
    m = _INFO_ERROR.search(text)
    if m is None:
        raise PayloadError(source, "text", "'(error=<Errors>, replicas={' or 'LogDirDescription(replicaInfos={'",
                           text[:_TEXT_START])
    error = m.group(1)
    log_dir = None
    if m.group(0).startswith("(error="):
        head = re.search(r"(/\S*)$", text[:m.start()].split()[-1] if text[:m.start()].split() else "")
        log_dir = head.group(1) if head else None
        error = None if error == "NONE" else error
    body = text[m.end():]
    close = body.find("}")
    inner = body if close < 0 else body[:close]
    replicas = []
    for r in _REPLICA.finditer(inner):
        topic, partition = split_topic_partition(r.group(1), source, f"replicas[{len(replicas)}]")
        replicas.append({"topic": topic, "partition": partition, "size": int(r.group(2)),
                         "offset_lag": int(r.group(3)), "is_future": r.group(4) == "true"})
    if close >= 0 and m.group(0).startswith("LogDirDescription"):
        e = _DESC_ERROR.match(body[close:])
        error = None if e is None or e.group(1) == "null" else e.group(1)
    return {"log_dir": log_dir, "error": error, "replicas": replicas, "truncated": close < 0}


def looks_like_log_dirs(text: str) -> bool:
    return _QUERYING in text or (_RECEIVED.search(text) is not None) or (
        '"logDirs"' in text and '"brokers"' in text and '"offsetLag"' in text)


def looks_like_log_dir_info(text: str) -> bool:
    return _INFO_ERROR.search(text) is not None and "offsetLag=" in text
