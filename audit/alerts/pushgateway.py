"""A Prometheus Pushgateway route: every run pushes its numbers (prometheus_client's push_to_gateway, job
`replaudit`, grouping key `estate`), so the team's Prometheus scrapes them and Grafana shows history.

The gauges are the run's numbers (audit/history/metrics.py), the same the metrics history keeps. A push replaces
the estate's previous group, so a finding that is gone is gone from the gateway too."""
from __future__ import annotations

import logging
from typing import Any, Mapping, Sequence

from audit.alerts.http import FAILED, SENT, AlertResult, http_route, redacted, route_url
from audit.contracts import Gauge

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
                 gauges: Sequence[Gauge] = (), **_: Any) -> AlertResult:
    """`gauges`: the run's numbers (audit/history/metrics.py run_gauges), computed once by the alert stage."""
    from prometheus_client import push_to_gateway
    from prometheus_client.exposition import default_handler

    r = http_route(route)
    result = AlertResult(route=r.name, status=FAILED, attempts=1)
    try:
        extra = [(h, secrets.resolve(ref)) for h, ref in r.headers_from.items()]
        url = route_url(r, secrets)

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
