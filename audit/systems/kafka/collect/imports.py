"""`replaudit import --system kafka`: evidence taken by hand (or by a collector elsewhere) into raw/kafka/<cluster>/
(docs/kafka/collector.md, "Import kinds"):

  --kind log-dir --broker N [--index I] DIR...
        a copied or mounted broker log dir, scanned exactly as the collector scans one (logdir.py) into
        brokers/<N>/dir<I>/... (meta.properties, checkpoints, partition files, batches.json, scan.json). Several
        DIRs are the broker's log.dirs in order; --index places the first (default: the next position with no
        scan.json stored in the run). The broker id is checked against each dir's meta.properties (broker.id,
        or node.id in KRaft): a mismatch refuses the import, naming --broker and both ids.
  --kind dump-log --broker N FILE...
        kafka-dump-log.sh output (any generation, audit/systems/kafka/formats/dump_log.py) of that broker's segments,
        stored as given under brokers/<N>/dump-log/<file name or path inside the folder given>
  --kind log-dirs-describe FILE...
        kafka-log-dirs.sh --describe output (audit/systems/kafka/formats/log_dirs.py), under
        admin/log-dirs-describe/<name>
  --kind mm2-checkpoints --mirror S FILE...
  --kind mm2-offset-syncs --mirror S FILE...
        console-consumer output with MirrorMaker 2's CheckpointFormatter / OffsetSyncFormatter (including the old
        `metatadata=` spelling; audit/systems/kafka/formats/mm2.py), under mm2/<S>/checkpoints-text/<name> and
        mm2/<S>/offset-syncs-text/<name> (S = the mirror's source alias, as the collector's mm2/<S>/)

Text is stored byte for byte once it parses: lines the parser does not know (a pasted command, a line cut short)
are kept in the stored text and reported by normalize, but a file with nothing of its kind in it is rejected with
the reason. Evidence is never replaced: a key already stored in the run is rejected."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

from audit.collectors.base import ImportJob
from audit.systems.kafka.collect.logdir import SCAN_FILE, BrokerIdMismatch, dir_key, scan_log_dir
from audit.contracts import ImportKind, ImportOption
from audit.errors import PayloadError
from audit.systems.kafka.formats.dump_log import parse_dump_log
from audit.systems.kafka.formats.log_dirs import parse_log_dirs
from audit.systems.kafka.formats.mm2 import parse_formatter_text

SYSTEM = "kafka"
BROKER = ImportOption("broker", "Kafka broker id, for log-dir and dump-log (checked against meta.properties)")
INDEX = ImportOption("index", "position of the (first) log dir in the broker's log.dirs, for log-dir "
                              "(default: the next one not imported yet)")
MIRROR = ImportOption("mirror", "MirrorMaker 2 source alias (mm2/<alias>/), for mm2-checkpoints and mm2-offset-syncs")
_ALIAS = re.compile(r"^[A-Za-z0-9._-]{1,200}$")
MAX_INDEX = 1000


def _int_option(options: dict, name: str, required: bool) -> int | None:
    value = options.get(name)
    if value is None:
        if required:
            raise ValueError(f"--{name}: required for this kind (an integer >= 0)")
        return None
    text = str(value).strip()
    if not text.isdigit() or int(text) > 0x7FFFFFFF:
        raise ValueError(f"--{name} {value!r}: expected an integer >= 0")
    return int(text)


def _alias(options: dict) -> str:
    alias = options.get("mirror")
    if not isinstance(alias, str) or not _ALIAS.match(alias):
        raise ValueError(f"--mirror {alias!r}: expected the mirror's source alias (letters, digits, '.', '_', '-')")
    return alias


def _roots(files: list[tuple[Path, str]]) -> list[Path]:
    """The folders given, in order: each file's path less its path inside the folder."""
    roots: list[Path] = []
    for path, rel in files:
        root = Path(str(path)[: len(str(path)) - len(rel)].rstrip("/") or "/")
        if root not in roots:
            roots.append(root)
    return roots


