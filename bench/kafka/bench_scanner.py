"""Benchmark of the log-dir scanner (audit/systems/kafka/collect/logdir.py `scan_log_dir`) over real segment files.

    .venv/bin/python -m bench.kafka.bench_scanner [--gib 2] [--partitions 16] [--quick]

A broker log dir is written outside the timed section: meta.properties, the four offset checkpoints, and per
partition a leader-epoch-checkpoint and segments of 128 MiB made of 16 KiB v2 batches (16 records of ~1 KiB each,
an idempotent producer, gzip off) encoded by audit/systems/kafka/formats/batch.py `encode_batch`. Each partition's batch
is encoded once and copied with its base offset and producer sequence written in: the base offset is outside the
CRC-32C (it covers attributes..records), the sequence is inside, so the CRC is recomputed for each copy; the bench
checks sampled copies byte for byte against encode_batch's own output.

Timed: scan_log_dir (headers only: 61 bytes read per batch, payloads skipped; batches.json and scan.json encoded
and handed to an in-memory sink), twice: with the page cache warm (the files were just read), and cold (every
segment evicted with posix_fadvise(DONTNEED) after fsync: the kernel reads from the disk again, its read-ahead
included). Target: >= 1 GB/s of segment data with a warm page cache."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import sys
import tempfile
import time

import crc32c

from audit.systems.kafka.formats.batch import encode_batch
from audit.systems.kafka.formats.checkpoint import encode_leader_epoch_checkpoint, encode_offsets_checkpoint
from audit.systems.kafka.formats.records import SimpleRecord
from bench.common import Results, main_of

TARGET_GBPS = 1.0
BATCH_BYTES = 16 * 1024
RECORDS = 16
SEGMENT_BYTES = 128 << 20
T0 = 1_760_000_000_000
_CRC_AT, _ATTR_AT, _SEQ_AT = 17, 21, 53          # DefaultRecordBatch field offsets (docs/formats/kafka.md)


def _records(partition: int) -> list[SimpleRecord]:
    """16 records whose encoded batch is 16 KiB (values sized to fit, varint framing included)."""
    value = bytes((partition + i) % 251 for i in range(1000))
    recs = [SimpleRecord(f"k{i}".encode(), value, T0 + i) for i in range(RECORDS)]
    size = len(encode_batch(0, 0, recs, producer_id=1, producer_epoch=0, base_sequence=0))
    pad = BATCH_BYTES - size
    last = recs[-1]
    return recs[:-1] + [SimpleRecord(last.key, last.value + b"x" * pad, last.timestamp)]


def _copy(template: bytes, base_offset: int, sequence: int) -> bytes:
    """encode_batch's bytes for another base offset and producer sequence (same records)."""
    b = bytearray(template)
    struct.pack_into(">q", b, 0, base_offset)
    struct.pack_into(">i", b, _SEQ_AT, sequence)
    struct.pack_into(">I", b, _CRC_AT, crc32c.crc32c(bytes(b[_ATTR_AT:])))
    return bytes(b)


def write_log_dir(path: str, gib: float, partitions: int) -> dict:
    """A broker log dir holding about `gib` GiB of segments; returns its sizes and a check sample."""
    os.makedirs(path)
    with open(os.path.join(path, "meta.properties"), "w") as f:
        f.write("version=1\nnode.id=1\ncluster.id=bench-cluster-000000000\n"
                "directory.id=AAAAAAAAAAAAAAAAAAAAAQ\n")
    per_partition = int(gib * (1 << 30)) // partitions // BATCH_BYTES
    ends = []
    sample = []
    for p in range(partitions):
        pdir = os.path.join(path, f"bench-{p}")
        os.makedirs(pdir)
        recs = _records(p)
        template = encode_batch(0, 3, recs, producer_id=1000 + p, producer_epoch=0, base_sequence=0)
        assert len(template) == BATCH_BYTES, len(template)
        per_segment = SEGMENT_BYTES // BATCH_BYTES
        for first in range(0, per_partition, per_segment):
            count = min(per_segment, per_partition - first)
            name = os.path.join(pdir, f"{first * RECORDS:020d}.log")
            with open(name, "wb") as f:
                for i in range(first, first + count):
                    f.write(_copy(template, i * RECORDS, i * RECORDS))
        sample.append((p, per_partition - 1, recs))
        with open(os.path.join(pdir, "leader-epoch-checkpoint"), "wb") as f:
            f.write(encode_leader_epoch_checkpoint([(3, 0)]))
        ends.append(("bench", p, per_partition * RECORDS))
    for name in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint",
                 "log-start-offset-checkpoint"):
        with open(os.path.join(path, name), "wb") as f:
            f.write(encode_offsets_checkpoint([(t, p, 0 if "start" in name else end) for t, p, end in ends]))
    return {"batches": partitions * per_partition, "bytes": partitions * per_partition * BATCH_BYTES,
            "sample": sample}


