"""BookKeeper normalize: raw/bookkeeper/** -> bk_ledgers, bk_entry_availability, bk_bookies, bk_bookie_evidence and
BookKeeper's quarantine rows (docs/bookkeeper/contracts.md "Normalized tables"). DataFrames in the transform; `run`
writes them.

bk_bookies.state: "available" (listed under <ledgers>/available), "readonly" (under available/readonly),
"registered" (has a cookie but is in neither list).

bk_ledgers.ctime is the *effective* creation time, as LedgerMetadataSerDe.parseVersion2/3Config gives it: a stored
ctime field wins whatever its value (-1 or any value <= 0 is null: unknown, never 1970, never the znode's ctime);
without the field, for format versions 2 and 3, the znode's ctime (AbstractZkLedgerManager's stat.getCtime());
else null. ctime_source says which ("metadata" | "znode"; null when ctime is null).

bk_ledgers.znode_mtime is the znode's last write (creation, ensemble change, close), null without its Stat: how
long the ledger has been settled when a bookie's location index was read (audit_rows.py)."""
from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, MapType, StructType
from pyspark.sql.window import Window

from audit.systems.bookkeeper.transforms.decode import (AVAILABILITY as AVAILABILITY_ROWS, BOOKIES as BOOKIES_ROWS,
                                                        DELETED, EVIDENCE as EVIDENCE_ROWS, LEDGERS as LEDGERS_ROWS,
                                                        QUARANTINE as QUARANTINE_ROWS, RACKS, SYSTEM, ZNODE_STATS,
                                                        decode_file)
from audit.transforms.common import B, I, L, QUARANTINE, S, Cached, decode_raw, struct, tagged, write_normalized

GROUP = struct(("first_sequence_start", L), ("last_sequence_start", L), ("sequence_size", I),
                ("sequence_period", I))
SEGMENT = struct(("first_entry_id", L), ("ensemble", ArrayType(S)))
LEDGERS = struct(
    ("cluster", S), ("ledger_id", L), ("source_key", S), ("format_version", I), ("state", S), ("ensemble_size", I),
    ("write_quorum", I), ("ack_quorum", I), ("last_entry_id", L), ("length", L), ("ctime", L), ("ctoken", L),
    ("digest_type", S), ("has_password", B), ("owner_topic", S), ("custom_metadata", MapType(S, S)),
    ("segments", ArrayType(SEGMENT)), ("stored_ctime", L), ("znode_ctime", L), ("ctime_source", S),
    ("znode_mtime", L))
AVAILABILITY = struct(("cluster", S), ("bookie", S), ("ledger_id", L), ("status", S), ("error", S),
                       ("groups", ArrayType(GROUP)), ("source_key", S), ("evidence", S), ("probe_share", I),
                       ("probed", L), ("absent", ArrayType(L)))
BOOKIES = struct(("cluster", S), ("bookie", S), ("state", S), ("rack", S))
BOOKIE_EVIDENCE = struct(("cluster", S), ("bookie", S), ("evidence", S), ("complete", B), ("share_percent", I),
                          ("reason", S), ("source_key", S), ("ledger_ids", ArrayType(L)), ("read_at_ms", L))
_STATS = struct(("cluster", S), ("ledger_id", L), ("znode_ctime", L), ("znode_mtime", L), ("source_key", S))
# Every decoded row goes into one wide row tagged with its table, so the files are read and decoded once.
_DELETED = struct(("cluster", S), ("ledger_id", L), ("source_key", S))
_DECODED = tagged("table", (LEDGERS, AVAILABILITY, BOOKIES, BOOKIE_EVIDENCE, _STATS, _DELETED, QUARANTINE))
ZNODE_FORMATS_WITH_STAT_CTIME = (2, 3)    # v1 metadata never takes the znode's ctime


