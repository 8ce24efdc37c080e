"""`kafka-dump-log.sh` (DumpLogSegments) output of every generation, read back into batch and record headers.

Each generation of the tool's output is one `_Layout` below; docs/formats/kafka.md §7 lists them with the releases read
and the changes between them. The tool prints `key:`/`payload:` text (and decoded control/metadata JSON) after the
record fields: it is skipped, never kept. Lines are matched token by token against the known layouts, so a line that
somebody hard-wrapped (GitHub comments, terminals) is joined back as long as the joined text still fits a layout. A line
no layout accepts becomes an item of the file's "unparsed" list naming the line number and the start of the text (or a
PayloadError in strict mode, which `replaudit inspect` uses)."""
from __future__ import annotations

import re
from typing import NamedTuple

from audit.errors import PayloadError

_TEXT_START = 60  # how much of a line an error item repeats (it may be payload text)


class _Layout(NamedTuple):
    name: str                # the generation, e.g. "batch 3.2+"
    role: str                # batch | legacy | message | record | entry
    pipe: bool               # starts with the record indent "|" (2.2+ record lines)
    fields: tuple[str, ...]  # printed names in order; "TS" = TimestampType name; "?" = may be absent
    tail: bool               # control marker / decoded control record / key / payload text may follow


_V2 = ("baseOffset", "lastOffset", "count", "baseSequence", "lastSequence", "producerId", "producerEpoch",
       "partitionLeaderEpoch", "isTransactional", "isControl")
_R28 = ("offset", "isValid", "crc", "keySize", "valueSize", "TS", "baseOffset", "lastOffset", "baseSequence",
        "lastSequence", "producerEpoch", "partitionLeaderEpoch", "batchSize", "magic", "compressType", "position")
_LOG = (
    _Layout("batch 3.2+", "batch", False,
            _V2 + ("deleteHorizonMs", "position", "TS", "size", "magic", "compresscodec", "crc", "isvalid"), False),
    _Layout("batch 2.2-3.1", "batch", False,
            _V2 + ("position", "TS", "size", "magic", "compresscodec", "crc", "isvalid"), False),
    _Layout("batch 2.0-2.1", "batch", False,
            _V2 + ("position", "TS", "isvalid", "size", "magic", "compresscodec", "crc"), False),
    _Layout("batch 0.11-1.1", "batch", False,
            ("baseOffset", "lastOffset", "baseSequence", "lastSequence", "producerId", "producerEpoch",
             "partitionLeaderEpoch", "isTransactional", "position", "TS", "isvalid", "size", "magic",
             "compresscodec", "crc"), False),
    _Layout("legacy batch 2.2+", "legacy", False,
            ("offset", "position", "TS", "size", "magic", "compresscodec", "crc", "isvalid"), False),
    _Layout("legacy batch 0.11-2.1", "legacy", False,
            ("offset", "position", "TS", "isvalid", "size", "magic", "compresscodec", "crc"), False),
    _Layout("message 0.10.1-0.10.2", "message", False,
            ("offset", "position", "TS", "isvalid", "payloadsize", "magic", "compresscodec", "crc", "keysize?"), True),
    _Layout("message 0.8-0.10.0", "message", False,
            ("offset", "position", "isvalid", "payloadsize", "magic", "compresscodec", "crc", "keysize?"), True),
    _Layout("record 0.11-2.1", "record", False,
            ("offset", "position", "TS", "isvalid", "keysize", "valuesize", "magic", "compresscodec", "producerId",
             "producerEpoch?", "sequence", "isTransactional", "headerKeys"), True),
    _Layout("legacy record 0.11-2.1", "record", False,
            ("offset", "position", "TS", "isvalid", "keysize", "valuesize", "magic", "compresscodec", "crc"), True),
    _Layout("record 3.1+", "record", True, ("offset", "TS", "keySize", "valueSize", "sequence", "headerKeys"), True),
    # 3.1+ prints `crc: <n>}` for a legacy record: a stray brace in the format string (docs/formats/kafka.md §7.4)
    _Layout("legacy record 3.1+", "record", True, ("offset", "TS", "keySize", "valueSize", "isValid", "crc}"), True),
    _Layout("record 2.8-3.0", "record", True, _R28 + ("sequence", "headerKeys"), True),
    _Layout("legacy record 2.8-3.0", "record", True, _R28 + ("crc", "isvalid"), True),
    _Layout("record 2.2-2.7", "record", True, ("offset", "TS", "keysize", "valuesize", "sequence", "headerKeys"), True),
    _Layout("legacy record 2.2-2.7", "record", True, ("offset", "TS", "keysize", "valuesize", "crc", "isvalid"), True),
)
_LAYOUTS = {
    "log": _LOG, "snapshot": _LOG, "bootstrap-snapshot": _LOG,
    "index": (_Layout("index entry", "entry", False, ("offset", "position"), False),),
    "timeindex": (_Layout("time index entry", "entry", False, ("timestamp", "offset"), False),),
    "txnindex": (_Layout("aborted transaction", "entry", False,
                         ("version", "producerId", "firstOffset", "lastOffset", "lastStableOffset"), False),),
    "producer-snapshot": (
        _Layout("producer state 1.0+", "entry", False,
                ("producerId", "producerEpoch", "coordinatorEpoch", "currentTxnFirstOffset", "lastTimestamp?",
                 "firstSequence?", "lastSequence?", "lastOffset?", "offsetDelta?", "timestamp?"), False),
        _Layout("producer state 0.11", "entry", False,
                ("producerId", "producerEpoch", "lastSequence", "lastOffset", "offsetDelta", "lastTimestamp",
                 "coordinatorEpoch", "currentTxnFirstOffset"), False)),
    "unknown": (),  # the tool prints nothing for other file names ("Ignoring unknown file" on stderr)
}
_SUFFIX_KIND = {".log": "log", ".checkpoint": "snapshot", ".index": "index", ".timeindex": "timeindex",
                ".snapshot": "producer-snapshot", ".txnindex": "txnindex"}
