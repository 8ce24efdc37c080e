"""Assemble a run's reports from what the earlier stages staged: summary.json, report.html, repair_plan.json.

Reads small Parquet outputs with pyarrow (no Spark needed), the GX outcome (reports/validation.json), the
collectors' coverage (raw/<system>/<cluster>/collection.json) and, for the lab, its ground truth. Pulsar
metrics (metrics/pulsar_failover, metrics/pulsar_snapshots) are read when the run wrote them."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import pyarrow.parquet as pq

from audit.repair.bookkeeper import plan_repairs
from audit.repair.pulsar import plan_subscription_repairs
from audit.report.html import render_html
from audit.report.summary import build_summary, replica_metrics


def _rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return pq.read_table(str(path)).to_pylist()


def _optional_rows(path: Path) -> list[dict] | None:
    """None when the run did not write this output (e.g. an estate without Pulsar), else its rows."""
    return pq.read_table(str(path)).to_pylist() if path.exists() else None


def _coverage(root: Path) -> list[dict]:
    gaps = []
    for f in sorted((root / "raw").glob("*/*/collection.json")):
        report = json.loads(f.read_text())
        gaps += [{"system": report["system"], "cluster": report["cluster"], **g} for g in report.get("gaps", [])]
    for q in _rows(root / "tables" / "quarantine"):
        gaps.append({"system": q["system"], "cluster": q["cluster"], "source": q["source_key"],
                     "what": q["payload_kind"], "error": q["reason"]})
    return gaps


def _ground_truth(root: Path) -> dict[str, Any]:
    return {f.parent.name: json.loads(f.read_text()) for f in sorted((root / "raw" / "_lab").glob("*/ground_truth.json"))}


def _repair_plans(root: Path, violations: list[dict]) -> list[dict]:
    fragments = _rows(root / "findings" / "bk_missing_fragments")
    ledgers = _rows(root / "tables" / "bk_ledgers")
    bookies = _rows(root / "tables" / "bk_bookies")
    plans = []
    for cluster in sorted({f["cluster"] for f in fragments}):
        lost = []
        for v in violations:
            if v["cluster"] == cluster and v["check"] == "bk.entries_lost":
                ev = json.loads(v.get("evidence") or "{}")
                item = {"ledger_id": int(ev["ledger_id"]), "entry_count": int(v["entry_count"])}
                if ev.get("lost_ranges"):
                    item["ranges"] = ev["lost_ranges"]
                lost.append(item)
        plans.append(plan_repairs(
            [f for f in fragments if f["cluster"] == cluster],
            {r["ledger_id"]: r for r in ledgers if r["cluster"] == cluster},
            {b["bookie"]: {"state": b["state"], "rack": b.get("rack")} for b in bookies if b["cluster"] == cluster},
            lost))
    return plans


def build_run_report(root: Path, *, estate: str, run_id: str, attempt_id: str, report_prefix: str,
                     pulsar_admin_urls: Mapping[str, str] | None = None) -> dict:
    """`pulsar_admin_urls`: Pulsar cluster name -> admin URL, written into the Pulsar repair plans (optional)."""
    root = Path(root)
    violations = _rows(root / "findings" / "violations")
    metrics_rows = _rows(root / "metrics" / "bk_ledger_replicas")
    metrics = replica_metrics(metrics_rows)
    validation_file = root / "reports" / "validation.json"
    validation = json.loads(validation_file.read_text()) if validation_file.exists() else None
    truth = _ground_truth(root)
    run_meta = {"estate": estate, "run_id": run_id, "attempt_id": attempt_id,
                "report_location": report_prefix + "report.html", "report_prefix": report_prefix}
    failover = _optional_rows(root / "metrics" / "pulsar_failover")
    snapshots = _optional_rows(root / "metrics" / "pulsar_snapshots")
    summary = build_summary(run_meta, violations, metrics, _coverage(root), validation, truth or None,
                            pulsar_failover=failover, pulsar_snapshots=snapshots)
    plans = _repair_plans(root, violations)
    pulsar_items = plan_subscription_repairs(failover or [], cluster_admin_urls=pulsar_admin_urls)
    pulsar_plans = [p for p in pulsar_items if p["status"] == "planned"]
    pulsar_errors = [p for p in pulsar_items if p["status"] != "planned"]
    summary["repair_plans"] = [{"system": "bookkeeper", "cluster": p["cluster"], "plan_id": p["plan_id"],
                                "ledgers": len(p["ledgers"]), "dry_run": p["dry_run"]} for p in plans]
    summary["repair_plans"] += [{"system": "pulsar", "cluster": p["cluster"], "plan_id": p["plan_id"],
                                 "topic": p["topic"], "subscription": p["subscription"],
                                 "source_cluster": p["source_cluster"], "dry_run": p["dry_run"]}
                                for p in pulsar_plans]
    if pulsar_errors:
        summary["repair_errors"] = [{"system": "pulsar", "error": e["error"]} for e in pulsar_errors]
    reports = root / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    (reports / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True, default=str))
    (reports / "repair_plan.json").write_text(json.dumps(
        {"dry_run": True, "plans": plans, "pulsar_plans": pulsar_plans, "pulsar_errors": pulsar_errors},
        indent=1, sort_keys=True, default=str))
    acks = [int(r["ack_quorum"]) for r in metrics_rows if r.get("audited") and r.get("ack_quorum")]
    histogram = {int(k): v for k, v in metrics["replica_histogram"].items()}
    (reports / "report.html").write_text(render_html(summary, violations, histogram,
                                                     min_ack_quorum=min(acks) if acks else None))
    return summary


def load_violations(store, writer) -> list[dict]:
    """The published run's violations (for alerting after the manifest is written)."""
    import io

    out = []
    for key in store.list(writer.key("findings", "violations") + "/"):
        if key.endswith(".parquet"):
            out += pq.read_table(io.BytesIO(store.get(key))).to_pylist()
    return out
