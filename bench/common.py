"""What every bench module repeats: its result rows, its `python -m` entry point, an incident check of the lab."""
from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator


class Results(list):
    """The rows `metrics()` returns ({name, value, unit, target, ok}), each printed as it is measured."""

    def add(self, name: str, value: float, unit: str, target: str | None, ok: bool = True) -> None:
        self.append({"name": name, "value": round(value, 3), "unit": unit, "target": target, "ok": ok})
        print(f"{name:58s} {value:14.3f} {unit:10s} target {target}", flush=True)


def main_of(metrics: Callable[[list[str] | None], list[dict]], argv: list[str] | None = None) -> int:
    """A bench module run alone: its rows as JSON; exit 1 when a target is missed."""
    results = metrics(argv)
    print(json.dumps(results, indent=1))
    return 0 if all(r["ok"] for r in results) else 1


@contextmanager
def lab_incident_check(scope: Any) -> Iterator[tuple[dict, float, Path]]:
    """An incident check (`pipeline.run_all` with `scope`) of the built-in lab estate, its store in a temporary
    folder removed afterwards: yields (summary, seconds it took, the store's root)."""
    import shutil
    import tempfile
    import time

    import yaml

    from audit import pipeline

    repo = Path(__file__).resolve().parent.parent
    work = Path(tempfile.mkdtemp(prefix="replaudit-bench-incident-"))
    try:
        estate = yaml.safe_load((repo / "lab" / "estate.yaml").read_text())
        estate["store"] = {"uri": f"file://{work / 'store'}"}
        path = work / "estate.yaml"
        path.write_text(yaml.safe_dump(estate))
        started = time.perf_counter()
        summary = pipeline.run_all(str(path), scope=scope)
        yield summary, time.perf_counter() - started, work / "store"
    finally:
        shutil.rmtree(work, ignore_errors=True)
