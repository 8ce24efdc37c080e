"""What every bench module repeats: its result rows and its `python -m` entry point."""
from __future__ import annotations

import json
from typing import Callable


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