def _check_sample(path: str, sample: list) -> None:
    """Copies equal encode_batch's own output for their base offset and sequence."""
    for p, i, recs in sample:
        offset = i * RECORDS
        want = encode_batch(offset, 3, recs, producer_id=1000 + p, producer_epoch=0, base_sequence=offset)
        per_segment = SEGMENT_BYTES // BATCH_BYTES
        first = (i // per_segment) * per_segment
        with open(os.path.join(path, f"bench-{p}", f"{first * RECORDS:020d}.log"), "rb") as f:
            got = os.pread(f.fileno(), BATCH_BYTES, (i - first) * BATCH_BYTES)
        if got != want:
            raise AssertionError(f"bench-{p} batch {i}: the copy differs from encode_batch's bytes")


def _evict(path: str) -> None:
    for folder, _, names in os.walk(path):
        for n in names:
            fd = os.open(os.path.join(folder, n), os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def _scan(path: str) -> tuple[float, dict, int]:
    from audit.systems.kafka.collect.logdir import scan_log_dir

    stored: dict[str, bytes] = {}
    t0 = time.perf_counter()
    result = scan_log_dir(path, 1, stored.__setitem__, verify_crc=False, check_broker=False)
    elapsed = time.perf_counter() - t0
    indexed = sum(len(seg["batches"]["base_offset"]) for k, v in stored.items() if k.endswith("batches.json")
                  for seg in json.loads(v)["segments"])
    return elapsed, result.counts, indexed


def metrics(argv: list[str] | None = None) -> list[dict]:
    """Rows {name, value, unit, target, ok} for bench/run.py."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gib", type=float, default=2.0, help="GiB of segment data")
    p.add_argument("--partitions", type=int, default=16)
    p.add_argument("--quick", action="store_true", help="64 MiB, for a smoke run")
    args = p.parse_args(argv if argv is not None else [])
    gib = 1 / 16 if args.quick else args.gib
    work = tempfile.mkdtemp(prefix="bench-kafka-scan-")
    results = Results()
    add = results.add

    try:
        t0 = time.perf_counter()
        logdir = os.path.join(work, "kafka-logs")
        written = write_log_dir(logdir, gib, args.partitions)
        _check_sample(logdir, written["sample"])
        gb = written["bytes"] / 1e9
        add(f"write {gb:.2f} GB of 16 KiB batches (untimed prep)", time.perf_counter() - t0, "s", None)
        _scan(logdir)                                     # page cache warm: every page just read
        warm, counts, indexed = _scan(logdir)
        if indexed != written["batches"] or counts.get("segment_bytes_read") != written["bytes"]:
            raise AssertionError(f"indexed {indexed} batches / {counts.get('segment_bytes_read')} bytes, "
                                 f"expected {written['batches']} / {written['bytes']}")
        add(f"log-dir scan, {gb:.2f} GB, 16 KiB batches, page cache warm", gb / warm, "GB/s",
            f">= {TARGET_GBPS} GB/s", args.quick or gb / warm >= TARGET_GBPS)
        add("log-dir scan, batch headers per second (warm)", indexed / warm, "batches/s", None)
        _evict(logdir)
        cold, _, _ = _scan(logdir)
        add(f"log-dir scan, {gb:.2f} GB, page cache cold (fadvise DONTNEED)", gb / cold, "GB/s", None)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def main(argv: list[str] | None = None) -> int:
    return main_of(metrics, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
