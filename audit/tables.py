"""Reading a run's small Parquet outputs without Spark (pyarrow): what the report, the repair planners and the
systems' report sections read."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Sequence

_SKIPPED = ("_", ".")   # Spark's _SUCCESS / _temporary, .crc files


def file_rows(source: Any, folders: Sequence[str], columns: list[str] | None = None) -> list[dict]:
    """Rows of one Parquet file (`source`: a path or a file object) found below a table folder in `folders`: a
    `key=value` folder gives column `key` to rows without it. `columns`: read only these (those the file lacks
    are left out of its rows)."""
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(source)
    cols = None if columns is None else [c for c in columns if c in pf.schema_arrow.names]
    rows = pf.read(columns=cols).to_pylist()
    hive = dict(p.split("=", 1) for p in folders if "=" in p)
    for r in rows:
        for k, v in hive.items():
            r.setdefault(k, v)
    return rows


def is_data_file(parts: Sequence[str]) -> bool:
    return parts[-1].endswith(".parquet") and not any(p.startswith(_SKIPPED) for p in parts)


def read_rows(path: Path | str, columns: Iterable[str] | None = None) -> list[dict]:
    """Every row of the Parquet table at `path`: one file, a folder of part files, or a folder of per-system
    folders (`<system>/` or `system=<system>/`, any depth) -- the old flat layout and the new nested one alike.
    Names starting with "_" or "." are skipped. A `key=value` folder gives column `key` to rows without it.
    `columns`: read only these (those a file lacks are left out of its rows). [] for a missing path."""
    path = Path(path)
    wanted = list(columns) if columns is not None else None
    if path.is_file():
        return file_rows(str(path), (), wanted)
    if not path.is_dir():
        return []
    rows: list[dict] = []
    for f in sorted(path.rglob("*.parquet")):
        rel = f.relative_to(path).parts
        if f.is_file() and is_data_file(rel):
            rows += file_rows(str(f), rel[:-1], wanted)
    return rows
