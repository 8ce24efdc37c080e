"""Pulsar in the run's reports: the HTML section (tables, escaped names, a redelivered/skipped SVG per pair,
the lab failover comparison) and build_run_report reading metrics/pulsar_* Parquet and writing Pulsar plans."""
import json
import re
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq

from audit.report.build import build_run_report
from audit.report.html import render_html
from audit.report.summary import build_summary
from audit.report.svg import grouped_bar_chart
from audit.validate.outcome import SuiteOutcome, ValidationOutcome
from tests.report.systems import SYSTEMS, staged

SVG = "{http://www.w3.org/2000/svg}"
EVIL = '<b onclick="x">'
T = "persistent://acme/orders/created"
GX = ValidationOutcome([SuiteOutcome("violations", "violations", "passed")], "index.html")


def fo(sub, r, s, lost=0, topic=T, target_mdp="7:9", exact="7:4", acks=(), count=None):
    return {"run_id": "r1", "topic": topic, "subscription": sub, "source_cluster": "east", "target_cluster": "west",
            "replicated": True, "source_mdp": "5:4", "target_mdp": target_mdp, "expected_target_mdp": None,
            "exact_target_mdp": exact, "window_from": "5:0", "window_to": "5:20", "compared": 20,
            "only_on_source": 0, "only_on_target": 0, "redelivered": r, "skipped": s, "lost": lost,
            "redelivered_ranges": "[]", "skipped_ranges": "[]", "to_acknowledge": json.dumps(list(acks)),
            "to_acknowledge_count": len(acks) if count is None else count, "complete": True}


def _bars(svg_text):
    root = ET.fromstring(svg_text)
    return [(b.get("data-label"), b.get("data-series"), int(b.get("data-count")), float(b.get("height")))
            for b in root.iter(f"{SVG}rect") if b.get("class") == "bar"]


def test_grouped_chart_one_bar_per_series_scaled():
    bars = _bars(grouped_bar_chart(["a", "b"], {"redelivered": [10, 5], "skipped": [0, 20]}, "t", "messages"))
    assert [b[:3] for b in bars] == [("a", "redelivered", 10), ("a", "skipped", 0), ("b", "redelivered", 5),
                                     ("b", "skipped", 20)]
    assert bars[0][3] == 2 * bars[2][3] and bars[3][3] == 2 * bars[0][3] and bars[1][3] == 0
    assert "no data" in grouped_bar_chart([], {}, "t", "y")


def test_html_pulsar_section_and_escaping(tmp_path):
    rows = [fo("billing", 5, 1, 1), fo(EVIL, 0, 3), fo("quiet", 0, 0)]
    snaps = [{"cluster": "east", "topic": T, "requests": 3, "responses": 3, "snapshots": 0, "updates": 0,
              "unanswered_requests": 0, "timed_out": 2, "newest_snapshot_age_s": None, "replicated_subscriptions": 1}]
    summary = build_summary({"estate": "lab", "run_id": "r"}, [], [], GX, None, systems=SYSTEMS,
                            outputs=staged(tmp_path, pulsar_failover=rows, pulsar_snapshots=snaps))
    page = render_html(summary, [], SYSTEMS)
    assert "<h2>Pulsar failover</h2>" in page and "timing_out" in page
    assert EVIL not in page and "&lt;b onclick=&quot;x&quot;&gt;" in page
    svg = re.search(r'<figure class="pulsar-failover" id="pulsar-failover-0">(<svg.*?</svg>)', page, re.S).group(1)
    assert [b[:3] for b in _bars(svg)] == [("created billing", "redelivered", 5), ("created billing", "skipped", 1),
                                           (f"created {EVIL}", "redelivered", 0), (f"created {EVIL}", "skipped", 3)]
    assert "quiet" not in svg                       # nothing redelivered or skipped: not plotted


