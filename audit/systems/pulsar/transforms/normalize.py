"""Pulsar normalize on Spark: raw/pulsar/** -> the pulsar_* tables of docs/pulsar/contracts.md + quarantine rows.

Every raw file (dump chunks included, 1e5+ lines per topic) is decoded in the executors by
audit/systems/pulsar/transforms/decode.py's decode_file inside mapInArrow; the driver only lists files. Partial rows are
joined here: topics = stats-internal + dump.json (+ the collected message TTL), subscriptions = stats (flags and
consumption evidence) + replicatedSubscriptionStatus, cursors = every read of them (the collection's stats-internal.json
and the rereads) + the instant of that read (its `.read.json`), and a cursor is `replicated` by its property or by its
subscription's `isReplicated` in stats.

What cannot be judged is said, never judged (each becomes a quarantine row, which the report lists as a coverage
gap naming cluster and topic):
- dump chunks without their window (`dump.json`): which positions were asked for, and whether the dump is
  complete, is unknown;
- entries an old broker served without the message metadata headers (docs/formats/pulsar.md §2.8; decode.py
  `metadata_headers`) on a topic that takes part in replication: a marker would count as a message and a replicated copy
  as local, so those positions go to pulsar_entry_gaps instead of pulsar_entries (the window is then incomplete)."""
from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, MapType

from audit.transforms.common import B, D, I, L, QUARANTINE, S, Cached, decode_raw, struct, tagged, write_normalized
from audit.systems.pulsar.transforms import decode as rows

ACK_RANGE = struct(("from_ledger", L), ("from_entry", L), ("to_ledger", L), ("to_entry", L))
CLUSTER_POSITION = struct(("cluster", S), ("ledger_id", L), ("entry_id", L))
TOPICS = struct(("cluster", S), ("topic", S), ("state", S), ("last_confirmed_ledger", L),
                 ("last_confirmed_entry", L), ("number_of_entries", L), ("dump_from_ledger", L),
                 ("dump_from_entry", L), ("dump_to_ledger", L), ("dump_to_entry", L), ("dump_complete", B),
                 # message-ttl.json (the applied TTL) / namespace-message-ttl.json (a broker without that GET)
                 ("message_ttl_s", L), ("namespace_message_ttl_s", L), ("source_key", S))
LEDGERS = struct(("cluster", S), ("topic", S), ("ledger_id", L), ("entries", L), ("size", L), ("is_open", B))
CURSORS = struct(("cluster", S), ("topic", S), ("cursor", S), ("kind", S), ("remote_cluster", S),
                  ("replicated", B), ("mark_delete_ledger", L), ("mark_delete_entry", L), ("read_ledger", L),
                  ("read_entry", L), ("individually_deleted", ArrayType(ACK_RANGE)), ("state", S),
                  # which read (0: the collection's, n: reread pass n) and when (null: not recorded)
                  ("read", I), ("read_requested_ms", L), ("read_answered_ms", L), ("source_key", S))
ENTRIES = struct(("cluster", S), ("topic", S), ("ledger_id", L), ("entry_id", L), ("producer_name", S),
                  ("sequence_id", L), ("publish_time_ms", L), ("replicated_from", S), ("replicate_to", ArrayType(S)),
                  ("source_position_ledger", L), ("source_position_entry", L), ("marker_type", I),
                  ("snapshot_id", S), ("marker_source_cluster", S), ("marker_local_ledger", L),
                  ("marker_local_entry", L), ("marker_subscription", S),
                  ("marker_clusters", ArrayType(CLUSTER_POSITION)), ("source_key", S))
GAPS = struct(("cluster", S), ("topic", S), ("ledger_id", L), ("entry_id", L), ("status", I), ("error", S),
               ("source_key", S))
REPLICATION = struct(("cluster", S), ("topic", S), ("remote_cluster", S), ("connected", B),
                      ("replication_backlog", L), ("replication_delay_s", L), ("msg_rate_out", D), ("source_key", S))
SUBSCRIPTIONS = struct(("cluster", S), ("topic", S), ("subscription", S), ("is_replicated", B), ("is_durable", B),
                        ("replicated_status", MapType(S, B)), ("consumers", I), ("msg_out_counter", L),
                        ("last_consumed_ms", L), ("consumed_here", B), ("source_key", S))
