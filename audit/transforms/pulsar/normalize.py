"""Pulsar normalize on Spark: raw/pulsar/** -> the pulsar_* tables of docs/pulsar-contracts.md + quarantine rows.

Every raw file (dump chunks included, 1e5+ lines per topic) is decoded in the executors by
pulsar_normalize_rows.decode_file inside mapInArrow; the driver only lists files. Partial rows are joined
here: topics = stats-internal + dump.json, subscriptions = stats (flags and consumption evidence) +
replicatedSubscriptionStatus, and a cursor is `replicated` by its property or by its subscription's
`isReplicated` in stats."""
from __future__ import annotations

import os
from typing import Iterator
from urllib.parse import unquote, urlparse

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (ArrayType, BooleanType, DataType, DoubleType, IntegerType, LongType, MapType,
                               StringType, StructField, StructType)

from audit.transforms.pulsar import decode as rows

S, L, I, B, D = StringType(), LongType(), IntegerType(), BooleanType(), DoubleType()


def _struct(*fields: tuple[str, DataType]) -> StructType:
    return StructType([StructField(name, t, True) for name, t in fields])


ACK_RANGE = _struct(("from_ledger", L), ("from_entry", L), ("to_ledger", L), ("to_entry", L))
CLUSTER_POSITION = _struct(("cluster", S), ("ledger_id", L), ("entry_id", L))
TOPICS = _struct(("cluster", S), ("topic", S), ("state", S), ("last_confirmed_ledger", L),
                 ("last_confirmed_entry", L), ("number_of_entries", L), ("dump_from_ledger", L),
                 ("dump_from_entry", L), ("dump_to_ledger", L), ("dump_to_entry", L), ("dump_complete", B),
                 ("source_key", S))
LEDGERS = _struct(("cluster", S), ("topic", S), ("ledger_id", L), ("entries", L), ("size", L), ("is_open", B))
CURSORS = _struct(("cluster", S), ("topic", S), ("cursor", S), ("kind", S), ("remote_cluster", S),
                  ("replicated", B), ("mark_delete_ledger", L), ("mark_delete_entry", L), ("read_ledger", L),
                  ("read_entry", L), ("individually_deleted", ArrayType(ACK_RANGE)), ("state", S), ("source_key", S))
ENTRIES = _struct(("cluster", S), ("topic", S), ("ledger_id", L), ("entry_id", L), ("producer_name", S),
                  ("sequence_id", L), ("publish_time_ms", L), ("replicated_from", S), ("replicate_to", ArrayType(S)),
                  ("source_position_ledger", L), ("source_position_entry", L), ("marker_type", I),
                  ("snapshot_id", S), ("marker_source_cluster", S), ("marker_local_ledger", L),
                  ("marker_local_entry", L), ("marker_subscription", S),
                  ("marker_clusters", ArrayType(CLUSTER_POSITION)), ("source_key", S))
GAPS = _struct(("cluster", S), ("topic", S), ("ledger_id", L), ("entry_id", L), ("status", I), ("error", S),
               ("source_key", S))
REPLICATION = _struct(("cluster", S), ("topic", S), ("remote_cluster", S), ("connected", B),
                      ("replication_backlog", L), ("replication_delay_s", L), ("msg_rate_out", D), ("source_key", S))
SUBSCRIPTIONS = _struct(("cluster", S), ("topic", S), ("subscription", S), ("is_replicated", B), ("is_durable", B),
                        ("replicated_status", MapType(S, B)), ("consumers", I), ("msg_out_counter", L),
                        ("last_consumed_ms", L), ("consumed_here", B), ("source_key", S))
QUARANTINE = _struct(("system", S), ("cluster", S), ("source_key", S), ("payload_kind", S), ("reason", S))
SCHEMAS = {rows.TOPICS: TOPICS, rows.LEDGERS: LEDGERS, rows.CURSORS: CURSORS, rows.ENTRIES: ENTRIES,
           rows.GAPS: GAPS, rows.REPLICATION: REPLICATION, rows.SUBSCRIPTIONS: SUBSCRIPTIONS,
           rows.QUARANTINE: QUARANTINE}
# One wide row tagged with its table, so every file is read and decoded exactly once.
_DECODED = StructType([StructField("table", S, False)] + list(
    {f.name: f for t in SCHEMAS.values() for f in t.fields}.values()))
_BATCH_ROWS = 4096  # dump chunks expand to many rows: hand them to Arrow in bounded batches


def pulsar_root(raw_dir: str) -> str:
    """The folder holding <cluster>/... : raw_dir/pulsar (raw_dir = the attempt's raw/) or raw_dir/raw/pulsar."""
    root = os.path.abspath(raw_dir)
    for candidate in (os.path.join(root, rows.SYSTEM), os.path.join(root, "raw", rows.SYSTEM)):
        if os.path.isdir(candidate):
            return candidate
    return os.path.join(root, rows.SYSTEM)


def _key(path: str, root: str) -> str:
    local = unquote(urlparse(path).path) if path.startswith("file:") else path
    rel = local[len(root) + 1:] if local.startswith(root + "/") else local
    return f"raw/{rows.SYSTEM}/{rel}"


def _empty_files(root: str) -> list[str]:
    out = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            if os.path.getsize(path) == 0:
                out.append(_key(path, root))
    return sorted(out)


