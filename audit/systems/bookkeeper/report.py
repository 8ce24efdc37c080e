"""The BookKeeper part of a run's reports: replica metrics (metrics/bk_ledger_replicas) in the summary, the
least-replicas histogram in the HTML page, a line per cluster in the terminal text, how each bookie's entries were
read (tables/bk_bookie_evidence and tables/bk_entry_availability), and how the lab scorecard matches BookKeeper
findings: on (check, cluster, ledger_id[, bookie]), ledger_id and bookie from the evidence JSON (the ledger id
otherwise from the subject, "ledger 12 ...")."""
from __future__ import annotations

import re
from collections import Counter
from typing import Any, Iterable, Mapping

from audit.contracts import ReportSection, RunOutputs
from audit.systems.bookkeeper.domain.evidence import ENTRIES_OF_LEDGER, LOCATION_INDEX, READ_PROBE
from audit.report.svg import bar_chart
from audit.report.fragments import evidence

_LEDGER_IN_SUBJECT = re.compile(r"\bledger[\s:/=#-]*(\d+)", re.IGNORECASE)
METRICS = ("metrics", "bk_ledger_replicas")      # under the attempt folder
BOOKIE_EVIDENCE = ("tables", "bk_bookie_evidence")
AVAILABILITY = ("tables", "bk_entry_availability")
LISTED_IN_TEXT = 10   # listing bookies named per cluster in the terminal text; the summary names them all