BROKERS = struct(("cluster", S), ("broker_version", S), ("source_key", S))
SCHEMAS = {rows.TOPICS: TOPICS, rows.LEDGERS: LEDGERS, rows.CURSORS: CURSORS, rows.ENTRIES: ENTRIES,
           rows.GAPS: GAPS, rows.REPLICATION: REPLICATION, rows.SUBSCRIPTIONS: SUBSCRIPTIONS,
           rows.BROKERS: BROKERS, rows.QUARANTINE: QUARANTINE}
# One wide row tagged with its table, so every file is read and decoded exactly once.
_DECODED = tagged("table", [*SCHEMAS.values(), struct((rows.METADATA_HEADERS, B))])
OLD_BROKER = ("per-entry admin response without X-Pulsar-producer-name, -sequence-id, -replicated-from, "
              "-replicated-to or -marker-type (a broker before apache/pulsar#11443, Pulsar 2.9)")


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


def _quarantine(df: DataFrame, kind: str, reason) -> DataFrame:
    return df.select(F.lit(rows.SYSTEM).alias("system"), "cluster", "source_key", F.lit(kind).alias("payload_kind"),
                     reason.alias("reason"))


def _replicating(replication: DataFrame, cursors: DataFrame) -> DataFrame:
    """(cluster, topic) that take part in replication as this cluster's evidence or another's shows it: a
    `replication` entry or a `pulsar.repl.*` cursor either way, or a replicated subscription."""
    keys = ["cluster", "topic"]
    repl = cursors.where(F.col("kind") == "replicator").select(*keys, "remote_cluster")
    out = replication.select(*keys, "remote_cluster").unionByName(repl)
    return (out.select(*keys)
            .unionByName(out.where(F.col("remote_cluster").isNotNull())
                         .select(F.col("remote_cluster").alias("cluster"), "topic"))
            .unionByName(cursors.where(F.col("replicated")).select(*keys))
            .distinct())


def _old_broker_entries(entries: DataFrame, replicating: DataFrame) -> tuple[DataFrame, DataFrame, DataFrame]:
    """(entries to audit, gap rows, quarantine rows): entries without the metadata headers on a replicating
    topic become gaps, and each such (cluster, topic) one quarantine row saying why it was not judged."""
    keys = ["cluster", "topic"]
    judged = entries.join(replicating.withColumn("_replicating", F.lit(True)), keys, "left")
    bare = ~F.coalesce(F.col(rows.METADATA_HEADERS), F.lit(True)) & F.col("_replicating").isNotNull()
    gaps = judged.where(bare).select(*keys, "ledger_id", "entry_id", F.lit(200).alias("status"),
                                     F.lit(OLD_BROKER).alias("error"), "source_key")
    per_topic = gaps.groupBy(*keys).agg(F.count(F.lit(1)).alias("n"), F.min("source_key").alias("source_key"))
    quarantine = _quarantine(per_topic, rows.DUMP_CHUNK, F.concat(
        F.col("topic"), F.lit(" on cluster "), F.col("cluster"), F.lit(": "), F.col("n").cast("string"),
        F.lit(" entries not judged: " + OLD_BROKER + "; a marker cannot be told from a message nor a "
              "replicated copy from a local message")))
    return judged.where(~bare).select(*entries.columns), gaps, quarantine


def _windowless(chunks: DataFrame, windows: DataFrame) -> DataFrame:
    """One quarantine row per (cluster, topic) with dump chunks but no dump.json."""
    keys = ["cluster", "topic"]
    lone = (chunks.groupBy(*keys).agg(F.min("source_key").alias("source_key"))
            .join(windows.select(*keys).distinct(), keys, "left_anti"))
    return _quarantine(lone, rows.DUMP_JSON, F.concat(
        F.col("topic"), F.lit(" on cluster "), F.col("cluster"),
        F.lit(": dump chunks without their window (dump.json): which positions were asked for and whether the "
              "dump is complete is unknown; import the topic's dump.json (replaudit import --kind dump-window)")))


