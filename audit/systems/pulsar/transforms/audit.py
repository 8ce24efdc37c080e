"""Pulsar audit on Spark: the normalized pulsar_* tables -> metrics/pulsar_failover, metrics/pulsar_snapshots and
Pulsar findings rows. DataFrames in, DataFrames out in `audit`; `run` is the job (reads the tables, writes the outputs).

Entries are large (1e5+ rows per topic and cluster), everything else is small: the small tables are unioned
into one tagged "state" DataFrame, and entries and state are cogrouped by topic. Each topic's group runs the
pure domain (audit/systems/pulsar/domain/topic.py) in one Python call; its rows come back tagged by kind and are split
into the three outputs from one persisted DataFrame."""
from __future__ import annotations

import os

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import ArrayType, StructType

from audit.contracts import AuditRequest
from audit.systems.pulsar.domain.checks import DEFAULT, Thresholds, Tolerance
from audit.systems.pulsar.domain.snapshot_cache import DEFAULT_SIZE
from audit.systems.pulsar.domain.topic import Settings
from audit.transforms.common import (B, I, L, S, VIOLATIONS, CachedTuple, conform, has_table, read, struct, tagged,
                                     union, violations_path, write)
from audit.systems.pulsar.transforms import audit_rows as arrow
from audit.systems.pulsar.transforms.decode import SYSTEM

ACK_RANGE = struct(("from_ledger", L), ("from_entry", L), ("to_ledger", L), ("to_entry", L))
CLUSTER_POSITION = struct(("cluster", S), ("ledger_id", L), ("entry_id", L))
# The columns read from each normalized table (docs/pulsar/contracts.md); absent columns read as null.
INPUTS = {
    "pulsar_entries": struct(
        ("cluster", S), ("topic", S), ("ledger_id", L), ("entry_id", L), ("producer_name", S), ("sequence_id", L),
        ("publish_time_ms", L), ("replicated_from", S), ("replicate_to", ArrayType(S)),
        ("source_position_ledger", L), ("source_position_entry", L), ("marker_type", I), ("snapshot_id", S),
        ("marker_source_cluster", S), ("marker_local_ledger", L), ("marker_local_entry", L),
        ("marker_subscription", S), ("marker_clusters", ArrayType(CLUSTER_POSITION))),
    # The ledger list: no longer part of the state (its first ledger cannot tell whether older ones were
    # trimmed: docs/pulsar/audit.md "Window start"); kept as an input for the job's table set.
    "pulsar_ledgers": struct(("cluster", S), ("topic", S), ("ledger_id", L), ("entries", L)),
    "pulsar_topics": struct(("cluster", S), ("topic", S), ("dump_from_ledger", L), ("dump_from_entry", L),
                             ("dump_to_ledger", L), ("dump_to_entry", L), ("dump_complete", B),
                             ("message_ttl_s", L), ("namespace_message_ttl_s", L)),
    "pulsar_cursors": struct(("cluster", S), ("topic", S), ("cursor", S), ("kind", S), ("remote_cluster", S),
                              ("replicated", B), ("mark_delete_ledger", L), ("mark_delete_entry", L),
                              ("read_ledger", L), ("read_entry", L), ("individually_deleted", ArrayType(ACK_RANGE)),
                              ("read", I), ("read_requested_ms", L), ("read_answered_ms", L)),
    "pulsar_entry_gaps": struct(("cluster", S), ("topic", S), ("ledger_id", L), ("entry_id", L)),
    "pulsar_replication": struct(("cluster", S), ("topic", S), ("remote_cluster", S), ("connected", B),
                                  ("replication_backlog", L)),
    "pulsar_subscriptions": struct(("cluster", S), ("topic", S), ("subscription", S), ("is_replicated", B),
                                    ("consumed_here", B)),
    # One row per cluster (GET /admin/v2/brokers/version): not part of the state, read on the driver.
    "pulsar_brokers": struct(("cluster", S), ("broker_version", S)),
}
STATE = struct(("kind", S), ("cluster", S), ("topic", S), ("name", S), ("cursor_kind", S), ("remote_cluster", S),
                ("replicated", B), ("mark_delete_ledger", L), ("mark_delete_entry", L), ("read_ledger", L),
                ("read_entry", L), ("individually_deleted", ArrayType(ACK_RANGE)), ("dump_from_ledger", L),
                ("dump_from_entry", L), ("dump_to_ledger", L), ("dump_to_entry", L), ("dump_complete", B),
                ("gap_count", L), ("connected", B), ("replication_backlog", L),
                ("consumed_here", B), ("cluster_key", L), ("ledger_id", L), ("entry_id", L), ("marker_type", I),
                ("publish_time_ms", L), ("replicated_from", S), ("replicate_to", ArrayType(S)),
                ("snapshot_id", S), ("marker_source_cluster", S), ("marker_local_ledger", L),
                ("marker_local_entry", L), ("marker_subscription", S), ("marker_clusters", ArrayType(CLUSTER_POSITION)),
                ("read", I), ("read_requested_ms", L), ("read_answered_ms", L), ("message_ttl_s", L),
                ("namespace_message_ttl_s", L))
