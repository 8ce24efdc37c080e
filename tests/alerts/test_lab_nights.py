"""Three consecutive lab nights through the whole pipeline (collect, normalize, audit, validate, report, alert): a
healthy BookKeeper lab cluster, the same cluster with a disk lost on night 2, repaired on night 3. Exactly one
alert on night 2 (at a real Alertmanager, by email and by webhook), one resolved notice on night 3, nothing on
night 1; a drift flag on night 2 where the history says so; the Pushgateway holds each night's numbers."""
from __future__ import annotations

import json

from audit import pipeline
from tests.estates import write_lab_estate
from tests.http_receiver import receiver_factory  # noqa: F401  (fixture)
from tests.prometheus import alertmanager_server, pushgateway_server  # noqa: F401  (fixtures)
from tests.smtp import CONN_ID, smtp_server  # noqa: F401  (fixture)

DAY = 24 * 3600 * 1000
T0 = 1_790_000_000_000
HEALTHY = "[]"
DISK_LOST = "[{kind: disk_loss, ledgers: 1}]"


def test_three_lab_nights_fault_on_night_two_repaired_on_night_three(tmp_path, receiver_factory,
                                                                      alertmanager_server, smtp_server,
                                                                      pushgateway_server):
    hook = receiver_factory()
    routes = f"""
alerts:
  routes:
    - {{name: am, kind: alertmanager, url: "{alertmanager_server.url}", min_severity: major}}
    - {{name: hook, url: "{hook.url}", min_severity: major}}
    - {{name: mail, kind: email, to: [oncall@example.com], smtp_conn_id: {CONN_ID}, min_severity: major}}
    - {{name: prom, kind: pushgateway, url: "{pushgateway_server.url}"}}
  drift:
    - {{metric: replaudit_entries_at_risk, strategy: absolute, max_increase: 0}}
"""

    def night(n: int, faults: str) -> dict:
        estate = write_lab_estate(tmp_path / f"estate-{n}.yaml", estate="lab", store=f'{{uri: "file://{tmp_path}/store"}}',
                                  cluster="bk-a", lab=f"{{seed: 5, ledgers: 24, bookies: 6, faults: {faults}}}",
                                  extra=routes)
        summary = pipeline.run_all(str(estate), run_id=f"night-{n}", as_of_ms=T0 + n * DAY)
        assert all(r["ok"] for r in summary["alerts"]["routes"]), summary["alerts"]
        assert summary["alerts"]["problems"] == []
        return summary

    def at_risk_at_gateway() -> int:
        text = pushgateway_server.get_text("/metrics")
        return sum(int(float(line.rsplit(" ", 1)[1])) for line in text.splitlines()
                   if line.startswith("replaudit_entries_at_risk{"))

    def active():
        return [(a["labels"]["check"], a["annotations"]["notice"])
                for a in alertmanager_server.get_json("/api/v2/alerts")]

    first = night(1, HEALTHY)
    assert first["alerts"]["notices"] == {}
    assert active() == [] and hook.requests == [] and smtp_server.messages == [] and at_risk_at_gateway() == 0

    second = night(2, DISK_LOST)
    lab = second["lab"]
    assert lab["injected"] == lab["detected"] > 0 and lab["false_alarms"] == 0
    # the finding (routes at major and above) and the drift flag (a warning: kept in the state, below the routes)
    assert second["alerts"]["notices"] == {"new": 2}
    (told,) = [v for r in hook.requests for v in r["body"]["violations"]]
    assert told["notice"] == "new" and told["system"] == "bookkeeper" and told["cluster"] == "bk-a"
    assert active() == [(told["check"], "new")]
    assert [m["Subject"] for m in smtp_server.messages] == ["[replaudit lab] 1 new (run night-2)"]
    at_risk = at_risk_at_gateway()
    assert at_risk == told["entry_count"] > 0
    state = json.loads(next((tmp_path / "store" / "lab" / "alerts").glob("*__night-2.json")).read_text())
    (flag,) = [t["signal"] for t in state["tracked"] if t["signal"]["check"] == "drift"]
    assert flag["subject"].startswith("replaudit_entries_at_risk{") and flag["severity"] == "warning"
    assert f"from 0 to {at_risk}" in flag["message"]

    third = night(3, HEALTHY)
    assert third["alerts"]["notices"] == {"resolved": 2}      # the finding and the drift flag
    assert [[v["notice"] for v in r["body"]["violations"]] for r in hook.requests] == [["new"], ["resolved"]]
    assert active() == [] and at_risk_at_gateway() == 0
    assert [m["Subject"] for m in smtp_server.messages][1:] == ["[replaudit lab] 1 resolved (run night-3)"]
