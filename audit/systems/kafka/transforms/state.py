"""The Spark part of the partition audit: kafka_* tables -> per-replica state on the driver (Deequ style: Spark
computes state from the data, the domain's pure rules turn it into verdicts).

1. Small tables to the driver as Arrow: kafka_replicas (one row per replica), kafka_epochs (checkpoint lines) and
   kafka_partitions (metadata), each row keyed by `pkey` = xxhash64(cluster, topic, partition) and replicas by
   `rkey` = xxhash64(cluster, topic, partition, broker, dir). replicas.assemble picks each partition's reference
   replica (the domain's reference_broker) and the kernel's parameters.
2. kafka_batches (up to 1e7+ rows): only numeric columns, hash-partitioned by pkey so that every batch of a
   partition lands in one task; batch_state.replica_rows runs over each task's rows at once with numpy
   (mapInArrow, no Python call per partition). Parameters travel as a broadcast variable.
3. The kernel's rows (one per replica) back to the driver as Arrow.

An incident check (`scope` with subject patterns): only the wanted topic-partitions are judged. The replica,
epoch, metadata and batch rows of the others are left out before anything is assembled (a left semi join on the
wanted (cluster, topic, partition) keys): a log dir's checkpoint files list every partition of the dir, and
Metadata, ListOffsets or a KRaft replay speak of every partition of the cluster, but none of those is judged
without the partition being asked for."""
from __future__ import annotations

import math
import os
from typing import Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from audit.systems.kafka.domain.subjects import wanted
from audit.transforms.common import has_table, read, rows_written
from audit.systems.kafka.transforms import batch_state
from audit.systems.kafka.transforms.replicas import Assembled, assemble
from audit.systems.kafka.transforms.tables import BATCHES, EPOCHS, LOG_DIRS, PARTITIONS, REPLICAS, SCHEMAS

ROWS_PER_TASK = 1_500_000     # batch rows one kernel call holds in memory (~13 int64 columns: ~160 MB)
REPLICA_COLUMNS = ("cluster", "topic", "partition", "broker", "dir", "high_watermark", "log_start_offset",
                   "cleaner_offset", "cleaning_below", "log_end_offset", "first_batch_offset", "epoch_checkpoint",
                   "epoch_checkpoint_error", "index_complete", "index_problem", "read_started_at_ms",
                   "read_finished_at_ms", "checkpoints_read_at_ms", "listed_at_ms", "topic_id")
METADATA_COLUMNS = ("origin", "topic_id", "broker", "leader", "leader_epoch", "replicas", "isr", "error_code",
                    "high_watermark", "offsets_error_code", "metadata_offset", "replicas_since_ms",
                    "read_started_at_ms", "read_finished_at_ms", "offsets_read_finished_at_ms")
KERNEL_SCHEMA = from_arrow_schema(batch_state.OUT_SCHEMA)


def pkey() -> F.Column:
    return F.xxhash64("cluster", "topic", "partition")


def rkey() -> F.Column:
    return F.xxhash64("cluster", "topic", "partition", "broker", "dir")


def table(spark: SparkSession, tables_dir: str, name: str) -> DataFrame:
    """A kafka_* table with its declared schema (absent: empty)."""
    path = os.path.join(tables_dir, name)
    if has_table(path):
        return read(spark, path, SCHEMAS[name])
    return spark.createDataFrame([], SCHEMAS[name])


def _arrow(df: DataFrame) -> pa.Table:
    return df.toArrow()


def driver_inputs(replicas: DataFrame, epochs: DataFrame, partitions: DataFrame) -> tuple[pa.Table, ...]:
    keyed = replicas.where(F.col("cluster").isNotNull() & F.col("topic").isNotNull()
                           & F.col("partition").isNotNull() & F.col("broker").isNotNull())
    r = keyed.select(pkey().alias("pkey"), rkey().alias("rkey"), *REPLICA_COLUMNS)
    e = epochs.where(F.col("epoch").isNotNull() & F.col("start_offset").isNotNull()).select(
        rkey().alias("rkey"), F.coalesce("entry_index", F.lit(0)).alias("entry_index"), "epoch", "start_offset")
    m = partitions.where(F.col("partition").isNotNull() & F.col("topic").isNotNull()).select(
        pkey().alias("pkey"), "cluster", "topic", "partition", *METADATA_COLUMNS)
    return _arrow(r), _arrow(e), _arrow(m)


