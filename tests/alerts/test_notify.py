"""The alert stage over consecutive nights: a real HTTP receiver on loopback, the state in a real file store."""
from __future__ import annotations

import json

from audit import systems
from audit.alerts.notify import alert_run
from audit.alerts.state import state_key
from audit.config.estate import parse_estate
from audit.config.secrets import SecretResolver
from audit.store import open_store
from tests.http_receiver import receiver_factory  # noqa: F401  (fixture)
from tests.prometheus import alertmanager_server, pushgateway_server  # noqa: F401  (fixtures)
from tests.smtp import CONN_ID, smtp_server  # noqa: F401  (fixture)

DAY = 24 * 3600 * 1000
T0 = 1_790_000_000_000
LOST = {"system": "bookkeeper", "cluster": "bk-a", "check": "bk.entries_lost", "severity": "critical",
        "subject": "ledger 12", "entry_count": 5, "message": "5 entries lost"}
MINOR = {"system": "bookkeeper", "cluster": "bk-a", "check": "bk.placement_violation", "severity": "minor",
         "subject": "ledger 13", "entry_count": 0, "message": "one rack"}
LOST_MEANS = systems.get("bookkeeper").checks["bk.entries_lost"].meaning
UNREACHABLE = {"system": "bookkeeper", "cluster": "bk-a", "source": "bookie-4:3181", "what": "entries of ledger 9",
               "error": "unreachable"}


def _estate(tmp_path, url, **alerts):
    extra = "".join(f"\n  {k}: {v}" for k, v in alerts.items())
    return parse_estate(f"""
estate: lab
store: {{uri: "file://{tmp_path}/store"}}
alerts:{extra}
  routes:
    - {{name: ops, url: "{url}", min_severity: major, headers_from: {{Authorization: {{env: OPS_TOKEN}}}}}}
systems: {{}}
""")


def _night(tmp_path, estate, n, violations, gaps=(), validation_complete=True, kind="nightly"):
    run_id = f"night-{n}" if kind == "nightly" else f"incident__{n}"
    summary = {"estate": "lab", "run_id": run_id, "status": "x", "coverage_gaps": list(gaps),
               "validation": {"complete": validation_complete}, "run": {"kind": kind}}
    return alert_run(open_store(f"file://{tmp_path}/store"), estate, run_id, T0 + n * DAY, summary,
                     violations, SecretResolver(environ={"OPS_TOKEN": "Bearer t0k3n"}))


def _told(rx, since):
    return [(v["notice"], v["check"], v["subject"]) for r in rx.requests[since:] for v in r["body"]["violations"]]


def test_three_nights_fault_on_night_two_repaired_on_night_three(tmp_path, receiver_factory):
    rx = receiver_factory()
    estate = _estate(tmp_path, rx.url)
    first = _night(tmp_path, estate, 1, [MINOR])          # new, but minor: below the route's min_severity
    assert first["notices"] == {"new": 1} and [r["status"] for r in first["routes"]] == ["skipped"]
    assert rx.requests == []
    second = _night(tmp_path, estate, 2, [MINOR, LOST])
    assert second["notices"] == {"new": 1} and second["previous_run"] == "night-1"
    assert _told(rx, 0) == [("new", "bk.entries_lost", "ledger 12")]
    (posted,) = rx.requests
    assert posted["headers"]["Authorization"] == "Bearer t0k3n"
    v = posted["body"]["violations"][0]
    assert (v["first_seen_ms"], v["last_seen_ms"], len(v["fingerprint"])) == (T0 + 2 * DAY, T0 + 2 * DAY, 16)
    assert posted["body"]["counts"]["by_notice"] == {"new": 1}
    third = _night(tmp_path, estate, 3, [MINOR])
    assert third["notices"] == {"resolved": 1}
    assert _told(rx, 1) == [("resolved", "bk.entries_lost", "ledger 12")]
    state = json.loads((tmp_path / "store" / state_key("lab", "night-3", T0 + 3 * DAY)).read_text())
    assert [t["signal"]["subject"] for t in state["tracked"]] == ["ledger 13"]
    assert "t0k3n" not in json.dumps(state)


