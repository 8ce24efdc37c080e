"""Broker log dirs for the scanner tests, written with the formats' own encoders (real v2 batches, real checkpoint
text): what a broker leaves on disk, small."""
from __future__ import annotations

import os
from pathlib import Path

from audit.systems.kafka.formats.batch import encode_batch, encode_legacy
from audit.systems.kafka.formats.checkpoint import encode_leader_epoch_checkpoint, encode_offsets_checkpoint
from audit.systems.kafka.formats.properties import encode_meta_properties, encode_partition_metadata

TOPIC_ID = "Hx4h3m8YQxC0Xg8PZt1i9A"


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


def batches(base_offset: int, count: int, epoch: int, per_batch: int = 2, size: int = 10) -> bytes:
    """`count` batches of `per_batch` records from `base_offset`, all in leader epoch `epoch`."""
    out = b""
    for i in range(count):
        out += encode_batch(base_offset + i * per_batch, epoch,
                            [bytes([65 + (i % 26)]) * size] * per_batch, base_timestamp=1_700_000_000_000 + i)
    return out


def write_partition(root: Path, name: str, segments: dict[int, bytes], epochs: list[tuple[int, int]] | None,
                    topic_id: str = TOPIC_ID) -> Path:
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    for base, data in segments.items():
        (d / segment_name(base)).write_bytes(data)
        (d / f"{base:020d}.index").write_bytes(b"")           # the scanner ignores indexes
    if epochs is not None:
        (d / "leader-epoch-checkpoint").write_bytes(encode_leader_epoch_checkpoint(epochs))
    (d / "partition.metadata").write_bytes(encode_partition_metadata(topic_id))
    return d


def write_log_dir(root: Path, broker: int, hw: list[tuple[str, int, int]], *, kraft: bool = False,
                  cluster_id: str = "6FP5xR3jTsO5HbmLMGrOBw") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    if kraft:
        meta = encode_meta_properties(version=1, cluster_id=cluster_id, node_id=broker,
                                      directory_id="y1GmjUl3SgqjCwr0xQrPwA")
    else:
        meta = encode_meta_properties(version=0, cluster_id=cluster_id, broker_id=broker)
    (root / "meta.properties").write_bytes(meta)
    (root / "replication-offset-checkpoint").write_bytes(encode_offsets_checkpoint(hw))
    (root / "recovery-point-offset-checkpoint").write_bytes(encode_offsets_checkpoint(hw))
    (root / "log-start-offset-checkpoint").write_bytes(encode_offsets_checkpoint([(t, p, 0) for t, p, _ in hw]))
    (root / "cleaner-offset-checkpoint").write_bytes(b"")
    return root


def standard_log_dir(root: Path, broker: int = 1) -> Path:
    """orders-0: a rolled segment (3 batches, epoch 0) and an active one (2 batches, epoch 2);
    orders-1: one active segment whose last batch is half written; legacy-0: a magic 1 message set."""
    write_log_dir(root, broker, [("orders", 0, 10), ("orders", 1, 4), ("legacy", 0, 2)])
    write_partition(root, "orders-0", {0: batches(0, 3, 0), 6: batches(6, 2, 2)}, [(0, 0), (2, 6)])
    whole = batches(0, 2, 1)
    half = batches(4, 1, 1)[:40]
    write_partition(root, "orders-1", {0: whole + half}, [(1, 0)])
    legacy = encode_legacy(0, b"old", magic=1, timestamp=1_500_000_000_000) + encode_legacy(1, b"older", magic=0)
    write_partition(root, "legacy-0", {0: legacy}, None)
    return root


def file_bytes(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def tree(root: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = Path(dirpath) / n
            out[p.relative_to(root).as_posix()] = p.read_bytes()
    return out
