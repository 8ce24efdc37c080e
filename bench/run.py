"""`make bench`: every benchmark, one table, and bench/results.json ({name, value, unit, target, ok}).

Each registered system lists its bench modules (`benches`); each exposes `metrics() -> list[dict]`. Benchmarks
are not tests: they measure targets on this machine and print them; the exit code is 1 when a target is missed."""
from __future__ import annotations

import importlib
import json
import sys
import traceback
from pathlib import Path


def modules() -> list[str]:
    from audit import systems

    return [m for s in systems.all_systems() for m in s.benches]


def main(argv: list[str]) -> int:
    only = argv[1:]
    rows: list[dict] = []
    for name in modules():
        if only and not any(o in name for o in only):
            continue
        print(f"== {name}", flush=True)
        try:
            rows += importlib.import_module(name).metrics()
        except Exception as exc:  # one broken bench must not hide the others
            traceback.print_exc()
            rows.append({"name": name, "value": None, "unit": "", "target": "runs", "ok": False,
                         "error": f"{type(exc).__name__}: {exc}"})
    out = Path(__file__).with_name("results.json")
    out.write_text(json.dumps(rows, indent=1))
    width = max(len(r["name"]) for r in rows) if rows else 10
    print(f"\n{'benchmark'.ljust(width)}  {'value':>12}  {'unit':<10}  {'target':<24}  ok")
    for r in rows:
        value = "-" if r["value"] is None else (f"{r['value']:.2f}" if isinstance(r["value"], float) else r["value"])
        print(f"{r['name'].ljust(width)}  {value!s:>12}  {r['unit']:<10}  {r['target']!s:<24}  "
              f"{'yes' if r['ok'] else 'NO'}")
    print(f"\nwritten: {out}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
