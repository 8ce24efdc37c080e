"""A Prometheus Pushgateway route: every run pushes its numbers (prometheus_client's push_to_gateway, job
`replaudit`, grouping key `estate`), so the team's Prometheus scrapes them and Grafana shows history.

Shared gauges: findings per system, cluster, check and severity; entries at risk (the findings' entry counts) per
system, cluster and check; sources not covered per system and cluster; whether the run was complete; its
duration up to the alert stage; its time. Each system adds its own through its report section's `gauges`
(e.g. failover redeliveries and skips per replication flow). A push replaces the estate's previous group, so a
finding that is gone is gone from the gateway too."""
from __future__ import annotations

import logging
import time
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Mapping

from audit.alerts.http import FAILED, SENT, AlertResult, http_route, redacted
from audit.contracts import Gauge

log = logging.getLogger("replaudit.alerts")
JOB = "replaudit"


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


def registry_of(gauges: list[Gauge]):
    from prometheus_client import CollectorRegistry
    from prometheus_client import Gauge as PromGauge

    registry = CollectorRegistry()
    metrics: dict[str, Any] = {}
    for g in gauges:
        names = tuple(sorted(g.labels))
        if g.name not in metrics:
            metrics[g.name] = (PromGauge(g.name, g.help, names, registry=registry), names)
        metric, labelnames = metrics[g.name]
        if labelnames != names:
            raise ValueError(f"gauge {g.name}: labels {names} differ from {labelnames}")
        (metric.labels(**g.labels) if names else metric).set(g.value)
    return registry


def push_metrics(route: Any, summary: Mapping[str, Any], notices: list, secrets: Any, *,
                 findings: Iterable[Mapping[str, Any]] = (), now_s: Callable[[], float] = time.time,
                 **_: Any) -> AlertResult:
    from prometheus_client import push_to_gateway
    from prometheus_client.exposition import default_handler

    r = http_route(route)
    result = AlertResult(route=r.name, status=FAILED, attempts=1)
    try:
        gauges = shared_gauges(summary, findings, now_s()) + system_gauges(summary)
        extra = [(h, secrets.resolve(ref)) for h, ref in r.headers_from.items()]
        url = r.url or secrets.resolve(r.url_from)

        def handler(url, method, timeout, headers, data):     # prometheus_client's handler signature
            return default_handler(url, method, timeout, list(headers) + extra, data)

        push_to_gateway(url, job=JOB, registry=registry_of(gauges), grouping_key={"estate": summary.get("estate")
                                                                                   or "-"},
                        timeout=r.timeout_s, handler=handler)
    except Exception as exc:      # never stops the run; the message names no secret
        result.error = redacted(f"{type(exc).__name__}: {exc}", secrets)
        log.error("alert route %s: %s", r.name, result.error)
        return result
    result.status, result.sent_violations = SENT, len(gauges)
    return result