# What crosses to Python per entry: numbers only (see audit_rows.py); names as xxhash64 codes.
ENTRY_COLUMNS = ("cluster_key", "ledger_id", "entry_id", "producer_key", "sequence_id", "publish_time_ms",
                 "origin_key", "source_position_ledger", "source_position_entry", "marker_type")
FAILOVER = struct(
    ("run_id", S), ("topic", S), ("subscription", S), ("source_cluster", S), ("target_cluster", S),
    ("replicated", B), ("source_mdp", S), ("target_mdp", S), ("expected_target_mdp", S), ("exact_target_mdp", S),
    ("window_from", S), ("window_to", S), ("compared", L), ("only_on_source", L), ("only_on_target", L),
    ("redelivered", L), ("skipped", L), ("lost", L), ("redelivered_ranges", S), ("skipped_ranges", S),
    ("to_acknowledge", S), ("to_acknowledge_count", L), ("complete", B), ("pairing_ambiguous", B), ("ambiguous", L),
    ("redelivery_lag", L), ("redelivery_beyond_tolerance", L), ("unsettled", L), ("after_source_window", L),
    ("target_read_at_ms", L), ("source_read_before_ms", L), ("source_read_after_ms", L))
SNAPSHOTS = struct(("cluster", S), ("topic", S), ("requests", L), ("responses", L), ("snapshots", L),
                    ("updates", L), ("unanswered_requests", L), ("timed_out", L), ("newest_snapshot_age_s", L),
                    ("replicated_subscriptions", I))
# What could not be judged (docs/pulsar/contracts.md): the report lists these rows beside the collectors' gaps.
COVERAGE = struct(("run_id", S), ("cluster", S), ("topic", S), ("subscription", S), ("target_cluster", S),
                   ("what", S), ("entry_count", L), ("detail", S))
# Every output row in one wide row tagged with its kind (column names shared by outputs have one type).
_OUT = tagged("kind", (FAILOVER, SNAPSHOTS, VIOLATIONS, COVERAGE))


def empty_tables(spark: SparkSession) -> dict[str, DataFrame]:
    return {name: spark.createDataFrame([], schema) for name, schema in INPUTS.items()}


def _state(t: dict[str, DataFrame]) -> DataFrame:
    topics = t["pulsar_topics"].select(F.lit(arrow.TOPIC).alias("kind"), "cluster", "topic", "dump_from_ledger",
                                       "dump_from_entry", "dump_to_ledger", "dump_to_entry", "dump_complete",
                                       "message_ttl_s", "namespace_message_ttl_s")
    gaps = (t["pulsar_entry_gaps"].groupBy("cluster", "topic").agg(F.count(F.lit(1)).alias("gap_count"))
            .withColumn("kind", F.lit(arrow.GAPS)))
    cursors = t["pulsar_cursors"].select(
        F.lit(arrow.CURSOR).alias("kind"), "cluster", "topic", F.col("cursor").alias("name"),
        F.col("kind").alias("cursor_kind"), "remote_cluster", "replicated", "mark_delete_ledger", "mark_delete_entry",
        "read_ledger", "read_entry", "individually_deleted", F.coalesce("read", F.lit(0)).alias("read"),
        "read_requested_ms", "read_answered_ms")
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
    parts = [topics, gaps, cursors, replication, subs, extra]
    return union([conform(p, STATE) for p in parts]).withColumn("cluster_key", F.xxhash64("cluster"))


class Outputs(CachedTuple):
    """(failover, snapshots, violations, coverage) selected from one persisted DataFrame; `unpersist()` releases
    it."""


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


def reported_versions(tables: dict[str, DataFrame]) -> dict[str, str]:
    """cluster -> the version its admin API reported (pulsar_brokers: a handful of rows). Should a cluster carry
    two (two imports), the smallest is kept: the order of the files does not change the result."""
    if "pulsar_brokers" not in tables:
        return {}
    rows = (tables["pulsar_brokers"].where(F.col("cluster").isNotNull() & F.col("broker_version").isNotNull())
            .groupBy("cluster").agg(F.min("broker_version").alias("v")).collect())
    return {r["cluster"]: r["v"] for r in rows}


