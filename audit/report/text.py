"""A few lines for a terminal: status, counts, coverage, lab scorecard, where the report is."""
from __future__ import annotations

from typing import Any, Mapping


def render_text(summary: Mapping[str, Any]) -> str:
    lines = [f"replaudit: estate {summary.get('estate')} run {summary.get('run_id')}: {summary.get('status')}"]
    counts = summary.get("counts") or {}
    for sev, n in sorted((counts.get("by_severity") or {}).items()):
        lines.append(f"  {sev:<9} {n}")
    for check, n in sorted((counts.get("by_check") or {}).items()):
        lines.append(f"  {check:<36} {n}")
    for name, c in sorted(((summary.get("metrics") or {}).get("clusters") or {}).items()):
        lines.append(f"  {name}: {c.get('audited', 0)}/{c.get('ledgers', 0)} ledgers audited, "
                     f"{c.get('entries_lost', 0)} entries lost, {c.get('entries_below_ack_quorum', 0)} below Qa, "
                     f"{c.get('entries_below_write_quorum', 0)} below Qw")
    for pair, p in sorted(((summary.get("pulsar") or {}).get("pairs") or {}).items()):
        lines.append(f"  pulsar {pair}: {p.get('subscriptions', 0)} subscription(s), {p.get('redelivered', 0)} "
                     f"redelivered, {p.get('skipped', 0)} skipped, {p.get('lost', 0)} lost")
    gaps = summary.get("coverage_gaps") or []
    if gaps:
        lines.append(f"  not covered: {len(gaps)} source(s), e.g. {gaps[0].get('source')}: {gaps[0].get('error')}")
    failed = (summary.get("validation") or {}).get("failed_expectations") or []
    lines.append(f"  Great Expectations: {len(failed)} failed expectation(s)")
    lab = summary.get("lab")
    if lab:
        lines.append(f"  lab: injected {lab.get('injected')}, detected {lab.get('detected')}, "
                     f"wrong count {lab.get('wrong_count')}, missed {lab.get('missed')}, "
                     f"false alarms {lab.get('false_alarms')}")
        fo = lab.get("failover")
        if fo:
            lines.append(f"  lab failover: {fo.get('matched')}/{fo.get('expected')} matched, mismatched "
                         f"{fo.get('mismatched')}, missing {fo.get('missing')}, unexpected {fo.get('unexpected')}")
    run = summary.get("run") or {}
    if run.get("report_location"):
        lines.append(f"  report: {run['report_location']}")
    return "\n".join(lines)
