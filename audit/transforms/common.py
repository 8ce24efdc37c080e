"""What every system's Spark transforms and jobs share: the shared table schemas (violations, quarantine), the
read-and-decode loop over a system's raw files, persisted results, and where a system writes its outputs.

Shared tables hold one folder per system, Hive-style (`findings/violations/system=<name>/`,
`tables/quarantine/system=<name>/`): each system replaces only its own folder, in any order or in parallel, and a
reader of the whole table (`spark.read.parquet(findings/violations)`, `pyarrow.dataset.dataset(...)`) sees every
system's rows with the same schema."""
from __future__ import annotations

import os
from typing import Callable, Iterable, Iterator
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (BooleanType, DataType, DoubleType, IntegerType, LongType, StringType, StructField,
                               StructType)

S, L, I, B, D = StringType(), LongType(), IntegerType(), BooleanType(), DoubleType()


def struct(*fields: tuple[str, DataType]) -> StructType:
    """A schema of nullable fields."""
    return StructType([StructField(name, t, True) for name, t in fields])


VIOLATIONS = struct(("run_id", S), ("system", S), ("cluster", S), ("check", S), ("severity", S), ("subject", S),
                    ("entry_count", L), ("message", S), ("evidence", S))
QUARANTINE = struct(("system", S), ("cluster", S), ("source_key", S), ("payload_kind", S), ("reason", S))


def tagged(tag: str, schemas: Iterable[StructType]) -> StructType:
    """One wide row tagged with which table it belongs to (columns shared by tables have one type), so a job reads
    and decodes its input once and splits the result afterwards."""
    fields = {f.name: f for s in schemas for f in s.fields}
    return StructType([StructField(tag, S, False)] + list(fields.values()))


class Cached(dict):
    """Tables selected from one persisted DataFrame; `unpersist()` releases it."""

    def __init__(self, tables: dict, cached: DataFrame):
        super().__init__(tables)
        self.cached = cached

    def unpersist(self) -> None:
        self.cached.unpersist()


class CachedTuple(tuple):
    """Outputs selected from one persisted DataFrame; `unpersist()` releases it."""

    def __new__(cls, frames: tuple, cached: DataFrame):
        obj = super().__new__(cls, frames)
        obj.cached = cached
        return obj

    def unpersist(self) -> None:
        self.cached.unpersist()


def conform(df: DataFrame, schema: StructType) -> DataFrame:
    """`df` with exactly `schema`'s columns (absent ones null), cast to its types."""
    have = set(df.columns)
    return df.select(*[(F.col(f.name) if f.name in have else F.lit(None)).cast(f.dataType).alias(f.name)
                       for f in schema.fields])


def union(frames: list[DataFrame]) -> DataFrame:
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


# -- reading a system's raw evidence ---------------------------------------------------------
def system_raw_root(raw_dir: str, system: str) -> str:
    """The folder holding <cluster>/...: raw_dir/<system> (raw_dir = the attempt's raw/) or raw_dir/raw/<system>."""
    root = os.path.abspath(raw_dir)
    for candidate in (os.path.join(root, system), os.path.join(root, "raw", system)):
        if os.path.isdir(candidate):
            return candidate
    return os.path.join(root, system)


def _raw_key(path: str, root: str, system: str) -> str:
    local = unquote(urlparse(path).path) if path.startswith("file:") else path
    rel = local[len(root) + 1:] if local.startswith(root + "/") else local
    return f"raw/{system}/{rel}"


def _unlisted(root: str) -> tuple[list[str], list[str]]:
    """Files below `root` that Spark's file source never lists: (those inside a folder whose name starts with "_" or
    ".", those whose own name does), non-empty ones only. Evidence is named after what it describes, and internal
    topics and system folders are named so (e.g. `__consumer_offsets-7`)."""
    in_hidden, named_hidden = [], []
    for folder, _, names in os.walk(root):
        parts = os.path.relpath(folder, root).split(os.sep)
        hidden_folder = any(p.startswith(("_", ".")) for p in parts if p != ".")
        for n in names:
            path = os.path.join(folder, n)
            if os.path.getsize(path) == 0:
                continue   # decoded with the other empty files
            if n.startswith(("_", ".")):
                named_hidden.append(path)
            elif hidden_folder:
                in_hidden.append(path)
    return in_hidden, named_hidden


