"""The alert stage of a run: tonight's findings and coverage gaps -> the lifecycle's notices (lifecycle.py) -> each
route -> the state kept for tomorrow (state.py). Nothing is sent for what was already told: two identical nights
send nothing on the second, a retried alert task of the same run sends nothing again. When a route fails, the
state is not kept, so the next attempt tells every route again (Alertmanager dedupes; a webhook may see it twice)."""
from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Any, Callable, Mapping

from audit.alerts.alertmanager import post_alerts
from audit.alerts.email import send_email
from audit.alerts.lifecycle import INCOMPLETE, Notice, Policy, Signal, Tracked, from_gaps, from_violations, transition
from audit.alerts.pushgateway import push_metrics
from audit.alerts.slack import post_message
from audit.alerts.state import AlertStateError, already_alerted, previous_state, save_state
from audit.alerts.webhook import post_violations
from audit.contracts import SEVERITIES, Gauge
from audit.history import store as history
from audit.history.drift import Bound, Rule, bounds
from audit.history.gx_drift import DriftValidationError, violated
from audit.history.metrics import run_gauges

# route kind (audit.config.model.ROUTE_KINDS) -> sender(route, summary, notices, secrets, firing=..., gauges=...)
# -> AlertResult
SENDERS: Mapping[str, Callable[..., Any]] = {"webhook": post_violations, "alertmanager": post_alerts,
                                             "slack": post_message, "email": send_email,
                                             "pushgateway": push_metrics}
EVERY_RUN = ("alertmanager", "pushgateway")   # told every run: they dedupe or keep state by themselves

log = logging.getLogger("replaudit.alerts")
VALIDATION = Signal("", "*", INCOMPLETE, "great expectations", "major", 1, "validation incomplete: a suite was "
                                                                            "skipped or broke")


def signals(summary: Mapping[str, Any], violations: list[Mapping[str, Any]]) -> list[Signal]:
    """Every finding, one "audit incomplete" per (system, cluster, source) not covered, and one when validation
    did not run completely."""
    out = from_violations(v for v in violations if v.get("severity") in SEVERITIES)
    out += from_gaps(summary.get("coverage_gaps") or [])
    validation = summary.get("validation") or {}
    if validation and not validation.get("complete", True):
        out.append(VALIDATION)
    return out


DRIFT = "drift"
HISTORY_RUNS = 30


def drift_signal(d: Bound) -> Signal:
    """A drift flag as a signal: its series is its subject, so it follows the lifecycle like a finding."""
    labels = history.parse_series(d.labels)
    return Signal(labels.get("system", ""), labels.get("cluster", "*"), DRIFT, f"{d.metric}{{{d.labels}}}",
                  d.rule.severity, int(d.after), d.message)


def drifts(store: Any, estate: Any, run_id: str, at_ms: int, gauges: list[Gauge],
           problems: list[str]) -> list[Bound]:
    """Append tonight's metrics to the history (once per run), then judge them by the estate's drift rules: the
    bounds come from the history, GX gives the verdicts (audit/history/gx_drift.py)."""
    try:
        past = history.recent(store, estate.name, HISTORY_RUNS, exclude=run_id)
    except ValueError as exc:
        problems.append(f"metrics history unreadable, drift not judged: {exc}")
        log.error("%s", problems[-1])
        past = None
    history.append(store, estate.name, run_id, at_ms, gauges)
    if past is None:
        return []
    tonight = {(g.name, history.series_key(g.labels)): float(g.value) for g in gauges}
    rules = [Rule(**{f: getattr(r, f) for f in Rule._fields}) for r in estate.alerts.drift]
    try:
        return violated(bounds(rules, past, tonight, at_ms))
    except DriftValidationError as exc:
        problems.append(str(exc))
        log.error("%s", problems[-1])
        return []


def notice_row(n: Notice) -> dict:
    """A notice as the routes receive it: the finding's keys plus the lifecycle's."""
    return _row(n.tracked, n.kind)


def _row(t: Tracked, kind: str) -> dict:
    s = t.signal
    return {"system": s.system, "cluster": s.cluster, "check": s.check, "severity": s.severity,
            "subject": s.subject, "entry_count": s.count, "message": s.message, "notice": kind,
            "fingerprint": s.fingerprint, "first_seen_ms": t.first_seen_ms, "last_seen_ms": t.last_seen_ms}


def alert_run(store: Any, estate: Any, run_id: str, at_ms: int, summary: Mapping[str, Any],
              violations: list[Mapping[str, Any]], secrets: Any,
              senders: Mapping[str, Callable[..., Any]] = SENDERS) -> dict:
    """{"notices": {kind: count}, "routes": [delivery results], "previous_run", "state" (its key), "problems"}."""
    name = estate.name
    if already_alerted(store, name, run_id):
        log.info("alerts of run %s were sent already: nothing sent again", run_id)
        return {"notices": {}, "routes": [], "previous_run": None, "state": None, "already_sent": True}
    if (summary.get("run") or {}).get("kind") == "incident":
        # its narrow scope would read as "everything outside it resolved" and poison tomorrow's baseline, the
        # history and the Pushgateway's numbers: the person who asked reads its report; the nightly alerts
        log.info("run %s is an incident check: its report is its answer, the nightly lifecycle is untouched", run_id)
        return {"notices": {}, "routes": [], "previous_run": None, "state": None, "incident": True, "problems": []}
    problems = []
    try:
        previous, previous_run = previous_state(store, name, run_id)
    except AlertStateError as exc:     # tonight's findings all count as new rather than none being told
        previous, previous_run = {}, None
        problems.append(f"previous alert state unreadable, every signal counts as new: {exc}")
        log.error("%s", problems[-1])
    policy = Policy(estate.alerts.repeat_interval * 1000, estate.alerts.worse_factor)
    # the run's numbers, once: the history, the drift rules and the Pushgateway all take these
    gauges = run_gauges(summary, violations, time.time())
    tonight = signals(summary, violations) + [drift_signal(d) for d in drifts(store, estate, run_id, at_ms, gauges,
                                                                             problems)]
    notices, state = transition(previous, tonight, at_ms, policy)
    rows = [notice_row(n) for n in notices]
    told = {n.tracked.signal.fingerprint: n.kind for n in notices}
    firing = [_row(t, told.get(fp, "firing")) for fp, t in sorted(state.items())]
    # a route that dedupes by itself (Alertmanager) is told every night what still fires, the Pushgateway gets
    # every run's numbers; the others only changes
    results = [senders[route.kind](route, summary, rows, secrets, firing=firing, gauges=gauges).to_json()
               for route in estate.alerts.routes if rows or route.kind in EVERY_RUN]
    failed = [r["route"] for r in results if not r["ok"]]
    key = None
    if failed:       # not kept: a retry of this run, or the next run, tells it again
        problems.append(f"route(s) {', '.join(failed)} failed: alert state not kept, the notices will be sent again")
        log.error("%s", problems[-1])
    else:
        key = save_state(store, name, run_id, at_ms, state, notices, results)
    return {"notices": dict(Counter(n.kind for n in notices)), "routes": results, "previous_run": previous_run,
            "state": key, "problems": problems}
