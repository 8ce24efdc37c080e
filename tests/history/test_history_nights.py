"""Consecutive nights through the alert stage: the metrics history grows one file per run (partitioned by date,
read back as one table by Spark) and a drift rule flags the night the history says so."""
from __future__ import annotations

import json

from audit.alerts.notify import alert_run
from audit.alerts.state import state_key
from audit.config.estate import parse_estate
from audit.config.secrets import SecretResolver
from audit.history.store import recent
from audit.store import open_store

DAY = 24 * 3600 * 1000
T0 = 1_790_000_000_000


def _finding(count):
    return {"system": "bookkeeper", "cluster": "bk-a", "check": "bk.entries_below_ack_quorum", "severity": "major",
            "subject": "ledger 7", "entry_count": count, "message": "m"}


def test_nights_grow_the_history_and_a_week_over_week_rise_is_flagged(tmp_path, spark):
    estate = parse_estate(f"""
estate: lab
store: {{uri: "file://{tmp_path}/store"}}
alerts:
  worse_factor: 100
  repeat_interval: 30d
  drift:
    - {{metric: replaudit_entries_at_risk, strategy: relative, max_increase: 1.5, compare_with: week,
       labels: {{system: bookkeeper}}}}
systems: {{}}
""")
    store = open_store(f"file://{tmp_path}/store")
    counts = [100, 100, 105, 110, 110, 120, 130, 140, 151, 160]     # nights 0..9
    told = []
    for n, count in enumerate(counts):
        summary = {"estate": "lab", "run_id": f"night-{n}", "complete": True, "coverage_gaps": [],
                   "validation": {"complete": True}}
        out = alert_run(store, estate, f"night-{n}", T0 + n * DAY, summary, [_finding(count)], SecretResolver({}))
        assert out["problems"] == []
        told.append(out["notices"])
    assert told[0] == {"new": 1}                          # the finding itself
    # night 7 is the first with a run a week before (night 0: 100 -> 140, x1.4); night 8: 100 -> 151 (x1.51)
    assert told[7] == {} and told[8] == {"new": 1}
    assert told[9] == {}                                  # 105 -> 160 (x1.52): still drifting, already told
    state = json.loads((tmp_path / "store" / state_key("lab", "night-9", T0 + 9 * DAY)).read_text())
    (flag,) = [t["signal"] for t in state["tracked"] if t["signal"]["check"] == "drift"]
    assert flag["subject"] == ("replaudit_entries_at_risk{check=bk.entries_below_ack_quorum,cluster=bk-a,"
                               "system=bookkeeper}")
    assert (flag["system"], flag["cluster"], flag["count"]) == ("bookkeeper", "bk-a", 160)
    assert "week over week" in flag["message"]
    runs = recent(store, "lab", limit=30)
    assert [r.run_id for r in runs] == [f"night-{n}" for n in range(10)]
    # the newest runs only, from the newest days' files; a run excluded (tonight's) is never among them
    assert [r.run_id for r in recent(store, "lab", limit=3)] == ["night-7", "night-8", "night-9"]
    assert [r.run_id for r in recent(store, "lab", limit=2, exclude="night-9")] == ["night-7", "night-8"]
    table = spark.read.parquet(str(tmp_path / "store" / "lab" / "history"))
    rows = table.where("metric = 'replaudit_entries_at_risk'").orderBy("at_ms").collect()
    assert [int(r["value"]) for r in rows] == counts
    assert len({r["date"] for r in rows}) == 10 and rows[0]["cluster"] == "bk-a"


def test_a_run_writes_its_history_once(tmp_path):
    estate = parse_estate(f'estate: lab\nstore: {{uri: "file://{tmp_path}/store"}}\nsystems: {{}}\n')
    store = open_store(f"file://{tmp_path}/store")
    summary = {"estate": "lab", "run_id": "r", "coverage_gaps": [], "validation": {"complete": True}}
    alert_run(store, estate, "r", T0, summary, [_finding(3)], SecretResolver({}))
    files = list((tmp_path / "store" / "lab" / "history").rglob("*.parquet"))
    assert len(files) == 1 and files[0].parent.name.startswith("date=")
    before = files[0].read_bytes()
    alert_run(store, estate, "r", T0, summary, [_finding(99)], SecretResolver({}))     # a retried task
    assert files[0].read_bytes() == before
