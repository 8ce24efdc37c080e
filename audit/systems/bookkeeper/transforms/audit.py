"""BookKeeper audit: bk_ledgers + bk_entry_availability (+ bk_bookies, bk_bookie_evidence) ->
metrics/bk_ledger_replicas, findings/bk_missing_fragments, findings/bk_outside_ensemble (information: entries held
outside the ensemble the metadata assigns) and BookKeeper's folder of findings/violations.

ledger_state  one row per ledger: metadata + the array of every bookie's answer (never per entry)
audit         ReplicasCheck and the other per-ledger checks (docs/formats/bookkeeper.md §1.6-1.7)
run           the job: reads the tables, writes the outputs

In the checks, an ensemble bookie is *unknown* when it is not in bk_bookies at all (never registered), and *dead*
when its state is "registered". A cluster without any bk_bookies row is not judged for either (its lists were not
collected). A bookie whose location-index inventory is complete (bk_bookie_evidence) and that has no answer for a
ledger it is an ensemble member of holds nothing of it (NoSuchLedger)."""
from __future__ import annotations

import os
from typing import Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import ArrayType, StructField, StructType

from audit.contracts import AuditRequest
from audit.systems.bookkeeper.domain.evidence import LOCATION_INDEX
from audit.systems.bookkeeper.transforms.arrow import iter_ledgers
from audit.systems.bookkeeper.transforms.audit_rows import (DEFAULT_INDEX_SETTLE_MS, SYSTEM, Settings, audit_parsed,
                                                            audit_row)
from audit.systems.bookkeeper.transforms.normalize import GROUP
from audit.transforms.common import (B, I, L, S, VIOLATIONS, CachedTuple, has_table, read, rows_written, struct,
                                     violations_path, write)

METRICS = struct(("cluster", S), ("ledger_id", L), ("state", S), ("audited", B), ("least_replicas", I),
                  ("entries", L), ("entries_lost", L), ("entries_below_ack_quorum", L),
                  ("entries_below_write_quorum", L), ("unavailable_bookies", I), ("write_quorum", I),
                  ("ack_quorum", I), ("entries_outside_ensemble", L), ("ctime", L))
FRAGMENTS = struct(("cluster", S), ("ledger_id", L), ("segment_first_entry_id", L), ("segment_last_entry_id", L),
                    ("ensemble", ArrayType(S)), ("bookie", S), ("bookie_index", I), ("missing_count", L),
                    ("missing_ranges", ArrayType(struct(("first", L), ("last", L)))))
OUTSIDE = struct(("cluster", S), ("ledger_id", L), ("segment_first_entry_id", L), ("segment_last_entry_id", L),
                 ("ensemble", ArrayType(S)), ("bookie", S), ("entry_count", L),
                 ("ranges", ArrayType(struct(("first", L), ("last", L)))))
ANSWER = struct(("bookie", S), ("status", S), ("error", S), ("groups", ArrayType(GROUP)), ("evidence", S),
                ("probe_share", I), ("probed", L), ("absent", ArrayType(L)))
# Columns the audit reads from ledger_state rows.
STATE_COLUMNS = ["cluster", "ledger_id", "format_version", "state", "ensemble_size", "write_quorum", "ack_quorum",
                 "last_entry_id", "length", "ctime", "ctoken", "digest_type", "has_password", "segments", "answers",
                 "znode_mtime"]
_AUDITED = StructType(METRICS.fields + [StructField("fragments", ArrayType(FRAGMENTS)),
                                        StructField("outside", ArrayType(OUTSIDE)),
                                        StructField("violations", ArrayType(VIOLATIONS))])


def ledger_state(ledgers_df: DataFrame, availability_df: DataFrame) -> DataFrame:
    """One row per ledger: its metadata columns plus `answers` = array of {bookie, status, error, groups, evidence,
    probe_share, probed, absent}. Answers for ledgers absent from the metadata are not kept here."""
    have = set(availability_df.columns)   # tables written before the evidence columns: list answers
    fields = [F.col(f.name) if f.name in have else F.lit(None).cast(f.dataType).alias(f.name) for f in ANSWER.fields]
    answers = (availability_df
               .groupBy("cluster", "ledger_id")
               .agg(F.collect_list(F.struct(*fields)).alias("answers")))
    return (ledgers_df.join(answers, ["cluster", "ledger_id"], "left")
            .withColumn("answers", F.coalesce("answers", F.array().cast(ArrayType(ANSWER)))))


def _bookie_map(bookies_df: DataFrame | None) -> dict:
    if bookies_df is None:
        return {}
    out: dict = {}
    for r in bookies_df.select("cluster", "bookie", "state", "rack").collect():  # a few hundred rows at most
        out.setdefault(r["cluster"], {})[r["bookie"]] = (r["state"], r["rack"])
    return out


