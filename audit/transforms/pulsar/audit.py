"""Pulsar audit on Spark: the normalized pulsar_* tables -> metrics/pulsar_failover, metrics/pulsar_snapshots and
Pulsar findings rows. DataFrames in, DataFrames out; spark_jobs/pulsar_audit.py does the I/O.

Entries are large (1e5+ rows per topic and cluster), everything else is small: the small tables are unioned
into one tagged "state" DataFrame, and entries and state are cogrouped by topic. Each topic's group runs the
pure domain (audit/domain/pulsar/topic.py) in one Python call; its rows come back tagged by kind and are split
into the three outputs from one persisted DataFrame."""
from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (ArrayType, BooleanType, DataType, IntegerType, LongType, StringType, StructField,
                               StructType)

from audit.domain.pulsar.checks import Thresholds
from audit.domain.pulsar.pip33 import DEFAULT_CACHE_LIMIT
from audit.domain.pulsar.topic import Settings
from audit.transforms.pulsar import audit_rows as arrow
from audit.transforms.bookkeeper.spark import CachedTuple

S, L, I, B = StringType(), LongType(), IntegerType(), BooleanType()


def _struct(*fields: tuple[str, DataType]) -> StructType:
    return StructType([StructField(name, t, True) for name, t in fields])


ACK_RANGE = _struct(("from_ledger", L), ("from_entry", L), ("to_ledger", L), ("to_entry", L))
CLUSTER_POSITION = _struct(("cluster", S), ("ledger_id", L), ("entry_id", L))
# The columns read from each normalized table (docs/pulsar-contracts.md); absent columns read as null.
INPUTS = {
    "pulsar_entries": _struct(
        ("cluster", S), ("topic", S), ("ledger_id", L), ("entry_id", L), ("producer_name", S), ("sequence_id", L),
        ("publish_time_ms", L), ("replicated_from", S), ("replicate_to", ArrayType(S)),
        ("source_position_ledger", L), ("source_position_entry", L), ("marker_type", I), ("snapshot_id", S),
        ("marker_source_cluster", S), ("marker_local_ledger", L), ("marker_local_entry", L),
        ("marker_subscription", S), ("marker_clusters", ArrayType(CLUSTER_POSITION))),
    "pulsar_topics": _struct(("cluster", S), ("topic", S), ("dump_from_ledger", L), ("dump_from_entry", L),
                             ("dump_to_ledger", L), ("dump_to_entry", L), ("dump_complete", B)),
    "pulsar_ledgers": _struct(("cluster", S), ("topic", S), ("ledger_id", L), ("entries", L)),
    "pulsar_cursors": _struct(("cluster", S), ("topic", S), ("cursor", S), ("kind", S), ("remote_cluster", S),
                              ("replicated", B), ("mark_delete_ledger", L), ("mark_delete_entry", L),
                              ("read_ledger", L), ("read_entry", L), ("individually_deleted", ArrayType(ACK_RANGE))),
    "pulsar_entry_gaps": _struct(("cluster", S), ("topic", S), ("ledger_id", L), ("entry_id", L)),
    "pulsar_replication": _struct(("cluster", S), ("topic", S), ("remote_cluster", S), ("connected", B),
                                  ("replication_backlog", L)),
    "pulsar_subscriptions": _struct(("cluster", S), ("topic", S), ("subscription", S), ("is_replicated", B),
                                    ("consumed_here", B)),
}
STATE = _struct(("kind", S), ("cluster", S), ("topic", S), ("name", S), ("cursor_kind", S), ("remote_cluster", S),
                ("replicated", B), ("mark_delete_ledger", L), ("mark_delete_entry", L), ("read_ledger", L),
                ("read_entry", L), ("individually_deleted", ArrayType(ACK_RANGE)), ("dump_from_ledger", L),
                ("dump_from_entry", L), ("dump_to_ledger", L), ("dump_to_entry", L), ("dump_complete", B),
                ("first_ledger", L), ("gap_count", L), ("connected", B), ("replication_backlog", L),
                ("consumed_here", B), ("cluster_key", L), ("ledger_id", L), ("entry_id", L), ("marker_type", I),
                ("publish_time_ms", L), ("replicated_from", S), ("replicate_to", ArrayType(S)),
                ("snapshot_id", S), ("marker_source_cluster", S), ("marker_local_ledger", L),
                ("marker_local_entry", L), ("marker_subscription", S), ("marker_clusters", ArrayType(CLUSTER_POSITION)))
