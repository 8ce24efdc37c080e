"""Approved repairs (docs/repair.md): a saved plan, found by its id among the estate's published runs, carried out
by its system's `repair_actions` -- or only checked, in a dry run (the default everywhere).

The rules, the same from the CLI (`replaudit repair apply`) and the Airflow DAG (`replaudit_repair`):
- the plan is read from the published run that holds it; the file must still have the sha256 the run's manifest
  recorded, and the plan must still hash to its id (audit.repair.common.plan_id): otherwise it was changed;
- a plan older than the estate's `repairs.max_plan_age` (from its run's publication) is refused, and so is one
  that an earlier attempt already applied;
- applying needs an approver's name (the Airflow approval's responder, or the CLI's --approve with the plan id);
- before each action its precondition is read from the cluster; the first that does not hold stops the plan;
- every step (request, check, call, result, verification, refusal) is a record of the audit log in the store
  (audit/repair/log.py), with the resolved secrets scrubbed."""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable

from audit.contracts import RepairAction
from audit.repair.common import RepairInputError, plan_id as hash_plan, plans_in_file
from audit.repair.log import AuditLog, records
from audit.store.base import ObjectStore
from audit.store.run import list_runs

PLAN_ID = re.compile(r"^[0-9a-f]{64}$")
PLAN_FILE = "/reports/repair_plan.json"
APPLIED, DRY_RUN_OK = "applied", "dry_run_ok"


class RepairRefused(Exception):
    """A plan the runner will not act on: `reason` says why, for the person and the audit log."""

    def __init__(self, plan_id: str, reason: str):
        self.plan_id, self.reason = plan_id, reason
        super().__init__(f"repair plan {plan_id}: refused: {reason}")


@dataclass(frozen=True)
class SavedPlan:
    plan: dict
    system: str
    run_id: str
    planned_at: datetime        # when the run that made it was published
    key: str                    # the store key of the run's repair_plan.json


@dataclass
class Outcome:
    plan_id: str
    mode: str                   # dry_run | apply
    status: str                 # dry_run_ok | applied | refused | precondition_failed | failed | verify_failed
    steps: list[dict] = field(default_factory=list)
    reason: str = ""

    def to_json(self) -> dict:
        return {"plan_id": self.plan_id, "mode": self.mode, "status": self.status, "reason": self.reason,
                "steps": self.steps}


def find_plan(store: ObjectStore, estate: str, plan_id: str) -> SavedPlan:
    """The plan with this id in the newest published run that holds it. RepairRefused when there is none, or when
    the run's plan file no longer has the sha256 its manifest recorded."""
    if not PLAN_ID.match(plan_id or ""):
        raise RepairRefused(str(plan_id), "a plan id is 64 lowercase hex digits (the plan's sha256)")
    for run in reversed(list_runs(store, estate)):
        for obj in run.objects("reports"):
            if not obj["key"].endswith(PLAN_FILE):
                continue
            data = store.get(obj["key"])
            plan = next((p for p in plans_in_file(json.loads(data)) if p["plan_id"] == plan_id), None)
            if plan is None:
                continue
            if hashlib.sha256(data).hexdigest() != obj.get("sha256"):
                raise RepairRefused(plan_id, f"{obj['key']} changed after run {run.run_id} was published (its "
                                             "sha256 is not the manifest's)")
            return SavedPlan(plan, str(plan.get("system", "")), run.run_id, run.created, obj["key"])
    raise RepairRefused(plan_id, f"no published run of estate {estate!r} holds this plan")


def review(saved: SavedPlan, max_age_s: int, now: datetime) -> str | None:
    """Why this plan must not be acted on, or None."""
    plan = saved.plan
    if hash_plan(plan) != plan.get("plan_id"):
        return "the plan no longer hashes to its id: it was changed after it was made"
    if plan.get("status", "planned") != "planned":
        return f"its status is {plan.get('status')!r}, not 'planned'"
    age = (now - saved.planned_at).total_seconds()
    if age > max_age_s:
        return (f"stale: planned by run {saved.run_id} at {saved.planned_at.isoformat()}, {age / 3600:.1f} h ago, "
                f"beyond the estate's repairs.max_plan_age ({max_age_s / 3600:g} h): re-run the audit")
    return None


def describe(saved: SavedPlan, actions: list[RepairAction]) -> str:
    """What the approver reads: the plan's identity and hash, then every call in order with what it requires."""
    plan = saved.plan
    lines = [f"Repair plan {plan['plan_id']}",
             f"system {saved.system}, cluster {plan.get('cluster')}; made by run {saved.run_id} at "
             f"{saved.planned_at.isoformat()}",
             f"sha256 of the plan: {hash_plan(plan)}", ""]
    for i, a in enumerate(actions, 1):
        lines.append(f"{i}. {a.name} on {a.target}")
        lines.append("   " + json.dumps(dict(a.request), sort_keys=True))
    for w in plan.get("warnings") or ():
        lines.append(f"warning: {w}")
    return "\n".join(lines)


def plan_actions(saved: SavedPlan, estate: Any, secrets: Any) -> list[RepairAction]:
    from audit import systems

    plan_id = saved.plan.get("plan_id", "")
    try:
        system = systems.get(saved.system)
    except KeyError:
        raise RepairRefused(plan_id, f"no registered system {saved.system!r}") from None
    if system.repair is None or system.repair.actions is None:
        raise RepairRefused(plan_id, f"{system.title} plans are carried out by hand: follow their steps")
    try:
        cluster = estate.cluster(system.name, str(saved.plan.get("cluster")))
    except KeyError as exc:
        raise RepairRefused(plan_id, str(exc).strip("'\"")) from None
    try:
        return list(system.repair.actions(saved.plan, cluster, secrets))
    except RepairInputError as exc:
        raise RepairRefused(plan_id, str(exc)) from None