def test_identical_nights_send_nothing_then_remind_and_worsen(tmp_path, receiver_factory):
    rx = receiver_factory()
    estate = _estate(tmp_path, rx.url, repeat_interval="3d", worse_factor=2)
    _night(tmp_path, estate, 1, [LOST])
    for n in (2, 3):
        assert _night(tmp_path, estate, n, [LOST])["notices"] == {}
    assert len(rx.requests) == 1
    assert _night(tmp_path, estate, 4, [LOST])["notices"] == {"reminder": 1}          # 3 days after night 1
    assert _night(tmp_path, estate, 5, [{**LOST, "entry_count": 10}])["notices"] == {}  # 2x, not past it
    assert _night(tmp_path, estate, 6, [{**LOST, "entry_count": 11}])["notices"] == {"worse": 1}
    assert [k for k, _, _ in _told(rx, 0)] == ["new", "reminder", "worse"]
    # a retried alert task of night 6 sends nothing again
    assert _night(tmp_path, estate, 6, [{**LOST, "entry_count": 11}]).get("already_sent") is True
    assert len(rx.requests) == 3


def test_incomplete_is_its_own_alert_and_hides_no_resolution(tmp_path, receiver_factory):
    rx = receiver_factory()
    estate = _estate(tmp_path, rx.url)
    _night(tmp_path, estate, 1, [LOST])
    # night 2: a bookie unreachable (minor route threshold does not filter it), the finding not seen: not resolved
    second = _night(tmp_path, estate, 2, [], gaps=[UNREACHABLE, {**UNREACHABLE, "what": "entries of ledger 10"}])
    assert second["notices"] == {"new": 1}
    assert _told(rx, 1) == [("new", "audit_incomplete", "bookie-4:3181")]
    assert rx.requests[1]["body"]["violations"][0]["entry_count"] == 2
    # night 3: the same gap again: nothing; night 4: covered and healthy: both resolved
    assert _night(tmp_path, estate, 3, [], gaps=[UNREACHABLE])["notices"] == {}
    assert _night(tmp_path, estate, 4, [])["notices"] == {"resolved": 2}
    assert sorted(_told(rx, 2)) == [("resolved", "audit_incomplete", "bookie-4:3181"),
                                    ("resolved", "bk.entries_lost", "ledger 12")]
    # validation that did not run completely is a gap too
    assert _night(tmp_path, estate, 5, [], validation_complete=False)["notices"] == {"new": 1}


def test_failed_route_keeps_no_state_so_the_next_attempt_tells_again(tmp_path, receiver_factory):
    rx = receiver_factory(statuses=[400])
    estate = _estate(tmp_path, rx.url)
    first = _night(tmp_path, estate, 1, [LOST])
    assert first["state"] is None and "route(s) ops failed" in first["problems"][0]
    assert _night(tmp_path, estate, 1, [LOST])["notices"] == {"new": 1}      # the retry tells it again
    assert [r["body"]["violations"][0]["notice"] for r in rx.requests] == ["new", "new"]


def test_unreadable_previous_state_is_named_and_everything_counts_as_new(tmp_path, receiver_factory):
    rx = receiver_factory()
    estate = _estate(tmp_path, rx.url)
    _night(tmp_path, estate, 1, [LOST])
    key = state_key("lab", "night-1", T0 + DAY)
    (tmp_path / "store" / key).write_text('{"format": "replaudit.alert-state/1"}')
    out = _night(tmp_path, estate, 2, [LOST])
    assert out["notices"] == {"new": 1}
    assert f"{key}: at_ms / run_id: expected an integer and a string" in out["problems"][0]


