"""The BookKeeper transforms on small hand-built DataFrames, checking exact counts."""
import json

import pytest

from audit.systems.bookkeeper.domain.model import CLOSED, OPEN
from audit.systems.bookkeeper.transforms import audit as T
from audit.systems.bookkeeper.transforms.normalize import AVAILABILITY, BOOKIES, LEDGERS
from audit.systems.bookkeeper.transforms.decode import ledger_row
from tests.bookkeeper.domain.cases import expected_entries, ledger

AS_OF = 1_700_000_000_000
DAY = 86_400_000


def _groups(entries):
    from audit.systems.bookkeeper.formats.availability import canonical_groups, entries_to_groups
    return [{"first_sequence_start": g.first_sequence_start, "last_sequence_start": g.last_sequence_start,
             "sequence_size": g.sequence_size, "sequence_period": g.sequence_period}
            for g in canonical_groups(entries_to_groups(sorted(entries)))]


def _answer(lid, bookie, entries=None, status="ok", error=None):
    return {"cluster": "c1", "bookie": bookie, "ledger_id": lid, "status": status, "error": error,
            "groups": _groups(entries) if status == "ok" else None, "source_key": f"raw/bookkeeper/c1/{bookie}/{lid}"}


@pytest.fixture(scope="module")
def frames(spark):
    healthy = ledger({0: ["b1", "b2", "b3"]}, 29, Qw=2, Qa=2, ledger_id=1)
    bug4651 = ledger({0: ["BK1", "BK2"], 5: ["BK3", "BK4"]}, 10, Qw=2, Qa=1, ledger_id=2)
    stuck = ledger({0: ["b1", "b2", "b3"]}, -1, Qw=2, Qa=2, ledger_id=3, state=OPEN, ctime=AS_OF - 3 * DAY)
    young = ledger({0: ["b1", "b2", "b3"]}, -1, Qw=2, Qa=2, ledger_id=5, state=OPEN, ctime=AS_OF - 1000)
    gap = ledger({0: ["b1", "b2", "bx"]}, 29, Qw=2, Qa=2, ledger_id=4)
    mds = [healthy, bug4651, stuck, young, gap]
    ledgers = spark.createDataFrame([ledger_row("c1", f"k{md.ledger_id}", md) for md in mds], LEDGERS)
    answers = [_answer(1, b, expected_entries(healthy, b)) for b in ("b1", "b2", "b3")]
    answers += [_answer(2, b, range(0, 7)) for b in ("BK1", "BK2")] + [_answer(2, b, range(7, 11))
                                                                        for b in ("BK3", "BK4")]
    answers += [_answer(4, "b1", status="unavailable", error="timeout: no answer in 30 s"),
                _answer(4, "b2", [e for e in expected_entries(gap, "b2") if e != 4]),
                _answer(4, "bx", expected_entries(gap, "bx")),
                _answer(99, "b1", [1, 2])]            # a ledger the metadata does not know
    availability = spark.createDataFrame(answers, AVAILABILITY)
    bookies = spark.createDataFrame(
        [("c1", b, "available", "/r1" if b in ("b1", "b2") else "/r2") for b in ("b1", "b2", "b3")]
        + [("c1", "BK1", "available", None), ("c1", "BK2", "readonly", None), ("c1", "BK3", "available", None),
           ("c1", "BK4", "registered", None)], BOOKIES)
    state = T.ledger_state(ledgers, availability)
    metrics, fragments, violations, outside = T.audit(state, bookies, run_id="r1", as_of_ms=AS_OF,
                                                      open_ledger_max_age_ms=DAY)
    return {"state": state, "metrics": {r["ledger_id"]: r.asDict() for r in metrics.collect()},
            "fragments": [r.asDict(recursive=True) for r in fragments.collect()],
            "violations": [r.asDict() for r in violations.collect()],
            "outside": [r.asDict(recursive=True) for r in outside.collect()],
            "schemas": (metrics.schema, fragments.schema, violations.schema, outside.schema)}


def test_ledger_state_is_one_row_per_ledger(frames):
    rows = {r["ledger_id"]: r for r in frames["state"].collect()}
    assert sorted(rows) == [1, 2, 3, 4, 5]
    assert sorted(a["bookie"] for a in rows[2]["answers"]) == ["BK1", "BK2", "BK3", "BK4"]
    assert rows[3]["answers"] == []


