"""The kafka_* tables normalize.py writes (docs/kafka/contracts.md "Tables"): names and Spark schemas.

Column words are the broker's own: high watermark, log end offset, log start offset, recovery point, leader epoch,
epoch start offset, ISR, upstream/downstream offset. Offsets are int64, partitions/brokers/epochs int32.

Read instants. Every row says when its evidence was read (`read_started_at_ms`, `read_finished_at_ms`, epoch
milliseconds): a log dir's files are read between its scan.json's started/finished instants, an admin document
between its own. Brokers are scanned one after another under traffic, so a rule comparing two rows may only
conclude what the read order allows (docs/kafka/contracts.md "Snapshots apart"). Null = not recorded.

Every table carries `source_key` (the raw key, `raw/kafka/<cluster>/...`) so a finding can name its evidence."""
from __future__ import annotations

from pyspark.sql.types import ArrayType, StructType

from audit.transforms.common import B, I, L, QUARANTINE, S, struct

SYSTEM = "kafka"
LOG_DIRS, REPLICAS, SEGMENTS, EPOCHS, BATCHES = (
    "kafka_log_dirs", "kafka_replicas", "kafka_segments", "kafka_epochs", "kafka_batches")
PARTITIONS, REPLICA_LAGS, EPOCH_ANSWERS = "kafka_partitions", "kafka_replica_lags", "kafka_epoch_answers"
MM2_SYNCS, MM2_CHECKPOINTS, MM2_GROUPS, MM2_OFFSETS = (
    "kafka_mm2_syncs", "kafka_mm2_checkpoints", "kafka_mm2_groups", "kafka_mm2_offsets")
QUARANTINE_TABLE = "quarantine"

_READ = (("read_started_at_ms", L), ("read_finished_at_ms", L))
# The replica a row belongs to: which broker, which of its log dirs (dir = the raw folder dir0, dir1, ...;
# log_dir = the broker's own path of it, from scan.json), which partition.
_REPLICA = (("cluster", S), ("broker", I), ("dir", S), ("log_dir", S), ("topic", S), ("partition", I))

# Within a scan (null when the scan did not record them): the dir's checkpoint files were read by
# checkpoints_read_at_ms, then every segment's size was listed by listed_at_ms; segments are read up to those sizes.
# So a replica's high watermark was read before its log end offset was fixed.
_SCAN_STEPS = (("checkpoints_read_at_ms", L), ("listed_at_ms", L))
SKIPPED = struct(("dir", S), ("why", S))
VANISHED = struct(("file", S), ("why", S))
SCAN_ERROR = struct(("file", S), ("offset", L), ("error", S))
FILE_ERROR = struct(("file", S), ("error", S))

# One row per scanned broker log dir (scan.json + meta.properties): what was indexed, skipped or lost while reading.
LOG_DIRS_SCHEMA = struct(
    ("cluster", S), ("broker", I), ("dir", S), ("log_dir", S), *_READ, *_SCAN_STEPS, ("verify_crc", B),
    ("meta_broker_id", I),        # broker.id (ZooKeeper form) or node.id (KRaft form) from meta.properties
    ("meta_cluster_id", S), ("meta_directory_id", S), ("meta_mode", S),   # "zookeeper" | "kraft"
    ("partitions", I),            # partition dirs indexed
    # the per-log-dir checkpoint files (replication-offset-checkpoint, ...) that decoded, and those that did not
    # (then every replica of the dir has that offset null: unknown, not absent)
    ("checkpoint_files", ArrayType(S)), ("checkpoint_errors", ArrayType(FILE_ERROR)),
    ("skipped_dirs", ArrayType(SKIPPED)), ("vanished_files", ArrayType(VANISHED)),
    ("scan_errors", ArrayType(SCAN_ERROR)),
    ("source_key", S))

