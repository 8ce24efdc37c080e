"""The machine-readable summary of a run (reports/summary.json). Pure: values in, dict out.

Exit status: "violations" when any finding exists, else "incomplete" when something could not be
audited (a coverage gap, or a GX suite that was skipped or broke), else "clean".
Lab scorecard: each ground-truth finding is matched to the run's violations on (check, cluster, ledger_id[, bookie])
for BookKeeper and on (check, cluster, topic, subscription, target_cluster) -- from the evidence JSON -- for Pulsar;
a match whose entry_count differs is "wrong_count". Pulsar ground truth also lists the exact failover counts of
every subscription pair, compared with metrics/pulsar_failover (report/pulsar.py)."""
from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any, Iterable, Mapping

from audit.report.sections.pulsar import failover_scorecard, pulsar_metrics
from audit.validate.outcome import ValidationOutcome

SEVERITIES = ("critical", "major", "minor", "warning")
CLEAN, VIOLATIONS, INCOMPLETE = "clean", "violations", "incomplete"
_LEDGER_IN_SUBJECT = re.compile(r"\bledger[\s:/=#-]*(\d+)", re.IGNORECASE)
DETAIL_LIMIT = 200   # scorecard items listed per outcome kind


class SummaryInputError(ValueError):
    """A summary input is malformed: `source` names the input, `field` the key, `expected` what it should be."""

    def __init__(self, source: str, field: str, expected: str):
        self.source, self.field, self.expected = source, field, expected
        super().__init__(f"{source}: {field}: expected {expected}")


def build_summary(run_meta: Mapping[str, Any], violations: list[dict], metrics: Mapping[str, Any],
                  coverage_gaps: list[dict], validation: ValidationOutcome | Mapping[str, Any] | None,
                  ground_truth: Any = None, *, pulsar_failover: list[dict] | None = None,
                  pulsar_snapshots: list[dict] | None = None) -> dict[str, Any]:
    """`pulsar_failover` / `pulsar_snapshots`: rows of metrics/pulsar_failover and metrics/pulsar_snapshots, None
    when the run has no such metrics (no "pulsar" section then)."""
    for i, v in enumerate(violations):
        for key in ("system", "cluster", "check", "severity"):
            if not isinstance(v.get(key), str):
                raise SummaryInputError(f"violations[{i}]", key, "a string")
        if v["severity"] not in SEVERITIES:
            raise SummaryInputError(f"violations[{i}]", "severity", f"one of {SEVERITIES}")
    gx = _validation_json(validation)
    # A failing expectation marks a violation; findings no suite covers still count.
    # Only evaluated-and-failed expectations mark violations; skipped or broken suites make a run incomplete.
    failed = [e for s in gx.get("suites", []) if s.get("status") == "failed"
              for e in s.get("expectations", []) if not e.get("success") and not e.get("exception")]
    status = (VIOLATIONS if violations or failed else
              INCOMPLETE if coverage_gaps or not gx.get("complete", False) else CLEAN)
    summary: dict[str, Any] = {
        "estate": run_meta.get("estate"), "run_id": run_meta.get("run_id"), "run": dict(run_meta),
        "status": status,
        "complete": not coverage_gaps and bool(gx.get("complete", False)),
        "counts": count_violations(violations),
        "coverage_gaps": [dict(g) for g in coverage_gaps],
        "metrics": dict(metrics),
        "validation": {**gx, "failed_expectations": _failed_expectations(gx)},
    }
    if pulsar_failover is not None or pulsar_snapshots is not None:
        summary["pulsar"] = pulsar_metrics(pulsar_failover, pulsar_snapshots)
    truths = _truth_list(ground_truth)
    if truths:
        summary["lab"] = scorecard(truths, violations, pulsar_failover)
    return summary


