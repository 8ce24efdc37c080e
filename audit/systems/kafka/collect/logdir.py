"""The log-dir scanner: one broker log dir into raw/kafka/<cluster>/brokers/<broker>/<d>/ (docs/kafka/contracts.md,
"Raw layout"), read-only, while the broker may still be writing.

Copied byte for byte: meta.properties and the four offset checkpoints of the dir; per partition dir
leader-epoch-checkpoint and partition.metadata; for the KRaft metadata partition `__cluster_metadata-0` also its
segments, snapshot `.checkpoint` files and quorum-state (metadata, not user data). Per partition dir batches.json:
the batch-header index of every segment (audit/systems/kafka/formats/segment.py reads headers only and seeks over the
payloads; `verify_crc` reads whole batches). Then scan.json: what was indexed, skipped, vanished or broken.

Reading order, so that values read at different instants stay comparable (docs/kafka/contracts.md, "Snapshots
apart"): first the dir's checkpoints (a high watermark only trails the log end offset), then the listing with every
segment's size (a log end offset only grows), then per partition its leader-epoch-checkpoint (written when an epoch
is assigned, before that epoch's batches are appended) and its segments up to the sizes listed. So a healthy
broker's copy never shows a HW above the LEO, nor a batch whose epoch is missing from the checkpoint. The log cleaner
rewrites batches below its new first dirty offset before it checkpoints that offset (docs/formats/kafka.md §11.5):
after the segments the dir's cleaner-offset-checkpoint is read again (`cleaner-offset-checkpoint.after-segments`:
it only grows), and a partition dir that holds a cleaner's `.cleaned` or `.swap` file when it is listed or after its
segments were read is named in batches.json `cleaning` (a pass in progress, not yet checkpointed). A broker
still writing is normal: a segment deleted after the listing is `vanished`, a growing active segment is read up to
its listed size, and a partial batch at that size is the segment's `tail`. A broken batch header ends that
segment's index with an error naming the file and the byte offset, and the scan goes on with the next file;
with `verify_crc` a batch whose CRC does not match is an error naming the file, its position and its base offset,
and the scan goes on with the next batch.

Partition dirs are `<topic>-<partition>` (docs/formats/kafka.md §4.1);
`<topic>-<p>.<id>-future|-delete|-stray` dirs (replica moves, deletions, strays) are listed in scan.json
`skipped`, not indexed as replicas, as is anything else that is not a partition dir.

An incident check (`scope`, audit.contracts.Scope with subject patterns): a partition dir no pattern wants
(audit/systems/kafka/domain/subjects.py: `<topic>` or `<topic>-<p>`) is neither listed nor read; scan.json names it in
`skipped` with why "not in scope" and the counts say `partition_dirs_not_in_scope` (never a coverage gap). The
dir's own files (meta.properties, the four offset checkpoints, which list every partition of the dir) are evidence
byte for byte and stay whole; the KRaft metadata log is the cluster's metadata and is always read. `Scope.deep`
changes nothing here: a wanted partition's segments are always indexed in full (headers only)."""
from __future__ import annotations

import json
import os
import re
import time
from typing import Callable, NamedTuple

from audit.collectors.base import CoverageGap
from audit.systems.kafka.domain.subjects import partition_dir, wanted
from audit.errors import PayloadError
from audit.systems.kafka.formats.checkpoint import (CLEANER_CHECKPOINT_FILE, CLEANER_REREAD,
                                                    LEADER_EPOCH_CHECKPOINT_FILE, OFFSET_CHECKPOINT_FILES,
                                                    parse_leader_epoch_checkpoint, parse_offsets_checkpoint)
from audit.systems.kafka.formats.properties import parse_meta_properties, parse_partition_metadata
from audit.systems.kafka.formats.segment import batch_columns, scan_segment, segment_base_offset

Put = Callable[[str, bytes], None]