# One row per broker x partition replica found in a scanned log dir. Checkpointed offsets come from that log dir's
# checkpoint files (null: the partition is not in the file, or the file is absent); the log end offset from the
# batch index: the last complete batch's last offset + 1, or the last segment's base offset when it holds none
# (LogSegment.readNextOffset), as of the size each segment had when the scan reached it.
REPLICAS_SCHEMA = struct(
    *_REPLICA, ("topic_id", S),   # partition.metadata's topic id (base64 Uuid), null when absent
    ("high_watermark", L),        # replication-offset-checkpoint (lags the broker's memory by up to 5 s)
    ("recovery_point", L),        # recovery-point-offset-checkpoint
    ("log_start_offset", L),      # log-start-offset-checkpoint; the broker writes only starts above the first
                                  # segment's base offset: null = that base offset (or the file is absent)
    ("cleaner_offset", L),        # cleaner-offset-checkpoint (compacted topics only): the larger of its two reads,
                                  # before and after the segments (it only grows)
    ("cleaning_below", L),        # a cleaning pass was in progress (.cleaned/.swap files): the active segment's
                                  # base offset, below which batches may be rewritten; else null
    ("log_end_offset", L),
    ("first_batch_offset", L),    # base offset of the first indexed batch (null: no batch)
    ("last_batch_epoch", I),      # partitionLeaderEpoch of the last indexed batch (null: no batch)
    ("segments", I), ("batches", L),
    ("epoch_checkpoint", B),      # a leader-epoch-checkpoint was copied (it may still not decode: next column)
    ("epoch_checkpoint_error", S),  # why it did not decode (e.g. the count line lies), else null
    ("index_complete", B),        # every segment read to its size at start: nothing vanished, no error, no tail
    ("index_problem", S),         # why not (first problem, naming the segment file), else null
    *_READ, *_SCAN_STEPS, ("source_key", S))    # the partition's batches.json

# One row per segment file the scanner met (batches.json "segments").
SEGMENTS_SCHEMA = struct(
    *_REPLICA, ("file", S), ("base_offset", L), ("size_at_start", L), ("read_bytes", L), ("active", B),
    ("vanished", B), ("tail_offset", L), ("tail_why", S), ("error_offset", L), ("error", S), ("batches", L),
    ("source_key", S))

# One row per leader-epoch-checkpoint line (entry_index = its 0-based place among the entries, file order).
EPOCHS_SCHEMA = struct(*_REPLICA, ("entry_index", I), ("epoch", I), ("start_offset", L), *_READ, ("source_key", S))

# One row per batch header (never a payload). Legacy magic 0/1 message sets: base_offset = last_offset = the
# message's offset, partition_leader_epoch -1, producer fields -1. crc_valid is null when the CRC was not verified.
BATCHES_SCHEMA = struct(
    *_REPLICA, ("segment", L),    # base offset of the segment file holding it
    ("base_offset", L), ("last_offset", L), ("partition_leader_epoch", I), ("magic", I), ("crc", L),
    ("crc_valid", B), ("attributes", I), ("transactional", B), ("control", B), ("base_timestamp", L),
    ("max_timestamp", L), ("producer_id", L), ("producer_epoch", I), ("base_sequence", I), ("records_count", I),
    ("position", L), ("size", L), ("source_key", S))

# One row per partition per origin: "admin" (Metadata + ListOffsets, broker null) or "kraft" (the replayed metadata
# log and snapshot of `broker`'s __cluster_metadata-0 copy; its own leader from quorum-state). Null = not known
# from that origin (KRaft gives no high watermark; old brokers no ELR).
PARTITIONS_SCHEMA = struct(
    ("cluster", S), ("topic", S), ("partition", I), ("topic_id", S), ("origin", S), ("broker", I),
    ("leader", I), ("leader_epoch", I), ("partition_epoch", I), ("replicas", ArrayType(I)), ("isr", ArrayType(I)),
    ("elr", ArrayType(I)), ("offline", ArrayType(I)), ("error_code", I),
    ("log_start_offset", L), ("high_watermark", L),   # ListOffsets EARLIEST / LATEST (read_uncommitted)
    ("latest_leader_epoch", I), ("offsets_error_code", I),
    ("metadata_offset", L),       # kraft: offset of the last metadata record applied to this partition
    #                               (a snapshot's records: its end offset - 1)
    ("replicas_since_ms", L),     # kraft: batch timestamp of the record that last set the replica list (a
    #                               snapshot's: when the snapshot was written); an upper bound of when it was set
    *_READ,                       # of the metadata (admin: metadata.json; kraft: the log dir scan)
    ("offsets_read_started_at_ms", L), ("offsets_read_finished_at_ms", L),   # of list-offsets.json
    ("source_key", S))