def count_violations(violations: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    by_cluster: dict[str, Counter] = {}
    by_system, by_check, by_sev = Counter(), Counter(), Counter()
    entries = 0
    n = 0
    for v in violations:
        n += 1
        by_system[v["system"]] += 1
        by_check[v["check"]] += 1
        by_sev[v["severity"]] += 1
        by_cluster.setdefault(f'{v["system"]}/{v["cluster"]}', Counter())[v["severity"]] += 1
        entries += int(v.get("entry_count") or 0)
    return {"total": n, "entries": entries,
            "by_severity": {s: by_sev.get(s, 0) for s in SEVERITIES},
            "by_system": dict(sorted(by_system.items())),
            "by_check": dict(sorted(by_check.items())),
            "by_cluster": {c: {s: cnt.get(s, 0) for s in SEVERITIES} for c, cnt in sorted(by_cluster.items())}}


def replica_metrics(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Aggregate metrics/bk_ledger_replicas rows: per cluster totals and the least-replicas histogram
    (audited ledgers only: a ledger that was not audited has no replica count)."""
    clusters: dict[str, dict[str, int]] = {}
    histogram: Counter = Counter()
    keys = ("entries", "entries_lost", "entries_below_ack_quorum", "entries_below_write_quorum")
    for r in rows:
        c = clusters.setdefault(r["cluster"], {"ledgers": 0, "audited": 0, **{k: 0 for k in keys},
                                               "ledgers_with_lost_entries": 0})
        c["ledgers"] += 1
        if not r.get("audited"):
            continue
        c["audited"] += 1
        for k in keys:
            c[k] += int(r.get(k) or 0)
        c["ledgers_with_lost_entries"] += bool(r.get("entries_lost"))
        if r.get("least_replicas") is not None:
            histogram[int(r["least_replicas"])] += 1
    return {"clusters": dict(sorted(clusters.items())),
            "replica_histogram": {str(k): histogram[k] for k in sorted(histogram)}}


# -- lab scorecard ---------------------------------------------------------------------------
def _evidence(v: Mapping[str, Any]) -> dict[str, Any]:
    ev = v.get("evidence")
    if isinstance(ev, str):
        try:
            ev = json.loads(ev) if ev else {}
        except ValueError:
            ev = {}
    return ev if isinstance(ev, dict) else {}


def violation_key(v: Mapping[str, Any], with_bookie: bool) -> tuple:
    """(check, cluster, ledger_id[, bookie]) of a violation. ledger_id and bookie come from the evidence
    JSON, the ledger id otherwise from the subject ("ledger 12 ...")."""
    ev = _evidence(v)
    ledger = ev.get("ledger_id")
    if ledger is None:
        m = _LEDGER_IN_SUBJECT.search(str(v.get("subject") or ""))
        ledger = int(m.group(1)) if m else None
    key = (v.get("check"), v.get("cluster"), None if ledger is None else int(ledger))
    return key + (ev.get("bookie"),) if with_bookie else key


PULSAR_KEY = ("check", "cluster", "topic", "subscription", "target_cluster")


def pulsar_key(v: Mapping[str, Any]) -> tuple:
    """("pulsar", check, cluster, topic, subscription, target_cluster) of a Pulsar violation (from its evidence)
    or ground-truth finding (its own fields); absent parts are None."""
    ev = v if "evidence" not in v else {**_evidence(v), "check": v.get("check"), "cluster": v.get("cluster")}
    return ("pulsar",) + tuple(ev.get(k) for k in PULSAR_KEY)


def _truth_key(f: Mapping[str, Any], system: str) -> tuple:
    if system == "pulsar":
        return pulsar_key(f)
    return (f["check"], f["cluster"], int(f["ledger_id"])) + ((f["bookie"],) if f.get("bookie") else ())


def _claims(v: Mapping[str, Any]) -> list[tuple[tuple, Any]]:
    """(key, entry_count) pairs one violation can answer. A ledger-level finding whose evidence lists
    per-bookie parts (`outside`: [{bookie, entry_count}]) also answers each bookie on its own."""
    if v.get("system") == "pulsar":
        return [(pulsar_key(v), v.get("entry_count"))]
    claims = [(violation_key(v, False), v.get("entry_count")), (violation_key(v, True), v.get("entry_count"))]
    base = violation_key(v, False)
    for part in _evidence(v).get("outside") or []:
        if isinstance(part, dict) and part.get("bookie"):
            claims.append((base + (part["bookie"],), part.get("entry_count")))
    return claims


def scorecard(truths: list[Mapping[str, Any]], violations: list[Mapping[str, Any]],
              pulsar_failover: list[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    lab_clusters = {t.get("cluster") for t in truths}
    expected = [(f, _system(t)) for t in truths for f in t.get("findings", [])]
    scored = [v for v in violations if v.get("cluster") in lab_clusters]
    # Each claim answers one truth item; a violation is a false alarm when none of its claims is used.
    pool: dict[tuple, list[tuple[int, int, Any]]] = {}
    for vi, v in enumerate(scored):
        for ci, (key, count) in enumerate(_claims(v)):
            pool.setdefault(key, []).append((vi, ci, count))
    used_claims: set[tuple[int, int]] = set()
    used_violations: set[int] = set()
    detected, wrong, missed = [], [], []
    per_check: dict[str, Counter] = {}
    for f, system in expected:
        key = _truth_key(f, system)
        # a violation answers a ledger-level truth once, but may answer several bookie-level ones
        match = next((c for c in pool.get(key, []) if (c[0], c[1]) not in used_claims
                      and (f.get("bookie") or c[0] not in used_violations)), None)
        pc = per_check.setdefault(f["check"], Counter())
        pc["injected"] += 1
        where = ({k: f.get(k) for k in PULSAR_KEY[2:] if f.get(k) is not None} if system == "pulsar" else
                 {"ledger_id": f["ledger_id"], **({"bookie": f["bookie"]} if f.get("bookie") else {})})
        item = {"check": f["check"], "cluster": f["cluster"], **where, "expected_entry_count": f.get("entry_count")}
        if match is None:
            missed.append(item)
            pc["missed"] += 1
            continue
        vi, ci, got = match
        used_claims.add((vi, ci))
        used_violations.add(vi)
        if f.get("entry_count") is not None and got != f["entry_count"]:
            wrong.append({**item, "entry_count": got})
            pc["wrong_count"] += 1
        else:
            detected.append(item)
            pc["detected"] += 1
    false_alarms = []
    for vi, v in enumerate(scored):
        if vi not in used_violations:
            false_alarms.append({"check": v["check"], "cluster": v["cluster"], "subject": v.get("subject"),
                                 "entry_count": v.get("entry_count")})
            per_check.setdefault(v["check"], Counter())["false_alarms"] += 1
    kinds = ("injected", "detected", "wrong_count", "missed", "false_alarms")
    failover = failover_scorecard(truths, pulsar_failover, DETAIL_LIMIT)
    card = {
        "clusters": sorted(c for c in lab_clusters if c),
        "faults": sum(len(t.get("faults", [])) for t in truths),
        "injected": len(expected), "detected": len(detected), "wrong_count": len(wrong),
        "missed": len(missed), "false_alarms": len(false_alarms),
        "perfect": not (wrong or missed or false_alarms),
        "by_check": {c: {k: cnt.get(k, 0) for k in kinds} for c, cnt in sorted(per_check.items())},
        "wrong_count_items": wrong[:DETAIL_LIMIT], "missed_items": missed[:DETAIL_LIMIT],
        "false_alarm_items": false_alarms[:DETAIL_LIMIT],
    }
    if failover is not None:
        card["failover"] = failover
        card["perfect"] = card["perfect"] and failover["perfect"]
    return card


def _system(truth: Mapping[str, Any]) -> str:
    return "pulsar" if truth.get("system") == "pulsar" else "bookkeeper"


def _truth_list(ground_truth: Any) -> list[Mapping[str, Any]]:
    """None, one cluster's ground truth, a list of them, or {cluster: ground truth}."""
    if not ground_truth:
        return []
    if isinstance(ground_truth, Mapping) and "findings" in ground_truth:
        items = [ground_truth]
    elif isinstance(ground_truth, Mapping):
        items = list(ground_truth.values())
    elif isinstance(ground_truth, list):
        items = ground_truth
    else:
        raise SummaryInputError("ground_truth", "(root)", "a mapping or a list of mappings")
    for i, t in enumerate(items):
        if not isinstance(t, Mapping) or not isinstance(t.get("findings"), list):
            raise SummaryInputError(f"ground_truth[{i}]", "findings", "a list")
        required = ("check", "cluster", "topic") if _system(t) == "pulsar" else ("check", "cluster", "ledger_id")
        for j, f in enumerate(t["findings"]):
            for k in required:
                if f.get(k) is None:
                    raise SummaryInputError(f"ground_truth[{i}].findings[{j}]", k, "a value")
        failover = t.get("failover", [])
        if not isinstance(failover, list):
            raise SummaryInputError(f"ground_truth[{i}]", "failover", "a list")
        for j, f in enumerate(failover):
            for k in ("topic", "subscription", "source_cluster", "target_cluster", "redelivered", "skipped", "lost"):
                if not isinstance(f, Mapping) or f.get(k) is None:
                    raise SummaryInputError(f"ground_truth[{i}].failover[{j}]", k, "a value")
    return items


def _validation_json(validation: Any) -> dict[str, Any]:
    if validation is None:
        return {"success": False, "complete": False, "suites": [], "docs_index": None}
    if isinstance(validation, ValidationOutcome):
        return validation.to_json()
    if isinstance(validation, Mapping) and isinstance(validation.get("suites"), list):
        return dict(validation)
    raise SummaryInputError("validation", "suites", "a ValidationOutcome or its to_json() dict")


def _failed_expectations(gx: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"suite": s["name"], "check": e.get("check"), "severity": e.get("severity"),
             "expectation_type": e.get("expectation_type"), "unexpected_count": e.get("unexpected_count"),
             "exception": e.get("exception")}
            for s in gx.get("suites", []) for e in s.get("expectations", []) if not e.get("success")]
