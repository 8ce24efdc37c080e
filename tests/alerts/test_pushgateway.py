"""The Pushgateway route against a real Pushgateway (Debian's prometheus-pushgateway on loopback)."""
from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from audit.alerts.pushgateway import push_metrics
from audit.config.model import AlertRoute
from audit.config.secrets import SecretResolver
from audit.history.metrics import run_gauges
from tests.prometheus import pushgateway_server  # noqa: F401  (fixture)

LOST = {"system": "bookkeeper", "cluster": "bk-a", "check": "bk.entries_lost", "severity": "critical",
        "subject": "ledger 12", "entry_count": 5}


def _samples(gateway) -> dict:
    out = {}
    for family in text_string_to_metric_families(gateway.get_text("/metrics")):
        for s in family.samples:
            if s.name.startswith("replaudit_"):
                labels = {k: v for k, v in s.labels.items() if k not in ("instance", "job")}
                out[(s.name, tuple(sorted(labels.items())))] = s.value
    return out


def _summary(run, complete, **parts):
    return {"estate": "lab", "run_id": run, "complete": complete, "run": {"attempt_id": "20261126T000000000000Z-ab"},
            "coverage_gaps": [] if complete else [{"system": "bookkeeper", "cluster": "bk-a", "source": "b4"}],
            **parts}


def test_each_run_replaces_the_estates_numbers_at_the_gateway(pushgateway_server):
    route = AlertRoute(name="prom", kind="pushgateway", url=pushgateway_server.url)
    secrets = SecretResolver(environ={})
    kafka = {"mm2": {"primary->dr": {"source": "primary", "target": "dr", "redelivered_min": 908,
                                     "skipped_min": 0}}}
    summary = _summary("night-1", False, kafka=kafka)
    first = push_metrics(route, summary, [], secrets, gauges=run_gauges(summary, [LOST, LOST], 1_795_651_200.0 + 75))
    assert first.ok and first.status == "sent"
    got = _samples(pushgateway_server)
    estate = ("estate", "lab")
    assert got[("replaudit_findings", (("check", "bk.entries_lost"), ("cluster", "bk-a"), estate,
                                       ("severity", "critical"), ("system", "bookkeeper")))] == 2
    assert got[("replaudit_entries_at_risk", (("check", "bk.entries_lost"), ("cluster", "bk-a"), estate,
                                              ("system", "bookkeeper")))] == 10
    assert got[("replaudit_coverage_gaps", (("cluster", "bk-a"), estate, ("system", "bookkeeper")))] == 1
    assert got[("replaudit_run_complete", (estate,))] == 0
    assert got[("replaudit_run_duration_seconds", (estate,))] == 75
    assert got[("replaudit_failover_redelivered_messages", (estate, ("source", "primary"), ("system", "kafka"),
                                                            ("target", "dr")))] == 908
    # the next night is healthy: its push replaces the estate's group, the finding is gone from the gateway
    summary = _summary("night-2", True)
    assert push_metrics(route, summary, [], secrets, gauges=run_gauges(summary, [], 1_795_737_600.0)).ok
    got = _samples(pushgateway_server)
    assert not any(name == "replaudit_findings" for name, _ in got)
    assert got[("replaudit_run_complete", (estate,))] == 1


def test_an_unreachable_gateway_is_a_failed_route_not_a_failed_run():
    route = AlertRoute(name="prom", kind="pushgateway", url="http://127.0.0.1:9/")
    summary = _summary("n", True)
    result = push_metrics(route, summary, [], SecretResolver(environ={}), gauges=run_gauges(summary, [LOST], 0.0))
    assert (result.status, result.ok) == ("failed", False) and "URLError" in result.error
