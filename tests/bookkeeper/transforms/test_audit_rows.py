"""audit_parsed (one ledger's findings) on the issue-8 evidence: complete inventories, read probes and their note,
#4651's finding and its per-bookie parts, the outside-ensemble information, creation time unknown."""
import json

import pytest

from audit.systems.bookkeeper.domain.model import OPEN
from audit.systems.bookkeeper.domain.replicas import BookieAnswer
from audit.systems.bookkeeper.report import claims
from audit.systems.bookkeeper.transforms.audit_rows import Settings, answers_from_row, audit_parsed
from tests.bookkeeper.domain.cases import expected_entries, healthy, ledger, ok

E3 = ["b1", "b2", "b3"]


def _checks(out):
    return sorted((v["check"], v["entry_count"]) for v in out["violations"])


def test_complete_inventory_without_a_file_is_no_such_ledger():
    md = ledger({0: E3}, 29, Qw=2, Qa=2, ledger_id=4)
    answers = {b: a for b, a in healthy(md).items() if b != "b2"}
    plain = audit_parsed("c", md, answers, Settings())
    assert (plain["unavailable_bookies"], _checks(plain)) == (1, [])
    for asked, want in ((None, [("bk.entries_below_ack_quorum", 20)]),
                        (frozenset({4}), [("bk.entries_below_ack_quorum", 20)]),
                        (frozenset({5}), [])):
        out = audit_parsed("c", md, answers, Settings(inventories={"c": {"b2": asked}}))
        assert _checks(out) == want


def test_findings_on_probed_bookies_say_they_are_sampled():
    md = ledger({0: E3}, 29, Qw=2, Qa=2, ledger_id=4)
    answers = {**healthy(md), "b3": BookieAnswer.read_probes(25, 8, [2])}
    (v,) = audit_parsed("c", md, answers, Settings())["violations"]
    assert (v["check"], v["entry_count"]) == ("bk.entries_below_ack_quorum", 1)
    assert v["message"].endswith("; sampled evidence: read probes at 25 % on b3")
    assert json.loads(v["evidence"])["sampled"] == [{"bookie": "b3", "share_percent": 25, "probed": 8}]


def test_4651_counts_each_entry_once_and_names_each_holder():
    md = ledger({0: ["BK1", "BK2"], 5: ["BK3", "BK4"]}, 10, Qw=2, Qa=1, ledger_id=9)
    answers = {"BK1": ok(range(7)), "BK2": ok(range(7)), "BK3": ok(range(7, 11)), "BK4": ok(range(7, 11))}
    out = audit_parsed("c", md, answers, Settings())
    (v,) = [v for v in out["violations"] if v["check"] == "bk.entries_outside_ensemble"]
    assert v["entry_count"] == 2 and v["severity"] == "major"
    parts = json.loads(v["evidence"])["outside"]
    assert [(p["bookie"], p["entry_count"], p["ranges"]) for p in parts] == [("BK1", 2, [[5, 6]]), ("BK2", 2, [[5, 6]])]
    keys = {k: n for k, n in claims(v)}
    assert (keys[("bk.entries_outside_ensemble", "c", 9)] == 2
            and keys[("bk.entries_outside_ensemble", "c", 9, "BK1")] == 2)
    assert out["entries_outside_ensemble"] == 4 and len(out["outside"]) == 2


def test_benign_strays_are_information_only():
    md = ledger({0: E3, 4: ["b1", "b4", "b3"]}, 29, Qw=2, Qa=2, ledger_id=3)
    answers = healthy(md, b2=ok(expected_entries(md, "b2") + [4]))
    out = audit_parsed("c", md, answers, Settings())
    assert out["violations"] == [] and out["entries_outside_ensemble"] == 1
    assert [(o["bookie"], o["entry_count"], o["ranges"]) for o in out["outside"]] == [
        ("b2", 1, [{"first": 4, "last": 4}])]


@pytest.mark.parametrize("ctime, found", [(None, False), (-1, False), (0, False), (1, True)])
def test_open_too_long_needs_a_known_ctime(ctime, found):
    md = ledger({0: E3}, -1, state=OPEN, ledger_id=2, ctime=ctime)
    out = audit_parsed("c", md, {}, Settings(as_of_ms=10**9, open_ledger_max_age_ms=1000))
    assert ("bk.ledger_open_too_long", 0) in _checks(out) if found else _checks(out) == []
    assert out["ctime"] == (ctime if found else None)


def test_answers_from_row_reads_the_evidence_columns():
    row = {"answers": [
        {"bookie": "b1", "status": "ok", "error": None, "groups": [], "evidence": "read_probe", "probe_share": 5,
         "probed": 3, "absent": [4, 2]},
        {"bookie": "b2", "status": "unavailable", "error": "timeout", "groups": None, "evidence": "entries_of_ledger"},
        {"bookie": "b2", "status": "ok", "error": None, "groups": [], "evidence": "location_index"},
        {"bookie": "b3", "status": "no_such_ledger", "error": "ENOLEDGER", "groups": None}]}
    a = answers_from_row(row)
    assert a["b1"] == BookieAnswer.read_probes(5, 3, [2, 4])
    assert (a["b2"].status, a["b2"].evidence) == ("ok", "location_index")       # the decisive answer wins
    assert (a["b3"].status, a["b3"].evidence) == ("no_such_ledger", "entries_of_ledger")
