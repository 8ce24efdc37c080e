"""Read the lab's raw evidence back the simple way (an oracle independent of the simulation's bookkeeping):
per broker and partition the batches (base, last, crc) from batches.json and the checkpointed high watermark."""
from __future__ import annotations

import json

from audit.systems.kafka.formats.checkpoint import parse_leader_epoch_checkpoint, parse_offsets_checkpoint


def batches(raw: dict, broker: int, topic: str, partition: int = 0, d: int = 0) -> list[tuple[int, int, int, int]]:
    """(base, last, crc, partition leader epoch) of every indexed batch."""
    doc = json.loads(raw[f"brokers/{broker}/dir{d}/{topic}-{partition}/batches.json"])
    out = []
    for seg in doc["segments"]:
        cols = seg["batches"]
        out += list(zip(cols["base_offset"], cols["last_offset"], cols["crc"], cols["partition_leader_epoch"]))
    return out


def high_watermark(raw: dict, broker: int, topic: str, partition: int = 0, d: int = 0) -> int | None:
    entries = parse_offsets_checkpoint(raw[f"brokers/{broker}/dir{d}/replication-offset-checkpoint"], "hw")
    return next((e.offset for e in entries if (e.topic, e.partition) == (topic, partition)), None)


def epochs(raw: dict, broker: int, topic: str, partition: int = 0, d: int = 0) -> list[tuple[int, int]]:
    data = raw[f"brokers/{broker}/dir{d}/{topic}-{partition}/leader-epoch-checkpoint"]
    return [tuple(e) for e in parse_leader_epoch_checkpoint(data, "epochs")]


def differing_offsets(a: list, b: list) -> set[int]:
    """Offsets both logs hold where the batches differ (other offsets or CRC)."""
    def by_offset(bs):
        return {o: (base, last, crc) for base, last, crc, _ in bs for o in range(base, last + 1)}
    ma, mb = by_offset(a), by_offset(b)
    return {o for o in ma.keys() & mb.keys() if ma[o] != mb[o]}