def _store_log_dir(put, cluster: str, files: list[tuple[Path, str]], options: dict) -> dict:
    broker = _int_option(options, "broker", required=True)
    index = _int_option(options, "index", required=False)
    roots = _roots(files)
    if not roots:
        raise ValueError("--kind log-dir: expected a broker log dir folder, got no files")
    job = ImportJob(put, SYSTEM, cluster)
    if index is None:
        index = next(i for i in range(MAX_INDEX + 1) if i == MAX_INDEX or
                     not job.taken(f"{dir_key(broker, i)}/{SCAN_FILE}"))
    for i, root in enumerate(roots, start=index):
        prefix = dir_key(broker, i)
        if job.taken(f"{prefix}/{SCAN_FILE}"):
            job.reject(root, f"{root}: raw/{SYSTEM}/{cluster}/{prefix}/ is already stored in this run (give --index "
                             "for another position in log.dirs, or import into a new run)")
            continue

        def put_new(key: str, data: bytes, root=root) -> None:
            if job.taken(key):
                job.reject(root, f"{key}: already stored in this run; not replaced")
                return
            put(key, data)
            job.stored.append(key)

        try:
            result = scan_log_dir(str(root), broker, put_new, dir_index=i, check_broker=True)
        except BrokerIdMismatch as exc:
            raise ValueError(f"--broker {broker}: {root}/meta.properties says {exc.key}={exc.found} (broker "
                             f"{exc.found}, not {broker}); give --broker {exc.found} or the log dir of broker "
                             f"{broker}") from None
        for gap in result.gaps:
            job.reject(gap.source, f"{gap.what}: {gap.error}")
    return job.result()


def _dump_log(data: bytes, source: str) -> None:
    doc = parse_dump_log(data, source)
    if not doc["files"]:
        raise PayloadError(source, "line 1", "kafka-dump-log output (a 'Dumping <file>' line)",
                           (doc["preamble"] or [{"text": ""}])[0]["text"])


def _log_dirs(data: bytes, source: str) -> None:
    doc = parse_log_dirs(data, source)
    if not doc["brokers"] and not doc["missing_brokers"]:
        raise PayloadError(source, "json", "kafka-log-dirs --describe output with at least one broker", "none")


def _formatter(kind: str, other: str):
    def check(data: bytes, source: str) -> None:
        doc = parse_formatter_text(data, source)
        if not doc[kind]:
            raise PayloadError(source, "lines", f"{'Checkpoint' if kind == 'checkpoints' else 'OffsetSync'}{{...}} "
                               "lines (console-consumer output with MirrorMaker 2's formatter)",
                               f"{len(doc[other])} {other.replace('_', ' ')} lines, "
                               f"{len(doc['unparsed'])} other lines")
        if doc[other]:
            raise PayloadError(source, "lines", f"only {kind.replace('_', ' ')} (import the other kind apart)",
                               f"{len(doc[other])} {other.replace('_', ' ')} lines")
    return check


def _text_kind(folder: Callable[[dict], str], check: Callable[[bytes, str], None]):
    def store(put, cluster: str, files: list[tuple[Path, str]], options: dict) -> dict:
        prefix = folder(options)
        if not files:
            raise ValueError("expected at least one file")
        job = ImportJob(put, SYSTEM, cluster)
        for path, rel in files:
            job.store(path, f"{prefix}/{rel}", check)
        return job.result()
    return store


def _dump_log_folder(options: dict) -> str:
    return f"brokers/{_int_option(options, 'broker', required=True)}/dump-log"


KINDS = {
    "log-dir": ImportKind("a broker log dir (copied or mounted), scanned like the collector does: checkpoints, "
                          "meta.properties, partition.metadata, leader-epoch-checkpoint, batch-header index",
                          _store_log_dir, (BROKER, INDEX)),
    "dump-log": ImportKind("kafka-dump-log.sh output of a broker's segment files",
                           _text_kind(_dump_log_folder, _dump_log), (BROKER,)),
    "log-dirs-describe": ImportKind("kafka-log-dirs.sh --describe output",
                                    _text_kind(lambda o: "admin/log-dirs-describe", _log_dirs)),
    "mm2-checkpoints": ImportKind("console-consumer output of <alias>.checkpoints.internal with CheckpointFormatter",
                                  _text_kind(lambda o: f"mm2/{_alias(o)}/checkpoints-text",
                                             _formatter("checkpoints", "offset_syncs")), (MIRROR,)),
    "mm2-offset-syncs": ImportKind("console-consumer output of mm2-offset-syncs.<alias>.internal with "
                                   "OffsetSyncFormatter",
                                   _text_kind(lambda o: f"mm2/{_alias(o)}/offset-syncs-text",
                                              _formatter("offset_syncs", "checkpoints")), (MIRROR,)),
}