def _inventories(evidence_df: DataFrame | None) -> dict:
    """{cluster: {bookie: asked ledger ids or None}} of complete location-index inventories (one row per bookie)."""
    if evidence_df is None:
        return {}
    out: dict = {}
    rows = (evidence_df.where((F.col("evidence") == LOCATION_INDEX) & F.col("complete"))
            .select("cluster", "bookie", "ledger_ids").collect())
    for r in rows:
        asked = None if r["ledger_ids"] is None else frozenset(r["ledger_ids"])
        out.setdefault(r["cluster"], {})[r["bookie"]] = asked
    return out


def _index_reads(evidence_df: DataFrame | None) -> dict:
    """{cluster: {bookie: read_at_ms}} of every location-index inventory (one row per bookie)."""
    if evidence_df is None or "read_at_ms" not in evidence_df.columns:
        return {}
    out: dict = {}
    for r in evidence_df.where(F.col("evidence") == LOCATION_INDEX).select("cluster", "bookie", "read_at_ms").collect():
        out.setdefault(r["cluster"], {})[r["bookie"]] = r["read_at_ms"]
    return out


def audit(state_df: DataFrame, bookies_df: DataFrame | None = None, *, run_id: str = "",
          as_of_ms: int | None = None, open_ledger_max_age_ms: int | None = None,
          min_racks_per_write_quorum: int = 2, max_ranges: int = 1000,
          engine: str = "mapInArrow", evidence_df: DataFrame | None = None,
          index_settle_ms: int = DEFAULT_INDEX_SETTLE_MS) -> tuple[DataFrame, ...]:
    """(metrics_df, fragments_df, violations_df, outside_df) from ledger_state rows.

    The per-ledger work runs once into a persisted DataFrame that the three outputs select from;
    `engine` is "mapInArrow" (default, measured faster: see bench/) or "arrow_udf"."""
    settings = Settings(run_id, _bookie_map(bookies_df), as_of_ms, open_ledger_max_age_ms,
                        min_racks_per_write_quorum, max_ranges, _inventories(evidence_df),
                        _index_reads(evidence_df), index_settle_ms)
    out_schema = _AUDITED
    if "znode_mtime" not in state_df.columns:     # ledgers without their znodes' Stat (admin HTTP, generated)
        state_df = state_df.withColumn("znode_mtime", F.lit(None).cast("long"))
    state = state_df.select(*STATE_COLUMNS)
    if engine == "mapInArrow":
        arrow_schema = to_arrow_schema(out_schema)

        def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                rows = [audit_parsed(c, md, answers, settings, mtime) for c, md, answers, mtime in iter_ledgers(batch)]
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
    outside = audited.select(F.explode("outside").alias("o")).select("o.*")
    return CachedTuple((metrics, fragments, violations, outside), cached=audited)


def run(spark: SparkSession, tables_dir: str, root: str, request: AuditRequest) -> dict:
    """{output: rows} and, per check, the number of violations. Raises FileNotFoundError naming a missing table."""
    for name in ("bk_ledgers", "bk_entry_availability"):
        if not os.path.isdir(os.path.join(tables_dir, name)):
            raise FileNotFoundError(f"{tables_dir}: table {name}/ not found")
    th = request.thresholds   # the estate's (audit/systems/bookkeeper/config.py holds the defaults)
    bookies_path = os.path.join(tables_dir, "bk_bookies")
    bookies = read(spark, bookies_path) if has_table(bookies_path) else None
    evidence_path = os.path.join(tables_dir, "bk_bookie_evidence")
    evidence = read(spark, evidence_path) if has_table(evidence_path) else None
    state = ledger_state(read(spark, os.path.join(tables_dir, "bk_ledgers")),
                         read(spark, os.path.join(tables_dir, "bk_entry_availability")))
    frames = audit(state, bookies, run_id=request.run_id, as_of_ms=request.as_of_ms,
                   open_ledger_max_age_ms=th.open_ledger_max_age_s * 1000 if request.as_of_ms is not None else None,
                   min_racks_per_write_quorum=th.min_racks_per_write_quorum, evidence_df=evidence,
                   index_settle_ms=int(th.location_index_settle_s * 1000))
    paths = {"metrics": os.path.join(root, "metrics", "bk_ledger_replicas"),
             "fragments": os.path.join(root, "findings", "bk_missing_fragments"),
             "violations": violations_path(root, SYSTEM),
             "outside": os.path.join(root, "findings", "bk_outside_ensemble")}
    try:
        out = {}
        for name, df in zip(paths, frames):
            write(df, paths[name])
            out[name] = rows_written(paths[name])
        by_check = read(spark, paths["violations"]).groupBy("check").count().collect()
        out["violations_by_check"] = {r["check"]: r["count"] for r in by_check}
        return out
    finally:
        frames.unpersist()
