"""BookKeeper Spark transforms: DataFrame in, DataFrame out, no paths (spark_jobs/* do the I/O).

normalize_bookkeeper  raw files -> bk_ledgers, bk_entry_availability, bk_bookies, quarantine
ledger_state          one row per ledger: metadata + the array of every bookie's answer (never per entry)
replica_audit         ReplicasCheck and the other per-ledger checks -> metrics, missing fragments, violations

bk_bookies.state: "available" (listed under <ledgers>/available), "readonly" (under available/readonly),
"registered" (has a cookie but is in neither list). In the checks, an ensemble bookie is *unknown* when
it is not in bk_bookies at all (never registered), and *dead* when its state is "registered". A cluster
without any bk_bookies row is not judged for either (its lists were not collected)."""
from __future__ import annotations

from typing import Iterator
from urllib.parse import unquote, urlparse

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (ArrayType, BooleanType, DataType, IntegerType, LongType, MapType, StringType,
                               StructField, StructType)
from pyspark.sql.window import Window

from audit.transforms.bookkeeper import decode as bk_decode
from audit.transforms.bookkeeper.arrow import iter_ledgers
from audit.transforms.bookkeeper.audit_rows import AuditSettings, audit_parsed, audit_row

S, L, I, B = StringType(), LongType(), IntegerType(), BooleanType()


def _struct(*fields: tuple[str, DataType]) -> StructType:
    return StructType([StructField(name, t, True) for name, t in fields])


GROUP = _struct(("first_sequence_start", L), ("last_sequence_start", L), ("sequence_size", I),
                ("sequence_period", I))
SEGMENT = _struct(("first_entry_id", L), ("ensemble", ArrayType(S)))
LEDGERS = _struct(
    ("cluster", S), ("ledger_id", L), ("source_key", S), ("format_version", I), ("state", S), ("ensemble_size", I),
    ("write_quorum", I), ("ack_quorum", I), ("last_entry_id", L), ("length", L), ("ctime", L), ("ctoken", L),
    ("digest_type", S), ("has_password", B), ("owner_topic", S), ("custom_metadata", MapType(S, S)),
    ("segments", ArrayType(SEGMENT)))
AVAILABILITY = _struct(("cluster", S), ("bookie", S), ("ledger_id", L), ("status", S), ("error", S),
                       ("groups", ArrayType(GROUP)), ("source_key", S))
BOOKIES = _struct(("cluster", S), ("bookie", S), ("state", S), ("rack", S))
QUARANTINE = _struct(("system", S), ("cluster", S), ("source_key", S), ("payload_kind", S), ("reason", S))
METRICS = _struct(("cluster", S), ("ledger_id", L), ("state", S), ("audited", B), ("least_replicas", I),
                  ("entries", L), ("entries_lost", L), ("entries_below_ack_quorum", L),
                  ("entries_below_write_quorum", L), ("unavailable_bookies", I), ("write_quorum", I),
                  ("ack_quorum", I))
FRAGMENTS = _struct(("cluster", S), ("ledger_id", L), ("segment_first_entry_id", L), ("segment_last_entry_id", L),
                    ("ensemble", ArrayType(S)), ("bookie", S), ("bookie_index", I), ("missing_count", L),
                    ("missing_ranges", ArrayType(_struct(("first", L), ("last", L)))))
VIOLATIONS = _struct(("run_id", S), ("system", S), ("cluster", S), ("check", S), ("severity", S), ("subject", S),
                     ("entry_count", L), ("message", S), ("evidence", S))
ANSWER = _struct(("bookie", S), ("status", S), ("error", S), ("groups", ArrayType(GROUP)))
# Columns replica_audit reads from ledger_state rows.
STATE_COLUMNS = ["cluster", "ledger_id", "format_version", "state", "ensemble_size", "write_quorum", "ack_quorum",
                 "last_entry_id", "length", "ctime", "ctoken", "digest_type", "has_password", "segments", "answers"]
# Every decoded row goes into one wide row tagged with its table, so the files are read and decoded once.
_DECODED = StructType([StructField("table", S, False)] + list(
    {f.name: f for t in (LEDGERS, AVAILABILITY, BOOKIES, QUARANTINE) for f in t.fields}.values()))
_AUDITED = StructType(METRICS.fields + [StructField("fragments", ArrayType(FRAGMENTS)),
                                        StructField("violations", ArrayType(VIOLATIONS))])


class Cached(dict):
    """The tables, plus `unpersist()` for the shared cached DataFrame they are selected from."""

    def __init__(self, tables: dict, cached: DataFrame):
        super().__init__(tables)
        self.cached = cached

    def unpersist(self) -> None:
        self.cached.unpersist()


class CachedTuple(tuple):
    def __new__(cls, frames: tuple, cached: DataFrame):
        obj = super().__new__(cls, frames)
        obj.cached = cached
        return obj

    def unpersist(self) -> None:
        self.cached.unpersist()


def _relative_key(path: str, root: str) -> str:
    local = unquote(urlparse(path).path) if path.startswith("file:") else path
    root = root.rstrip("/") + "/"
    return local[len(root):] if local.startswith(root) else local


def _empty_files(root: str, folders: list[str]) -> list[str]:
    import os

    out = []
    for folder, _, names in (w for top in folders for w in os.walk(top)):
        for name in names:
            path = os.path.join(folder, name)
            if os.path.getsize(path) == 0:
                key = os.path.relpath(path, root).replace(os.sep, "/")
                out.append(key if key.startswith("raw/") else "raw/" + key)
    return sorted(out)


