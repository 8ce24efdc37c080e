"""Kafka normalize on Spark: raw/kafka/** -> the kafka_* tables of tables.py (docs/kafka/contracts.md "Tables")
+ quarantine rows.

Every raw file is decoded once in the executors by decode.py's decode_file inside mapInArrow (batches.json files
expand to one row per batch header); the driver only lists files. Partial rows are joined here:
- kafka_replicas = the partition dirs a log dir holds (scan.json's list, and any dir with a batch index, an epoch
  checkpoint or a partition.metadata) + the batch index summary + that log dir's checkpoint offsets (one column per
  file) + the topic id + the log dir's path and scan instants;
- kafka_log_dirs = scan.json + meta.properties + which checkpoint files decoded;
- kafka_segments / kafka_batches / kafka_epochs get their log dir's path (and epochs the scan instants);
- kafka_partitions = admin metadata + ListOffsets (origin "admin"), and the KRaft metadata log each broker holds,
  replayed (origin "kraft", kraft_rows.py)."""
from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType

from audit.transforms.common import B, I, L, S, Cached, decode_raw, struct, tagged, write_normalized
from audit.systems.kafka.transforms import decode as rows
from audit.systems.kafka.transforms import kraft_rows
from audit.systems.kafka.transforms.tables import (BATCHES, EPOCHS, FILE_ERROR, LOG_DIRS, PARTITIONS, QUARANTINE_TABLE,
                                           REPLICAS, SCAN_ERROR, SCHEMAS, SEGMENTS, SKIPPED, SYSTEM, VANISHED)

DIR_KEYS = ["cluster", "broker", "dir"]
REPLICA_KEYS = DIR_KEYS + ["topic", "partition"]
PARTITION_KEYS = ["cluster", "topic", "partition"]
OFFSET_COLUMNS = tuple(dict.fromkeys(rows.OFFSET_COLUMNS.values()))   # two files fill cleaner_offset
_READ = ("read_started_at_ms", "read_finished_at_ms")
_SCAN_STEPS = ("checkpoints_read_at_ms", "listed_at_ms")

_PARTIAL = {
    rows.SCAN: struct(("cluster", S), ("broker", I), ("dir", S), ("log_dir", S), ("read_started_at_ms", L),
                      ("read_finished_at_ms", L), ("checkpoints_read_at_ms", L), ("listed_at_ms", L),
                      ("verify_crc", B), ("partitions", I),
                      ("skipped_dirs", ArrayType(SKIPPED)), ("vanished_files", ArrayType(VANISHED)),
                      ("scan_errors", ArrayType(SCAN_ERROR)), ("source_key", S)),
    rows.LISTED: struct(("cluster", S), ("broker", I), ("dir", S), ("topic", S), ("partition", I)),
    rows.META: struct(("cluster", S), ("broker", I), ("dir", S), ("meta_broker_id", I), ("meta_cluster_id", S),
                      ("meta_directory_id", S), ("meta_mode", S)),
    rows.CHECKPOINT_FILE: struct(("cluster", S), ("broker", I), ("dir", S), ("file", S), ("error", S)),
    rows.OFFSETS: struct(("cluster", S), ("broker", I), ("dir", S), ("topic", S), ("partition", I),
                         ("column", S), ("offset", L)),
    rows.TOPIC_ID: struct(("cluster", S), ("broker", I), ("dir", S), ("topic", S), ("partition", I),
                          ("topic_id", S)),
    rows.EPOCH_FILE: struct(("cluster", S), ("broker", I), ("dir", S), ("topic", S), ("partition", I),
                            ("epoch_checkpoint_error", S)),
    rows.REPLICA: struct(("cluster", S), ("broker", I), ("dir", S), ("topic", S), ("partition", I),
                         ("log_end_offset", L), ("first_batch_offset", L), ("last_batch_epoch", I), ("segments", I),
                         ("batches", L), ("index_complete", B), ("index_problem", S), ("cleaning_below", L),
                         ("source_key", S)),
    rows.LIST_OFFSETS: struct(("cluster", S), ("topic", S), ("partition", I), ("log_start_offset", L),
                              ("high_watermark", L), ("latest_leader_epoch", I), ("offsets_error_code", I),
                              ("offsets_read_started_at_ms", L), ("offsets_read_finished_at_ms", L)),
    **kraft_rows.PARTIAL,
}
# One wide row tagged with its table, so every file is read and decoded exactly once.
_DECODED = tagged("table", [*SCHEMAS.values(), *_PARTIAL.values()])
NO_INDEX = "no batch index (batches.json) for this partition dir"


def _log_dirs(part, scans: DataFrame) -> DataFrame:
    files = (part(rows.CHECKPOINT_FILE).groupBy(*DIR_KEYS).agg(
        F.sort_array(F.collect_list(F.when(F.col("error").isNull(), F.col("file")))).alias("checkpoint_files"),
        F.sort_array(F.collect_list(F.when(F.col("error").isNotNull(), F.struct(
            F.col("file"), F.col("error")).cast(FILE_ERROR)))).alias("checkpoint_errors")))
    return (scans.join(part(rows.META), DIR_KEYS, "full").join(files, DIR_KEYS, "full")
            .select(*SCHEMAS[LOG_DIRS].fieldNames()))


