import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

from audit.report.html import render_html
from audit.report.summary import build_summary
from audit.report.svg import bar_chart
from audit.validate.outcome import ExpectationOutcome, SuiteOutcome, ValidationOutcome
from tests.report.systems import SYSTEMS

EVIL = '<script>alert("x")</script>'


def _violation(check, severity, subject, count, cluster="bk-a"):
    return {"run_id": "r", "system": "bookkeeper", "cluster": cluster, "check": check, "severity": severity,
            "subject": subject, "entry_count": count, "message": f"msg {subject}", "evidence": "{}"}


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.links = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.links += [v for k, v in attrs if k in ("href", "src")]


def _page(violations, gaps=(), truth=None, histogram=None):
    e = ExpectationOutcome("expect_column_values_to_be_between", "bk.entries_lost", "critical", "d", False, 1)
    gx = ValidationOutcome([SuiteOutcome("bk_ledger_replicas", "bk_ledger_replicas", "failed", expectations=[e])],
                           docs_index="index.html")
    metrics = {"replica_histogram": {str(k): n for k, n in (histogram or {0: 1, 2: 3, 3: 40}).items()},
               "min_ack_quorum": 2}
    summary = build_summary({"estate": "lab", "run_id": "r-1"}, violations, list(gaps), gx, truth, systems=SYSTEMS,
                            parts={"metrics": metrics})
    return summary, render_html(summary, violations, SYSTEMS)


def test_page_is_self_contained_and_escapes_values():
    vs = [_violation("bk.entries_lost", "critical", f"ledger 1 {EVIL}", 5),
          _violation("bk.placement_violation", "minor", "ledger 2", 0, cluster=EVIL)]
    gaps = [{"system": "bookkeeper", "cluster": "bk-a", "source": "bookie", "what": "b1:3181", "error": EVIL}]
    _, page = _page(vs, gaps)
    assert "<script" not in page and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    p = _Tags()
    p.feed(page)
    assert "script" not in p.tags and "link" not in p.tags and "img" not in p.tags
    assert p.links == ["data_docs/index.html"]   # the only link: relative, to the Data Docs
    assert 'id="status">violations<' in page
    assert "Coverage gaps: 1" in page and "b1:3181" in page


def test_findings_grouped_by_cluster_most_severe_first():
    vs = [_violation("bk.placement_violation", "minor", "ledger 9", 0),
          _violation("bk.entries_lost", "critical", "ledger 7", 3),
          _violation("bk.entries_below_ack_quorum", "major", "ledger 8", 2, cluster="bk-b")]
    _, page = _page(vs)
    a, b = page.index("bookkeeper / bk-a"), page.index("bookkeeper / bk-b")
    assert a < page.index("ledger 7") < page.index("ledger 9") < b < page.index("ledger 8")
    means = SYSTEMS[0].checks["bk.entries_lost"].meaning     # the check's tooltip and its row of the counts
    assert f'<span title="{means}">bk.entries_lost</span>' in page and f"<td>{means}</td>" in page


def test_histogram_svg_has_one_bar_per_replica_count_scaled_to_counts():
    _, page = _page([], histogram={3: 40, 0: 1, 2: 10})
    svg = re.search(r"<svg.*?</svg>", page, re.S).group(0)
    root = ET.fromstring(svg)   # well-formed XML
    bars = [el for el in root.iter("{http://www.w3.org/2000/svg}rect") if el.get("class") == "bar"]
    assert [(b.get("data-key"), b.get("data-count")) for b in bars] == [("0", "1"), ("2", "10"), ("3", "40")]
    heights = [float(b.get("height")) for b in bars]
    assert heights[2] == 4 * heights[1] and abs(heights[0] * 10 - heights[1]) <= 0.5
    assert [b.get("fill") for b in bars] == ["#c0392b", "#2e86c1", "#2e86c1"]   # below Qa in red


def test_empty_histogram_and_lab_scorecard():
    truth = {"cluster": "bk-a", "faults": [{}], "findings": [
        {"check": "bk.entries_lost", "cluster": "bk-a", "ledger_id": 1, "entry_count": 5}]}
    vs = [_violation("bk.entries_lost", "critical", "ledger 1", 4)]
    summary, page = _page(vs, truth=truth, histogram={})
    assert summary["lab"]["wrong_count"] == 1
    assert "Lab scorecard" in page and "Wrong counts" in page
    assert "no data" in bar_chart({}, "t", "x", "y")