def replica_metrics(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Aggregate metrics/bk_ledger_replicas rows: per cluster totals, the least-replicas histogram (audited
    ledgers only: a ledger that was not audited has no replica count) and the smallest ack quorum of the
    audited ledgers (`min_ack_quorum`, None without one: the histogram's bars below it are alarms).
    Information beside them, per cluster: `outside_ensemble` (entries held outside the ensemble the metadata
    assigns, each holder's copy counted: findings/bk_outside_ensemble lists them) and `open_ctime_unknown` (OPEN or
    IN_RECOVERY ledgers whose creation time is unknown, so bk.ledger_open_too_long could not judge them)."""
    clusters: dict[str, dict[str, int]] = {}
    outside: Counter = Counter()
    unknown_ctime: Counter = Counter()
    histogram: Counter = Counter()
    acks = []
    keys = ("entries", "entries_lost", "entries_below_ack_quorum", "entries_below_write_quorum")
    for r in rows:
        c = clusters.setdefault(r["cluster"], {"ledgers": 0, "audited": 0, **{k: 0 for k in keys},
                                               "ledgers_with_lost_entries": 0})
        c["ledgers"] += 1
        outside[r["cluster"]] += int(r.get("entries_outside_ensemble") or 0)
        # metrics written before the ctime column have no key: nothing is known about them either way
        if r.get("state") in ("OPEN", "IN_RECOVERY") and "ctime" in r and r["ctime"] is None:
            unknown_ctime[r["cluster"]] += 1
        if not r.get("audited"):
            continue
        c["audited"] += 1
        for k in keys:
            c[k] += int(r.get(k) or 0)
        c["ledgers_with_lost_entries"] += bool(r.get("entries_lost"))
        if r.get("least_replicas") is not None:
            histogram[int(r["least_replicas"])] += 1
        if r.get("ack_quorum"):
            acks.append(int(r["ack_quorum"]))
    return {"clusters": dict(sorted(clusters.items())),
            "replica_histogram": {str(k): histogram[k] for k in sorted(histogram)},
            "min_ack_quorum": min(acks) if acks else None,
            "outside_ensemble": {k: v for k, v in sorted(outside.items()) if v},
            "open_ctime_unknown": {k: v for k, v in sorted(unknown_ctime.items()) if v}}


def bookie_reads(evidence_rows: Iterable[Mapping[str, Any]],
                 availability_rows: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """{cluster: [{bookie, evidence, exact, share_percent, not_read}]}, bookies sorted: how each bookie's entries
    were read. evidence: "location_index" (exact when its inventory is complete), "read_probe" (share_percent; exact
    only at 100 %, else sampled), "entries_of_ledger" (the listing answered at least once: exact) or None when
    nothing came back (`not_read`: the error kinds of its .error.json answers, e.g. unreachable,
    list_unsupported)."""
    def read(bookie: str, evidence: str | None, exact: bool, share: int | None = None,
             kinds: list[str] | None = None) -> dict[str, Any]:
        return {"bookie": bookie, "evidence": evidence, "exact": exact, "share_percent": share, "not_read": kinds}

    out: dict[tuple[str, str], dict[str, Any]] = {}
    for r in evidence_rows:   # one per bookie read on its host or by probes (inventory.json / bookie.json)
        key, kind = (r["cluster"], r["bookie"]), r.get("evidence")
        if kind == LOCATION_INDEX:
            out[key] = read(r["bookie"], kind, bool(r.get("complete")))
        elif kind == READ_PROBE and key not in out:
            out[key] = read(r["bookie"], kind, r.get("share_percent") == 100, r.get("share_percent"))
    not_read: dict[tuple[str, str], set[str]] = {}
    for r in availability_rows:
        key = (r["cluster"], r["bookie"])
        # tables written before the evidence column hold list answers only
        if (r.get("evidence") or ENTRIES_OF_LEDGER) != ENTRIES_OF_LEDGER or key in out:
            continue
        if r.get("status") == "unavailable":   # an .error.json: no answer came
            not_read.setdefault(key, set()).add(str(r.get("error") or "unknown").split(":")[0])
        else:   # an answer as received (EOK, ENOLEDGER or another status): the bookie serves the listing
            out[key] = read(r["bookie"], ENTRIES_OF_LEDGER, True)
    for key, kinds in not_read.items():
        if key not in out:
            out[key] = read(key[1], None, False, kinds=sorted(kinds))
    clusters: dict[str, list[dict[str, Any]]] = {}
    for (cluster, _), r in sorted(out.items()):
        clusters.setdefault(cluster, []).append(r)
    return clusters


def how_read(read: Mapping[str, Any]) -> str:
    """One bookie_reads item in words: listing, location index (exact), read probes at N % (sampled), not read."""
    kind = read.get("evidence")
    if kind == ENTRIES_OF_LEDGER:
        return "listing (GetListOfEntriesOfLedger)"
    if kind == LOCATION_INDEX:
        return "location index (exact)" if read.get("exact") else \
            "location index (incomplete: a ledger without a file is unknown)"
    if kind == READ_PROBE:
        share = read.get("share_percent")
        return f"read probes at {share} % (" + ("every entry the metadata places" if read.get("exact")
                                                 else "sampled") + ")"
    return "not read (" + ", ".join(read.get("not_read") or ["no answer"]) + ")"


def summary(outputs: RunOutputs) -> dict[str, Any]:
    from audit.tables import read_rows

    metrics = replica_metrics(read_rows(outputs.root.joinpath(*METRICS)))
    metrics["bookie_reads"] = bookie_reads(
        read_rows(outputs.root.joinpath(*BOOKIE_EVIDENCE), ["cluster", "bookie", "evidence", "complete",
                                                             "share_percent"]),
        read_rows(outputs.root.joinpath(*AVAILABILITY), ["cluster", "bookie", "evidence", "status", "error"]))
    return {"metrics": metrics}


def html(summary: Mapping[str, Any], violations: list) -> str:
    """The least-replicas histogram (bars below the smallest ack quorum are drawn as alarms) and how each bookie's
    entries were read."""
    from audit.report.fragments import table

    metrics = summary.get("metrics") or {}
    histogram = {int(k): int(v) for k, v in (metrics.get("replica_histogram") or {}).items()}
    chart = bar_chart(histogram, "Least replica count per ledger", "least replicas", "ledgers",
                      highlight_below=metrics.get("min_ack_quorum"))
    out = f"<h2>Replica counts</h2><figure id=\"replica-histogram\">{chart}</figure>"
    rows = [[cluster, read.get("bookie"), how_read(read)]
            for cluster, reads in sorted((metrics.get("bookie_reads") or {}).items()) for read in reads]
    if rows:
        out += "<h2 id=\"bookie-reads\">How bookies were read</h2>" + table(["cluster", "bookie", "entries read by"],
                                                                           rows)
    return out


def text(summary: Mapping[str, Any]) -> list[str]:
    metrics = summary.get("metrics") or {}
    lines = []
    for name, c in sorted((metrics.get("clusters") or {}).items()):
        lines.append(f"  {name}: {c.get('audited', 0)}/{c.get('ledgers', 0)} ledgers audited, "
                     f"{c.get('entries_lost', 0)} entries lost, {c.get('entries_below_ack_quorum', 0)} below Qa, "
                     f"{c.get('entries_below_write_quorum', 0)} below Qw")
        n = (metrics.get("outside_ensemble") or {}).get(name)
        if n:
            lines.append(f"  {name}: {n} entries held outside the ensemble the metadata assigns (information: "
                         "findings/bk_outside_ensemble)")
        n = (metrics.get("open_ctime_unknown") or {}).get(name)
        if n:
            lines.append(f"  {name}: {n} open ledgers with unknown creation time (not judged for open too long)")
    for name, reads in sorted((metrics.get("bookie_reads") or {}).items()):
        # listing is the usual case: one line for those; every other bookie gets its own
        listed = [r["bookie"] for r in reads if r.get("evidence") == ENTRIES_OF_LEDGER]
        if listed:
            more = ", ..." if len(listed) > LISTED_IN_TEXT else ""
            lines.append(f"  {name}: {len(listed)} bookies read by listing (GetListOfEntriesOfLedger): "
                         + ", ".join(listed[:LISTED_IN_TEXT]) + more)
        lines += [f"  {name}: bookie {r['bookie']} read by {how_read(r)}" if r.get("evidence")
                  else f"  {name}: bookie {r['bookie']} {how_read(r)}"
                  for r in reads if r.get("evidence") != ENTRIES_OF_LEDGER]
    return lines


# -- lab scorecard ---------------------------------------------------------------------------
def violation_key(v: Mapping[str, Any], with_bookie: bool) -> tuple:
    """(check, cluster, ledger_id[, bookie]) of a violation. ledger_id and bookie come from the evidence
    JSON, the ledger id otherwise from the subject ("ledger 12 ...")."""
    ev = evidence(v)
    ledger = ev.get("ledger_id")
    if ledger is None:
        m = _LEDGER_IN_SUBJECT.search(str(v.get("subject") or ""))
        ledger = int(m.group(1)) if m else None
    key = (v.get("check"), v.get("cluster"), None if ledger is None else int(ledger))
    return key + (ev.get("bookie"),) if with_bookie else key


def truth_key(f: Mapping[str, Any]) -> tuple:
    return (f["check"], f["cluster"], int(f["ledger_id"])) + ((f["bookie"],) if f.get("bookie") else ())


def claims(v: Mapping[str, Any]) -> list[tuple[tuple, Any]]:
    """(key, entry_count) pairs one violation can answer: the ledger, the ledger and the evidence's bookie, and,
    when the evidence lists per-bookie parts (`outside`: [{bookie, entry_count}]), each bookie on its own."""
    claims = [(violation_key(v, False), v.get("entry_count")), (violation_key(v, True), v.get("entry_count"))]
    base = violation_key(v, False)
    for part in evidence(v).get("outside") or []:
        if isinstance(part, dict) and part.get("bookie"):
            claims.append((base + (part["bookie"],), part.get("entry_count")))
    return claims


def truth_item(f: Mapping[str, Any]) -> dict[str, Any]:
    return {"ledger_id": f["ledger_id"], **({"bookie": f["bookie"]} if f.get("bookie") else {})}


SECTION = ReportSection(summary=summary, html=html, text=text, truth_key=truth_key, claims=claims,
                        truth_item=truth_item, truth_required=("check", "cluster", "ledger_id"))
