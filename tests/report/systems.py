"""The built-in systems for report tests (the registry's BookKeeper and Pulsar records), and a staged run folder
holding given Parquet tables."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from audit import systems
from audit.contracts import RunOutputs

SYSTEMS = systems.of(["bookkeeper", "pulsar"])


def write_table(root: Path, rel: str, rows: list[dict[str, Any]], name: str = "part-00000.parquet") -> Path:
    """rows -> <root>/<rel>/<name> (a zero-column file for no rows)."""
    d = Path(root) / rel
    d.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), str(d / name))
    return d / name


def staged(root: Path, violations: list[dict] | None = None, estate: Any = None, **metrics: list[dict]) -> RunOutputs:
    """A staged attempt folder with metrics/<name> tables (`pulsar_failover=[...]`) as RunOutputs."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for name, rows in metrics.items():
        write_table(root, f"metrics/{name}", rows)
    return RunOutputs(root=root, violations=list(violations or []), estate=estate)