def audit(tables: dict[str, DataFrame], *, run_id: str = "", as_of_ms: int | None = None,
          thresholds: Thresholds = Thresholds(), broker_versions: dict[str, str] | None = None,
          snapshot_cache_size: int = DEFAULT_SIZE) -> Outputs:
    """(failover_df, snapshots_df, violations_df). `tables` maps INPUTS names to DataFrames (missing = empty); a
    threshold left None is not checked. The message TTL a cluster's broker reported for a topic wins over the estate's
    (domain/pulsar/ttl.py). Each source cluster's replicated-subscription snapshot cache rule (docs/formats/pulsar.md
    §2.6) follows its broker version: the estate's declared one (`broker_versions`, cluster -> version) over the one its
    admin API reported (`pulsar_brokers`); a cluster with neither gets the current rule and a coverage note."""
    versions = {**reported_versions(tables), **dict(broker_versions or {})}
    settings = Settings(run_id, as_of_ms, thresholds, broker_versions=versions,
                        snapshot_cache_size=snapshot_cache_size)
    schema = to_arrow_schema(_OUT)

    def per_topic(entries, state):
        return arrow.audit_group(entries, state, settings, schema)

    entries, state = audit_inputs(tables)
    out = (entries.groupBy("topic_key").cogroup(state.groupBy("topic_key"))
           .applyInArrow(per_topic, _OUT)).persist()

    def part(kind: str, schema_: StructType) -> DataFrame:
        return out.where(F.col("kind") == kind).select(*schema_.fieldNames())

    return Outputs((part(arrow.FAILOVER, FAILOVER), part(arrow.SNAPSHOTS, SNAPSHOTS),
                    part(arrow.VIOLATION, VIOLATIONS), part(arrow.COVERAGE, COVERAGE)), cached=out)


def thresholds_of(th) -> Thresholds:
    """The domain's Thresholds from the estate's PulsarThresholds (audit/systems/pulsar/config.py)."""
    tolerance, ttl = th.pulsar_redelivery_tolerance, th.pulsar_message_ttl
    return Thresholds(
        th.pulsar_replicator_backlog_max, th.pulsar_snapshot_max_age_s,
        redelivery_tolerance=tuple((ns, Tolerance(t.messages, t.age_s)) for ns, t in
                                   ((DEFAULT, tolerance.default), *sorted(tolerance.namespaces.items()))),
        message_ttl_s=((DEFAULT, ttl.default), *sorted(ttl.namespaces.items())))


def run(spark: SparkSession, tables_dir: str, root: str, request: AuditRequest,
        broker_versions: dict[str, str] | None = None, snapshot_cache_size: int = DEFAULT_SIZE) -> dict:
    """Writes metrics/pulsar_failover, metrics/pulsar_snapshots, metrics/pulsar_coverage and Pulsar's folder of
    findings/violations; returns {pulsar_failover, pulsar_snapshots, pulsar_coverage, pulsar_violations: rows,
    pulsar_violations_by_check}. Every input table
    that exists is read with the columns the audit uses (given, so no schema-inference job per table; a column the
    files lack reads as null); the rest count as empty."""
    tables = {name: read(spark, os.path.join(tables_dir, name), schema) for name, schema in INPUTS.items()
              if has_table(os.path.join(tables_dir, name))}
    th = request.thresholds   # the estate's (audit/systems/pulsar/config.py holds the defaults)
    if broker_versions is None:   # what the estate declares about its clusters' brokers
        broker_versions = {c.name: c.broker_version for c in request.clusters
                           if getattr(c, "broker_version", None)}
    frames = audit(tables or empty_tables(spark), run_id=request.run_id, as_of_ms=request.as_of_ms,
                   thresholds=thresholds_of(th),
                   broker_versions=broker_versions, snapshot_cache_size=snapshot_cache_size)
    failover, snapshots, violations, coverage = frames
    try:
        counted = frames.cached.groupBy("kind", "check").count().collect()   # one pass over the persisted rows
        n = {kind: sum(r["count"] for r in counted if r["kind"] == kind)
             for kind in (arrow.FAILOVER, arrow.SNAPSHOTS, arrow.COVERAGE)}
        by_check = {r["check"]: r["count"] for r in counted if r["kind"] == arrow.VIOLATION}
        write(failover, os.path.join(root, "metrics", "pulsar_failover"))
        write(snapshots, os.path.join(root, "metrics", "pulsar_snapshots"))
        write(violations, violations_path(root, SYSTEM))
        write(coverage, os.path.join(root, "metrics", "pulsar_coverage"))
    finally:
        frames.unpersist()
    return {"pulsar_failover": n[arrow.FAILOVER], "pulsar_snapshots": n[arrow.SNAPSHOTS],
            "pulsar_coverage": n[arrow.COVERAGE], "pulsar_violations": sum(by_check.values()),
            "pulsar_violations_by_check": by_check}
