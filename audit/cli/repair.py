"""`replaudit repair plan|apply|log` (docs/repair.md): the same rules as the `replaudit_repair` DAG. `apply` is a
dry run (every precondition read from the cluster, no call made) unless --approve repeats the plan's id: the
person confirms the exact plan they reviewed, as the DAG's approver does in Airflow."""
from __future__ import annotations

import json
import os
import sys

from audit.cli.output import EXIT_CLEAN, EXIT_INCOMPLETE, EXIT_VIOLATIONS, print_json


def add_parser(sub, estate_arg) -> None:
    p = sub.add_parser("repair", help="repair plans: list or show them, check or apply one (docs/repair.md)")
    repair_sub = p.add_subparsers(dest="repair_command", required=True)
    q = repair_sub.add_parser("plan", help="the plans of the newest run (or --run-id); --plan ID shows one as the "
                                           "approver sees it")
    estate_arg(q)
    q.add_argument("--run-id", help="a published run (default: the newest with a plan file)")
    q.add_argument("--plan", metavar="ID", help="show this plan: every call, its request and the plan's hash")
    q.add_argument("--json", action="store_true")
    q = repair_sub.add_parser("apply", help="check a plan against its cluster (dry run), or apply it with --approve")
    estate_arg(q)
    q.add_argument("--plan", metavar="ID", required=True, help="the plan's id (its sha256)")
    q.add_argument("--approve", metavar="ID", help="apply: repeat the plan's id to confirm the plan you reviewed")
    q.add_argument("--by", default=os.environ.get("USER") or "unknown", help="the approver's name (default: $USER)")
    q.add_argument("--json", action="store_true")
    q = repair_sub.add_parser("log", help="print a plan's audit log (JSON Lines, oldest first)")
    estate_arg(q)
    q.add_argument("--plan", metavar="ID", required=True)


def cmd_repair(args, load, usage_error) -> int:
    from audit.config.secrets import SecretResolver
    from audit.repair import runner
    from audit.repair.log import records
    from audit.store import open_estate_store

    estate = load(args.estate)
    secrets = SecretResolver()
    store = open_estate_store(estate.store, secrets)
    try:
        if args.repair_command == "log":
            for record in records(store, estate.name, args.plan):
                print(json.dumps(record, sort_keys=True))
            return EXIT_CLEAN
        if args.repair_command == "plan":
            return _plan(store, estate, secrets, args)
        if args.approve is not None and args.approve != args.plan:
            raise usage_error(f"--approve {args.approve!r} is not the plan's id {args.plan!r}: approve the plan "
                              "you reviewed")
        outcome = runner.run_plan(store, estate, args.plan, secrets=secrets, dry_run=args.approve is None,
                                  approved_by=args.by if args.approve else None,
                                  on_describe=None if args.json else print)
    except runner.RepairRefused as exc:
        print(f"replaudit repair: {exc}", file=sys.stderr)
        return EXIT_INCOMPLETE
    if args.json:
        print_json(outcome.to_json())
    else:
        print(f"\n{outcome.mode}: {outcome.status}" + (f": {outcome.reason}" if outcome.reason else ""))
    return EXIT_CLEAN if outcome.status in (runner.APPLIED, runner.DRY_RUN_OK) else EXIT_VIOLATIONS


def _plan(store, estate, secrets, args) -> int:
    from audit.repair import runner

    if args.plan:
        saved = runner.find_plan(store, estate.name, args.plan)
        actions = runner.plan_actions(saved, estate, secrets)
        print_json(saved.plan) if args.json else print(runner.describe(saved, actions))
        return EXIT_CLEAN
    run_id, plans = runner.saved_plans(store, estate.name, args.run_id)
    rows = [{"plan_id": p["plan_id"], "system": p.get("system"), "cluster": p.get("cluster"),
             "kind": p.get("kind") or ("subscription" if "subscription" in p else "ledgers"),
             "subject": _subject(p)} for p in plans]
    if args.json:
        print_json({"run_id": run_id, "plans": rows})
    else:
        print(f"run {run_id}: {len(rows)} plan(s)")
        for r in rows:
            print(f"  {r['plan_id']}  {r['system']:<10} {r['cluster']:<12} {r['kind']:<12} {r['subject']}")
    return EXIT_CLEAN


def _subject(plan: dict) -> str:
    if plan.get("group"):
        return f"group {plan['group']} on {plan.get('topic')}:{plan.get('partition')}"
    if plan.get("subscription"):
        return f"{plan.get('topic')} / {plan['subscription']}"
    if plan.get("topic"):
        return f"{plan['topic']}-{plan.get('partition')}"
    return f"{len(plan.get('ledgers') or ())} ledger(s)"