def normalize_bookkeeper(spark: SparkSession, raw_dir: str) -> dict[str, DataFrame]:
    """Decode every file below `raw_dir` (the attempt's raw/ folder, or a folder holding raw/)."""
    import os

    root = os.path.abspath(raw_dir)
    # Only BookKeeper's evidence: other systems' raw files (Pulsar dumps can be large) are not read twice.
    folders = [f for f in (os.path.join(root, "bookkeeper"), os.path.join(root, "raw", "bookkeeper"))
               if os.path.isdir(f)]
    reader = spark.read.format("binaryFile").option("recursiveFileLookup", "true")
    files = (reader.load(folders) if folders else reader.schema("path string, content binary").load(root)
             .limit(0)).select("path", "content")
    arrow_schema = to_arrow_schema(_DECODED)

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows = []
            for path, content in zip(batch.column("path").to_pylist(), batch.column("content").to_pylist()):
                key = _relative_key(path, root)
                if not key.startswith("raw/"):
                    key = "raw/" + key
                for table, row in bk_decode.decode_file(key, content):
                    rows.append({"table": table, **row})
            yield pa.RecordBatch.from_pylist(rows, schema=arrow_schema)

    decoded = files.mapInArrow(decode, _DECODED)
    empty = _empty_files(root, folders)
    if empty:
        # Spark's file sources skip zero-length files; decode those here so none goes unreported.
        rows = [{"table": t, **r} for key in empty for t, r in bk_decode.decode_file(key, b"")]
        decoded = decoded.unionByName(spark.createDataFrame(rows, _DECODED))
    decoded = decoded.persist()

    def table(name: str, schema: StructType) -> DataFrame:
        return decoded.where(F.col("table") == name).select(*schema.fieldNames())

    ledgers = table(bk_decode.LEDGERS, LEDGERS)
    # The same ledger from a znode and from an admin-HTTP export: keep the znode.
    rank = F.when(F.col("source_key").contains("/ledger-metadata-http/"), 1).otherwise(0)
    w = Window.partitionBy("cluster", "ledger_id").orderBy(rank, F.col("source_key"))
    ledgers = ledgers.withColumn("_n", F.row_number().over(w)).where("_n = 1").drop("_n")
    racks = decoded.where(F.col("table") == bk_decode.RACKS).select("cluster", "bookie", "rack")
    bookies = (decoded.where(F.col("table") == bk_decode.BOOKIES).select("cluster", "bookie", "state").alias("b")
               .join(racks.alias("r"), ["cluster", "bookie"], "left")
               .select("cluster", "bookie", "state", "rack"))
    return Cached({"bk_ledgers": ledgers, "bk_entry_availability": table(bk_decode.AVAILABILITY, AVAILABILITY),
                   "bk_bookies": bookies, "quarantine": table(bk_decode.QUARANTINE, QUARANTINE)}, cached=decoded)


def ledger_state(ledgers_df: DataFrame, availability_df: DataFrame) -> DataFrame:
    """One row per ledger: its metadata columns plus `answers` = array of {bookie, status, error, groups}.
    Answers for ledgers absent from the metadata are not kept here."""
    answers = (availability_df
               .groupBy("cluster", "ledger_id")
               .agg(F.collect_list(F.struct("bookie", "status", "error", "groups")).alias("answers")))
    return (ledgers_df.join(answers, ["cluster", "ledger_id"], "left")
            .withColumn("answers", F.coalesce("answers", F.array().cast(ArrayType(ANSWER)))))


def _bookie_map(bookies_df: DataFrame | None) -> dict:
    if bookies_df is None:
        return {}
    out: dict = {}
    for r in bookies_df.select("cluster", "bookie", "state", "rack").collect():  # a few hundred rows at most
        out.setdefault(r["cluster"], {})[r["bookie"]] = (r["state"], r["rack"])
    return out


def replica_audit(state_df: DataFrame, bookies_df: DataFrame | None = None, *, run_id: str = "",
                  as_of_ms: int | None = None, open_ledger_max_age_ms: int | None = None,
                  min_racks_per_write_quorum: int = 2, max_ranges: int = 1000,
                  engine: str = "mapInArrow") -> tuple[DataFrame, DataFrame, DataFrame]:
    """(metrics_df, fragments_df, violations_df) from ledger_state rows.

    The per-ledger work runs once into a persisted DataFrame that the three outputs select from;
    `engine` is "mapInArrow" (default, measured faster: see bench/) or "arrow_udf"."""
    settings = AuditSettings(run_id, _bookie_map(bookies_df), as_of_ms, open_ledger_max_age_ms,
                             min_racks_per_write_quorum, max_ranges)
    out_schema = _AUDITED
    state = state_df.select(*STATE_COLUMNS)
    if engine == "mapInArrow":
        arrow_schema = to_arrow_schema(out_schema)

        def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                rows = [audit_parsed(c, md, answers, settings) for c, md, answers in iter_ledgers(batch)]
                yield pa.RecordBatch.from_pylist(rows, schema=arrow_schema)

        audited = state.mapInArrow(run, out_schema)
    elif engine == "arrow_udf":
        names = out_schema.fieldNames()

        @F.udf(returnType=out_schema, useArrow=True)
        def audit_udf(row):
            out = audit_row(row.asDict(recursive=True), settings)
            return tuple(out[n] for n in names)

        audited = state.select(audit_udf(F.struct(*STATE_COLUMNS)).alias("a")).select("a.*")
    else:
        raise ValueError(f"engine: expected 'mapInArrow' or 'arrow_udf', got {engine!r}")
    audited = audited.persist()
    metrics = audited.select(*METRICS.fieldNames())
    fragments = audited.select(F.explode("fragments").alias("f")).select("f.*")
    violations = audited.select(F.explode("violations").alias("v")).select("v.*")
    return CachedTuple((metrics, fragments, violations), cached=audited)
