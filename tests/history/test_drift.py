"""Drift rules as one table of cases: history + tonight -> the series flagged."""
from __future__ import annotations

import pytest

from audit.history.drift import WEEK_MS, Rule, baseline, bounds, detect
from audit.history.store import RunMetrics, parse_series, series_key

DAY = WEEK_MS // 7
AT = 100 * DAY
A = series_key({"system": "bookkeeper", "cluster": "bk-a", "check": "bk.entries_below_ack_quorum"})
B = series_key({"system": "bookkeeper", "cluster": "bk-b", "check": "bk.entries_below_ack_quorum"})
M = "replaudit_entries_at_risk"


def run(days_ago, **values):
    return RunMetrics(f"r-{days_ago}", AT - days_ago * DAY, {(M, {"a": A, "b": B}[k]): v for k, v in values.items()})


HISTORY = [run(8, a=100, b=10), run(7, a=100, b=10), run(1, a=140, b=10)]
UP50 = Rule(M, "relative", max_increase=1.5)
# (name, rule, history, tonight, flagged [(series, before, after)])
CASES = [
    ("within-the-rate", UP50, HISTORY, {"a": 150, "b": 10}, []),
    ("past-the-rate", UP50, HISTORY, {"a": 211, "b": 10}, [("a", 140, 211)]),
    ("week-over-week", UP50._replace(compare_with="week"), HISTORY, {"a": 151, "b": 10}, [("a", 100, 151)]),
    ("unchanged-is-quiet", UP50, HISTORY[:2], {"a": 100, "b": 10}, []),
    ("a-series-that-appears", UP50, [run(1, a=10)], {"a": 10, "b": 3}, [("b", 0, 3)]),
    ("a-series-that-vanishes-is-0", Rule(M, "relative", max_decrease=0.5), [run(1, a=10, b=4)], {"a": 10},
     [("b", 4, 0)]),
    ("no-history-no-judgement", UP50, [], {"a": 1000}, []),
    ("no-run-a-week-before", UP50._replace(compare_with="week"), [run(1, a=1)], {"a": 1000}, []),
    ("absolute-increase", Rule(M, "absolute", max_increase=20), [run(1, a=100, b=10)], {"a": 121, "b": 30},
     [("a", 100, 121)]),
    ("absolute-decrease", Rule(M, "absolute", max_decrease=5), [run(1, a=100, b=10)], {"a": 94, "b": 10},
     [("a", 100, 94)]),
    ("threshold", Rule(M, "threshold", upper=50), [], {"a": 51, "b": 50}, [("a", None, 51)]),
    ("only-the-labels-asked", UP50._replace(labels={"cluster": "bk-b"}), [run(1, a=1, b=1)], {"a": 9, "b": 2},
     [("b", 1, 2)]),
    ("another-metric-is-not-judged", Rule("replaudit_findings", "threshold", upper=0), [], {"a": 9}, []),
]


@pytest.mark.parametrize("name, rule, history, tonight, flagged", CASES, ids=[c[0] for c in CASES])
def test_detect(name, rule, history, tonight, flagged):
    values = {(M, {"a": A, "b": B}[k]): v for k, v in tonight.items()}
    got = detect([rule], history, values, AT)
    names = {A: "a", B: "b"}
    assert [(names[d.labels], d.before, d.after) for d in got] == flagged
    for d in got:
        assert d.metric == M and d.message


def test_baseline_and_series_keys():
    assert baseline(HISTORY, AT, "previous").run_id == "r-1"
    assert baseline(HISTORY, AT, "week").run_id == "r-7"
    assert parse_series(A) == {"system": "bookkeeper", "cluster": "bk-a", "check": "bk.entries_below_ack_quorum"}
    assert series_key({"b": "2", "a": "1"}) == "a=1,b=2" and parse_series("") == {}


def test_great_expectations_gives_the_same_verdicts_through_suite_parameters():
    from audit.history.gx_drift import violated

    everything = []
    for name, rule, history, tonight, _ in CASES:
        values = {(M, {"a": A, "b": B}[k]): v for k, v in tonight.items()}
        everything += bounds([rule], history, values, AT)
    assert len(everything) == 19 and sum(not b.holds() for b in everything) == 8
    assert violated(everything) == [b for b in everything if not b.holds()]
