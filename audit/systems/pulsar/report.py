"""The Pulsar part of a run's reports, from metrics/pulsar_failover and metrics/pulsar_snapshots rows
(docs/pulsar/contracts.md): summary["pulsar"] (failover per cluster pair, snapshot health), its HTML section and
terminal lines, how the lab scorecard matches Pulsar findings -- on (check, cluster, topic, subscription,
target_cluster), from the evidence JSON -- and the lab's failover comparison (lab["failover"]). The functions
below SECTION's entry points are pure: values in, dicts out."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from audit.contracts import Gauge, ReportSection, RunOutputs
from audit.report.fragments import evidence

TOP_SUBSCRIPTIONS = 10      # per cluster pair, by redelivered + skipped
FAILOVER_COUNTS = ("redelivered", "skipped", "lost")
SNAPSHOT_FIELDS = ("requests", "responses", "snapshots", "updates", "unanswered_requests", "timed_out",
                   "newest_snapshot_age_s", "replicated_subscriptions")


def _n(value: Any) -> int:
    return int(value or 0)


def pulsar_metrics(failover: Iterable[Mapping[str, Any]] | None,
                   snapshots: Iterable[Mapping[str, Any]] | None,
                   coverage: Iterable[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """{"pairs": {"<source>-><target>": totals + top subscriptions}, "snapshots": {cluster: {topic: health}}},
    plus "not_judged" (metrics/pulsar_coverage rows: what the audit could not judge) when there are any."""
    pairs: dict[str, dict[str, Any]] = {}
    ranked: dict[str, list[dict[str, Any]]] = {}
    for r in failover or ():
        name = f'{r["source_cluster"]}->{r["target_cluster"]}'
        p = pairs.setdefault(name, {"source_cluster": r["source_cluster"], "target_cluster": r["target_cluster"],
                                    "subscriptions": 0, "compared": 0, "redelivered": 0, "skipped": 0, "lost": 0,
                                    "incomplete": 0})
        p["subscriptions"] += 1
        for k in ("compared", *FAILOVER_COUNTS):
            p[k] += _n(r.get(k))
        p["incomplete"] += r.get("complete") is False
        if _n(r.get("redelivered")) + _n(r.get("skipped")):
            ranked.setdefault(name, []).append({"topic": r["topic"], "subscription": r["subscription"],
                                                **{k: _n(r.get(k)) for k in FAILOVER_COUNTS}})
    for name, p in pairs.items():
        rows = sorted(ranked.get(name, []), key=lambda s: (-(s["redelivered"] + s["skipped"]), -s["lost"],
                                                           s["topic"], s["subscription"]))
        p["top"] = rows[:TOP_SUBSCRIPTIONS]
    health: dict[str, dict[str, Any]] = {}
    for r in snapshots or ():
        item = {k: r.get(k) for k in SNAPSHOT_FIELDS}
        item["health"] = snapshot_health(r)
        health.setdefault(r["cluster"], {})[r["topic"]] = item
    out = {"pairs": dict(sorted(pairs.items())),
           "snapshots": {c: dict(sorted(t.items())) for c, t in sorted(health.items())}}
    gaps = sorted(({k: r.get(k) for k in COVERAGE_FIELDS} for r in coverage or ()),
                  key=lambda g: tuple(str(g.get(k) or "") for k in COVERAGE_FIELDS))
    if gaps:
        out["not_judged"] = gaps
    return out


def snapshot_health(r: Mapping[str, Any]) -> str:
    """timing_out: snapshot requests expired; no_snapshot: requests but no complete snapshot; idle: no request
    (nothing published, or a replicator down); ok: snapshots complete."""
    if _n(r.get("timed_out")):
        return "timing_out"
    if not _n(r.get("snapshots")):
        return "no_snapshot" if _n(r.get("requests")) else "idle"
    return "ok"


def _key(r: Mapping[str, Any]) -> tuple:
    return (r.get("topic"), r.get("subscription"), r.get("source_cluster"), r.get("target_cluster"))


def _item(key: tuple) -> dict[str, Any]:
    return dict(zip(("topic", "subscription", "source_cluster", "target_cluster"), key))


SCORED = (*FAILOVER_COUNTS, "unsettled", "ambiguous")   # compared where both the truth and the row carry them


def failover_scorecard(truths: list[Mapping[str, Any]], rows: Iterable[Mapping[str, Any]] | None,
                       limit: int) -> dict[str, Any] | None:
    """Every ground-truth `failover` row against the metrics/pulsar_failover row of the same (topic, subscription,
    source, target): matched, mismatched (every count both carry: FAILOVER_COUNTS, and unsettled / ambiguous when
    present), missing; rows the lab does not list are unexpected (scored only for sources that have ground
    truth). `by_seed`: the same per lab seed (the source cluster's), with its clusters. None when no ground truth
    carries `failover`."""
    if not any("failover" in t for t in truths):
        return None
    lab_sources = {t.get("cluster") for t in truths if "failover" in t}
    seed_of = {t.get("cluster"): t.get("seed") for t in truths if "failover" in t}
    got, unexpected = _failover_rows_by_key(rows, lab_sources)
    matched, mismatched, missing, wanted = _score_expected(truths, got)
    for key, r in got.items():
        if key not in wanted:
            unexpected.append({**_item(key), **{k: r.get(k) for k in FAILOVER_COUNTS}})
    by_seed = _outcomes_by_seed(seed_of, (("matched", matched), ("mismatched", mismatched), ("missing", missing),
                                          ("unexpected", unexpected)))
    return {"expected": len(wanted), "matched": len(matched), "mismatched": len(mismatched),
            "missing": len(missing), "unexpected": len(unexpected),
            "perfect": not (mismatched or missing or unexpected),
            "mismatched_items": mismatched[:limit], "missing_items": missing[:limit],
            "unexpected_items": unexpected[:limit],
            "by_seed": {str(seed): v for seed, v in sorted(by_seed.items(), key=lambda kv: (kv[0] is None, kv[0]))}}


def _failover_rows_by_key(rows: Iterable[Mapping[str, Any]] | None, lab_sources: set
                          ) -> tuple[dict[tuple, Mapping[str, Any]], list[dict[str, Any]]]:
    """(key -> the first failover row of a lab source, its duplicates as unexpected items)."""
    got: dict[tuple, Mapping[str, Any]] = {}
    unexpected = []
    for r in rows or ():
        if r.get("source_cluster") not in lab_sources:
            continue
        if _key(r) in got:
            unexpected.append({**_item(_key(r)), **{k: r.get(k) for k in FAILOVER_COUNTS}, "duplicate": True})
        else:
            got[_key(r)] = r
    return got, unexpected


def _score_expected(truths: list[Mapping[str, Any]], got: Mapping[tuple, Mapping[str, Any]]
                    ) -> tuple[list[dict], list[dict], list[dict], set[tuple]]:
    """(matched, mismatched, missing, every expected key): each ground-truth failover row against the row of its
    key, over the SCORED counts both carry."""
    matched, mismatched, missing = [], [], []
    wanted = set()
    for t in truths:
        for f in t.get("failover", []):
            key = _key(f)
            wanted.add(key)
            row = got.get(key)
            scored = [k for k in SCORED if f.get(k) is not None and (row is None or row.get(k) is not None)]
            expected = {k: f.get(k) for k in scored}
            if row is None:
                missing.append({**_item(key), "expected": expected})
                continue
            actual = {k: row.get(k) for k in scored}
            (matched if actual == expected else mismatched).append(
                {**_item(key), "expected": expected, **({"got": actual} if actual != expected else {})})
    return matched, mismatched, missing, wanted


def _outcomes_by_seed(seed_of: Mapping[Any, Any], outcomes: Iterable[tuple[str, list[dict]]]
                      ) -> dict[Any, dict[str, Any]]:
    """lab seed -> its clusters and the count of each outcome of its source clusters' items."""
    by_seed: dict[Any, dict[str, Any]] = {}
    for c in sorted(c for c in seed_of if c):
        by_seed.setdefault(seed_of[c], {"clusters": [], **{k: 0 for k in _OUTCOMES}})["clusters"].append(c)
    for kind, items in outcomes:
        for i in items:
            by_seed.setdefault(seed_of.get(i["source_cluster"]), {"clusters": [], **{k: 0 for k in _OUTCOMES}})
            by_seed[seed_of.get(i["source_cluster"])][kind] += 1
            if kind != "unexpected":
                by_seed[seed_of.get(i["source_cluster"])]["expected"] += 1
    return by_seed


_OUTCOMES = ("expected", "matched", "mismatched", "missing", "unexpected")


# -- report section ------------------------------------------------------------------------
FAILOVER = ("metrics", "pulsar_failover")            # under the attempt folder
SNAPSHOTS = ("metrics", "pulsar_snapshots")
COVERAGE = ("metrics", "pulsar_coverage")            # what the audit could not judge (docs/pulsar/contracts.md)
COVERAGE_FIELDS = ("cluster", "topic", "subscription", "target_cluster", "what", "entry_count", "detail")
# what pulsar_metrics / failover_scorecard read (to_acknowledge lists can be large: left out)
_FAILOVER_COLUMNS = ("topic", "subscription", "source_cluster", "target_cluster", "compared", "complete",
                     *FAILOVER_COUNTS, "unsettled", "ambiguous")
PULSAR_KEY = ("check", "cluster", "topic", "subscription", "target_cluster")


def _optional_rows(outputs: RunOutputs | None, parts: tuple[str, ...],
                   columns: Iterable[str] | None = None) -> list[dict] | None:
    """None when the run did not write this output (e.g. an estate without Pulsar), else its rows."""
    from audit.tables import read_rows

    if outputs is None:
        return None
    path = outputs.root.joinpath(*parts)
    return read_rows(path, columns=columns) if path.exists() else None


def summary(outputs: RunOutputs) -> dict[str, Any]:
    """{"pulsar": pulsar_metrics(...)} when the run wrote metrics/pulsar_failover or metrics/pulsar_snapshots."""
    failover = _optional_rows(outputs, FAILOVER, _FAILOVER_COLUMNS)
    snapshots = _optional_rows(outputs, SNAPSHOTS)
    coverage = _optional_rows(outputs, COVERAGE, COVERAGE_FIELDS)
    if failover is None and snapshots is None and coverage is None:
        return {}
    return {"pulsar": pulsar_metrics(failover, snapshots, coverage)}


def html(summary: Mapping[str, Any], violations: list) -> str:
    """Failover per cluster pair (totals, top subscriptions, a redelivered/skipped chart), snapshot health and
    the lab's failover comparison; "" when the run has none of them."""
    parts = []
    if summary.get("pulsar"):
        parts.append(_pulsar_html(summary["pulsar"]))
    fo = (summary.get("lab") or {}).get("failover")
    if fo:
        parts.append(_lab_failover_html(fo))
    return "\n".join(parts)


def _pulsar_html(pulsar: Mapping[str, Any]) -> str:
    from audit.report.fragments import esc, table
    from audit.report.svg import grouped_bar_chart

    pairs = pulsar.get("pairs") or {}
    out = ["<h2>Pulsar failover</h2>"]
    keys = ("subscriptions", "compared", "redelivered", "skipped", "lost", "incomplete")
    out.append(table(["source -> target", *keys], [[name, *(p.get(k) for k in keys)] for name, p in pairs.items()])
               if pairs else "<p>No replicated subscription pair was audited.</p>")
    for n, (name, p) in enumerate(pairs.items()):
        top = p.get("top") or []
        if not top:
            continue
        out.append(f"<h3>{esc(name)}: subscriptions by redelivered + skipped</h3>")
        out.append(table(["topic", "subscription", "redelivered", "skipped", "lost"],
                          [[t["topic"], t["subscription"], t["redelivered"], t["skipped"], t["lost"]] for t in top]))
        labels = [f'{str(t["topic"]).rsplit("/", 1)[-1]} {t["subscription"]}' for t in top]
        chart = grouped_bar_chart(labels, {"redelivered": [t["redelivered"] for t in top],
                                           "skipped": [t["skipped"] for t in top]},
                                  f"Redelivered and skipped messages, {name}", "messages")
        out.append(f'<figure class="pulsar-failover" id="pulsar-failover-{n}">{chart}</figure>')
    gaps = pulsar.get("not_judged") or []
    if gaps:
        out.append("<h3>Not judged</h3>")
        out.append(table(["cluster", "target", "topic", "subscription", "what", "messages", "why"],
                          [[g.get("cluster"), g.get("target_cluster"), g.get("topic"), g.get("subscription"),
                            g.get("what"), g.get("entry_count"), g.get("detail")] for g in gaps]))
    snaps = pulsar.get("snapshots") or {}
    if snaps:
        keys = ("health", "requests", "snapshots", "updates", "timed_out", "newest_snapshot_age_s",
                "replicated_subscriptions")
        out.append("<h3>Replicated-subscription snapshots</h3>")
        out.append(table(["cluster", "topic", *keys], [[c, topic, *(v.get(k) for k in keys)]
                                                        for c, topics in snaps.items() for topic, v in topics.items()]))
    return "\n".join(out)


def _lab_failover_html(fo: Mapping[str, Any]) -> str:
    from audit.report.fragments import table

    kinds = ("expected", "matched", "mismatched", "missing", "unexpected")
    out = ["<h3>Lab scorecard: Pulsar failover counts</h3>" + table(kinds, [[fo.get(k, 0) for k in kinds]])]
    rows = [[i["topic"], i["subscription"], f'{i["source_cluster"]}->{i["target_cluster"]}', kind,
             *(f'{(i.get("got") or {}).get(c)} (expected {i["expected"][c]})' if kind == "mismatched"
               else (i.get("expected") or {}).get(c, i.get(c)) for c in FAILOVER_COUNTS)]
            for kind in ("mismatched", "missing", "unexpected") for i in fo.get(f"{kind}_items") or []]
    if rows:
        out.append(table(["topic", "subscription", "pair", "outcome", *FAILOVER_COUNTS], rows))
    return "\n".join(out)


def text(summary: Mapping[str, Any]) -> list[str]:
    lines = [f"  pulsar {pair}: {p.get('subscriptions', 0)} subscription(s), {p.get('redelivered', 0)} "
             f"redelivered, {p.get('skipped', 0)} skipped, {p.get('lost', 0)} lost"
             for pair, p in sorted(((summary.get("pulsar") or {}).get("pairs") or {}).items())]
    gaps = (summary.get("pulsar") or {}).get("not_judged") or []
    if gaps:
        what = sorted({str(g.get("what")) for g in gaps})
        lines.append(f"  pulsar not judged: {len(gaps)} ({', '.join(what)}); see the report")
    fo = (summary.get("lab") or {}).get("failover")
    if fo:
        lines.append(f"  lab failover: {fo.get('matched')}/{fo.get('expected')} matched, mismatched "
                     f"{fo.get('mismatched')}, missing {fo.get('missing')}, unexpected {fo.get('unexpected')}")
        lines += _seed_lines(summary.get("lab") or {}, fo)
    return lines


def _seed_lines(lab: Mapping[str, Any], fo: Mapping[str, Any]) -> list[str]:
    """One line per lab seed (a world of several clusters) when there are several: its findings (the lab's
    per-cluster counts added up) and its failover rows."""
    seeds = fo.get("by_seed") or {}
    if len(seeds) < 2:
        return []
    per_cluster = lab.get("by_cluster") or {}
    kinds = ("injected", "detected", "wrong_count", "missed", "false_alarms")
    lines = []
    for seed, s in seeds.items():
        found = {k: sum((per_cluster.get(c) or {}).get(k, 0) for c in s["clusters"]) for k in kinds}
        lines.append(f"    pulsar seed {seed} ({', '.join(s['clusters'])}): injected {found['injected']}, detected "
                     f"{found['detected']}, wrong count {found['wrong_count']}, missed {found['missed']}, false alarms "
                     f"{found['false_alarms']}; failover {s['matched']}/{s['expected']} matched, mismatched "
                     f"{s['mismatched']}, missing {s['missing']}, unexpected {s['unexpected']}")
    return lines


def pulsar_key(v: Mapping[str, Any]) -> tuple:
    """("pulsar", check, cluster, topic, subscription, target_cluster) of a Pulsar violation (from its evidence)
    or ground-truth finding (its own fields); absent parts are None."""
    ev = v if "evidence" not in v else {**evidence(v), "check": v.get("check"), "cluster": v.get("cluster")}
    return ("pulsar",) + tuple(ev.get(k) for k in PULSAR_KEY)


def claims(v: Mapping[str, Any]) -> list[tuple[tuple, Any]]:
    return [(pulsar_key(v), v.get("entry_count"))]


def truth_item(f: Mapping[str, Any]) -> dict[str, Any]:
    return {k: f.get(k) for k in PULSAR_KEY[2:] if f.get(k) is not None}


def scorecard(truths: list[Mapping[str, Any]], outputs: RunOutputs | None) -> dict[str, Any] | None:
    """The lab's failover comparison (failover_scorecard) against metrics/pulsar_failover; None when no ground
    truth carries `failover`. A malformed `failover` list raises SummaryInputError naming truth and field."""
    from audit.report.summary import DETAIL_LIMIT, SummaryInputError

    for i, t in enumerate(truths):
        failover = t.get("failover", [])
        if not isinstance(failover, list):
            raise SummaryInputError(f"ground_truth[{i}]", "failover", "a list")
        for j, f in enumerate(failover):
            for k in ("topic", "subscription", "source_cluster", "target_cluster", *FAILOVER_COUNTS):
                if not isinstance(f, Mapping) or f.get(k) is None:
                    raise SummaryInputError(f"ground_truth[{i}].failover[{j}]", k, "a value")
    if not any("failover" in t for t in truths):
        return None
    return failover_scorecard(truths, _optional_rows(outputs, FAILOVER, _FAILOVER_COLUMNS), DETAIL_LIMIT)


def coverage(outputs: RunOutputs) -> list[dict[str, Any]]:
    """metrics/pulsar_coverage rows as coverage gaps: what the audit could not judge makes the run incomplete."""
    gaps = []
    for r in _optional_rows(outputs, COVERAGE, COVERAGE_FIELDS) or ():
        where = r.get("topic") or ""
        if r.get("subscription"):
            where += f" sub={r['subscription']}"
        if r.get("target_cluster"):
            where += f" -> {r['target_cluster']}"
        gaps.append({"system": "pulsar", "cluster": r.get("cluster"), "source": where, "what": r.get("what"),
                     "error": r.get("detail") or f"{r.get('entry_count')} entries not judged"})
    return gaps


def gauges(summary: Mapping[str, Any]) -> list[Gauge]:
    """Per replication pair: what a failover of its subscriptions would redeliver, skip and lose."""
    out = []
    for p in ((summary.get("pulsar") or {}).get("pairs") or {}).values():
        labels = {"system": "pulsar", "source": p["source_cluster"], "target": p["target_cluster"]}
        for name, key, what in (("replaudit_failover_redelivered_messages", "redelivered", "redeliver"),
                                ("replaudit_failover_skipped_messages", "skipped", "skip"),
                                ("replaudit_failover_lost_messages", "lost", "lose")):
            out.append(Gauge(name, f"messages a failover from source to target would {what}", labels, p[key] or 0))
    return out


SECTION = ReportSection(summary=summary, html=html, text=text, truth_key=pulsar_key, claims=claims,
                        truth_item=truth_item, truth_required=("check", "cluster", "topic"),
                        scorecard=scorecard, scorecard_key="failover", coverage=coverage, gauges=gauges)
