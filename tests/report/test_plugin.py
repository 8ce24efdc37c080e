"""The shared report is driven by the systems it is given: a system registered at run time, with its own report
section and repair planner, shows up in summary.json, report.html, the terminal text, the lab scorecard and
repair_plan.json; a failed normalize/audit job (reports/stages/*.json) makes the run incomplete; tables are read
in the flat and the per-system layouts alike."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from audit import systems as registry
from audit.contracts import Check, Pipeline, Repair, ReportSection, RunOutputs, System, SystemConfig
from audit.report.build import build_run_report, load_violations
from audit.tables import read_rows
from audit.report.html import render_html
from audit.report.text import render_text
from tests.report.systems import SYSTEMS, write_table

GX_OK = {"success": True, "complete": True, "suites": [{"name": "violations", "status": "passed",
                                                        "expectations": []}], "docs_index": None}


def _toy_summary(outputs: RunOutputs) -> dict:
    rows = read_rows(outputs.root / "metrics" / "toy_widgets")
    if not rows:
        return {}
    return {"toy": {"widgets": len(rows), "broken": sum(bool(r["broken"]) for r in rows)}}


def _toy_html(summary, violations) -> str:
    toy = summary.get("toy")
    return f'<h2 id="toy">Toy widgets: {toy["widgets"]} ({toy["broken"]} broken)</h2>' if toy else ""


def _toy_text(summary) -> list[str]:
    toy = summary.get("toy")
    return [f'  toy: {toy["widgets"]} widget(s), {toy["broken"]} broken'] if toy else []


def _toy_claims(v) -> list:
    ev = json.loads(v.get("evidence") or "{}")
    return [((v["check"], v["cluster"], ev.get("widget")), v.get("entry_count"))]


def _toy_scorecard(truths, outputs):
    mine = [t for t in truths if t["system"] == "toy"]
    if not mine:
        return None
    wanted = sum(len(t.get("widgets", [])) for t in mine)
    got = len(read_rows(outputs.root / "metrics" / "toy_widgets"))
    return {"expected": wanted, "got": got, "perfect": wanted == got}


def _toy_plans(outputs):
    broken = [r for r in read_rows(outputs.root / "metrics" / "toy_widgets") if r["broken"]]
    plans = [{"system": "toy", "cluster": r["cluster"], "dry_run": True, "widget": r["widget"],
              "plan_id": f"p-{r['widget']}"} for r in broken if r["widget"] != "??"]
    errors = [{"status": "error", "system": "toy", "error": "widget ?? has no name"} for r in broken
              if r["widget"] == "??"]
    return plans, errors


TOY = System(
    name="toy", title="Toy", checks={"toy.broken": Check("major", "a widget is broken")},
    config=SystemConfig(dict),
    pipeline=Pipeline(collect=lambda req: None, normalize=lambda *a: {}, audit=lambda *a: {}),
    report=ReportSection(summary=_toy_summary, html=_toy_html, text=_toy_text,
                         truth_key=lambda f: (f["check"], f["cluster"], f["widget"]), claims=_toy_claims,
                         truth_item=lambda f: {"widget": f["widget"]}, truth_required=("check", "cluster", "widget"),
                         scorecard=_toy_scorecard, scorecard_key="widgets"),
    repair=Repair(_toy_plans))


@pytest.fixture
def toy():
    registry.register(TOY)
    try:
        yield registry.get("toy")
    finally:
        registry.unregister("toy")
    assert "toy" not in registry.names()


def _violation(widget, count=1, cluster="t1"):
    return {"run_id": "r1", "system": "toy", "cluster": cluster, "check": "toy.broken", "severity": "major",
            "subject": f"widget {widget}", "entry_count": count, "message": "broken", "evidence":
                json.dumps({"widget": widget})}


def _stage(root: Path, violations, truth=None, gx=GX_OK):
    write_table(root, "metrics/toy_widgets", [
        {"cluster": "t1", "widget": "w1", "broken": True}, {"cluster": "t1", "widget": "w2", "broken": False},
        {"cluster": "t1", "widget": "??", "broken": True}])
    if violations:
        write_table(root, "findings/violations/system=toy", violations)
    (root / "reports").mkdir(parents=True, exist_ok=True)
    (root / "reports" / "validation.json").write_text(json.dumps(gx))
    if truth:
        lab = root / "raw" / "_lab" / truth["cluster"]
        lab.mkdir(parents=True)
        (lab / "ground_truth.json").write_text(json.dumps(truth))


def _report(root, systems):
    return build_run_report(root, estate="e", run_id="r1", attempt_id="a1", report_prefix="file:///x/",
                            systems=systems)


def test_a_system_registered_at_run_time_is_in_every_report(tmp_path, toy):
    truth = {"cluster": "t1", "faults": [{"kind": "break"}], "widgets": ["w1", "w2", "??"],
             "findings": [{"check": "toy.broken", "cluster": "t1", "widget": "w1", "entry_count": 1}]}
    _stage(tmp_path, [_violation("w1"), _violation("w9", cluster="t1")], truth)
    summary = _report(tmp_path, [*SYSTEMS, toy])

    written = json.loads((tmp_path / "reports" / "summary.json").read_text())
    assert written["toy"] == summary["toy"] == {"widgets": 3, "broken": 2}
    assert written["counts"]["by_system"] == {"toy": 2} and written["status"] == "violations"
    # the lab file has no "system": it is the toy's, the only system whose truth keys its findings carry
    lab = written["lab"]
    assert (lab["injected"], lab["detected"], lab["false_alarms"]) == (1, 1, 1)
    assert lab["false_alarm_items"] == [{"check": "toy.broken", "cluster": "t1", "subject": "widget w9",
                                         "entry_count": 1}]
    assert lab["widgets"] == {"expected": 3, "got": 3, "perfect": True} and lab["perfect"] is False
    assert written["repair_plans"] == [{"system": "toy", "cluster": "t1", "dry_run": True, "widget": "w1",
                                        "plan_id": "p-w1"}]
    assert written["repair_errors"] == [{"system": "toy", "error": "widget ?? has no name"}]

    plans = json.loads((tmp_path / "reports" / "repair_plan.json").read_text())
    toy_part = plans["systems"]["toy"]
    assert plans["dry_run"] is True and [p["plan_id"] for p in toy_part["plans"]] == ["p-w1"]
    assert [e["error"] for e in toy_part["errors"]] == ["widget ?? has no name"]
    assert plans["systems"]["bookkeeper"] == plans["systems"]["pulsar"] == {"plans": [], "errors": []}

    page = (tmp_path / "reports" / "report.html").read_text()
    assert '<h2 id="toy">Toy widgets: 3 (2 broken)</h2>' in page and "toy / t1" in page
    assert page.index("Replica counts") < page.index('id="toy"') < page.index("Great Expectations")

    text = render_text(written, [*SYSTEMS, toy])
    assert "  toy: 3 widget(s), 2 broken" in text and "lab: injected 1, detected 1" in text


def test_the_report_shows_only_the_systems_it_is_given(tmp_path, toy):
    _stage(tmp_path, [])
    summary = _report(tmp_path, [toy])
    assert "metrics" not in summary and "pulsar" not in summary and summary["toy"]["widgets"] == 3
    page = (tmp_path / "reports" / "report.html").read_text()
    assert "Replica counts" not in page and "Pulsar" not in page and 'id="toy"' in page
    plans = json.loads((tmp_path / "reports" / "repair_plan.json").read_text())
    assert set(plans) == {"dry_run", "systems"} and set(plans["systems"]) == {"toy"}
    assert 'id="toy"' in render_html(summary, [], [toy]) and "toy: 3 widget(s)" in render_text(summary, [toy])


def test_a_failed_stage_makes_the_run_incomplete_never_clean(tmp_path, toy):
    _stage(tmp_path, [])
    assert _report(tmp_path, [toy])["status"] == "clean"
    stages = tmp_path / "reports" / "stages"
    stages.mkdir()
    (stages / "audit-toy.json").write_text(json.dumps({"system": "toy", "stage": "audit", "error": "OOM in job"}))
    summary = _report(tmp_path, [toy])
    assert (summary["status"], summary["complete"]) == ("incomplete", False)
    assert summary["coverage_gaps"] == [{"system": "toy", "cluster": "*", "source": "audit job", "what": "audit of toy",
                                         "error": "OOM in job"}]
    assert "Coverage gaps: 1" in (tmp_path / "reports" / "report.html").read_text()
    assert "not covered: 1 source(s), e.g. audit job: OOM in job" in render_text(summary, [toy])


def test_truth_naming_a_system_not_in_the_run_is_refused(tmp_path, toy):
    from audit.report.summary import SummaryInputError

    truth = {"system": "kafka", "cluster": "t1", "findings": []}
    _stage(tmp_path, [], truth)
    with pytest.raises(SummaryInputError) as err:
        _report(tmp_path, [toy])
    assert (err.value.source, err.value.field) == ("ground_truth[0]", "system")


def test_two_systems_claiming_one_summary_key_is_refused(tmp_path, toy):
    from audit.report.summary import SummaryInputError

    twin = System(**{**TOY.__dict__, "name": "twin"})
    _stage(tmp_path, [])
    with pytest.raises(SummaryInputError) as err:
        _report(tmp_path, [toy, twin])
    assert err.value.field == "toy"


# -- reading the shared tables -----------------------------------------------------------------
def test_read_rows_flat_nested_and_hive_layouts(tmp_path):
    flat = tmp_path / "flat"
    write_table(tmp_path, "flat", [{"system": "a", "n": 1}], "part-00000.parquet")
    write_table(tmp_path, "flat", [{"system": "a", "n": 2}], "part-00001.parquet")
    (flat / "_SUCCESS").write_text("")
    (flat / ".part-00000.parquet.crc").write_text("x")
    assert [r["n"] for r in read_rows(flat)] == [1, 2]

    nested = tmp_path / "nested"
    write_table(nested, "a", [{"system": "a", "n": 1}])
    write_table(nested, "b/deeper", [{"system": "b", "n": 2, "extra": "x"}])
    write_table(nested, "system=c", [{"n": 3}])                 # the folder names the system
    write_table(nested, "_temporary/0", [{"system": "z", "n": 9}])
    rows = read_rows(nested)
    assert [(r["system"], r["n"]) for r in rows] == [("a", 1), ("b", 2), ("c", 3)]
    assert rows[1]["extra"] == "x" and "extra" not in rows[0]
    assert [sorted(r) for r in read_rows(nested, columns=["n", "extra"])] == [["n"], ["extra", "n"], ["n", "system"]]
    assert read_rows(tmp_path / "missing") == []
    assert read_rows(nested / "a" / "part-00000.parquet") == [{"system": "a", "n": 1}]


def test_quarantine_of_every_system_is_a_coverage_gap(tmp_path, toy):
    _stage(tmp_path, [])
    row = {"cluster": "t1", "source_key": "raw/toy/t1/w3.bin", "payload_kind": "widget", "reason": "truncated"}
    write_table(tmp_path, "tables/quarantine/system=toy", [row])
    write_table(tmp_path, "tables/quarantine/other", [{**row, "system": "other", "source_key": "k2"}])
    gaps = _report(tmp_path, [toy])["coverage_gaps"]
    assert [(g["system"], g["source"], g["what"], g["error"]) for g in gaps] == [
        ("other", "k2", "widget", "truncated"), ("toy", "raw/toy/t1/w3.bin", "widget", "truncated")]


class _Store:
    def __init__(self, root: Path):
        self.root = root

    def list(self, prefix):
        return iter(sorted(p.relative_to(self.root).as_posix() for p in self.root.rglob("*") if p.is_file()
                           and p.relative_to(self.root).as_posix().startswith(prefix)))

    def get(self, key):
        return (self.root / key).read_bytes()


class _Writer:
    def key(self, *parts):
        return "e/runs/r1/attempts/a1/" + "/".join(parts)


def test_load_violations_reads_every_system_folder(tmp_path):
    base = tmp_path / "e/runs/r1/attempts/a1/findings/violations"
    write_table(base, "system=toy", [_violation("w1")])
    write_table(base, "pulsarish", [{**_violation("w2"), "system": "other"}])
    write_table(base, "", [{**_violation("w3"), "system": "flat"}])          # the old flat layout
    (base / "_SUCCESS").write_text("")
    got = load_violations(_Store(tmp_path), _Writer())
    assert sorted((v["system"], json.loads(v["evidence"])["widget"]) for v in got) == [
        ("flat", "w3"), ("other", "w2"), ("toy", "w1")]