def decode_raw(spark: SparkSession, raw_dir: str, system: str, decode_file: Callable[[str, bytes], Iterable],
               schema: StructType, batch_rows: int = 4096) -> DataFrame:
    """Every file below the system's raw folder, decoded in the executors: `decode_file(key, bytes)` yields
    (table, row) pairs, `key` being `raw/<system>/<cluster>/...`; rows come back in `schema` (a tagged schema
    whose first column is the table). Files Spark's file source skips are decoded too (zero-length ones, and those
    below a folder named "_..." or "."..., read by explicit path, which Spark does not filter), so none goes
    unjudged. Only this system's folder is read: another system's evidence is never read twice."""
    root = system_raw_root(raw_dir, system)
    if not os.path.isdir(root):
        return spark.createDataFrame([], schema)
    arrow_schema = to_arrow_schema(schema)
    tag = schema.fields[0].name

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pending: list[dict] = []
        for batch in batches:
            for path, content in zip(batch.column("path").to_pylist(), batch.column("content").to_pylist()):
                for table, row in decode_file(_raw_key(path, root, system), content):
                    pending.append({tag: table, **row})
                    if len(pending) >= batch_rows:  # one file can expand to many rows: bounded Arrow batches
                        yield pa.RecordBatch.from_pylist(pending, schema=arrow_schema)
                        pending = []
        if pending:
            yield pa.RecordBatch.from_pylist(pending, schema=arrow_schema)

    files = (spark.read.format("binaryFile").option("recursiveFileLookup", "true").load(root)
             .select("path", "content"))
    decoded = files.mapInArrow(decode, schema)
    in_hidden, named_hidden = _unlisted(root)
    if in_hidden:
        # each explicit path is its own split: a few tasks instead of one per file
        hidden = (spark.read.format("binaryFile").load(in_hidden).select("path", "content")
                  .coalesce(spark.sparkContext.defaultParallelism))
        decoded = decoded.unionByName(hidden.mapInArrow(decode, schema))
    empty = sorted(_raw_key(os.path.join(folder, n), root, system)
                   for folder, _, names in os.walk(root) for n in names
                   if os.path.getsize(os.path.join(folder, n)) == 0)
    extra = [{tag: t, **r} for key in empty for t, r in decode_file(key, b"")]
    for path in named_hidden:   # a file named "_..." is refused even by explicit path
        with open(path, "rb") as f:
            extra += [{tag: t, **r} for t, r in decode_file(_raw_key(path, root, system), f.read())]
    if extra:
        decoded = decoded.unionByName(spark.createDataFrame(extra, schema))
    return decoded


# -- where a system's outputs go -----------------------------------------------------------
def quarantine_path(tables_dir: str, system: str) -> str:
    """The system's own folder of the shared quarantine table."""
    return os.path.join(tables_dir, "quarantine", f"system={system}")


def violations_path(root: str, system: str) -> str:
    """The system's own folder of the shared findings table (`root` is the attempt folder)."""
    return os.path.join(root, "findings", "violations", f"system={system}")


def write(df: DataFrame, path: str) -> None:
    """Replace the folder `path` with `df` (an earlier try of the same attempt is overwritten, nothing else)."""
    df.write.mode("overwrite").parquet(path)


def write_normalized(tables: Cached, tables_dir: str, system: str) -> dict:
    """A normalize job's output: each table to tables_dir/<table>/ (empty ones too) and its "quarantine" rows to the
    system's folder of the shared quarantine table; returns {table: rows} and releases the cached rows."""
    try:
        counts = {}
        for name, df in tables.items():
            path = quarantine_path(tables_dir, system) if name == "quarantine" else os.path.join(tables_dir, name)
            write(df, path)
            counts[name] = rows_written(path)
        return counts
    finally:
        tables.unpersist()


def rows_written(path: str) -> int:
    """Rows of the Parquet files in `path`, from their footers (no Spark job)."""
    if not os.path.isdir(path):
        return 0
    return sum(pq.read_metadata(os.path.join(path, n)).num_rows for n in os.listdir(path) if n.endswith(".parquet"))


def has_table(path: str) -> bool:
    """True when `path` holds Parquet files (at any depth)."""
    return os.path.isdir(path) and any(n.endswith(".parquet") for _, _, names in os.walk(path) for n in names)


def read(spark: SparkSession, path: str, schema: StructType | None = None) -> DataFrame:
    """A table folder (a shared table's system folders included). With `schema`, no inference job runs and an
    absent column reads as null."""
    reader = spark.read.schema(schema) if schema is not None else spark.read
    return reader.parquet(path)
