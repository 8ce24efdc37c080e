"""An aborted transaction is a normal state: its records stay in the log, followed by an ABORT control batch (one
control record, no sequence), and the producer's next batches go on from the aborted records' sequences (or
start again at 0 under a bumped producer epoch). Real batches through the kernel (batch_state.replica_rows) and
the partition verdicts: no sequence gap, no mismatch, no finding. A sequence that really skips is still found."""
from __future__ import annotations

import io

import pyarrow as pa
import pytest

from audit.systems.kafka.domain.partition import Settings, verdicts
from audit.systems.kafka.formats.batch import encode_batch
from audit.systems.kafka.formats.records import SimpleRecord, control_record
from audit.systems.kafka.formats.segment import scan_segment
from audit.systems.kafka.transforms.batch_state import BATCH_COLUMNS, replica_rows
from audit.systems.kafka.transforms.replicas import assemble, states
from audit.systems.kafka.transforms.state import METADATA_COLUMNS, REPLICA_COLUMNS

TRANSACTIONAL, CONTROL = 0x10, 0x20      # attributes bits 4 and 5
PID = 4000
TYPES = {"cluster": pa.string(), "topic": pa.string(), "dir": pa.string(), "epoch_checkpoint": pa.bool_(),
         "epoch_checkpoint_error": pa.string(), "index_complete": pa.bool_(), "index_problem": pa.string(),
         "origin": pa.string(), "replicas": pa.list_(pa.int64()), "isr": pa.list_(pa.int64()),
         "crc_valid": pa.bool_()}


def data(base, n, seq, *, producer_epoch=0, transactional=True):
    return encode_batch(base, 0, [SimpleRecord(None, b"v%d" % (base + i), 1_000 + base + i) for i in range(n)],
                        producer_id=PID, producer_epoch=producer_epoch, base_sequence=seq,
                        attributes=TRANSACTIONAL if transactional else 0)


def marker(base, kind, *, producer_epoch=0):
    return encode_batch(base, 0, [control_record(kind, 0, 1_000 + base)], producer_id=PID,
                        producer_epoch=producer_epoch, base_sequence=-1, attributes=TRANSACTIONAL | CONTROL)


def plain(base, n):
    return encode_batch(base, 0, [SimpleRecord(None, b"p", 1_000 + base)] * n)


# one producer id: a committed transaction, an aborted one, then the next (segment bytes, gaps expected)
LOGS = {
    "abort-then-next-transaction": (
        data(0, 3, 0) + marker(3, "COMMIT") + data(4, 5, 3) + plain(9, 2) + marker(11, "ABORT")
        + data(12, 2, 8) + marker(14, "COMMIT"), 0),
    # an abort that bumps the producer epoch (a transaction timeout; every transaction end under KIP-890):
    # the next epoch's sequences start at 0
    "abort-with-epoch-bump": (
        data(0, 3, 0) + data(3, 4, 3) + marker(7, "ABORT") + data(8, 2, 0, producer_epoch=1)
        + marker(10, "COMMIT", producer_epoch=1), 0),
    # the check still works on the same log shape: sequence 8 follows 0..2, 3..6 is missing
    "a-real-gap": (data(0, 3, 0) + marker(3, "ABORT") + data(4, 2, 8) + marker(6, "COMMIT"), 1),
}


def batch_rows(segment: bytes, rkey: int) -> list[dict]:
    scan = scan_segment(io.BytesIO(segment), "t-0/00000000000000000000.log", limit=len(segment), verify_crc=True)
    assert scan.error is None and scan.tail is None and all(ok for _, _, ok in scan.batches)
    return [{"pkey": 1, "rkey": rkey, "base_offset": h.base_offset, "last_offset": h.last_offset,
             "partition_leader_epoch": h.partition_leader_epoch, "magic": h.magic, "crc": h.crc,
             "producer_id": h.producer_id, "producer_epoch": h.producer_epoch, "base_sequence": h.base_sequence,
             "base_timestamp": h.base_timestamp, "max_timestamp": h.max_timestamp, "crc_valid": ok}
            for _, h, ok in scan.batches]


def table(rows: list[dict], names) -> pa.Table:
    return pa.table({n: pa.array([r.get(n) for r in rows], type=TYPES.get(n, pa.int64())) for n in names})


def partition_state(segment: bytes):
    """Brokers 1 (leader) and 2 holding the same segment, everything committed."""
    end = batch_rows(segment, 0)[-1]["last_offset"] + 1
    replicas = [{"pkey": 1, "rkey": 10 + b, "cluster": "c", "topic": "t", "partition": 0, "broker": b,
                 "dir": "dir0", "high_watermark": end, "log_start_offset": 0, "cleaner_offset": None,
                 "log_end_offset": end, "first_batch_offset": 0, "epoch_checkpoint": True,
                 "epoch_checkpoint_error": None, "index_complete": True, "index_problem": None,
                 "read_started_at_ms": 1, "read_finished_at_ms": 9, "checkpoints_read_at_ms": 2, "listed_at_ms": 3}
                for b in (1, 2)]
    epochs = [{"rkey": 10 + b, "entry_index": 0, "epoch": 0, "start_offset": 0} for b in (1, 2)]
    md = {"pkey": 1, "origin": "admin", "broker": None, "leader": 1, "leader_epoch": 0, "replicas": [1, 2],
          "isr": [1, 2], "error_code": 0, "high_watermark": end, "offsets_error_code": None,
          "metadata_offset": None, "read_started_at_ms": 1, "read_finished_at_ms": 2,
          "offsets_read_finished_at_ms": None}
    assembled = assemble(table(replicas, ("pkey", "rkey", *REPLICA_COLUMNS)),
                         table(epochs, ("rkey", "entry_index", "epoch", "start_offset")),
                         table([md], ("pkey", *METADATA_COLUMNS)))
    batches = batch_rows(segment, 11) + batch_rows(segment, 12)
    (st,), _ = states(assembled, replica_rows(assembled.params, table(batches, BATCH_COLUMNS)))
    return st


@pytest.mark.parametrize("name", LOGS)
def test_aborted_transactions_are_normal(name):
    segment, gaps = LOGS[name]
    st = partition_state(segment)
    leader = next(r for r in st.replicas if r.broker == 1)
    assert [r.mismatch_ranges for r in st.replicas] == [(), ()]
    assert leader.sequence_gaps == gaps
    found = [(f["check"], f["offset_from"], f["offset_to"]) for f in verdicts(st, Settings("leader-epoch"))]
    assert found == ([] if not gaps else [("kafka.producer_sequence_gap", 4, 5)])