def already_applied(store: ObjectStore, estate: str, plan_id: str) -> bool:
    return any(r.get("event") == "finished" and r.get("status") == APPLIED for r in records(store, estate, plan_id))


def run_plan(store: ObjectStore, estate: Any, plan_id: str, *, secrets: Any, approved_by: str | None = None,
             dry_run: bool = True, now: datetime | None = None,
             on_describe: Callable[[str], None] | None = None) -> Outcome:
    """Check (dry run) or apply one saved plan; every step goes to the audit log. Raises RepairRefused (logged)
    for a plan that cannot be acted on at all; a precondition that does not hold or a failed call is an Outcome."""
    now = now or datetime.now(timezone.utc)
    mode = "dry_run" if dry_run else "apply"
    log = AuditLog(store, estate.name, plan_id if PLAN_ID.match(plan_id or "") else "invalid", secrets=secrets)
    log.write("requested", mode=mode, approved_by=approved_by)
    try:
        saved = find_plan(store, estate.name, plan_id)
        reason = review(saved, estate.repairs.max_plan_age, now)
        if reason is None and not dry_run and not approved_by:
            reason = "not approved: applying needs an approver"
        if reason is None and not dry_run and already_applied(store, estate.name, plan_id):
            reason = "already applied by an earlier attempt (its audit log says so): re-run the audit instead"
        if reason is not None:
            raise RepairRefused(plan_id, reason)
        actions = plan_actions(saved, estate, secrets)
    except RepairRefused as exc:
        log.write("refused", reason=exc.reason)
        raise
    log.write("plan", run_id=saved.run_id, planned_at=saved.planned_at.isoformat(), system=saved.system,
              cluster=saved.plan.get("cluster"), actions=len(actions), key=saved.key)
    if on_describe:
        on_describe(describe(saved, actions))
    outcome = Outcome(plan_id, mode, DRY_RUN_OK if dry_run else APPLIED)
    for step, action in enumerate(actions, 1):
        where = {"step": step, "action": action.name, "target": action.target}
        if not _step(log, outcome, action, where, dry_run):
            break
    log.write("finished", status=outcome.status, reason=outcome.reason)
    return outcome


def _step(log: AuditLog, outcome: Outcome, action: RepairAction, where: dict, dry_run: bool) -> bool:
    """One action: check, then (applying) call and verify. False stops the plan (outcome updated)."""
    if dry_run and action.after_previous:
        outcome.steps.append({**where, "checked": False})
        log.write("not_checked", **where, reason="its precondition is what the call before it leaves")
        return True
    if not _judge(log, outcome, "check", action.check, where, "precondition_failed"):
        return False
    if dry_run:
        outcome.steps.append({**where, "checked": True})
        return True
    log.write("call", **where, request=dict(action.request))
    try:
        result = dict(action.run())
    except Exception as exc:  # the cluster's answer, whatever it is, ends the plan and is kept
        log.write("call_failed", **where, error=f"{type(exc).__name__}: {exc}")
        outcome.status, outcome.reason = "failed", f"step {where['step']} ({action.name}) failed: {exc}"
        return False
    log.write("result", **where, result=result)
    outcome.steps.append({**where, "result": result})
    if action.verify is not None:
        return _judge(log, outcome, "verify", action.verify, where, "verify_failed")
    return True


def _judge(log: AuditLog, outcome: Outcome, what: str, read: Callable, where: dict, failed: str) -> bool:
    try:
        seen = read()
    except Exception as exc:  # an unreachable cluster cannot confirm anything: stop
        log.write(f"{what}_failed", **where, error=f"{type(exc).__name__}: {exc}")
        outcome.status, outcome.reason = failed, f"step {where['step']}: {what} could not read the cluster: {exc}"
        return False
    log.write(what, **where, holds=seen.holds, observed=seen.observed, expected=seen.expected)
    if not seen.holds:
        outcome.status = failed
        outcome.reason = (f"step {where['step']} ({where['action']} on {where['target']}): {what} does not hold: "
                          f"expected {json.dumps(seen.expected, default=str)}, "
                          f"found {json.dumps(seen.observed, default=str)}")
        return False
    return True


def saved_plans(store: ObjectStore, estate: str, run_id: str | None = None) -> tuple[str, list[dict]]:
    """(run id, its plans) of the newest published run holding a plan file, or of `run_id`."""
    runs = list_runs(store, estate)
    for run in reversed(runs):
        if run_id and run.run_id != run_id:
            continue
        keys = [o["key"] for o in run.objects("reports") if o["key"].endswith(PLAN_FILE)]
        if keys:
            return run.run_id, plans_in_file(json.loads(store.get(keys[0])))
        if run_id:
            break
    raise RepairRefused(run_id or "-", f"no published run{' ' + run_id if run_id else ''} of estate {estate!r} "
                                        "has a repair plan file")


__all__ = ["APPLIED", "DRY_RUN_OK", "Outcome", "RepairRefused", "SavedPlan", "already_applied", "describe",
           "find_plan", "plan_actions", "review", "run_plan", "saved_plans"]