def _replicas(part, scans: DataFrame) -> DataFrame:
    keys = (part(rows.LISTED).select(*REPLICA_KEYS)
            .unionByName(part(rows.REPLICA).select(*REPLICA_KEYS))
            .unionByName(part(rows.EPOCH_FILE).select(*REPLICA_KEYS))
            .unionByName(part(rows.TOPIC_ID).select(*REPLICA_KEYS)).distinct())
    offsets = (part(rows.OFFSETS).groupBy(*REPLICA_KEYS).pivot("column", list(OFFSET_COLUMNS))
               .agg(F.max("offset")))
    epoch_file = part(rows.EPOCH_FILE).withColumn("epoch_checkpoint", F.lit(True))
    topic_ids = part(rows.TOPIC_ID).groupBy(*REPLICA_KEYS).agg(F.max("topic_id").alias("topic_id"))
    instants = scans.select(*DIR_KEYS, "log_dir", *_READ, *_SCAN_STEPS)
    out = (keys.join(part(rows.REPLICA), REPLICA_KEYS, "left").join(offsets, REPLICA_KEYS, "left")
           .join(epoch_file, REPLICA_KEYS, "left").join(topic_ids, REPLICA_KEYS, "left")
           .join(F.broadcast(instants), DIR_KEYS, "left")
           .withColumn("epoch_checkpoint", F.coalesce(F.col("epoch_checkpoint"), F.lit(False)))
           .withColumn("index_problem", F.when(F.col("index_complete").isNull(), F.lit(NO_INDEX))
                       .otherwise(F.col("index_problem")))
           .withColumn("index_complete", F.coalesce(F.col("index_complete"), F.lit(False)))
           .withColumn("segments", F.coalesce(F.col("segments"), F.lit(0)))
           .withColumn("batches", F.coalesce(F.col("batches"), F.lit(0).cast("long"))))
    return out.select(*[F.col(c) if c in out.columns else F.lit(None).alias(c)
                        for c in SCHEMAS[REPLICAS].fieldNames()])


def _with_log_dir(df: DataFrame, scans: DataFrame, table: str, instants: bool = False) -> DataFrame:
    """`df` (decoded without its log dir's path) with the path, and the scan instants when asked."""
    extra = ["log_dir", *(_READ if instants else ())]
    out = df.drop(*extra).join(F.broadcast(scans.select(*DIR_KEYS, *extra)), DIR_KEYS, "left")
    return out.select(*SCHEMAS[table].fieldNames())


def _partitions(part, decoded_admin: DataFrame, kraft: DataFrame) -> DataFrame:
    offset_cols = [c for c in _PARTIAL[rows.LIST_OFFSETS].fieldNames() if c not in PARTITION_KEYS]
    admin = (decoded_admin.drop(*offset_cols).join(part(rows.LIST_OFFSETS), PARTITION_KEYS, "full")
             .withColumn("origin", F.coalesce(F.col("origin"), F.lit("admin"))))
    names = SCHEMAS[PARTITIONS].fieldNames()
    return admin.select(*names).unionByName(kraft.select(*names))


def normalize(spark: SparkSession, raw_dir: str) -> Cached:
    decoded = decode_raw(spark, raw_dir, SYSTEM, rows.decode_file, _DECODED).persist()

    def part(name: str) -> DataFrame:
        schema = _PARTIAL.get(name) or SCHEMAS[name]
        return decoded.where(F.col("table") == name).select(*schema.fieldNames())

    scans = part(rows.SCAN)
    tables = {name: part(name) for name in SCHEMAS}
    kraft, kraft_quarantine = kraft_rows.partitions(part, scans)
    tables.update({
        LOG_DIRS: _log_dirs(part, scans), REPLICAS: _replicas(part, scans),
        SEGMENTS: _with_log_dir(tables[SEGMENTS], scans, SEGMENTS),
        BATCHES: _with_log_dir(tables[BATCHES], scans, BATCHES),
        EPOCHS: _with_log_dir(tables[EPOCHS], scans, EPOCHS, instants=True),
        PARTITIONS: _partitions(part, tables[PARTITIONS], kraft),
        QUARANTINE_TABLE: tables[QUARANTINE_TABLE].unionByName(kraft_quarantine)})
    return Cached({name: df.select(*SCHEMAS[name].fieldNames()) for name, df in tables.items()}, cached=decoded)


def run(spark: SparkSession, raw_dir: str, tables_dir: str) -> dict:
    """Write tables_dir/<table>/ for every Kafka table (empty ones too) and Kafka's folder of tables/quarantine;
    returns {table: rows}."""
    return write_normalized(normalize(spark, raw_dir), tables_dir, SYSTEM)
