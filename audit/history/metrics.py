"""A run's numbers, as Prometheus gauges: the same list feeds the Pushgateway route (audit/alerts/pushgateway.py)
and the metrics history (store.py). Shared gauges: findings per system, cluster, check and severity; entries at
risk (the findings' entry counts) per system, cluster and check; sources not covered per system and cluster;
whether the run was complete; its duration up to the alert stage; its time. Each system adds its own through its
report section's `gauges` (e.g. failover redeliveries and skips per replication flow)."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

from audit.contracts import Gauge


def _started_s(attempt_id: str | None) -> float | None:
    """An attempt id starts with its UTC start time (audit.store.run.new_attempt_id)."""
    try:
        return datetime.strptime((attempt_id or "")[:22], "%Y%m%dT%H%M%S%fZ").replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None


def shared_gauges(summary: Mapping[str, Any], violations: Iterable[Mapping[str, Any]], now_s: float) -> list[Gauge]:
    findings: dict[tuple, int] = {}
    at_risk: dict[tuple, int] = {}
    for v in violations:
        findings[(v["system"], v["cluster"], v["check"], v["severity"])] = \
            findings.get((v["system"], v["cluster"], v["check"], v["severity"]), 0) + 1
        at_risk[(v["system"], v["cluster"], v["check"])] = \
            at_risk.get((v["system"], v["cluster"], v["check"]), 0) + int(v.get("entry_count") or 0)
    gaps: dict[tuple, int] = {}
    for g in summary.get("coverage_gaps") or []:
        key = (str(g.get("system") or ""), str(g.get("cluster") or ""))
        gaps[key] = gaps.get(key, 0) + 1
    out = [Gauge("replaudit_findings", "findings of the run", dict(zip(("system", "cluster", "check", "severity"),
                                                                         k)), n) for k, n in sorted(findings.items())]
    out += [Gauge("replaudit_entries_at_risk", "entries (messages, offsets) the findings concern",
                  dict(zip(("system", "cluster", "check"), k)), n) for k, n in sorted(at_risk.items())]
    out += [Gauge("replaudit_coverage_gaps", "sources the run could not cover", dict(zip(("system", "cluster"), k)),
                  n) for k, n in sorted(gaps.items())]
    out.append(Gauge("replaudit_run_complete", "1 when everything was covered and validated", {},
                     1 if summary.get("complete") else 0))
    out.append(Gauge("replaudit_run_timestamp_seconds", "when the run's alert stage pushed", {}, now_s))
    started = _started_s((summary.get("run") or {}).get("attempt_id"))
    if started is not None:
        out.append(Gauge("replaudit_run_duration_seconds", "from the attempt's start to its alert stage", {},
                         max(0.0, now_s - started)))
    return out


def system_gauges(summary: Mapping[str, Any]) -> list[Gauge]:
    from audit import systems

    return [g for s in systems.all_systems() if s.report.gauges for g in s.report.gauges(summary)]


def run_gauges(summary: Mapping[str, Any], violations: Iterable[Mapping[str, Any]], now_s: float) -> list[Gauge]:
    return shared_gauges(summary, violations, now_s) + system_gauges(summary)
