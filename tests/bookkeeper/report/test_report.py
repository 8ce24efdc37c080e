"""BookKeeper in the run's reports: how each bookie's entries were read (listing, location index, read probes at
N %, or not read), from the normalized evidence tables, in the summary JSON, the HTML page and the terminal text."""
from audit import systems
from audit.report.html import render_html
from audit.systems.bookkeeper.report import SECTION
from audit.report.summary import build_summary
from audit.report.text import render_text
from audit.validate.outcome import SuiteOutcome, ValidationOutcome
from tests.report.systems import staged, write_table

SYSTEMS = systems.of(["bookkeeper"])
RUN = {"estate": "lab", "run_id": "r1", "attempt_id": "a1"}
GX = ValidationOutcome([SuiteOutcome("violations", "violations", "passed")], "index.html")
EVIL = "<b>bk9:3181"


def _evidence(bookie, kind, complete=False, share=None, cluster="bk-a"):
    return {"cluster": cluster, "bookie": bookie, "evidence": kind, "complete": complete, "share_percent": share,
            "reason": "r", "source_key": "k", "ledger_ids": None}


def _avail(bookie, status, error=None, evidence="entries_of_ledger", cluster="bk-a", ledger_id=3):
    return {"cluster": cluster, "bookie": bookie, "ledger_id": ledger_id, "status": status, "error": error,
            "source_key": "k", "evidence": evidence}


def _run(tmp_path):
    out = staged(tmp_path / "run", bk_ledger_replicas=[{"cluster": "bk-a", "ledger_id": 3, "state": "CLOSED",
                                                         "audited": True, "least_replicas": 2, "entries": 10}])
    write_table(out.root, "tables/bk_bookie_evidence", [
        _evidence("bk2:3181", "location_index", complete=True), _evidence("bk4:3181", "location_index"),
        _evidence("bk3:3181", "read_probe", share=50), _evidence("bk6:3181", "read_probe", share=100),
        _evidence("bk1:3181", "location_index", complete=True, cluster="bk-b")])
    write_table(out.root, "tables/bk_entry_availability", [
        _avail("bk1:3181", "ok"), _avail("bk1:3181", "unavailable", "timeout: no answer", ledger_id=4),
        _avail("bk7:3181", "error", "bookie answered ENOENTRY"),     # an answer all the same: the listing works
        _avail(EVIL, "no_such_ledger", "ENOLEDGER"),
        _avail("bk5:3181", "unavailable", "unreachable: connect refused"),
        _avail("bk5:3181", "unavailable", "list_unsupported: GetListOfEntriesOfLedger unanswered", ledger_id=4),
        _avail("bk3:3181", "ok", evidence="read_probe"), _avail("bk2:3181", "ok", evidence="location_index")])
    return out


def test_summary_says_how_each_bookie_was_read(tmp_path):
    s = build_summary(RUN, [], [], GX, None, systems=SYSTEMS, outputs=_run(tmp_path))
    reads = s["metrics"]["bookie_reads"]
    assert {c: [(r["bookie"], r["evidence"], r["exact"], r["share_percent"], r["not_read"]) for r in rs]
            for c, rs in reads.items()} == {
        "bk-a": [(EVIL, "entries_of_ledger", True, None, None),
                 ("bk1:3181", "entries_of_ledger", True, None, None),
                 ("bk2:3181", "location_index", True, None, None),
                 ("bk3:3181", "read_probe", False, 50, None),
                 ("bk4:3181", "location_index", False, None, None),
                 ("bk5:3181", None, False, None, ["list_unsupported", "unreachable"]),
                 ("bk6:3181", "read_probe", True, 100, None),
                 ("bk7:3181", "entries_of_ledger", True, None, None)],
        "bk-b": [("bk1:3181", "location_index", True, None, None)]}
    assert s["metrics"]["clusters"]["bk-a"]["audited"] == 1   # the replica metrics are still there


def test_text_and_html_give_a_line_per_bookie(tmp_path):
    s = build_summary(RUN, [], [], GX, None, systems=SYSTEMS, outputs=_run(tmp_path))
    text = render_text(s, SYSTEMS)
    for line in ("  bk-a: 3 bookies read by listing (GetListOfEntriesOfLedger): <b>bk9:3181, bk1:3181, bk7:3181",
                 "  bk-a: bookie bk2:3181 read by location index (exact)",
                 "  bk-a: bookie bk4:3181 read by location index (incomplete: a ledger without a file is unknown)",
                 "  bk-a: bookie bk3:3181 read by read probes at 50 % (sampled)",
                 "  bk-a: bookie bk6:3181 read by read probes at 100 % (every entry the metadata places)",
                 "  bk-a: bookie bk5:3181 not read (list_unsupported, unreachable)",
                 "  bk-b: bookie bk1:3181 read by location index (exact)"):
        assert line + "\n" in text + "\n", line
    page = render_html(s, [], SYSTEMS)
    assert 'id="bookie-reads"' in page
    assert "<td>bk-a</td><td>bk3:3181</td><td>read probes at 50 % (sampled)</td>" in page
    assert "<td>bk-a</td><td>bk2:3181</td><td>location index (exact)</td>" in page
    assert "<td>bk-a</td><td>&lt;b&gt;bk9:3181</td><td>listing (GetListOfEntriesOfLedger)</td>" in page
    assert "<td><b>bk9" not in page   # values escaped


def test_no_evidence_tables_no_bookie_lines(tmp_path):
    out = staged(tmp_path / "none")
    s = build_summary(RUN, [], [], GX, None, systems=SYSTEMS, outputs=out)
    assert s["metrics"]["bookie_reads"] == {}
    assert 'id="bookie-reads"' not in SECTION.html(s, []) and SECTION.text(s) == []