def normalize(spark: SparkSession, raw_dir: str) -> Cached:
    """Decode every file below `raw_dir` (the attempt's raw/ folder, or a folder holding raw/)."""
    decoded = decode_raw(spark, raw_dir, SYSTEM, decode_file, _DECODED).persist()

    def table(name: str, schema: StructType) -> DataFrame:
        return decoded.where(F.col("table") == name).select(*schema.fieldNames())

    ledgers = table(LEDGERS_ROWS, LEDGERS)
    # The same ledger from a znode and from an admin-HTTP export: keep the znode.
    rank = F.when(F.col("source_key").contains("/ledger-metadata-http/"), 1).otherwise(0)
    w = Window.partitionBy("cluster", "ledger_id").orderBy(rank, F.col("source_key"))
    ledgers = effective_ctime(ledgers.withColumn("_n", F.row_number().over(w)).where("_n = 1").drop("_n"),
                              decoded.where(F.col("table") == ZNODE_STATS).select("cluster", "ledger_id",
                                                                                  "znode_ctime", "znode_mtime"))
    # A ledger deleted while it was being collected (retention) is not judged: its bookies' empty answers came
    # after the deletion. Its metadata stays in raw/ as evidence.
    deleted = decoded.where(F.col("table") == DELETED).select("cluster", "ledger_id").distinct()
    ledgers = ledgers.join(deleted, ["cluster", "ledger_id"], "left_anti")
    racks = decoded.where(F.col("table") == RACKS).select("cluster", "bookie", "rack")
    bookies = (decoded.where(F.col("table") == BOOKIES_ROWS).select("cluster", "bookie", "state").alias("b")
               .join(racks.alias("r"), ["cluster", "bookie"], "left")
               .select("cluster", "bookie", "state", "rack"))
    return Cached({"bk_ledgers": ledgers, "bk_entry_availability": table(AVAILABILITY_ROWS, AVAILABILITY),
                   "bk_bookies": bookies, "bk_bookie_evidence": table(EVIDENCE_ROWS, BOOKIE_EVIDENCE),
                   "quarantine": table(QUARANTINE_ROWS, QUARANTINE)}, cached=decoded)


def effective_ctime(ledgers: DataFrame, stats: DataFrame) -> DataFrame:
    """bk_ledgers rows (ctime = the stored one) with stored_ctime, znode_ctime, ctime_source and the effective
    ctime. An admin-HTTP row's ctime is the server's effective one already: the znode's Stat is not used for it."""
    stats = stats.groupBy("cluster", "ledger_id").agg(F.max("znode_ctime").alias("_stat"),   # one Stat per znode
                                                      F.max("znode_mtime").alias("_mtime"))
    znode_row = ~F.col("source_key").contains("/ledger-metadata-http/")
    # Field presence decides (data.hasCtime()), not the value: a stored -1 is not replaced by the znode's ctime.
    stored = F.col("stored_ctime").isNotNull()
    stored_known = stored & (F.col("stored_ctime") > 0)
    from_znode = (~stored & znode_row & F.col("format_version").isin(*ZNODE_FORMATS_WITH_STAT_CTIME)
                  & F.col("znode_ctime").isNotNull())
    out = (ledgers.join(stats, ["cluster", "ledger_id"], "left")
           .withColumn("znode_ctime", F.when(znode_row, F.col("_stat")))
           .withColumn("znode_mtime", F.when(znode_row, F.col("_mtime")))
           .withColumn("ctime", F.when(stored_known, F.col("stored_ctime"))
                       .when(from_znode, F.col("znode_ctime")))
           .withColumn("ctime_source", F.when(stored_known, F.lit("metadata"))
                       .when(from_znode, F.lit("znode"))))
    return out.select(*LEDGERS.fieldNames())


def run(spark: SparkSession, raw_dir: str, tables_dir: str) -> dict:
    """Write tables_dir/<table>/ for each table and BookKeeper's folder of tables/quarantine; {table: rows}."""
    return write_normalized(normalize(spark, raw_dir), tables_dir, SYSTEM)