_ENTRY_START = {"index": "offset: ", "timeindex": "timestamp: ", "txnindex": "version: ",
                "producer-snapshot": "producerId: "}

_TS = {"CreateTime:", "LogAppendTime:", "NoTimestampType:"}
_BOOLS = {"true": True, "false": False}
_CODECS = {"none": "none", "gzip": "gzip", "snappy": "snappy", "lz4": "lz4", "zstd": "zstd",
           # 0.8-0.10.1 print the Scala CompressionCodec objects; 0.10.2-3.0 the Java enum names (NONE, GZIP, ...)
           "nocompressioncodec": "none", "gzipcompressioncodec": "gzip", "snappycompressioncodec": "snappy",
           "lz4compressioncodec": "lz4"}
_KEYS = {"isvalid": "is_valid", "isValid": "is_valid", "keysize": "key_size", "valuesize": "value_size",
         "payloadsize": "value_size", "compresscodec": "codec", "compressType": "codec", "crc}": "crc"}
_OPT_LONG = re.compile(r"OptionalLong\[(-?\d+)\]|Some\((-?\d+)\)")
_INT = re.compile(r"-?\d+")
_CONTROL = re.compile(r"([A-Z_]+)\((-?\d+)\)")
_END_TXN = re.compile(r"endTxnMarker: (COMMIT|ABORT) coordinatorEpoch: (-?\d+)")
_END_TXN_START = re.compile(r"endTxnMarker:( (COMMIT|ABORT)( coordinatorEpoch:)?)?")
_DECODED_CONTROL = {"SnapshotHeader": "SNAPSHOT_HEADER", "SnapshotFooter": "SNAPSHOT_FOOTER",
                    "KRaftVersion": "KRAFT_VERSION", "KRaftVoters": "KRAFT_VOTERS"}

_DUMPING = re.compile(r"Dumping (.+)")
_SEGMENT_BASE = re.compile(r"(?:Log s|S)tarting offset: (-?\d+)")
_SNAPSHOT_ID = re.compile(r"Snapshot end offset: (-?\d+), epoch: (-?\d+)")
_TRAILING = re.compile(r"Found (\d+) invalid bytes at the end of (.+)")
_INDEX_NOTE = re.compile(r".+ (is empty|passed sanity check)\.")
_IGNORED = re.compile(r"Ignoring unknown file (.+)")
# stderr summaries printed after all files (kind, heading, detail row)
_DIAG = (
    ("index_mismatch", re.compile(r"Mismatches in :(.*)"),
     re.compile(r" {2}Index offset: (-?\d+), log offset: (-?\d+)")),
    ("non_consecutive", re.compile(r"Non-(?:consecutive|secutive) offsets in :?(.*)"),
     re.compile(r" {2}(-?\d+) is followed by (-?\d+)")),
    ("time_index_mismatch", re.compile(r"Found timestamp mismatch in :(.*)"),
     re.compile(r" {2}Index timestamp: (-?\d+), log timestamp: (-?\d+)")),
    ("time_index_out_of_order", re.compile(r"Found out of order timestamp in :(.*)"),
     re.compile(r" {2}Index timestamp: (-?\d+), Previously indexed timestamp: (-?\d+)")),
    ("index_offset_not_found", re.compile(r"The following indexed offsets are not found in the log\.()"),
     re.compile(r"Indexed offset: (-?\d+), found log offset: (-?\d+)")),
)

