"""The report's history: each tracked metric over the last runs (the history's runs, then tonight), summed over
its series. Pure: the runs come in, a JSON-able dict goes out (summary["history"])."""
from __future__ import annotations

from typing import Iterable, Sequence

from audit.contracts import Gauge
from audit.history.store import RunMetrics

RUNS = 30
# what the report plots, in this order: totals of the shared gauges, then every other metric a run recorded
COUNTS = ("replaudit_findings", "replaudit_entries_at_risk", "replaudit_coverage_gaps")   # absent from a run: 0
TRACKED = (*COUNTS, "replaudit_run_complete")
UNPLOTTED = ("replaudit_run_timestamp_seconds",)


def trends(past: Sequence[RunMetrics], tonight: Iterable[Gauge], run_id: str, at_ms: int,
           runs: int = RUNS) -> dict:
    """{"runs": [{"run_id", "at_ms"}], "metrics": {name: [total per run, None where a run lacks the metric]}}."""
    now = RunMetrics(run_id, at_ms, {})
    totals: list[dict[str, float]] = []
    chosen = [r for r in past if r.run_id != run_id][-(runs - 1):] if runs > 1 else []
    for r in chosen:
        t: dict[str, float] = {}
        for (name, _), v in r.values.items():
            t[name] = t.get(name, 0.0) + v
        totals.append(t)
    t = {}
    for g in tonight:
        t[g.name] = t.get(g.name, 0.0) + float(g.value)
    totals.append(t)
    names = [n for n in TRACKED if any(n in x for x in totals)] + sorted(
        {n for x in totals for n in x} - set(TRACKED) - set(UNPLOTTED))
    # a count metric absent from a run was 0 there; a run before a metric existed has none (None)
    metrics = {n: [x.get(n, 0.0 if n in COUNTS else None) for x in totals] for n in names}
    return {"runs": [{"run_id": r.run_id, "at_ms": r.at_ms} for r in [*chosen, now]], "metrics": metrics}
