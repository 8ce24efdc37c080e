"""Benchmark of an on-demand incident check (`replaudit check`, docs/incident.md) on the built-in lab estate:
one Pulsar topic, collected on every Pulsar cluster, then normalized, audited, validated and reported, in this
process (Spark local mode), after setup (`make setup`). Target: under 60 s. The run is checked: it is an
incident run and its collection holds that topic only.

    .venv/bin/python bench/pulsar/bench_incident.py"""
from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from bench.common import Results, main_of  # noqa: E402

TARGET_S = 60
TOPIC = "persistent://lab/geo/orders-one-way"


def metrics(argv: list[str] | None = None) -> list[dict]:
    from audit import pipeline
    from audit.contracts import Scope

    repo = HERE.parent.parent
    out = Results()
    work = Path(tempfile.mkdtemp(prefix="replaudit-bench-incident-"))
    try:
        estate = yaml.safe_load((repo / "audit" / "lab" / "estate.yaml").read_text())
        estate["store"] = {"uri": f"file://{work / 'store'}"}
        path = work / "estate.yaml"
        path.write_text(yaml.safe_dump(estate))
        started = time.perf_counter()
        summary = pipeline.run_all(str(path), scope=Scope(systems=("pulsar",), subjects=(TOPIC + "*",)))
        elapsed = time.perf_counter() - started
        topics = {p.parent.name for p in (work / "store").rglob("stats-internal.json")
                  if "/rereads/" not in str(p)}
        ok = summary["run"]["kind"] == "incident" and topics == {"orders-one-way"}
        out.add("incident check: one Pulsar topic of the lab estate, after setup", elapsed, "s", f"< {TARGET_S} s",
                ok and elapsed < TARGET_S)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


if __name__ == "__main__":
    sys.exit(main_of(metrics, sys.argv[1:]))