BATCH_KEYS = ("base_offset", "last_offset", "count", "partition_leader_epoch", "producer_id", "producer_epoch",
              "base_sequence", "last_sequence", "is_transactional", "is_control", "delete_horizon_ms", "position",
              "size", "magic", "crc", "is_valid", "timestamp_type", "timestamp", "codec")
RECORD_KEYS = ("offset", "timestamp_type", "timestamp", "key_size", "value_size", "sequence", "header_keys",
               "is_valid", "crc", "control_type", "coordinator_epoch", "position", "magic", "codec", "producer_id",
               "producer_epoch", "is_transactional")
# what Kafka's own AbstractLegacyRecordBatch reports for the fields a magic 0/1 line does not print
_LEGACY_DEFAULTS = {"partition_leader_epoch": -1, "producer_id": -1, "producer_epoch": -1, "base_sequence": -1,
                    "last_sequence": -1, "is_transactional": False, "is_control": False}

_BAD, _PARTIAL = object(), object()


class _Match(NamedTuple):
    status: str          # full | partial | bad
    layout: _Layout | None
    fields: dict
    tail: str            # none (no tail possible) | empty | free (text that may go on) | closed


_NO_MATCH = _Match("bad", None, {}, "none")


def _snake(name: str) -> str:
    return _KEYS.get(name) or re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)


def _value(name: str, tokens: list[str], j: int):
    """(value, next index) of the field whose value starts at tokens[j]."""
    tok = tokens[j]
    if name == "headerKeys":
        if not tok.startswith("["):
            return _BAD, j
        k = j
        while not tokens[k].endswith("]"):  # a header key may hold spaces
            k += 1
            if k == len(tokens):
                return _PARTIAL, k
        inner = " ".join(tokens[j:k + 1])[1:-1]
        return (inner.split(",") if inner else []), k + 1
    if name in ("isTransactional", "isControl", "isvalid", "isValid"):
        return _BOOLS.get(tok, _BAD), j + 1
    if name in ("compresscodec", "compressType"):
        return _CODECS.get(tok.lower(), _BAD), j + 1
    if name in ("deleteHorizonMs", "currentTxnFirstOffset"):
        if tok in ("OptionalLong.empty", "None"):
            return None, j + 1
        m = _OPT_LONG.fullmatch(tok)
        return (int(m.group(1) or m.group(2)) if m else _BAD), j + 1
    if name == "crc}":
        return (int(tok[:-1]) if tok.endswith("}") and tok[:-1].isdigit() else _BAD), j + 1
    if name == "crc" and tok == "null":  # 2.8-3.0 print Record.checksumOrNull, null for v2 records
        return None, j + 1
    return (int(tok) if _INT.fullmatch(tok) else _BAD), j + 1


def _tail(tokens: list[str], out: dict) -> tuple[str, str]:
    """Status and tail state of what follows the record fields (never kept beyond the control type)."""
    if not tokens:
        return "full", "empty"
    head = tokens[0]
    if head in ("key:", "payload:") or head in _DECODED_CONTROL:
        out["control_type"] = _DECODED_CONTROL.get(head)
        return "full", "free"
    if head == "endTxnMarker:":  # EndTransactionMarker: COMMIT/ABORT and the coordinator epoch, nothing after
        text = " ".join(tokens)
        if m := _END_TXN.fullmatch(text):
            out["control_type"], out["coordinator_epoch"] = m.group(1), int(m.group(2))
            return "full", "closed"
        return ("partial" if _END_TXN_START.fullmatch(text) else "bad"), "none"
    if head == "controlType:":
        if len(tokens) == 1:
            return "partial", "none"
        m = _CONTROL.fullmatch(tokens[1])
        if not m or len(tokens) > 2:
            return "bad", "none"
        out["control_type"] = m.group(1) if m.group(1) != "UNKNOWN" else tokens[1]
        return "full", "closed"
    return "bad", "none"