def test_three_nights_at_a_real_alertmanager_by_email_and_webhooks(tmp_path, receiver_factory, alertmanager_server,
                                                                   smtp_server, pushgateway_server, monkeypatch):
    slack, hook = receiver_factory(), receiver_factory()
    monkeypatch.setenv("SLACK_URL", slack.url)
    estate = parse_estate(f"""
estate: lab
store: {{uri: "file://{tmp_path}/store"}}
alerts:
  routes:
    - {{name: am, kind: alertmanager, url: "{alertmanager_server.url}", min_severity: major}}
    - {{name: chat, kind: slack, url_from: {{env: SLACK_URL}}, min_severity: major}}
    - {{name: hook, url: "{hook.url}", min_severity: major}}
    - {{name: mail, kind: email, to: [oncall@example.com], smtp_conn_id: {CONN_ID}, min_severity: major}}
    - {{name: prom, kind: pushgateway, url: "{pushgateway_server.url}"}}
systems: {{}}
""")

    def night(n, violations):
        summary = {"estate": "lab", "run_id": f"night-{n}", "status": "x", "coverage_gaps": [],
                   "validation": {"complete": True}}
        out = alert_run(open_store(f"file://{tmp_path}/store"), estate, f"night-{n}", T0 + n * DAY, summary,
                        violations, SecretResolver(environ={"SLACK_URL": slack.url}))
        assert all(r["ok"] for r in out["routes"]), out
        return out

    def lost_at_gateway():
        text = pushgateway_server.get_text("/metrics")
        return [line.rsplit(" ", 1)[1] for line in text.splitlines()
                if line.startswith("replaudit_findings{") and 'check="bk.entries_lost"' in line]

    def active():
        return [(a["labels"]["check"], a["labels"]["subject"], a["annotations"]["notice"], a["status"]["state"])
                for a in alertmanager_server.get_json("/api/v2/alerts")]

    night(1, [MINOR])                                   # healthy for every route (minor is below them)
    assert active() == [] and slack.requests == [] and hook.requests == [] and smtp_server.messages == []
    assert lost_at_gateway() == []
    night(2, [MINOR, LOST])
    assert active() == [("bk.entries_lost", "ledger 12", "new", "active")]
    assert lost_at_gateway() == ["1"]                   # every run's numbers reach the Pushgateway
    (am,) = alertmanager_server.get_json("/api/v2/alerts")
    assert am["labels"] == {"alertname": "bk.entries_lost", "estate": "lab", "system": "bookkeeper",
                            "cluster": "bk-a", "check": "bk.entries_lost", "subject": "ledger 12"}
    assert am["annotations"]["severity"] == "critical" and am["annotations"]["entry_count"] == "5"
    assert am["annotations"]["description"] == LOST_MEANS
    night(3, [MINOR, LOST])                             # the same again: Alertmanager keeps it, the others hear nothing
    assert active() == [("bk.entries_lost", "ledger 12", "firing", "active")]
    night(4, [MINOR])                                   # repaired
    assert active() == [] and lost_at_gateway() == []
    texts = [r["body"]["text"] for r in slack.requests]
    assert len(texts) == 2 and ":rotating_light: new [critical] bookkeeper/bk-a `bk.entries_lost` ledger 12" in texts[0]
    assert ":white_check_mark: resolved" in texts[1]
    assert [[v["notice"] for v in r["body"]["violations"]] for r in hook.requests] == [["new"], ["resolved"]]
    assert [m["Subject"] for m in smtp_server.messages] == ["[replaudit lab] 1 new (run night-2)",
                                                            "[replaudit lab] 1 resolved (run night-4)"]
    assert smtp_server.envelopes[0] == ("replaudit@lab.example", ["oncall@example.com"])
    assert "<td>bk.entries_lost</td><td>ledger 12</td><td>5</td>" in smtp_server.html(0)
    assert f"<td>{LOST_MEANS}</td>" in smtp_server.html(0)
    state = (tmp_path / "store" / state_key("lab", "night-4", T0 + 4 * DAY)).read_text()
    assert slack.url not in state                      # the secret URL never reaches the store


def test_an_incident_check_between_two_nights_leaves_the_lifecycle_alone(tmp_path, receiver_factory):
    # an incident check of one other subject sees neither tonight's finding nor the cluster's others: taken as a
    # night, it would resolve LOST, and the identical next night would tell it as new again
    rx = receiver_factory()
    estate = _estate(tmp_path, rx.url)
    assert _night(tmp_path, estate, 1, [LOST])["notices"] == {"new": 1}
    check = _night(tmp_path, estate, 2, [{**MINOR, "severity": "critical"}], kind="incident")
    assert check["incident"] and check["notices"] == {} and check["state"] is None
    following = _night(tmp_path, estate, 3, [LOST])
    assert following["notices"] == {} and following["previous_run"] == "night-1"
    assert len(rx.requests) == 1
    assert not list((tmp_path / "store").rglob("*incident__*"))     # no alert state, no history row
