"""A Prometheus Pushgateway route: every run pushes its numbers (prometheus_client's push_to_gateway, job
`replaudit`, grouping key `estate`), so the team's Prometheus scrapes them and Grafana shows history.

The gauges are the run's numbers (audit/history/metrics.py), the same the metrics history keeps. A push replaces
the estate's previous group, so a finding that is gone is gone from the gateway too."""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Iterable, Mapping

from audit.alerts.http import FAILED, SENT, AlertResult, http_route, redacted
from audit.contracts import Gauge
from audit.history.metrics import run_gauges

log = logging.getLogger("replaudit.alerts")
JOB = "replaudit"


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
        gauges = run_gauges(summary, findings, now_s())
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
