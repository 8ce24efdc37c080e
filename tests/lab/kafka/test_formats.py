"""What the lab writes decodes with the format decoders: checkpoints, meta.properties, partition.metadata, and v2
batches whose CRC-32C is right (read back whole, and by the scanner with verify_crc)."""
from __future__ import annotations

import json
import os

from audit.systems.kafka.collect.logdir import scan_log_dir
from audit.systems.kafka.formats.batch import batch_crc, decode_batch
from audit.systems.kafka.formats.checkpoint import parse_leader_epoch_checkpoint, parse_offsets_checkpoint
from audit.systems.kafka.formats.properties import parse_meta_properties, parse_partition_metadata
from lab.kafka import runner
from lab.kafka.config import parse_kafka_lab
from tests.lab.kafka.helpers import AS_OF, collect

LAB = {"seed": 4}


def test_raw_files_decode():
    raw, _, _ = collect(LAB, "legacy-s2")
    raw2, _, _ = collect(LAB, "dr")
    for key, data in {**raw, **{"dr/" + k: v for k, v in raw2.items()}}.items():
        name = key.rsplit("/", 1)[-1]
        if name in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint",
                    "log-start-offset-checkpoint"):
            entries = parse_offsets_checkpoint(data, key)
            assert all(e.offset >= 0 for e in entries)
        elif name == "cleaner-offset-checkpoint":
            assert data == b""          # created empty by the log cleaner, nothing compacted
        elif name == "leader-epoch-checkpoint":
            entries = parse_leader_epoch_checkpoint(data, key)
            assert [e.epoch for e in entries] == sorted({e.epoch for e in entries})
        elif name == "meta.properties":
            meta = parse_meta_properties(data, key)
            assert meta["mode"] == ("kraft" if key.startswith("dr/") else "zookeeper")
        elif name == "partition.metadata":
            assert parse_partition_metadata(data, key)["version"] == 0


def test_segments_hold_v2_batches_with_valid_crcs(tmp_path):
    world = runner.lab_world(parse_kafka_lab(LAB), AS_OF, "legacy-s1")
    image = world.collections["legacy-s1"].images[2]
    seen = 0
    for rel, data in image.dirs[0].items():
        if not rel.endswith(".log"):
            continue
        pos = 0
        while pos < len(data):
            header, records = decode_batch(data[pos:], rel, pos)
            assert header.magic == 2 and header.crc == batch_crc(data[pos:pos + header.size])
            assert len(records) == header.records_count
            pos += header.size
            seen += 1
    assert seen > 100
    root = tmp_path / "dir0"
    for rel, data in image.dirs[0].items():
        os.makedirs(root / os.path.dirname(rel), exist_ok=True)
        (root / rel).write_bytes(data)
    stored = {}
    scan_log_dir(str(root), 2, stored.__setitem__, verify_crc=True, now_ms=lambda: 0)
    for key, data in stored.items():
        if key.endswith("batches.json"):
            for seg in json.loads(data)["segments"]:
                assert set(seg["batches"]["crc_valid"]) <= {True} and seg["error"] is None and seg["tail"] is None
