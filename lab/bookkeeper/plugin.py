"""The BookKeeper lab as the system record's `Lab` part (audit/systems/bookkeeper/system.py)."""
from __future__ import annotations

from collections import Counter

from audit.contracts import CollectRequest
from lab.bookkeeper.runner import collect as collect_lab
from lab.scope import keep_wanted


def collect(req: CollectRequest):
    return collect_lab(req.cluster, req.sink, req.secrets, req.as_of_ms, req.thresholds.open_ledger_max_age_s)


def scope_truth(truth: dict, scope, cluster) -> dict:
    """The ledgers asked for only; the summary's counts by check follow."""
    def wanted(item) -> bool:
        return not isinstance(item, dict) or item.get("ledger_id") is None or scope.wants(str(item["ledger_id"]))

    out = keep_wanted(truth, [k for k, v in truth.items() if isinstance(v, list) and k != "faults"], wanted)
    if isinstance(truth.get("summary"), dict):
        out["summary"] = {**truth["summary"], "findings_by_check": dict(Counter(f["check"] for f in out["findings"]))}
    return out