# What crosses to Python per entry: numbers only (see pulsar_audit_arrow); names as xxhash64 codes.
ENTRY_COLUMNS = ("cluster_key", "ledger_id", "entry_id", "producer_key", "sequence_id", "publish_time_ms",
                 "origin_key", "source_position_ledger", "source_position_entry", "marker_type")
FAILOVER = _struct(
    ("run_id", S), ("topic", S), ("subscription", S), ("source_cluster", S), ("target_cluster", S),
    ("replicated", B), ("source_mdp", S), ("target_mdp", S), ("expected_target_mdp", S), ("exact_target_mdp", S),
    ("window_from", S), ("window_to", S), ("compared", L), ("only_on_source", L), ("only_on_target", L),
    ("redelivered", L), ("skipped", L), ("lost", L), ("redelivered_ranges", S), ("skipped_ranges", S),
    ("to_acknowledge", S), ("to_acknowledge_count", L), ("complete", B))
SNAPSHOTS = _struct(("cluster", S), ("topic", S), ("requests", L), ("responses", L), ("snapshots", L),
                    ("updates", L), ("unanswered_requests", L), ("timed_out", L), ("newest_snapshot_age_s", L),
                    ("replicated_subscriptions", I))
VIOLATIONS = _struct(("run_id", S), ("system", S), ("cluster", S), ("check", S), ("severity", S), ("subject", S),
                     ("entry_count", L), ("message", S), ("evidence", S))
# Every output row in one wide row tagged with its kind (column names shared by outputs have one type).
_OUT = StructType([StructField("kind", S, False)] + list(
    {f.name: f for t in (FAILOVER, SNAPSHOTS, VIOLATIONS) for f in t.fields}.values()))


def conform(df: DataFrame, schema: StructType) -> DataFrame:
    """`df` with exactly `schema`'s columns (absent ones null), cast to its types."""
    have = set(df.columns)
    return df.select(*[(F.col(f.name) if f.name in have else F.lit(None)).cast(f.dataType).alias(f.name)
                       for f in schema.fields])


def empty_tables(spark: SparkSession) -> dict[str, DataFrame]:
    return {name: spark.createDataFrame([], schema) for name, schema in INPUTS.items()}


def _state(t: dict[str, DataFrame]) -> DataFrame:
    topics = t["pulsar_topics"].select(F.lit(arrow.TOPIC).alias("kind"), "cluster", "topic", "dump_from_ledger",
                                       "dump_from_entry", "dump_to_ledger", "dump_to_entry", "dump_complete")
    first = (t["pulsar_ledgers"].where(F.col("entries") > 0).groupBy("cluster", "topic")
             .agg(F.min("ledger_id").alias("first_ledger")).withColumn("kind", F.lit(arrow.FIRST_LEDGER)))
    gaps = (t["pulsar_entry_gaps"].groupBy("cluster", "topic").agg(F.count(F.lit(1)).alias("gap_count"))
            .withColumn("kind", F.lit(arrow.GAPS)))
    cursors = t["pulsar_cursors"].select(
        F.lit(arrow.CURSOR).alias("kind"), "cluster", "topic", F.col("cursor").alias("name"),
        F.col("kind").alias("cursor_kind"), "remote_cluster", "replicated", "mark_delete_ledger", "mark_delete_entry",
        "read_ledger", "read_entry", "individually_deleted")
    replication = t["pulsar_replication"].select(F.lit(arrow.REPLICATION).alias("kind"), "cluster", "topic",
                                                 "remote_cluster", "connected", "replication_backlog")
    subs = t["pulsar_subscriptions"].select(F.lit(arrow.SUBSCRIPTION).alias("kind"), "cluster", "topic",
                                            F.col("subscription").alias("name"),
                                            F.col("is_replicated").alias("replicated"), "consumed_here")
    # A cursor row without its markDeletePosition cannot be judged (the normalizer quarantines those).
    cursors = cursors.where(F.col("mark_delete_ledger").isNotNull() & F.col("mark_delete_entry").isNotNull())
    # Marker payloads and replicate_to lists are rare: they travel with the state, not with every entry.
    extra = t["pulsar_entries"].where(F.col("marker_type").isNotNull() | F.col("replicate_to").isNotNull()) \
        .withColumn("kind", F.lit(arrow.EXTRA))
    parts = [topics, first, gaps, cursors, replication, subs, extra]
    return _union([conform(p, STATE) for p in parts]).withColumn("cluster_key", F.xxhash64("cluster"))