def kernel_rows(spark: SparkSession, batches: DataFrame, params: batch_state.Replicas,
                task_count: int) -> pa.Table:
    """One row per replica with batches (batch_state.OUT_SCHEMA)."""
    shared = spark.sparkContext.broadcast(params)
    numeric = batches.select(pkey().alias("pkey"), rkey().alias("rkey"),
                             *[c for c in batch_state.BATCH_COLUMNS if c not in ("pkey", "rkey")])

    def run(chunks: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        got = [c for c in chunks if c.num_rows]
        if got:
            yield from batch_state.replica_rows(shared.value, pa.Table.from_batches(got)).to_batches()

    try:
        out = numeric.repartition(task_count, "pkey").mapInArrow(run, KERNEL_SCHEMA)
        return _arrow(out)
    finally:
        shared.unpersist()


def task_count(spark: SparkSession, tables_dir: str) -> int:
    rows = rows_written(os.path.join(tables_dir, BATCHES))   # from the Parquet footers: no Spark job
    return max(spark.sparkContext.defaultParallelism, math.ceil(rows / ROWS_PER_TASK))


def log_dir_reads(spark: SparkSession, tables_dir: str) -> list[dict]:
    """One row per scanned log dir: cluster, broker, dir, when it was listed, and its skipped dirs."""
    return [r.asDict(recursive=True) for r in table(spark, tables_dir, LOG_DIRS).where(
        F.col("broker").isNotNull()).select("cluster", "broker", "dir", "listed_at_ms", "read_started_at_ms",
                                            "skipped_dirs").collect()]


def scanned_brokers(spark: SparkSession, tables_dir: str) -> dict[str, set[int]]:
    """cluster -> the brokers with a scanned log dir (kafka_log_dirs), partitions or not."""
    out: dict[str, set[int]] = {}
    for r in table(spark, tables_dir, LOG_DIRS).where(F.col("broker").isNotNull()).select(
            "cluster", "broker").distinct().collect():
        out.setdefault(r["cluster"], set()).add(r["broker"])
    return out


PARTITION_KEY = ["cluster", "topic", "partition"]


def in_scope(spark: SparkSession, tables: dict[str, DataFrame], scope) -> dict[str, DataFrame]:
    """`tables` (name -> DataFrame with cluster, topic, partition) narrowed to the topic-partitions `scope` wants,
    judged by name on the driver over the replicas' distinct partitions (a few thousand at most)."""
    # the partitions of the log dirs and those only the metadata knows (whose replicas may all be missing)
    found = tables[REPLICAS].select(*PARTITION_KEY).unionByName(tables[PARTITIONS].select(*PARTITION_KEY)).where(
        F.col("partition").isNotNull()).distinct().collect()
    keep = [tuple(r) for r in found if r["topic"] is not None and wanted(scope, r["topic"], r["partition"])]
    keys = F.broadcast(spark.createDataFrame(keep, tables[REPLICAS].select(*PARTITION_KEY).schema))
    return {name: df.join(keys, PARTITION_KEY, "left_semi") for name, df in tables.items()}


def compute(spark: SparkSession, tables_dir: str, scope=None) -> tuple[Assembled, pa.Table]:
    """(assembled partitions with their kernel parameters, the kernel's per-replica rows). `scope`: an incident
    check's audit.contracts.Scope; with subject patterns only the topic-partitions it wants are judged."""
    tables = {name: table(spark, tables_dir, name) for name in (REPLICAS, EPOCHS, PARTITIONS, BATCHES)}
    if scope is not None and scope.subjects:
        tables = in_scope(spark, tables, scope)
    replicas, epochs, metadata = driver_inputs(tables[REPLICAS], tables[EPOCHS], tables[PARTITIONS])
    assembled = assemble(replicas, epochs, metadata)
    assembled.scanned = scanned_brokers(spark, tables_dir)
    # a stray copy (another topic id) holds nothing of the partition the metadata assigns
    held = replicas.filter(pa.array(~np.isin(replicas.column("rkey").to_numpy(), assembled.stray_rkeys)))
    assembled.found = held.select(["pkey", "cluster", "broker"])
    assembled.log_dirs = log_dir_reads(spark, tables_dir)
    if not assembled.partitions:
        return assembled, batch_state.OUT_SCHEMA.empty_table()
    rows = kernel_rows(spark, tables[BATCHES], assembled.params, task_count(spark, tables_dir))
    return assembled, rows