# DescribeLogDirs per broker x replica (admin/log-dirs.json; read instants: that broker's answer): size and offset
# lag as the broker reports them
# (offset_lag: max(HW - LEO, 0) for a current replica, LEO(current) - LEO(future) for a future one, -1 offline).
REPLICA_LAGS_SCHEMA = struct(
    ("cluster", S), ("broker", I), ("log_dir", S), ("topic", S), ("partition", I), ("size", L), ("offset_lag", L),
    ("is_future", B), ("error_code", I), ("broker_error", S), *_READ, ("source_key", S))

# OffsetsForLeaderEpoch answers per broker x partition (admin/offsets-for-leader-epoch.json); `round` = which
# request of the collector's truncation walk (null when not recorded); read instants: the request's own.
EPOCH_ANSWERS_SCHEMA = struct(
    ("cluster", S), ("broker", I), ("topic", S), ("partition", I), ("requested_epoch", I),
    ("current_leader_epoch", I), ("leader_epoch", I), ("end_offset", L), ("error_code", I), ("round", I), *_READ,
    ("source_key", S))

# MirrorMaker 2, per flow into `cluster` (the target) from `source_alias`. Each record as read from its internal
# topic: record_partition/record_offset/record_timestamp place it in that topic.
_FLOW = (("cluster", S), ("source_alias", S))
_RECORD = (("internal_topic", S), ("record_partition", I), ("record_offset", L), ("record_timestamp", L))
MM2_SYNCS_SCHEMA = struct(     # OffsetSync: topic/partition = the UPSTREAM partition
    *_FLOW, ("topic", S), ("partition", I), ("upstream_offset", L), ("downstream_offset", L), *_RECORD, *_READ,
    ("source_key", S))
MM2_CHECKPOINTS_SCHEMA = struct(   # Checkpoint: topic/partition = the DOWNSTREAM (renamed) partition
    *_FLOW, ("group", S), ("topic", S), ("partition", I), ("upstream_offset", L), ("downstream_offset", L),
    ("metadata", S), *_RECORD, *_READ, ("source_key", S))
MM2_GROUPS_SCHEMA = struct(    # committed offsets of a group on the source or the target cluster
    *_FLOW, ("side", S), ("group", S), ("topic", S), ("partition", I), ("offset", L), *_READ, ("source_key", S))
# Offsets of partitions: side "source"/"target" (groups.json's *_end_offsets: the log start and end offset of a
# topic partition) and "offset-syncs"/"checkpoints" (the internal topic's end offset when it was read; log start
# null): the end offsets say whether an internal topic was read to its end.
MM2_OFFSETS_SCHEMA = struct(
    *_FLOW, ("side", S), ("topic", S), ("partition", I), ("log_start_offset", L), ("end_offset", L), *_READ,
    ("source_key", S))

SCHEMAS: dict[str, StructType] = {
    LOG_DIRS: LOG_DIRS_SCHEMA, REPLICAS: REPLICAS_SCHEMA, SEGMENTS: SEGMENTS_SCHEMA, EPOCHS: EPOCHS_SCHEMA,
    BATCHES: BATCHES_SCHEMA, PARTITIONS: PARTITIONS_SCHEMA, REPLICA_LAGS: REPLICA_LAGS_SCHEMA,
    EPOCH_ANSWERS: EPOCH_ANSWERS_SCHEMA, MM2_SYNCS: MM2_SYNCS_SCHEMA, MM2_CHECKPOINTS: MM2_CHECKPOINTS_SCHEMA,
    MM2_GROUPS: MM2_GROUPS_SCHEMA, MM2_OFFSETS: MM2_OFFSETS_SCHEMA, QUARANTINE_TABLE: QUARANTINE}
TABLES = tuple(name for name in SCHEMAS if name != QUARANTINE_TABLE)
