"""Tonight against the history: pure functions, no I/O. The strategies are Deequ's anomaly-detection strategies
(com.amazon.deequ.anomalydetection): an absolute change, a relative rate of change (tonight / before), a simple
threshold. A rule names a metric (and optionally some of its labels), a strategy and what to compare with: the
previous run, or the run a week before (the newest at least 7 days older: "week over week"). Every series of the
metric is judged on its own; a series missing from a run counts 0 there (every gauge is a count, and a count
that is gone is 0). Without a run to compare with, nothing is judged.

`bounds` turns a rule and the history into the range tonight's value must lie in (low..high, inclusive): these are
the GX suite parameters that gx_drift.py hands to one ExpectColumnValuesToBeBetween per series, so GX gives the
verdict; `Bound.holds` is the same comparison in Python (`detect`), for the table of cases."""
from __future__ import annotations

import math
from typing import Iterable, Mapping, NamedTuple, Sequence

from audit.history.store import RunMetrics, parse_series

WEEK_MS = 7 * 24 * 3600 * 1000


class Rule(NamedTuple):
    metric: str
    strategy: str                        # absolute | relative | threshold
    max_increase: float | None = None    # absolute: tonight - before; relative: tonight / before (1.5 = +50 %)
    max_decrease: float | None = None    # absolute: before - tonight; relative: the lowest tonight / before
    lower: float | None = None           # threshold
    upper: float | None = None
    compare_with: str = "previous"       # previous | week
    labels: Mapping[str, str] = {}       # only the series with these labels
    severity: str = "warning"


class Bound(NamedTuple):
    """The range a series' value must lie in tonight, from a rule and the history."""

    rule: Rule
    metric: str
    labels: str                          # the series key (audit/history/store.py)
    before: float | None                 # None: a threshold, no comparison
    after: float
    baseline_run: str | None
    low: float | None                    # inclusive; None: no lower bound
    high: float | None

    def holds(self) -> bool:
        return (self.low is None or self.after >= self.low) and (self.high is None or self.after <= self.high)

    @property
    def message(self) -> str:
        r = self.rule
        if r.strategy == "threshold":
            return f"{self.metric} is {self.after:g}, outside [{r.lower}, {r.upper}]"
        when = "week over week" if r.compare_with == "week" else "since the previous run"
        if r.strategy == "relative":
            rate = math.inf if not self.before else self.after / self.before
            return f"{self.metric} went from {self.before:g} to {self.after:g} {when} (x{rate:.2f}; allowed " \
                   f"x{r.max_decrease if r.max_decrease is not None else 0}..x{r.max_increase})"
        return f"{self.metric} went from {self.before:g} to {self.after:g} {when} " \
               f"(change {self.after - self.before:+g})"


def baseline(history: Sequence[RunMetrics], at_ms: int, compare_with: str) -> RunMetrics | None:
    """The run to compare tonight with; `history` oldest first, without tonight's run."""
    if compare_with == "week":
        older = [r for r in history if r.at_ms <= at_ms - WEEK_MS]
        return older[-1] if older else None
    earlier = [r for r in history if r.at_ms < at_ms]
    return earlier[-1] if earlier else None


def _range(rule: Rule, before: float) -> tuple[float | None, float | None]:
    """(low, high) for tonight given the value before. Relative from 0: any rise is an infinite rate (high 0)."""
    if rule.strategy == "absolute":
        return (None if rule.max_decrease is None else before - rule.max_decrease,
                None if rule.max_increase is None else before + rule.max_increase)
    return (None if rule.max_decrease is None else before * rule.max_decrease,
            None if rule.max_increase is None else before * rule.max_increase)


def _matches(rule: Rule, metric: str, labels: str) -> bool:
    if metric != rule.metric:
        return False
    have = parse_series(labels)
    return all(have.get(k) == v for k, v in rule.labels.items())


def bounds(rules: Iterable[Rule], history: Sequence[RunMetrics], tonight: Mapping[tuple[str, str], float],
           at_ms: int) -> list[Bound]:
    """One bound per rule and series judged tonight."""
    out = []
    for rule in rules:
        mine = {k: v for k, v in tonight.items() if _matches(rule, *k)}
        if rule.strategy == "threshold":
            out += [Bound(rule, m, labels, None, v, None, rule.lower, rule.upper)
                    for (m, labels), v in sorted(mine.items())]
            continue
        base = baseline(history, at_ms, rule.compare_with)
        if base is None:
            continue
        theirs = {k: v for k, v in base.values.items() if _matches(rule, *k)}
        for key in sorted(set(mine) | set(theirs)):
            before, after = theirs.get(key, 0.0), mine.get(key, 0.0)
            out.append(Bound(rule, key[0], key[1], before, after, base.run_id, *_range(rule, before)))
    return out


def detect(rules: Iterable[Rule], history: Sequence[RunMetrics], tonight: Mapping[tuple[str, str], float],
           at_ms: int) -> list[Bound]:
    """The bounds tonight breaks, judged in Python (the GX run gives the same: gx_drift.py)."""
    return [b for b in bounds(rules, history, tonight, at_ms) if not b.holds()]
