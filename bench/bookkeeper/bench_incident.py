"""Benchmark of an on-demand incident check (`replaudit check`, docs/incident.md) on the built-in lab estate:
one BookKeeper ledger (one with missing fragments), then normalized, audited, validated and reported, in this
process (Spark local mode), after setup (`make setup`). Target: under 60 s. The run is checked: it is an incident
run, its collection holds that ledger only, and the lab's ground truth for it is matched exactly.

The ledger is picked from the lab's ground truth (bench.common.lab_truths: the lowest id among the ledgers with
missing fragments), never by a literal id: the lab's ledger ids change whenever its simulation does.

    .venv/bin/python bench/bookkeeper/bench_incident.py"""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from bench.common import Results, lab_incident_check, lab_truths, main_of, now_ms  # noqa: E402

TARGET_S = 60
SYSTEM = "bookkeeper"


def pick_ledger(truths: dict[str, dict]) -> tuple[str, str]:
    """(cluster, ledger id) of the lab ledger the incident check asks for: one with missing fragments."""
    faulty = sorted((int(f["ledger_id"]), cluster) for cluster, truth in truths.items()
                    for f in truth.get("missing_fragments", []))
    if not faulty:
        raise LookupError("the lab's ground truth lists no ledger with missing fragments "
                          f"(clusters {', '.join(truths)})")
    ledger_id, cluster = faulty[0]
    return cluster, str(ledger_id)


def metrics(argv: list[str] | None = None) -> list[dict]:
    from audit.contracts import Scope
    from audit.systems.bookkeeper.system import ledger_of_key

    as_of_ms = now_ms()
    cluster, ledger = pick_ledger(lab_truths(SYSTEM, as_of_ms))
    print(f"subject: ledger {ledger} of lab cluster {cluster} (missing fragments in the lab's ground truth)",
          flush=True)
    out = Results()
    with lab_incident_check(Scope(systems=(SYSTEM,), subjects=(ledger,)), as_of_ms) as (summary, elapsed, store):
        raw = [p.relative_to(r).as_posix() for r in store.rglob(f"raw/{SYSTEM}/{cluster}")
               for p in r.rglob("*") if p.is_file()]
        lab = summary.get("lab") or {}
        ok = (summary["run"]["kind"] == "incident" and {ledger_of_key(k) for k in raw} - {None} == {ledger}
              and lab.get("injected", 0) > 0 and (lab.get("missed"), lab.get("false_alarms")) == (0, 0))
        if not ok:
            print(f"check failed: run kind {summary['run']['kind']}, ledgers collected "
                  f"{sorted({ledger_of_key(k) for k in raw} - {None})}, lab "
                  f"{ {k: lab.get(k) for k in ('injected', 'detected', 'wrong_count', 'missed', 'false_alarms')} }",
                  flush=True)
    out.add("incident check: one BookKeeper ledger of the lab estate, after setup", elapsed, "s",
            f"< {TARGET_S} s", ok and elapsed < TARGET_S)
    return out


if __name__ == "__main__":
    sys.exit(main_of(metrics, sys.argv[1:]))