def normalize(spark: SparkSession, raw_dir: str) -> Cached:
    decoded = decode_raw(spark, raw_dir, rows.SYSTEM, rows.decode_file, _DECODED).persist()

    def part(name: str, columns: list[str]) -> DataFrame:
        return decoded.where(F.col("table") == name).select(*columns)

    keys = ["cluster", "topic"]
    window_cols = ["dump_from_ledger", "dump_from_entry", "dump_to_ledger", "dump_to_entry", "dump_complete"]
    topic_cols = ["state", "last_confirmed_ledger", "last_confirmed_entry", "number_of_entries"]
    windows = part(rows.DUMP_WINDOW, keys + window_cols + ["source_key"])
    ttl_cols = ["message_ttl_s", "namespace_message_ttl_s"]
    ttls = part(rows.TTL, keys + ttl_cols).groupBy(*keys).agg(*(F.max(c).alias(c) for c in ttl_cols))
    topics = (part(rows.TOPICS, keys + topic_cols + ["source_key"]).withColumnRenamed("source_key", "_k1")
              .join(windows.withColumnRenamed("source_key", "_k2"), keys, "full")
              .withColumn("source_key", F.coalesce("_k1", "_k2"))  # stats-internal's key when there is one
              .join(ttls, keys, "left"))   # a TTL alone makes no topic: nothing to judge by it
    sub_keys = keys + ["subscription"]
    usage = ["consumers", "msg_out_counter", "last_consumed_ms", "consumed_here"]  # null: no stats entry
    subscriptions = (part(rows.SUBSCRIPTIONS, sub_keys + ["is_replicated", "is_durable"] + usage + ["source_key"])
                     .withColumnRenamed("source_key", "_k1")
                     .join(part(rows.SUB_STATUS, sub_keys + ["replicated_status", "source_key"])
                           .withColumnRenamed("source_key", "_k2"), sub_keys, "full")
                     .withColumn("source_key", F.coalesce("_k1", "_k2")))
    flags = part(rows.SUBSCRIPTIONS, keys + ["subscription", "is_replicated"]).withColumnRenamed(
        "subscription", "cursor")
    instant_cols = ["read_requested_ms", "read_answered_ms"]
    instants = (part(rows.READ_INSTANT, keys + ["read"] + instant_cols).groupBy(*keys, "read")
                .agg(*(F.min(c).alias(c) for c in instant_cols)))   # one sidecar per body; min() if imported twice
    cursors = (part(rows.CURSORS, [c for c in CURSORS.fieldNames() if c not in instant_cols])
               .join(flags, keys + ["cursor"], "left").join(instants, keys + ["read"], "left")
               .withColumn("replicated", F.col("replicated") | F.coalesce(F.col("is_replicated"), F.lit(False)))
               .select(*CURSORS.fieldNames()))
    tables = {name: part(name, schema.fieldNames()) for name, schema in SCHEMAS.items()}
    entries, old_gaps, old = _old_broker_entries(part(rows.ENTRIES, ENTRIES.fieldNames() + [rows.METADATA_HEADERS]),
                                                 _replicating(tables[rows.REPLICATION], cursors))
    entries, foreign = _own_positions(entries, tables[rows.LEDGERS])
    gaps = tables[rows.GAPS].unionByName(old_gaps)
    chunks = entries.select(*keys, "source_key").unionByName(gaps.select(*keys, "source_key"))
    quarantine = (tables[rows.QUARANTINE].unionByName(foreign).unionByName(old)
                  .unionByName(_windowless(chunks, windows)))
    tables.update({rows.TOPICS: topics, rows.SUBSCRIPTIONS: subscriptions, rows.CURSORS: cursors,
                   rows.ENTRIES: entries, rows.GAPS: gaps,
                   rows.QUARANTINE: quarantine})
    return Cached({name: df.select(*SCHEMAS[name].fieldNames()) for name, df in tables.items()}, cached=decoded)


def run(spark: SparkSession, raw_dir: str, tables_dir: str) -> dict:
    """Write tables_dir/<table>/ for every Pulsar table (empty ones too) and Pulsar's folder of tables/quarantine;
    returns {table: rows}."""
    return write_normalized(normalize(spark, raw_dir), tables_dir, rows.SYSTEM)
