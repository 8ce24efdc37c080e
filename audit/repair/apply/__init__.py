"""Each system's approved-repair calls: `<system>.py` has `actions(plan, cluster, secrets) -> [RepairAction]`
(audit.contracts.RepairAction), registered as the System's `repair_actions`. The shared flow that runs them --
find the saved plan, refuse a stale or changed one, check before each call, keep the audit log -- is
audit/repair/runner.py."""
