"""post_violations against a real HTTP receiver on loopback."""
import json
import logging
import socket

import pytest

from audit.alerts.webhook import post_violations
from audit.config.model import AlertRoute, SecretRef
from audit.config.secrets import SecretResolver
from tests.http_receiver import receiver_factory  # noqa: F401  (fixture)

TOKEN = "Bearer s3cr3t-token-value"
SUMMARY = {"estate": "lab", "run_id": "r-7", "status": "violations",
           "run": {"report_location": "lab/runs/r-7/attempts/a/reports/report.html"}}


def _v(check, severity, ledger, count):
    return {"system": "bookkeeper", "cluster": "bk-a", "check": check, "severity": severity,
            "subject": f"ledger {ledger}", "entry_count": count, "message": "m", "evidence": "{}"}


VIOLATIONS = [_v("bk.placement_violation", "minor", 1, 0), _v("bk.entries_lost", "critical", 2, 5),
              _v("bk.entries_below_ack_quorum", "major", 3, 9), _v("bk.entries_below_ack_quorum", "major", 4, 90)]


def _secrets():
    return SecretResolver(environ={"OPS_TOKEN": TOKEN})


def _route(url, **kw):
    return AlertRoute(name="ops", kind="webhook", url=url,
                      headers_from={"Authorization": SecretRef(env="OPS_TOKEN", where="alerts.routes[0]")}, **kw)


def test_posts_body_and_auth_header_filtered_by_min_severity(receiver_factory, caplog):
    rx = receiver_factory()
    caplog.set_level(logging.DEBUG)
    result = post_violations(_route(rx.url, min_severity="major"), SUMMARY, VIOLATIONS, _secrets(), limit=2)
    assert (result.status, result.ok, result.attempts, result.http_status) == ("sent", True, 1, 200)
    assert (result.matching_violations, result.sent_violations) == (3, 2)
    (req,) = rx.requests
    assert req["path"] == "/hook" and req["headers"]["Authorization"] == TOKEN
    assert req["headers"]["Content-Type"] == "application/json"
    body = req["body"]
    assert (body["estate"], body["run_id"], body["report"]) == ("lab", "r-7", SUMMARY["run"]["report_location"])
    assert body["counts"] == {"total": 3, "by_severity": {"critical": 1, "major": 2, "minor": 0, "warning": 0},
                              "by_check": {"bk.entries_below_ack_quorum": 2, "bk.entries_lost": 1}}
    assert [(v["check"], v["subject"]) for v in body["violations"]] == [
        ("bk.entries_lost", "ledger 2"), ("bk.entries_below_ack_quorum", "ledger 4")]   # most severe, then largest
    assert body["truncated"] == 1
    assert "s3cr3t" not in json.dumps(result.to_json()) and "s3cr3t" not in caplog.text


def test_dict_route_retries_500_then_succeeds(receiver_factory):
    rx = receiver_factory(statuses=[500, 503])
    waits = []
    route = {"name": "ops", "url": rx.url, "headers_from": {"Authorization": {"env": "OPS_TOKEN"}},
             "min_severity": "warning", "timeout_s": 5}
    result = post_violations(route, SUMMARY, VIOLATIONS, _secrets(), backoff_s=0.01, sleep=waits.append)
    assert (result.status, result.attempts, result.http_status) == ("sent", 3, 200)
    assert len(rx.requests) == 3 and waits == [0.01, 0.02]
    assert result.attempt_log[0].startswith("attempt 1: HTTP 500")
    assert all(r["body"] == rx.requests[0]["body"] for r in rx.requests)


def test_4xx_is_not_retried(receiver_factory):
    rx = receiver_factory(statuses=[401])
    result = post_violations(_route(rx.url), SUMMARY, VIOLATIONS, _secrets(), sleep=lambda s: None)
    assert (result.status, result.attempts, result.http_status) == ("failed", 1, 401)
    assert "HTTP 401" in result.error


def test_unreachable_route_fails_clearly_without_raising(caplog):
    with socket.socket() as s:   # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/hook"
    result = post_violations(_route(url, timeout_s=2), SUMMARY, VIOLATIONS, _secrets(), retries=2, backoff_s=0.001)
    assert (result.status, result.ok, result.attempts, result.http_status) == ("failed", False, 3, None)
    assert result.error.startswith(f"cannot reach {url}") and "refused" in result.error.lower()
    assert "s3cr3t" not in json.dumps(result.to_json()) + caplog.text


def test_timeout_is_retried_then_reported(receiver_factory):
    rx = receiver_factory(hang=True)
    result = post_violations(_route(rx.url, timeout_s=0.3), SUMMARY, VIOLATIONS, _secrets(), retries=1,
                             sleep=lambda s: None)
    assert (result.status, result.attempts) == ("failed", 2)
    assert result.error == f"{rx.url} did not answer within 0.3 s"
    assert len(rx.requests) == 2


def test_nothing_to_send_and_missing_secret(receiver_factory):
    rx = receiver_factory()
    quiet = post_violations(_route(rx.url, min_severity="critical"), SUMMARY, VIOLATIONS[:1], _secrets())
    assert (quiet.status, quiet.ok, quiet.attempts) == ("skipped", True, 0)
    missing = post_violations(_route(rx.url), SUMMARY, VIOLATIONS, SecretResolver(environ={}))
    assert missing.status == "failed" and "header Authorization" in missing.error and "OPS_TOKEN" in missing.error
    assert rx.requests == []


def test_bad_route_config_is_a_clear_error():
    with pytest.raises(ValueError, match="min_severity"):
        post_violations({"name": "x", "url": "http://127.0.0.1:9/", "min_severity": "loud"}, SUMMARY, [], None)
