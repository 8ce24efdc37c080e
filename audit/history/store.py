"""The metrics history in the run store: one Parquet file per run, partitioned by date (Hive style, so Spark,
pyarrow and Athena read the folder as one table), written once and never replaced:

    <estate>/history/date=<YYYY-MM-DD>/<run_id>.parquet     run_id, at_ms, metric, labels, system, cluster, value

`labels` is the gauge's label set as `k=v` pairs joined by `,` in key order (a stable series key); `system` and
`cluster` repeat two of them for filtering ("" when the gauge has none)."""
from __future__ import annotations

import io
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from audit.contracts import Gauge
from audit.store.base import ObjectStore
from audit.store.run import estate_prefix, run_prefix

SCHEMA = pa.schema([("run_id", pa.string()), ("at_ms", pa.int64()), ("metric", pa.string()),
                    ("labels", pa.string()), ("system", pa.string()), ("cluster", pa.string()),
                    ("value", pa.float64())])


def series_key(labels) -> str:
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def parse_series(key: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in key.split(",")) if key else {}


@dataclass(frozen=True)
class RunMetrics:
    run_id: str
    at_ms: int
    values: dict[tuple[str, str], float]      # (metric, labels) -> value


def _prefix(estate: str) -> str:
    return estate_prefix(estate) + "history/"


def history_key(estate: str, run_id: str, at_ms: int) -> str:
    run_prefix(estate, run_id)      # the same name rules as the run's own keys
    day = datetime.fromtimestamp(at_ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d")
    return f"{_prefix(estate)}date={day}/{run_id}.parquet"


def append(store: ObjectStore, estate: str, run_id: str, at_ms: int, gauges: Iterable[Gauge]) -> str | None:
    """Write this run's rows; None when the run's file exists already (a retried task): it is never replaced."""
    key = history_key(estate, run_id, at_ms)
    if store.exists(key):
        return None
    gauges = list(gauges)
    table = pa.Table.from_pylist([{"run_id": run_id, "at_ms": at_ms, "metric": g.name, "labels": series_key(g.labels),
                                   "system": str(g.labels.get("system", "")), "cluster": str(g.labels.get("cluster",
                                                                                                          "")),
                                   "value": float(g.value)} for g in gauges], schema=SCHEMA)
    buf = io.BytesIO()
    pq.write_table(table, buf)
    store.put(key, buf.getvalue())
    return key


def recent(store: ObjectStore, estate: str, limit: int = 30, exclude: str | None = None) -> list[RunMetrics]:
    """The newest `limit` runs' metrics (oldest first), without run `exclude`. Only the newest days' files are read
    (a run's day is its at_ms's, so older days hold only older runs). A file that does not read as this schema
    raises ValueError naming its key."""
    days: dict[str, list[str]] = {}
    for key in store.list(_prefix(estate)):
        if key.endswith(".parquet"):
            days.setdefault(key[len(_prefix(estate)):].split("/", 1)[0], []).append(key)
    runs: dict[str, RunMetrics] = {}
    for day in sorted(days, reverse=True):
        if len(runs) >= limit:
            break
        for key in days[day]:
            _read(store, key, exclude, runs)
    return sorted(runs.values(), key=lambda r: (r.at_ms, r.run_id))[-limit:]


def _read(store: ObjectStore, key: str, exclude: str | None, runs: dict[str, RunMetrics]) -> None:
    try:
        rows = pq.read_table(io.BytesIO(store.get(key))).select(SCHEMA.names).to_pylist()
    except (pa.ArrowException, KeyError, ValueError) as exc:
        raise ValueError(f"{key}: expected a metrics history file with columns {SCHEMA.names}: {exc}") from None
    for r in rows:
        if r["run_id"] == exclude:
            continue
        run = runs.setdefault(r["run_id"], RunMetrics(r["run_id"], r["at_ms"], {}))
        run.values[(r["metric"], r["labels"])] = r["value"]