META_PROPERTIES = "meta.properties"
PARTITION_METADATA = "partition.metadata"
METADATA_PARTITION = "__cluster_metadata-0"      # KafkaRaftServer.MetadataPartition
QUORUM_STATE = "quorum-state"
SCAN_FILE, BATCHES_FILE = "scan.json", "batches.json"
_SPECIAL_DIR = re.compile(r"^(\S+)-(\S+)\.(\S+)-(delete|future|stray)$")   # LocalLog Delete/Future/StrayDirPattern
_SNAPSHOT = re.compile(r"^\d{20}-\d{10}\.checkpoint$")                      # Snapshots.filenameFromSnapshotId
_SEGMENT = re.compile(r"^\d+\.log$")
_CLEANER_FILE = re.compile(r"^\d+\.log\.(cleaned|swap)$")       # LogFileUtils CleanedFileSuffix, SwapFileSuffix
NOT_IN_SCOPE = "not in scope"


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class BrokerIdMismatch(ValueError):
    """The dir's meta.properties names another broker than the one it is scanned for."""

    def __init__(self, path: str, given: int, found: int, key: str):
        self.path, self.given, self.found, self.key = path, given, found, key
        super().__init__(f"{path}: meta.properties {key}={found}, but it is scanned as broker {given}")


class ScanResult(NamedTuple):
    counts: dict[str, int]
    gaps: list[CoverageGap]
    scan: dict                      # the scan.json document


def dir_key(broker: int, index: int) -> str:
    return f"brokers/{broker}/dir{index}"


def partition_dir_kind(name: str) -> str | None:
    """None for a replica dir `<topic>-<partition>`, else why it is not indexed."""
    special = _SPECIAL_DIR.match(name)
    if special:
        return {"future": "future replica (being moved to this dir)", "delete": "marked for deletion",
                "stray": "stray replica (not assigned to this broker)"}[special.group(4)]
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit() or len(partition) > 10 or int(partition) > 0x7FFFFFFF:
        return "not a partition dir (<topic>-<partition>)"
    return None


class _Listing(NamedTuple):
    partitions: list[tuple[str, list[tuple[str, int]], list[str]]]   # (dir, [(segment, size)], other files)
    skipped: list[dict]