def _union(frames: list[DataFrame]) -> DataFrame:
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


class Outputs(CachedTuple):
    """(failover, snapshots, violations) selected from one persisted DataFrame; `unpersist()` releases it."""


def audit_inputs(tables: dict[str, DataFrame]) -> tuple[DataFrame, DataFrame]:
    """(entries, state), both keyed by topic_key = xxhash64(topic), as the per-topic function receives them.
    `tables` maps INPUTS names to DataFrames (missing = empty)."""
    spark = next(iter(tables.values())).sparkSession
    t = {name: conform(tables[name], schema) if name in tables else spark.createDataFrame([], schema)
         for name, schema in INPUTS.items()}
    e = t["pulsar_entries"].where(F.col("topic").isNotNull() & F.col("cluster").isNotNull()
                                  & F.col("ledger_id").isNotNull() & F.col("entry_id").isNotNull())
    entries = e.select(
        F.xxhash64("topic").alias("topic_key"), F.xxhash64("cluster").alias("cluster_key"), "ledger_id", "entry_id",
        F.when(F.col("producer_name").isNotNull(), F.xxhash64("producer_name")).alias("producer_key"),
        "sequence_id", "publish_time_ms", F.xxhash64(F.coalesce("replicated_from", "cluster")).alias("origin_key"),
        "source_position_ledger", "source_position_entry", "marker_type")
    state = _state(t).where(F.col("topic").isNotNull() & F.col("cluster").isNotNull()) \
        .withColumn("topic_key", F.xxhash64("topic"))
    return entries, state


def pulsar_audit(tables: dict[str, DataFrame], *, run_id: str = "", as_of_ms: int | None = None,
                 replicator_backlog_max: int | None = 10_000, snapshot_max_age_s: int | None = 300,
                 snapshot_cache_limit: int = DEFAULT_CACHE_LIMIT) -> Outputs:
    """(failover_df, snapshots_df, violations_df). `tables` maps INPUTS names to DataFrames (missing = empty)."""
    settings = Settings(run_id, as_of_ms, Thresholds(replicator_backlog_max, snapshot_max_age_s),
                        snapshot_cache_limit)
    schema = to_arrow_schema(_OUT)

    def per_topic(entries, state):
        return arrow.audit_group(entries, state, settings, schema)

    entries, state = audit_inputs(tables)
    out = (entries.groupBy("topic_key").cogroup(state.groupBy("topic_key"))
           .applyInArrow(per_topic, _OUT)).persist()

    def part(kind: str, schema_: StructType) -> DataFrame:
        return out.where(F.col("kind") == kind).select(*schema_.fieldNames())

    return Outputs((part(arrow.FAILOVER, FAILOVER), part(arrow.SNAPSHOTS, SNAPSHOTS),
                    part(arrow.VIOLATION, VIOLATIONS)), cached=out)
