"""The report's history: each metric over the last runs, and its plot in the HTML report."""
from __future__ import annotations

from audit.contracts import Gauge
from audit.history.store import RunMetrics
from audit.history.trend import trends
from audit.report.html import render_html


def _run(i, findings, gaps=None):
    values = {("replaudit_findings", f"check=c{j}"): 1.0 for j in range(findings)}
    if gaps is not None:
        values[("replaudit_coverage_gaps", "cluster=a")] = gaps
    return RunMetrics(f"r{i}", i * 1000, values)


def test_totals_per_run_tonight_last_and_at_most_the_window():
    past = [_run(i, i % 4, gaps=1.0 if i == 33 else None) for i in range(35)]
    tonight = [Gauge("replaudit_findings", "", {"check": "x"}, 2), Gauge("replaudit_findings", "", {"check": "y"}, 5),
               Gauge("replaudit_run_complete", "", {}, 1), Gauge("replaudit_run_timestamp_seconds", "", {}, 9e9)]
    h = trends(past, tonight, "tonight", 99_000, runs=30)
    assert [r["run_id"] for r in h["runs"]] == [f"r{i}" for i in range(6, 35)] + ["tonight"]
    assert h["metrics"]["replaudit_findings"] == [float(i % 4) for i in range(6, 35)] + [7.0]
    # a count absent from a run is 0 there; run_complete did not exist before tonight; the clock is not plotted
    assert h["metrics"]["replaudit_coverage_gaps"][-3:] == [1.0, 0.0, 0.0]
    assert h["metrics"]["replaudit_run_complete"] == [None] * 29 + [1.0]
    assert list(h["metrics"]) == ["replaudit_findings", "replaudit_coverage_gaps", "replaudit_run_complete"]


def test_the_report_plots_each_metric():
    h = trends([_run(0, 1), _run(1, 3)], [Gauge("replaudit_findings", "", {"check": "x"}, 2)], "r2", 2000)
    page = render_html({"estate": "lab", "run_id": "r2", "status": "violations", "counts": {}, "history": h}, [],
                       systems=[])
    assert "<h2>History: the last 3 run(s)</h2>" in page
    row = page.split('<tr id="history-replaudit_findings">')[1].split("</tr>")[0]
    assert "<td>2</td><td>1</td><td>3</td>" in row
    assert row.count("<polyline") == 1 and 'points="0.0,56.0 160.0,4.0 320.0,30.0"' in row


def test_findings_show_when_they_were_first_seen(tmp_path):
    from audit.findings import fingerprint
    from audit.report.build import build_run_report
    from tests.report.systems import SYSTEMS, staged, write_table

    old = {"run_id": "r", "system": "bookkeeper", "cluster": "bk-a", "check": "bk.entries_lost",
           "severity": "critical", "subject": "ledger 1", "entry_count": 2, "message": "m", "evidence": "{}"}
    new = {**old, "subject": "ledger 2"}
    root = tmp_path / "attempt"
    staged(root)
    write_table(root, "findings/violations", [old, new])
    seen = {fingerprint("bookkeeper", "bk-a", "bk.entries_lost", "ledger 1"): 1_700_000_000_000}
    summary = build_run_report(root, estate="lab", run_id="r", attempt_id="a", report_prefix="file:///x/",
                               systems=SYSTEMS, at_ms=1_790_000_000_000, first_seen=seen)
    assert summary["findings_new"] == 1
    page = (root / "reports" / "report.html").read_text()
    assert "<th>first seen</th>" in page
    assert "2023-11-14 22:13 UTC" in page and "2026-09-21 14:13 UTC" in page
