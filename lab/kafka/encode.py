"""Record batches of the simulation, encoded once by the leader that appends them (followers copy the bytes):
real v2 batches with varint records and a CRC-32C, through audit.systems.kafka.formats.batch.encode_batch.

The CRC covers attributes..end, not the base offset nor the partition leader epoch, so a batch's CRC names its
content: a retried batch written at another offset keeps its CRC, two different batches differ."""
from __future__ import annotations

import struct

from audit.systems.kafka.formats.batch import encode_batch
from audit.systems.kafka.formats.records import SimpleRecord, control_record
from lab.kafka.log import Batch

TRANSACTIONAL = 0x10   # attributes bit 4
CONTROL = 0x20         # attributes bit 5
_FILL = bytes(range(32, 127)) * 110


def record_value(producer: str, n: int, size: int) -> bytes:
    head = f"{producer}#{n}|".encode()
    return head + _FILL[(n * 7) % 95:(n * 7) % 95 + max(0, size - len(head))]


def data_batch(base: int, epoch: int, producer: str, first_no: int, count: int, stamps: list[int],
               record_bytes: int, *, producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
               transactional: bool = False, upstream: tuple[int, ...] = (), created_ms: int = 0,
               payload_of=None) -> Batch:
    """A data batch of `count` records, numbered first_no.. for `producer`. `payload_of(i)` gives (key, value)
    of the i-th record when the content is copied from elsewhere (MirrorMaker 2)."""
    records = []
    for i in range(count):
        if payload_of is not None:
            key, value = payload_of(i)
        else:
            key, value = struct.pack(">i", (first_no + i) % 997), record_value(producer, first_no + i, record_bytes)
        records.append(SimpleRecord(key, value, stamps[i]))
    attributes = TRANSACTIONAL if transactional else 0
    data = encode_batch(base, epoch, records, producer_id=producer_id, producer_epoch=producer_epoch,
                        base_sequence=base_sequence, attributes=attributes)
    return Batch(base=base, last=base + count - 1, epoch=epoch, producer=producer, first_seq_no=first_no,
                 records=count, max_ts=max(stamps), created_ms=created_ms, producer_id=producer_id,
                 producer_epoch=producer_epoch, base_sequence=base_sequence, transactional=transactional,
                 upstream=upstream, data=data, crc=struct.unpack_from(">I", data, 17)[0])


def marker_batch(base: int, epoch: int, producer: str, marker_no: int, stamp: int, *, producer_id: int,
                 producer_epoch: int, created_ms: int) -> Batch:
    """A COMMIT transaction marker: one control record in a transactional control batch (no sequence)."""
    data = encode_batch(base, epoch, [control_record("COMMIT", 0, stamp)], producer_id=producer_id,
                        producer_epoch=producer_epoch, base_sequence=-1, attributes=TRANSACTIONAL | CONTROL)
    return Batch(base=base, last=base, epoch=epoch, producer=producer, first_seq_no=marker_no, records=1,
                 max_ts=stamp, created_ms=created_ms, producer_id=producer_id, producer_epoch=producer_epoch,
                 control=True, transactional=True, data=data, crc=struct.unpack_from(">I", data, 17)[0])


def reoffset(batch: Batch, base: int, epoch: int) -> Batch:
    """The same content appended again at another offset by another leader epoch (a retried produce): only the
    base offset and the partition leader epoch change, both outside the CRC."""
    data = struct.pack(">q", base) + batch.data[8:12] + struct.pack(">i", epoch) + batch.data[16:]
    return Batch(base=base, last=base + (batch.last - batch.base), epoch=epoch, producer=batch.producer,
                 first_seq_no=batch.first_seq_no, records=batch.records, max_ts=batch.max_ts,
                 created_ms=batch.created_ms, producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                 base_sequence=batch.base_sequence, control=batch.control, transactional=batch.transactional,
                 upstream=batch.upstream, data=data, crc=batch.crc)