def test_html_without_pulsar_has_no_pulsar_section():
    page = render_html(build_summary({"estate": "lab", "run_id": "r"}, [], [], GX, None, systems=SYSTEMS), [],
                       SYSTEMS)
    assert "Pulsar" not in page


def test_html_lab_failover_comparison(tmp_path):
    truth = {"system": "pulsar", "cluster": "east", "findings": [], "failover": [
        {"topic": T, "subscription": "billing", "source_cluster": "east", "target_cluster": "west",
         "redelivered": 4, "skipped": 1, "lost": 1}]}
    summary = build_summary({"estate": "lab", "run_id": "r"}, [], [], GX, truth, systems=SYSTEMS,
                            outputs=staged(tmp_path, pulsar_failover=[fo("billing", 5, 1, 1)]))
    page = render_html(summary, [], SYSTEMS)
    assert "Pulsar failover counts" in page and "5 (expected 4)" in page and "1 (expected 1)" in page


def _estate(admin_urls):
    """What the Pulsar planner reads of the estate: its Pulsar clusters' names and admin URLs."""
    clusters = tuple(SimpleNamespace(name=n, admin_url=u) for n, u in admin_urls.items())
    return SimpleNamespace(clusters=lambda system: clusters if system == "pulsar" else ())


def _write(root, area, name, rows):
    d = root / area / name
    d.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), str(d / "part-00000.parquet"))


def test_build_run_report_reads_pulsar_metrics_and_plans(tmp_path):
    rows = [fo("billing", 2, 1, acks=("7:6",)), fo("in-step", 0, 0, target_mdp="7:4"),
            fo("broken", 1, 0, exact="7-4")]
    _write(tmp_path, "metrics", "pulsar_failover", rows)
    _write(tmp_path, "metrics", "pulsar_snapshots", [
        {"cluster": "east", "topic": T, "requests": 4, "responses": 4, "snapshots": 4, "updates": 2,
         "unanswered_requests": 0, "timed_out": 0, "newest_snapshot_age_s": 1, "replicated_subscriptions": 3}])
    summary = build_run_report(tmp_path, estate="lab", run_id="r1", attempt_id="a1", report_prefix="file:///x/",
                               systems=SYSTEMS, estate_config=_estate({"west": "https://west:8443"}))
    assert summary["pulsar"]["pairs"]["east->west"]["subscriptions"] == 3
    assert summary["pulsar"]["snapshots"]["east"][T]["health"] == "ok"
    (item,) = summary["repair_plans"]
    assert (item["system"], item["cluster"], item["subscription"], item["dry_run"]) == ("pulsar", "west", "billing",
                                                                                        True)
    assert "exact_target_mdp" in summary["repair_errors"][0]["error"]
    written = json.loads((tmp_path / "reports" / "summary.json").read_text())
    assert written["pulsar"] == summary["pulsar"]
    plans = json.loads((tmp_path / "reports" / "repair_plan.json").read_text())
    assert plans["systems"]["bookkeeper"]["plans"] == [] and plans["dry_run"] is True
    (plan,) = plans["systems"]["pulsar"]["plans"]
    assert plan["plan_id"] == item["plan_id"]
    assert plan["steps"][0]["http"]["url"] == ("https://west:8443/admin/v2/persistent/acme/orders/created"
                                               "/subscription/billing/resetcursor")
    assert [e["subscription"] for e in plans["systems"]["pulsar"]["errors"]] == ["broken"]
    assert "<h2>Pulsar failover</h2>" in (tmp_path / "reports" / "report.html").read_text()


def test_build_run_report_without_pulsar(tmp_path):
    summary = build_run_report(tmp_path, estate="lab", run_id="r1", attempt_id="a1", report_prefix="file:///x/",
                               systems=SYSTEMS)
    assert "pulsar" not in summary and summary["repair_plans"] == [] and "repair_errors" not in summary
    plans = json.loads((tmp_path / "reports" / "repair_plan.json").read_text())
    assert plans["systems"]["pulsar"] == {"plans": [], "errors": []}