def test_output_schemas_follow_the_contract(frames):
    m, f, v, o = frames["schemas"]
    assert o.simpleString() == T.OUTSIDE.simpleString()
    assert m.simpleString() == T.METRICS.simpleString()
    assert f.simpleString() == T.FRAGMENTS.simpleString()
    assert v.simpleString() == T.VIOLATIONS.simpleString()


def test_metrics(frames):
    m = frames["metrics"]
    assert m[1] == dict(cluster="c1", ledger_id=1, state=CLOSED, audited=True, least_replicas=2, entries=30,
                        entries_lost=0, entries_below_ack_quorum=0, entries_below_write_quorum=0,
                        unavailable_bookies=0, write_quorum=2, ack_quorum=2, entries_outside_ensemble=0, ctime=None)
    assert (m[2]["entries_outside_ensemble"], m[3]["ctime"]) == (4, AS_OF - 3 * DAY)
    assert (m[2]["least_replicas"], m[2]["entries_lost"], m[2]["entries_below_ack_quorum"]) == (0, 2, 2)
    assert (m[3]["audited"], m[3]["least_replicas"], m[3]["entries"]) == (False, None, 0)
    # ledger 4: b1 unavailable (not counted), b2 lost entry 4 -> 1 replica < Qa=2
    assert (m[4]["least_replicas"], m[4]["entries_below_ack_quorum"], m[4]["entries_below_write_quorum"],
            m[4]["unavailable_bookies"]) == (1, 1, 1, 1)


def test_fragments(frames):
    got = sorted((f["ledger_id"], f["bookie"], f["bookie_index"], f["segment_first_entry_id"],
                  f["segment_last_entry_id"], f["missing_count"],
                  [(r["first"], r["last"]) for r in f["missing_ranges"]])
                 for f in frames["fragments"])
    assert got == [(2, "BK3", 0, 5, 10, 2, [(5, 6)]), (2, "BK4", 1, 5, 10, 2, [(5, 6)]),
                   (4, "b2", 1, 0, 29, 1, [(4, 4)])]


def test_violations(frames):
    got = sorted((v["check"], v["severity"], v["subject"], v["entry_count"]) for v in frames["violations"])
    assert got == [
        ("bk.ensemble_dead_bookie", "major", "ledger 2", 6),        # BK4 = index 1 of entries 5..10, Qw=E
        ("bk.ensemble_unknown_bookie", "major", "ledger 4", 20),
        ("bk.entries_below_ack_quorum", "major", "ledger 4", 1),
        ("bk.entries_lost", "critical", "ledger 2", 2),
        ("bk.entries_outside_ensemble", "major", "ledger 2", 2),   # entries 5, 6, each once (#4651)
        ("bk.ledger_open_too_long", "warning", "ledger 3", 0),
        ("bk.placement_violation", "minor", "ledger 1", 10),        # write set {b1,b2} of e = 0 mod 3
        ("bk.placement_violation", "minor", "ledger 3", 0),         # OPEN: every write set judged, no count
        ("bk.placement_violation", "minor", "ledger 4", 10),        # {b1,bx}, {bx,b1}: bx has no rack
        ("bk.placement_violation", "minor", "ledger 5", 0),
    ]
    assert all(v["run_id"] == "r1" and v["system"] == "bookkeeper" and v["cluster"] == "c1"
               for v in frames["violations"])
    lost = next(v for v in frames["violations"] if v["check"] == "bk.entries_lost")
    ev = json.loads(lost["evidence"])
    assert ev["least_replicas"] == 0 and {f["bookie"] for f in ev["fragments"]} == {"BK3", "BK4"}
    wrong = next(v for v in frames["violations"] if v["check"] == "bk.entries_outside_ensemble")
    assert [(p["bookie"], p["entry_count"], p["ranges"]) for p in json.loads(wrong["evidence"])["outside"]] == [
        ("BK1", 2, [[5, 6]]), ("BK2", 2, [[5, 6]])]


def test_outside_ensemble_information(frames):
    got = sorted((o["ledger_id"], o["bookie"], o["segment_first_entry_id"], o["entry_count"],
                  [(r["first"], r["last"]) for r in o["ranges"]]) for o in frames["outside"])
    assert got == [(2, "BK1", 5, 2, [(5, 6)]), (2, "BK2", 5, 2, [(5, 6)])]