def _match(layout: _Layout, tokens: list[str]) -> _Match:
    out: dict = {}
    i, n = (1 if layout.pipe else 0), len(tokens)
    for pos, spec in enumerate(layout.fields):
        name = spec.rstrip("?")
        if i >= n:
            if all(s.endswith("?") for s in layout.fields[pos:]):
                break
            return _Match("partial", layout, out, "none")
        tok = tokens[i]
        if (tok not in _TS) if name == "TS" else (tok != name.rstrip("}") + ":"):
            if spec.endswith("?"):
                continue
            return _NO_MATCH
        if i + 1 >= n:
            return _Match("partial", layout, out, "none")
        value, i = _value(name, tokens, i + 1)
        if value is _BAD:
            return _NO_MATCH
        if value is _PARTIAL:
            return _Match("partial", layout, out, "none")
        if name == "TS":
            out["timestamp_type"], out["timestamp"] = tok[:-1], value
        else:
            out[_snake(name)] = value
    if not layout.tail:
        return _Match("full", layout, out, "none") if i == n else _NO_MATCH
    status, state = _tail(tokens[i:], out)
    return _NO_MATCH if status == "bad" else _Match(status, layout, out, state)


def _file_kind(path: str) -> str:
    name = re.split(r"[/\\]", path)[-1]
    if name == "bootstrap.checkpoint":
        return "bootstrap-snapshot"
    return _SUFFIX_KIND.get(name[name.rfind("."):], "unknown") if "." in name else "unknown"


class _Pending(NamedTuple):
    line: int
    text: str | None  # None once the line is in free text (payload): nothing more to match
    match: _Match


class _Reader:
    def __init__(self, source: str, strict: bool):
        self.source, self.strict = source, strict
        self.result: dict = {"files": [], "preamble": [], "diagnostics": []}
        self.file: dict | None = None
        self.pending: _Pending | None = None
        self.diag: tuple[str, str, re.Pattern] | None = None

    # -- what a line is
    def _classify(self, text: str) -> _Match:
        tokens = text.split()
        pipe = bool(tokens) and tokens[0] == "|"
        best = _NO_MATCH
        for layout in _LAYOUTS[self.file["kind"]]:
            if layout.pipe == pipe:
                m = _match(layout, tokens)
                if m.status == "full":
                    return m
                if m.status == "partial" and best is _NO_MATCH:
                    best = m
        return best

    def _is_start(self, line: str) -> bool:
        if line.startswith(("Dumping ", "Starting offset: ", "Log starting offset: ", "Snapshot end offset: ",
                            "KRaft bootstrap snapshot", "Found ", "Ignoring unknown file ")) \
                or any(head.fullmatch(line) or row.fullmatch(line) for _, head, row in _DIAG):
            return True
        kind = self.file["kind"]
        if kind in _ENTRY_START:
            return line.startswith(_ENTRY_START[kind]) or _INDEX_NOTE.fullmatch(line) is not None
        return line.startswith(("baseOffset: ", "offset: ", "| ", " payload: ")) or line == "|"

    # -- feeding lines
    def feed(self, n: int, line: str) -> None:
        if self.pending is not None:
            if self._continues(line):
                return
            self._flush()
        self._start(n, line)

    def _continues(self, line: str) -> bool:
        p = self.pending
        if p.match.tail == "free":
            if not line.strip() or not self._is_start(line):
                return True  # payload or decoded JSON that went on over several lines
            return False
        if not line.strip() or (p.match.status == "full" and (p.match.tail != "empty" or self._is_start(line))):
            return False
        joined = p.text + " " + line.strip()
        m = self._classify(joined)
        if m.status == "bad":
            return False
        self.pending = _Pending(p.line, None if m.tail == "free" else joined, m)
        return True

    def _start(self, n: int, line: str) -> None:
        text = line.strip()
        m = _DUMPING.fullmatch(line)
        if m:
            self.file = {"file": m.group(1), "kind": _file_kind(m.group(1)), "line": n, "segment_base_offset": None,
                         "snapshot_end_offset": None, "snapshot_epoch": None, "invalid_trailing_bytes": None,
                         "batches": [], "records": [], "entries": [], "notes": [], "payload_lines": 0,
                         "generations": [], "unparsed": []}
            self.result["files"].append(self.file)
            return
        if self._diagnostic(n, line) or not text:
            return
        if self.file is None:  # a shell prompt, the command, anything before the tool's first line
            self.result["preamble"].append({"line": n, "text": text[:_TEXT_START]})
            return
        f = self.file
        if m := _SEGMENT_BASE.fullmatch(line):
            f["segment_base_offset"] = int(m.group(1))
        elif m := _SNAPSHOT_ID.fullmatch(line):
            f["snapshot_end_offset"], f["snapshot_epoch"] = int(m.group(1)), int(m.group(2))
        elif text == "KRaft bootstrap snapshot" or (f["kind"] in _ENTRY_START and _INDEX_NOTE.fullmatch(line)):
            f["notes"].append(text)
        elif m := _TRAILING.fullmatch(line):
            f["invalid_trailing_bytes"] = int(m.group(1))
        elif line.startswith(" payload: ") or text.startswith("| key: "):
            # --skip-record-metadata: only key/payload text, nothing to keep but that the record was there
            f["payload_lines"] += 1
            self.pending = _Pending(n, None, _Match("full", None, {}, "free"))
        else:
            self.pending = _Pending(n, text, self._classify(text))

    def _diagnostic(self, n: int, line: str) -> bool:
        if m := _IGNORED.fullmatch(line):
            self.result["diagnostics"].append({"line": n, "kind": "ignored_file", "file": m.group(1), "values": []})
            return True
        for kind, head, row in _DIAG:
            if m := head.fullmatch(line):
                self.diag = (kind, m.group(1) or None, row)
                return True
        if self.diag and (m := self.diag[2].fullmatch(line)):
            self.result["diagnostics"].append({"line": n, "kind": self.diag[0], "file": self.diag[1],
                                               "values": [int(m.group(1)), int(m.group(2))]})
            return True
        return False

    def _flush(self) -> None:
        p, self.pending = self.pending, None
        m, f = p.match, self.file
        if m.status != "full":
            expected = ("the rest of a " + m.layout.name + " line") if m.status == "partial" else \
                f"a line of a known generation for a {f['kind']} file (see docs/formats/kafka.md)"
            self.problem(p.line, p.text or "", expected)
            return
        if m.layout is None:
            return
        if m.layout.name not in f["generations"]:
            f["generations"].append(m.layout.name)
        if m.layout.role == "record":
            rec = {k: m.fields.get(k) for k in RECORD_KEYS}
            rec["batch"] = len(f["batches"]) - 1 if f["batches"] else None
            rec["line"] = p.line
            f["records"].append(rec)
        elif m.layout.role == "entry":
            f["entries"].append({**m.fields, "line": p.line})
        else:
            fields = m.fields
            if m.layout.role != "batch":  # magic 0/1: one offset, Kafka's legacy-batch defaults for the rest
                offset = fields["offset"]
                fields = {**_LEGACY_DEFAULTS, **fields, "base_offset": offset, "last_offset": offset}
            f["batches"].append({**{k: fields.get(k) for k in BATCH_KEYS}, "line": p.line})

    def problem(self, n: int, text: str, expected: str) -> None:
        err = PayloadError(self.source, f"line {n}", expected, text[:_TEXT_START])
        if self.strict:
            raise err
        self.file["unparsed"].append({"line": n, "text": text[:_TEXT_START], "error": str(err)})

    def finish(self) -> dict:
        if self.pending is not None:
            self._flush()
        if self.strict and not self.result["files"]:
            raise PayloadError(self.source, "line 1", "a 'Dumping <file>' line (kafka-dump-log output)",
                               self.result["preamble"][0]["text"] if self.result["preamble"] else "")
        return self.result


