"""Benchmark of an on-demand incident check (`replaudit check`, docs/incident.md) on the built-in lab estate:
one Pulsar topic (one with a finding), collected on every Pulsar cluster, then normalized, audited, validated and
reported, in this process (Spark local mode), after setup (`make setup`). Target: under 60 s. The run is checked:
it is an incident run, its collection holds that topic only, and the lab's ground truth for it is matched exactly.

The topic is picked from the lab's ground truth (bench.common.lab_truths: the first by name among the topics the
truth expects a finding on), never by a literal name: the lab's scenarios change whenever its simulation does.

    .venv/bin/python bench/pulsar/bench_incident.py"""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from bench.common import Results, lab_incident_check, lab_truths, main_of, now_ms  # noqa: E402

TARGET_S = 60
SYSTEM = "pulsar"


def pick_topic(truths: dict[str, dict]) -> str:
    """The lab topic the incident check asks for: one the ground truth expects a finding on."""
    topics = sorted({f["topic"] for truth in truths.values() for f in truth.get("findings", []) if f.get("topic")})
    if not topics:
        raise LookupError(f"the lab's ground truth expects no finding on any topic (clusters {', '.join(truths)})")
    return topics[0]


def metrics(argv: list[str] | None = None) -> list[dict]:
    from audit.contracts import Scope
    from audit.systems.pulsar.system import topic_of_key

    as_of_ms = now_ms()
    truths = lab_truths(SYSTEM, as_of_ms)
    topic = pick_topic(truths)
    print(f"subject: topic {topic} (a finding in the lab's ground truth)", flush=True)
    out = Results()
    with lab_incident_check(Scope(systems=(SYSTEM,), subjects=(topic,)), as_of_ms) as (summary, elapsed, store):
        subjects = {topic_of_key(p.relative_to(r).as_posix()) for cluster in truths
                    for r in store.rglob(f"raw/{SYSTEM}/{cluster}") for p in r.rglob("*") if p.is_file()} - {None}
        lab = summary.get("lab") or {}
        ok = (summary["run"]["kind"] == "incident" and bool(subjects) and all(topic in s for s in subjects)
              and lab.get("injected", 0) > 0 and (lab.get("missed"), lab.get("false_alarms")) == (0, 0))
        if not ok:
            print(f"check failed: run kind {summary['run']['kind']}, topics collected {sorted(subjects)}, lab "
                  f"{ {k: lab.get(k) for k in ('injected', 'detected', 'wrong_count', 'missed', 'false_alarms')} }",
                  flush=True)
    out.add("incident check: one Pulsar topic of the lab estate, after setup", elapsed, "s", f"< {TARGET_S} s",
            ok and elapsed < TARGET_S)
    return out


if __name__ == "__main__":
    sys.exit(main_of(metrics, sys.argv[1:]))
