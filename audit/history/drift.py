"""Tonight against the history: pure functions, no I/O. The strategies are Deequ's anomaly-detection strategies
(com.amazon.deequ.anomalydetection): an absolute change, a relative rate of change (tonight / before), a simple
threshold. A rule names a metric (and optionally some of its labels), a strategy and what to compare with: the
previous run, or the run a week before (the newest at least 7 days older: "week over week"). Every series of the
metric is judged on its own; a series missing from a run counts 0 there (every gauge is a count, and a count
that is gone is 0). Without a run to compare with, nothing is judged."""
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


class Drift(NamedTuple):
    rule: Rule
    metric: str
    labels: str                          # the series key (audit/history/store.py)
    before: float | None                 # None: a threshold, no comparison
    after: float
    baseline_run: str | None

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
        return f"{self.metric} went from {self.before:g} to {self.after:g} {when} (change {self.after - self.before:+g})"


def baseline(history: Sequence[RunMetrics], at_ms: int, compare_with: str) -> RunMetrics | None:
    """The run to compare tonight with; `history` oldest first, without tonight's run."""
    if compare_with == "week":
        older = [r for r in history if r.at_ms <= at_ms - WEEK_MS]
        return older[-1] if older else None
    earlier = [r for r in history if r.at_ms < at_ms]
    return earlier[-1] if earlier else None


def _anomalous(rule: Rule, before: float, after: float) -> bool:
    if rule.strategy == "absolute":
        change = after - before
        return (rule.max_increase is not None and change > rule.max_increase) or \
            (rule.max_decrease is not None and -change > rule.max_decrease)
    rate = (math.inf if after > 0 else 1.0) if before == 0 else after / before
    return (rule.max_increase is not None and rate > rule.max_increase) or \
        (rule.max_decrease is not None and rate < rule.max_decrease)


def _matches(rule: Rule, metric: str, labels: str) -> bool:
    if metric != rule.metric:
        return False
    have = parse_series(labels)
    return all(have.get(k) == v for k, v in rule.labels.items())


def detect(rules: Iterable[Rule], history: Sequence[RunMetrics], tonight: Mapping[tuple[str, str], float],
           at_ms: int) -> list[Drift]:
    out = []
    for rule in rules:
        mine = {k: v for k, v in tonight.items() if _matches(rule, *k)}
        if rule.strategy == "threshold":
            out += [Drift(rule, m, labels, None, v, None) for (m, labels), v in sorted(mine.items())
                    if (rule.lower is not None and v < rule.lower) or (rule.upper is not None and v > rule.upper)]
            continue
        base = baseline(history, at_ms, rule.compare_with)
        if base is None:
            continue
        theirs = {k: v for k, v in base.values.items() if _matches(rule, *k)}
        for key in sorted(set(mine) | set(theirs)):
            before, after = theirs.get(key, 0.0), mine.get(key, 0.0)
            if _anomalous(rule, before, after):
                out.append(Drift(rule, key[0], key[1], before, after, base.run_id))
    return out