def parse_dump_log(data: bytes | str, source: str, *, strict: bool = False) -> dict:
    """`{"files": [{"file", "kind", "segment_base_offset", "snapshot_end_offset", "snapshot_epoch", "batches",
    "records", "entries", "generations", "unparsed", ...}], "preamble", "diagnostics"}`.

    "segment_base_offset" is what the tool labels "Starting offset" / "Log starting offset": the number in the
    segment's file name, not the partition's log start offset. Records carry "batch", the index of the batch line
    printed before them (None for 0.11-2.1 deep iteration, which printed no batch lines). Lines before the first
    `Dumping` line are kept as "preamble" (a pasted command) and are not errors even in strict mode."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    reader = _Reader(source, strict)
    for n, line in enumerate(text.split("\n"), 1):
        reader.feed(n, line.rstrip("\r"))
    return reader.finish()


def looks_like_dump_log(text: str) -> bool:
    """Cheap test for the sniffer: a `Dumping` line followed by a line only this tool prints."""
    m = re.search(r"^Dumping \S", text, re.M)
    return m is not None and re.search(
        r"^((Log s|S)tarting offset: -?\d|Snapshot end offset: |baseOffset: -?\d|\| offset: -?\d|offset: -?\d+ "
        r"position: |timestamp: -?\d+ offset: |producerId: -?\d+ producerEpoch: |version: \d+ producerId: )",
        text[m.start():], re.M) is not None