def _decode_all(spark: SparkSession, root: str) -> DataFrame:
    if not os.path.isdir(root):
        return spark.createDataFrame([], _DECODED)
    arrow_schema = to_arrow_schema(_DECODED)

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pending: list[dict] = []
        for batch in batches:
            for path, content in zip(batch.column("path").to_pylist(), batch.column("content").to_pylist()):
                for table, row in rows.decode_file(_key(path, root), content):
                    pending.append({"table": table, **row})
                    if len(pending) >= _BATCH_ROWS:
                        yield pa.RecordBatch.from_pylist(pending, schema=arrow_schema)
                        pending = []
        if pending:
            yield pa.RecordBatch.from_pylist(pending, schema=arrow_schema)

    files = (spark.read.format("binaryFile").option("recursiveFileLookup", "true").load(root)
             .select("path", "content"))
    decoded = files.mapInArrow(decode, _DECODED)
    empty = _empty_files(root)
    if empty:  # binaryFile skips zero-length files; they must still be judged
        extra = [{"table": t, **r} for key in empty for t, r in rows.decode_file(key, b"")]
        decoded = decoded.unionByName(spark.createDataFrame(extra, _DECODED))
    return decoded


def _own_positions(entries: DataFrame, ledgers: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(entries on a ledger of their own topic, quarantine rows for the others). A dumped position whose ledger
    the topic's stats-internal does not list belongs to a different topic (a misfiled or mixed-up dump): it is
    quarantined with the reason, never audited as this topic's message. Topics without a ledgers list are kept."""
    keys = ["cluster", "topic"]
    listed = ledgers.select(*keys).distinct().withColumn("_listed", F.lit(True))
    own = ledgers.select(*keys, "ledger_id").distinct().withColumn("_own", F.lit(True))
    judged = entries.join(listed, keys, "left").join(own, keys + ["ledger_id"], "left")
    foreign = F.col("_listed").isNotNull() & F.col("_own").isNull()
    quarantine = judged.where(foreign).select(
        F.lit(rows.SYSTEM).alias("system"), "cluster", "source_key", F.lit("dump-chunk").alias("payload_kind"),
        F.concat(F.col("source_key"), F.lit(": field ledger_id: expected a ledger of "), F.col("topic"),
                 F.lit(" (its stats-internal ledgers), got position "), F.col("ledger_id").cast("string"), F.lit(":"),
                 F.col("entry_id").cast("string"), F.lit(" -- a position from a different topic")).alias("reason"))
    return judged.where(~foreign).select(*entries.columns), quarantine


class Tables(dict):
    """The tables, plus `unpersist()` for the cached decoded rows they are selected from."""

    def __init__(self, tables: dict, cached: DataFrame):
        super().__init__(tables)
        self.cached = cached

    def unpersist(self) -> None:
        self.cached.unpersist()


def normalize_pulsar(spark: SparkSession, raw_dir: str) -> Tables:
    decoded = _decode_all(spark, pulsar_root(raw_dir)).persist()

    def part(name: str, columns: list[str]) -> DataFrame:
        return decoded.where(F.col("table") == name).select(*columns)

    keys = ["cluster", "topic"]
    window_cols = ["dump_from_ledger", "dump_from_entry", "dump_to_ledger", "dump_to_entry", "dump_complete"]
    topic_cols = ["state", "last_confirmed_ledger", "last_confirmed_entry", "number_of_entries"]
    topics = (part(rows.TOPICS, keys + topic_cols + ["source_key"]).withColumnRenamed("source_key", "_k1")
              .join(part(rows.DUMP_WINDOW, keys + window_cols + ["source_key"]).withColumnRenamed("source_key", "_k2"),
                    keys, "full")
              .withColumn("source_key", F.coalesce("_k1", "_k2")))  # stats-internal's key when there is one
    sub_keys = keys + ["subscription"]
    usage = ["consumers", "msg_out_counter", "last_consumed_ms", "consumed_here"]  # null: no stats entry
    subscriptions = (part(rows.SUBSCRIPTIONS, sub_keys + ["is_replicated", "is_durable"] + usage + ["source_key"])
                     .withColumnRenamed("source_key", "_k1")
                     .join(part(rows.SUB_STATUS, sub_keys + ["replicated_status", "source_key"])
                           .withColumnRenamed("source_key", "_k2"), sub_keys, "full")
                     .withColumn("source_key", F.coalesce("_k1", "_k2")))
    flags = part(rows.SUBSCRIPTIONS, keys + ["subscription", "is_replicated"]).withColumnRenamed(
        "subscription", "cursor")
    cursors = (part(rows.CURSORS, CURSORS.fieldNames()).join(flags, keys + ["cursor"], "left")
               .withColumn("replicated", F.col("replicated") | F.coalesce(F.col("is_replicated"), F.lit(False)))
               .select(*CURSORS.fieldNames()))
    tables = {name: part(name, schema.fieldNames()) for name, schema in SCHEMAS.items()}
    entries, foreign = _own_positions(tables[rows.ENTRIES], tables[rows.LEDGERS])
    tables.update({rows.TOPICS: topics, rows.SUBSCRIPTIONS: subscriptions, rows.CURSORS: cursors,
                   rows.ENTRIES: entries, rows.QUARANTINE: tables[rows.QUARANTINE].unionByName(foreign)})
    return Tables({name: df.select(*SCHEMAS[name].fieldNames()) for name, df in tables.items()}, cached=decoded)