class _DirScan:
    def __init__(self, path: str, broker: int, prefix: str, put: Put, verify_crc: bool, now_ms: Callable[[], int],
                 scope=None):
        self.path, self.broker, self.prefix, self.put = path, broker, prefix, put
        self.verify_crc, self.now_ms = verify_crc, now_ms
        self.scope = scope if scope is not None and scope.subjects else None
        self.not_in_scope = 0
        self.counts: dict[str, int] = {}
        self.gaps: list[CoverageGap] = []
        self.vanished: list[dict] = []
        self.errors: list[dict] = []

    def count(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n

    def error(self, rel: str, offset: int | None, message: str) -> None:
        self.errors.append({"file": rel, "offset": offset, "error": message})
        self.count("errors")

    def read(self, rel: str, limit: int | None = None) -> bytes | None:
        """The file's bytes (up to `limit`), None when it is absent (noted as vanished when it was listed)."""
        try:
            with open(os.path.join(self.path, rel), "rb") as f:
                return f.read() if limit is None else f.read(limit)
        except FileNotFoundError:
            return None
        except OSError as exc:
            self.gaps.append(CoverageGap(os.path.join(self.path, rel), "log dir file", f"{type(exc).__name__}: {exc}"))
            return None

    def copy(self, rel: str, data: bytes, check=None) -> None:
        """Store `data` byte for byte; `check(data, source)` decodes it so a broken file is named in errors."""
        self.put(f"{self.prefix}/{rel}", data)
        self.count("files_copied")
        if check is not None:
            try:
                check(data, rel)
            except PayloadError as exc:
                self.error(rel, None, str(exc))

    def meta(self, given_broker: int, check_broker: bool) -> bytes | None:
        data = self.read(META_PROPERTIES)
        if data is None or not check_broker:
            return data
        try:
            meta = parse_meta_properties(data, META_PROPERTIES)
        except PayloadError:
            return data              # stored, and named in errors by copy()
        key, found = ("broker.id", meta.get("broker_id")) if meta["mode"] == "zookeeper" else \
            ("node.id", meta.get("node_id"))
        if found is not None and found != given_broker:
            raise BrokerIdMismatch(self.path, given_broker, found, key)
        return data

    def listing(self) -> _Listing:
        partitions, skipped = [], []
        with os.scandir(self.path) as entries:
            dirs = sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
        for name in dirs:
            why = partition_dir_kind(name)
            if why is not None:
                skipped.append({"dir": name, "why": why})
                continue
            if self.scope is not None and not self.wanted(name):
                skipped.append({"dir": name, "why": NOT_IN_SCOPE})     # neither listed nor read
                self.not_in_scope += 1
                continue
            try:
                with os.scandir(os.path.join(self.path, name)) as entries:
                    files = [(e.name, e.stat(follow_symlinks=False).st_size) for e in entries if e.is_file()]
            except FileNotFoundError:
                self.vanished.append({"file": name, "why": "partition dir deleted while listing"})
                continue
            except OSError as exc:
                self.gaps.append(CoverageGap(os.path.join(self.path, name), "partition dir", str(exc)))
                continue
            segments = sorted(((f, s) for f, s in files if _SEGMENT.match(f)), key=lambda fs: int(fs[0][:-4]))
            partitions.append((name, segments, sorted(f for f, _ in files)))
        return _Listing(partitions, skipped)

    def wanted(self, name: str) -> bool:
        tp = partition_dir(name)
        return tp is None or wanted(self.scope, *tp)     # None: the KRaft metadata log, always read

    def partition(self, name: str, segments: list[tuple[str, int]], others: list[str]) -> None:
        for small, check in ((LEADER_EPOCH_CHECKPOINT_FILE, parse_leader_epoch_checkpoint),
                             (PARTITION_METADATA, parse_partition_metadata)):
            if small in others:
                data = self.read(f"{name}/{small}")
                if data is None:
                    self.vanished.append({"file": f"{name}/{small}", "why": "deleted after the listing"})
                else:
                    self.copy(f"{name}/{small}", data, check)
        metadata_log = name == METADATA_PARTITION
        if metadata_log:
            for f in others:
                if f == QUORUM_STATE or _SNAPSHOT.match(f):
                    data = self.read(f"{name}/{f}")
                    if data is None:
                        self.vanished.append({"file": f"{name}/{f}", "why": "deleted after the listing"})
                    else:
                        self.copy(f"{name}/{f}", data)
        index = [self.segment(name, seg, size, i == len(segments) - 1, metadata_log)
                 for i, (seg, size) in enumerate(segments)]
        doc = {"version": 1, "partition_dir": name, "segments": index,
               "cleaning": sorted({f for f in others if _CLEANER_FILE.match(f)} | self.cleaner_files(name))}
        self.put(f"{self.prefix}/{name}/{BATCHES_FILE}", json.dumps(doc, separators=(",", ":")).encode())
        self.count("partitions_indexed")

    def cleaner_files(self, name: str) -> set[str]:
        """The cleaner's temporary segment files in the partition dir now (after its segments were read)."""
        try:
            return {f for f in os.listdir(os.path.join(self.path, name)) if _CLEANER_FILE.match(f)}
        except OSError:
            return set()         # deleted meanwhile: its vanished segments already say so

    def segment(self, pdir: str, name: str, size: int, active: bool, copy_bytes: bool) -> dict:
        rel = f"{pdir}/{name}"
        entry = {"file": name, "base_offset": segment_base_offset(name), "size_at_start": size, "read_bytes": 0,
                 "active": active, "vanished": False, "tail": None, "error": None,
                 "batches": batch_columns([])}
        try:
            f = open(os.path.join(self.path, rel), "rb")
        except FileNotFoundError:
            entry["vanished"] = True
            self.vanished.append({"file": rel, "why": "segment deleted after the listing (retention, compaction "
                                                      "or log cleaning)"})
            self.count("segments_vanished")
            return entry
        except OSError as exc:
            self.gaps.append(CoverageGap(os.path.join(self.path, rel), "segment", f"{type(exc).__name__}: {exc}"))
            entry["error"] = {"offset": 0, "error": f"not readable: {exc}"}
            self.error(rel, 0, entry["error"]["error"])
            return entry
        with f:
            result = scan_segment(f, rel, limit=size, verify_crc=self.verify_crc)
            if copy_bytes:        # the metadata log: its bytes are the cluster's metadata records
                # as listed, less a batch the broker was still writing (not yet part of the log)
                end = result.read_bytes if result.tail is not None and active else size
                self.copy(rel, os.pread(f.fileno(), end, 0))
        entry["read_bytes"] = result.read_bytes
        entry["batches"] = batch_columns(result.batches)
        self.count("segments_scanned")
        self.count("batches_indexed", len(result.batches))
        self.count("segment_bytes_read", result.read_bytes)
        if self.verify_crc:
            bad = [(position, h) for position, h, ok in result.batches if ok is False]
            self.count("batches_crc_invalid", len(bad))
            for position, h in bad:
                # the header was readable, so the batch stays indexed (crc_valid false) and the scan goes on
                self.error(rel, position, f"{rel}: batch@{position} (base offset {h.base_offset}): stored crc "
                                          f"{h.crc} does not match the {'CRC-32C' if h.magic >= 2 else 'CRC-32'} "
                                          "of its bytes")
        if result.tail is not None:
            entry["tail"] = {"offset": result.tail[0], "why": result.tail[1]}
            if not active:        # a rolled segment is complete: a partial batch in it is damage
                self.error(rel, result.tail[0], f"partial batch in a rolled (not active) segment: {result.tail[1]}")
            else:
                self.count("active_tails")
        if result.error is not None:
            entry["error"] = {"offset": result.read_bytes, "error": str(result.error)}
            self.error(rel, result.read_bytes, str(result.error))
            self.gaps.append(CoverageGap(f"{os.path.join(self.path, rel)}@{result.read_bytes}", "segment batches",
                                         f"not indexed from byte {result.read_bytes} to {size}: {result.error}"))
        return entry


def scan_log_dir(path: str, broker: int, put: Put, *, dir_index: int = 0, verify_crc: bool = False,
                 check_broker: bool = True, now_ms: Callable[[], int] = wall_ms, scope=None) -> ScanResult:
    """Scan one log dir of `broker` (its `dir_index`-th entry of log.dirs) and write it through `put`. `scope`: an
    incident check's audit.contracts.Scope (None: everything); partition dirs it does not want are skipped.

    Raises BrokerIdMismatch (before writing anything) when `check_broker` and the dir's meta.properties names
    another broker. A missing or unreadable dir is a coverage gap and writes nothing."""
    prefix = dir_key(broker, dir_index)
    scan = _DirScan(path, broker, prefix, put, verify_crc, now_ms, scope)
    started = now_ms()
    if not os.path.isdir(path):
        gap = CoverageGap(path, "broker log dir", "not a readable directory")
        return ScanResult({"log_dirs_missing": 1}, [gap], {})
    meta = scan.meta(broker, check_broker)
    if meta is not None:
        scan.copy(META_PROPERTIES, meta, parse_meta_properties)
    for name in OFFSET_CHECKPOINT_FILES:
        data = scan.read(name)
        if data is not None:
            scan.copy(name, data, parse_offsets_checkpoint)
    checkpoints_read = now_ms()
    try:
        listing = scan.listing()
    except OSError as exc:
        scan.gaps.append(CoverageGap(path, "broker log dir listing", f"{type(exc).__name__}: {exc}"))
        listing = _Listing([], [])
    listed = now_ms()
    for name, segments, others in listing.partitions:
        scan.partition(name, segments, others)
    if listing.partitions:
        data = scan.read(CLEANER_CHECKPOINT_FILE)
        if data is not None:
            scan.copy(CLEANER_REREAD, data, parse_offsets_checkpoint)
    doc = {"broker": broker, "log_dir": path, "started_at_ms": started, "checkpoints_read_at_ms": checkpoints_read,
           "listed_at_ms": listed, "finished_at_ms": now_ms(), "verify_crc": verify_crc,
           "meta_properties": meta is not None,
           "partitions": [name for name, _, _ in listing.partitions], "skipped": listing.skipped,
           "vanished": scan.vanished, "errors": scan.errors}
    put(f"{prefix}/{SCAN_FILE}", json.dumps(doc, indent=1).encode())
    scan.count("log_dirs_scanned")
    scan.count("partition_dirs_skipped", len(listing.skipped) - scan.not_in_scope)
    if scan.not_in_scope:
        scan.count("partition_dirs_not_in_scope", scan.not_in_scope)
    scan.count("vanished", len(scan.vanished))
    return ScanResult(scan.counts, scan.gaps, doc)


def scan_log_dirs(paths: list[str], broker: int, put: Put, *, verify_crc: bool = False, check_broker: bool = True,
                  now_ms: Callable[[], int] = wall_ms, scope=None) -> list[ScanResult]:
    """Every log dir of one broker, `paths` in its log.dirs order (dir0, dir1, ...)."""
    return [scan_log_dir(p, broker, put, dir_index=i, verify_crc=verify_crc, check_broker=check_broker,
                         now_ms=now_ms, scope=scope) for i, p in enumerate(paths)]
