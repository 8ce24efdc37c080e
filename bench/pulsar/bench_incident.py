"""Benchmark of an on-demand incident check (`replaudit check`, docs/incident.md) on the built-in lab estate:
one Pulsar topic, collected on every Pulsar cluster, then normalized, audited, validated and reported, in this
process (Spark local mode), after setup (`make setup`). Target: under 60 s. The run is checked: it is an
incident run and its collection holds that topic only.

    .venv/bin/python bench/pulsar/bench_incident.py"""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from bench.common import Results, lab_incident_check, main_of  # noqa: E402

TARGET_S = 60
TOPIC = "persistent://lab/geo/orders-one-way"


def metrics(argv: list[str] | None = None) -> list[dict]:
    from audit.contracts import Scope

    out = Results()
    with lab_incident_check(Scope(systems=("pulsar",), subjects=(TOPIC + "*",))) as (summary, elapsed, store):
        topics = {p.parent.name for p in store.rglob("stats-internal.json") if "/rereads/" not in str(p)}
        ok = summary["run"]["kind"] == "incident" and topics == {"orders-one-way"}
    out.add("incident check: one Pulsar topic of the lab estate, after setup", elapsed, "s", f"< {TARGET_S} s",
            ok and elapsed < TARGET_S)
    return out


if __name__ == "__main__":
    sys.exit(main_of(metrics, sys.argv[1:]))
