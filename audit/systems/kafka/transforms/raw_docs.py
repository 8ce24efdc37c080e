"""The collector's own JSON documents under raw/kafka/<cluster>/ (docs/kafka/contracts.md "Raw layout"), read
strictly: scan.json, batches.json, admin/*.json and mm2/<source alias>/*.json. Each reader returns the document with
every field it uses checked, or raises PayloadError naming the key, the field (with its path in the document) and
what was expected. Pure: bytes in, plain values out."""
from __future__ import annotations

import json
import re
from typing import Any

from audit.errors import MISSING, PayloadError

BATCH_COLUMNS = ("base_offset", "last_offset", "partition_leader_epoch", "magic", "crc", "crc_valid", "attributes",
                 "max_timestamp", "base_timestamp", "producer_id", "producer_epoch", "base_sequence",
                 "records_count", "position", "size")
BATCHES_VERSION = 1
PARTITION_DIR = re.compile(r"^(?P<topic>[A-Za-z0-9._-]+)-(?P<partition>\d{1,10})$")


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a partition dir `<topic>-<p>` (docs/formats/kafka.md §4.1); None
    for anything else (`-future`, `-delete`, `-stray` dirs carry a `.<uuid>` and are never indexed as replicas)."""
    m = PARTITION_DIR.match(name)
    if m is None or len(m.group("topic")) > 249 or int(m.group("partition")) > 0x7FFFFFFF:
        return None
    return m.group("topic"), int(m.group("partition"))


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


_KINDS = {"int": (_is_int, "an integer"), "str": (lambda v: isinstance(v, str), "a string"),
          "bool": (lambda v: isinstance(v, bool), "true or false"), "list": (lambda v: isinstance(v, list), "a list"),
          "dict": (lambda v: isinstance(v, dict), "an object")}


class Doc:
    """One JSON document being read: `get(obj, key, kind, where)` checks a field and names it on failure."""

    def __init__(self, data: bytes, source: str):
        self.source = source
        try:
            self.root = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise PayloadError(source, "document", "a JSON document (UTF-8)", f"{type(e).__name__}: {e}") from None
        if not isinstance(self.root, dict):
            raise PayloadError(source, "document", "a JSON object", type(self.root).__name__)

    def get(self, obj: dict, key: str, kind: str, where: str = "", null: bool = False) -> Any:
        value = obj.get(key, MISSING) if isinstance(obj, dict) else MISSING
        if value is None and null:
            return None
        ok, what = _KINDS[kind]
        if value is MISSING or not ok(value):
            raise PayloadError(self.source, f"{where}{key}", what + (" or null" if null else ""), value)
        return value

    def items(self, obj: dict, key: str, where: str = "") -> list[tuple[str, dict]]:
        """(path, object) for each item of the list obj[key]; every item must be an object."""
        out = []
        for i, item in enumerate(self.get(obj, key, "list", where)):
            path = f"{where}{key}[{i}]"
            if not isinstance(item, dict):
                raise PayloadError(self.source, path, "an object", item)
            out.append((path + ".", item))
        return out

    def read_instants(self, obj: dict | None = None, where: str = "",
                      default: tuple[int | None, int | None] = (None, None)) -> tuple[int | None, int | None]:
        """(started, finished) of the document, or of one item of it when it records its own read (else the
        document's, `default`)."""
        obj = self.root if obj is None else obj
        if obj is not self.root and "read_started_at_ms" not in obj and "read_finished_at_ms" not in obj:
            return default
        return (self.get(obj, "read_started_at_ms", "int", where, null=True),
                self.get(obj, "read_finished_at_ms", "int", where, null=True))


def scan(data: bytes, source: str) -> dict:
    """scan.json of one broker log dir."""
    d = Doc(data, source)
    r = d.root
    out = {"broker": d.get(r, "broker", "int"), "log_dir": d.get(r, "log_dir", "str"),
           "started_at_ms": d.get(r, "started_at_ms", "int"), "finished_at_ms": d.get(r, "finished_at_ms", "int"),
           "verify_crc": d.get(r, "verify_crc", "bool"),
           # steps within the scan, when recorded (absent from hand-made or older scans)
           "checkpoints_read_at_ms": d.get(r, "checkpoints_read_at_ms", "int", null=True) if
           "checkpoints_read_at_ms" in r else None,
           "listed_at_ms": d.get(r, "listed_at_ms", "int", null=True) if "listed_at_ms" in r else None}
    if out["finished_at_ms"] < out["started_at_ms"]:
        raise PayloadError(source, "finished_at_ms", f"an instant >= started_at_ms {out['started_at_ms']}",
                           out["finished_at_ms"])
    partitions = d.get(r, "partitions", "list")
    for i, name in enumerate(partitions):
        if not isinstance(name, str):
            raise PayloadError(source, f"partitions[{i}]", "a partition dir name", name)
    out["partitions"] = partitions
    out["skipped"] = [{"dir": d.get(s, "dir", "str", p), "why": d.get(s, "why", "str", p)}
                      for p, s in d.items(r, "skipped")]
    out["vanished"] = [{"file": d.get(s, "file", "str", p), "why": d.get(s, "why", "str", p)}
                       for p, s in d.items(r, "vanished")]
    out["errors"] = [{"file": d.get(s, "file", "str", p), "offset": d.get(s, "offset", "int", p, null=True),
                      "error": d.get(s, "error", "str", p)} for p, s in d.items(r, "errors")]
    return out


def batches(data: bytes, source: str) -> dict:
    """batches.json of one partition dir: segments with their batch-header columns (all of equal length)."""
    d = Doc(data, source)
    r = d.root
    version = d.get(r, "version", "int")
    if version != BATCHES_VERSION:
        raise PayloadError(source, "version", f"{BATCHES_VERSION}", version)
    segments = []
    for p, s in d.items(r, "segments"):
        seg = {"file": d.get(s, "file", "str", p), "base_offset": d.get(s, "base_offset", "int", p),
               "size_at_start": d.get(s, "size_at_start", "int", p), "read_bytes": d.get(s, "read_bytes", "int", p),
               "active": d.get(s, "active", "bool", p), "vanished": d.get(s, "vanished", "bool", p)}
        tail = d.get(s, "tail", "dict", p, null=True)
        seg["tail_offset"] = None if tail is None else d.get(tail, "offset", "int", p + "tail.")
        seg["tail_why"] = None if tail is None else d.get(tail, "why", "str", p + "tail.")
        error = d.get(s, "error", "dict", p, null=True)
        seg["error_offset"] = None if error is None else d.get(error, "offset", "int", p + "error.", null=True)
        seg["error"] = None if error is None else d.get(error, "error", "str", p + "error.")
        cols = d.get(s, "batches", "dict", p)
        columns = {name: d.get(cols, name, "list", p + "batches.") for name in BATCH_COLUMNS}
        n = len(columns["base_offset"])
        for name, values in columns.items():
            if len(values) != n:
                raise PayloadError(source, f"{p}batches.{name}", f"{n} values (as base_offset)", len(values))
            bad = next((i for i, v in enumerate(values) if not (
                (isinstance(v, bool) or v is None) if name == "crc_valid" else _is_int(v))), None)
            if bad is not None:
                what = "true, false or null" if name == "crc_valid" else "an integer"
                raise PayloadError(source, f"{p}batches.{name}[{bad}]", what, values[bad])
        seg["columns"] = columns
        segments.append(seg)
    # the log cleaner's .cleaned/.swap files seen in the dir (absent before the collector looked for them)
    cleaning = d.get(r, "cleaning", "list") if "cleaning" in r else []
    bad = next((c for c in cleaning if not isinstance(c, str)), None)
    if bad is not None:
        raise PayloadError(source, "cleaning", "file names (strings)", bad)
    return {"partition_dir": d.get(r, "partition_dir", "str"), "segments": segments, "cleaning": cleaning}


def metadata(data: bytes, source: str) -> dict:
    d = Doc(data, source)
    r = d.root
    parts = []
    for p, x in d.items(r, "partitions"):
        ints = {k: [d.get({"v": v}, "v", "int", f"{p}{k}[{i}].") for i, v in enumerate(d.get(x, k, "list", p))]
                for k in ("replicas", "isr", "offline")}
        elr = d.get(x, "elr", "list", p, null=True)
        parts.append({"topic": d.get(x, "topic", "str", p), "partition": d.get(x, "partition", "int", p),
                      "topic_id": d.get(x, "topic_id", "str", p, null=True), "leader": d.get(x, "leader", "int", p),
                      "leader_epoch": d.get(x, "leader_epoch", "int", p), **ints,
                      "elr": None if elr is None else [d.get({"v": v}, "v", "int", f"{p}elr[{i}].")
                                                       for i, v in enumerate(elr)],
                      "error_code": d.get(x, "error_code", "int", p)})
    return {"read": d.read_instants(), "partitions": parts}


def list_offsets(data: bytes, source: str) -> dict:
    d = Doc(data, source)
    whole = d.read_instants()
    out = []
    for p, x in d.items(d.root, "partitions"):
        started, finished = d.read_instants(x, p, whole)    # the partition's own requests, when recorded
        out.append({"topic": d.get(x, "topic", "str", p), "partition": d.get(x, "partition", "int", p),
                    "earliest": d.get(x, "earliest", "int", p, null=True),
                    "latest": d.get(x, "latest", "int", p, null=True),
                    "latest_leader_epoch": d.get(x, "latest_leader_epoch", "int", p, null=True),
                    "error_code": d.get(x, "error_code", "int", p), "read_started_at_ms": started,
                    "read_finished_at_ms": finished})
    return {"read": whole, "partitions": out}


def log_dirs(data: bytes, source: str) -> dict:
    d = Doc(data, source)
    whole = d.read_instants()
    rows = []
    for p, b in d.items(d.root, "brokers"):
        broker, error = d.get(b, "broker", "int", p), d.get(b, "error", "str", p, null=True)
        started, finished = d.read_instants(b, p, whole)   # each broker answers on its own
        read = {"read_started_at_ms": started, "read_finished_at_ms": finished}
        dirs = [] if error is not None and "log_dirs" not in b else d.items(b, "log_dirs", p)
        if error is not None and not dirs:
            rows.append({"broker": broker, "broker_error": error, **read})
        for q, ld in dirs:
            for s_, x in d.items(ld, "partitions", q):
                rows.append({"broker": broker, "broker_error": error, "log_dir": d.get(ld, "log_dir", "str", q),
                             "error_code": d.get(ld, "error_code", "int", q), "topic": d.get(x, "topic", "str", s_),
                             "partition": d.get(x, "partition", "int", s_), "size": d.get(x, "size", "int", s_),
                             "offset_lag": d.get(x, "offset_lag", "int", s_),
                             "is_future": d.get(x, "is_future", "bool", s_), **read})
    return {"read": whole, "rows": rows}


def epoch_answers(data: bytes, source: str) -> dict:
    d = Doc(data, source)
    whole = d.read_instants()
    out = []
    for p, x in d.items(d.root, "answers"):
        started, finished = d.read_instants(x, p, whole)    # each request's own send / answer instants
        out.append({"broker": d.get(x, "broker", "int", p), "topic": d.get(x, "topic", "str", p),
                    "partition": d.get(x, "partition", "int", p),
                    "requested_epoch": d.get(x, "requested_epoch", "int", p),
                    "current_leader_epoch": d.get(x, "current_leader_epoch", "int", p, null=True),
                    "leader_epoch": d.get(x, "leader_epoch", "int", p, null=True),
                    "end_offset": d.get(x, "end_offset", "int", p, null=True),
                    "error_code": d.get(x, "error_code", "int", p),
                    "round": d.get(x, "round", "int", p, null=True) if "round" in x else None,
                    "read_started_at_ms": started, "read_finished_at_ms": finished})
    return {"read": whole, "answers": out}


def mm2_topic(data: bytes, source: str) -> dict:
    """offset-syncs.json / checkpoints.json: the internal topic's records (key/value still base64) and end offsets."""
    d = Doc(data, source)
    r = d.root
    ends = d.get(r, "end_offsets", "dict")
    end_offsets = {}
    for k, v in ends.items():
        if not k.lstrip("-").isdigit() or not _is_int(v):
            raise PayloadError(source, f"end_offsets.{k}", "partition number -> integer offset", v)
        end_offsets[int(k)] = v
    records = [{"partition": d.get(x, "partition", "int", p), "offset": d.get(x, "offset", "int", p),
                "timestamp": d.get(x, "timestamp", "int", p, null=True),
                "key_b64": d.get(x, "key_b64", "str", p, null=True),
                "value_b64": d.get(x, "value_b64", "str", p, null=True), "where": p[:-1]}
               for p, x in d.items(r, "records")]
    return {"topic": d.get(r, "topic", "str"), "read": d.read_instants(), "end_offsets": end_offsets,
            "records": records}


GROUP_READS = ("target", "source", "target_after")     # groups.json's reads, in the reader's order


def _side_instants(d: Doc, side: str, whole: tuple[int | None, int | None]) -> tuple[int | None, int | None]:
    """`<side>_read_started_at_ms` / `_finished_at_ms`; a document without them (written before the reader
    recorded each read) has every read within its one pair: `whole`."""
    names = (f"{side}_read_started_at_ms", f"{side}_read_finished_at_ms")
    if not any(n in d.root for n in names):
        return whole
    started, finished = (d.get(d.root, n, "int", null=True) for n in names)
    if started is not None and finished is not None and finished < started:
        raise PayloadError(d.source, names[1], f"an instant >= {names[0]} {started}", finished)
    return started, finished


def mm2_groups(data: bytes, source: str) -> dict:
    """groups.json: committed offsets per read ("target", "source" and, since the reader reads the target groups
    again after the source, "target_after"; a document without it had two reads), partition offsets per side
    ("source"/"target"), and when each read was made ("sides": {read: (started, finished)})."""
    d = Doc(data, source)
    r = d.root
    reads = [side for side in GROUP_READS if side != "target_after" or "target_after" in r]
    groups = []
    for side in reads:
        for group, offsets in d.get(r, side, "dict").items():
            for p, x in d.items({group: offsets}, group, f"{side}."):
                groups.append({"side": side, "group": group, "topic": d.get(x, "topic", "str", p),
                               "partition": d.get(x, "partition", "int", p), "offset": d.get(x, "offset", "int", p)})
    ends = []
    for side in ("source", "target"):
        for p, x in d.items(r, f"{side}_end_offsets"):
            ends.append({"side": side, "topic": d.get(x, "topic", "str", p),
                         "partition": d.get(x, "partition", "int", p),
                         "log_start_offset": d.get(x, "log_start", "int", p, null=True),
                         "end_offset": d.get(x, "end", "int", p, null=True)})
    whole = d.read_instants()
    return {"read": whole, "sides": {side: _side_instants(d, side, whole) for side in reads},
            "groups": groups, "end_offsets": ends}
