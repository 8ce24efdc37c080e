"""Benchmark of an on-demand incident check (`replaudit check`, docs/incident.md) on the built-in lab estate:
one BookKeeper ledger (one with missing fragments), then normalized, audited, validated and reported, in this
process (Spark local mode), after setup (`make setup`). Target: under 60 s. The run is checked: it is an incident
run, its collection holds that ledger only, and the lab's ground truth for it is matched exactly.

    .venv/bin/python bench/bookkeeper/bench_incident.py"""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from bench.common import Results, lab_incident_check, main_of  # noqa: E402

TARGET_S = 60
LEDGER = "2156"          # seed 7 of the lab: a ledger with a missing fragment


def metrics(argv: list[str] | None = None) -> list[dict]:
    from audit.contracts import Scope
    from audit.systems.bookkeeper.system import ledger_of_key

    out = Results()
    with lab_incident_check(Scope(systems=("bookkeeper",), subjects=(LEDGER,))) as (summary, elapsed, store):
        raw = [p.relative_to(r).as_posix() for r in store.rglob("raw/bookkeeper/bk-lab")
               for p in r.rglob("*") if p.is_file()]
        lab = summary.get("lab") or {}
        ok = (summary["run"]["kind"] == "incident" and {ledger_of_key(k) for k in raw} - {None} == {LEDGER}
              and lab.get("injected", 0) > 0 and (lab.get("missed"), lab.get("false_alarms")) == (0, 0))
    out.add("incident check: one BookKeeper ledger of the lab estate, after setup", elapsed, "s",
            f"< {TARGET_S} s", ok and elapsed < TARGET_S)
    return out


if __name__ == "__main__":
    sys.exit(main_of(metrics, sys.argv[1:]))
