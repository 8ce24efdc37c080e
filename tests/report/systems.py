"""The built-in systems for report tests, and a staged run folder holding given Parquet tables.

`SYSTEMS` are the registry's BookKeeper and Pulsar records; while those modules cannot be imported yet (they are
being written alongside), stand-in records carrying the same report sections and repair planners."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from audit.contracts import RunOutputs, System


def _stand_in(name: str) -> System:
    import importlib

    section = importlib.import_module(f"audit.report.sections.{name}").SECTION
    planner = importlib.import_module(f"audit.repair.{name}").plan_run
    return System(name=name, title=name.title(), cluster_model=dict, collect=lambda req: (None, None),
                  normalize=lambda *a: {}, audit=lambda *a: {}, checks={}, report=section, plan_repairs=planner)


def builtin_systems() -> list[System]:
    from audit.systems import get

    out = []
    for name in ("bookkeeper", "pulsar"):
        try:
            out.append(get(name))
        except ImportError:
            out.append(_stand_in(name))
    return out


SYSTEMS = builtin_systems()


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
