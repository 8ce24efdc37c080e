"""The Kafka part of a run's reports, from metrics/kafka_partitions, metrics/kafka_mm2_failover and
metrics/kafka_coverage (docs/kafka/contracts.md "Metrics"): summary["kafka"] (per cluster: partitions, replicas,
findings, the follower-lag histogram; per MirrorMaker 2 flow: group-partitions, redelivered / skipped bounds; what
was not judged), its HTML section with two plots, terminal lines, how the lab scorecard matches Kafka findings --
on (check, cluster, topic, partition[, broker][, group][, offset_from, offset_to]) from the evidence JSON -- and the
lab's MM2 failover comparison (lab["mm2_failover"]). The functions below SECTION's entry points are pure: values
in, dicts out."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from audit.contracts import Gauge, ReportSection, RunOutputs
from audit.report.fragments import evidence

SYSTEM = "kafka"
PARTITIONS = ("metrics", "kafka_partitions")       # under the attempt folder
MM2 = ("metrics", "kafka_mm2_failover")
COVERAGE = ("metrics", "kafka_coverage")
_PARTITION_COLUMNS = ("cluster", "topic", "partition", "replica_count", "collected_replicas", "under_replicated",
                      "offline", "max_lag", "min_divergence_offset", "truncating_followers", "findings",
                      "not_judged")
_MM2_COLUMNS = ("cluster", "source", "group", "topic", "partition", "exact", "redelivered_min", "redelivered_max",
                "skipped_min", "skipped_max")
COVERAGE_FIELDS = ("cluster", "topic", "partition", "broker", "group", "what", "entry_count")
LAG_BUCKETS = ("0", "1-9", "10-99", "100-999", "1k-9999", "10k-99999", ">=100k")
TOP_GROUPS = 10
NOT_JUDGED_EXAMPLES = 3
KEY = ("check", "cluster", "topic", "partition", "broker", "group", "source")
FAILOVER_KEY = ("cluster", "source", "group", "topic", "partition")
FAILOVER_COUNTS = ("redelivered", "skipped")


def _n(value: Any) -> int:
    return int(value or 0)


def lag_bucket(lag: int) -> str:
    """The histogram bar of a partition's largest follower lag (offsets): 0, then powers of ten."""
    return LAG_BUCKETS[0] if lag <= 0 else LAG_BUCKETS[min(len(str(int(lag))), len(LAG_BUCKETS) - 1)]


def kafka_metrics(partitions: Iterable[Mapping[str, Any]] | None, mm2: Iterable[Mapping[str, Any]] | None,
                  coverage: Iterable[Mapping[str, Any]] | None, violations: Iterable[Mapping[str, Any]] = ()
                  ) -> dict[str, Any]:
    """{"clusters": {cluster: totals + "by_check" + "lag_histogram"}, "mm2": {"<source>-><target>": totals + top},
    "not_judged": [{cluster, what, items, entry_count, examples}]}. A cluster's "diverged" counts partitions with a
    truncating follower (metrics' truncating_followers: its rule cuts its log below its end)."""
    clusters: dict[str, dict[str, Any]] = {}

    def cluster(name: str) -> dict[str, Any]:
        return clusters.setdefault(name, {"partitions": 0, "replicas": 0, "collected_replicas": 0,
                                          "under_replicated": 0, "offline": 0, "diverged": 0, "findings": 0,
                                          "not_judged": 0, "by_check": {},
                                          "lag_histogram": {b: 0 for b in LAG_BUCKETS}})
    for r in partitions or ():
        c = cluster(r["cluster"])
        c["partitions"] += 1
        c["replicas"] += _n(r.get("replica_count"))
        c["collected_replicas"] += _n(r.get("collected_replicas"))
        c["under_replicated"] += bool(r.get("under_replicated"))
        c["offline"] += bool(r.get("offline"))
        # a follower whose rule cuts below its log end (every follower has a divergence offset, most at their end)
        c["diverged"] += _n(r.get("truncating_followers")) > 0
        c["not_judged"] += _n(r.get("not_judged"))
        c["lag_histogram"][lag_bucket(_n(r.get("max_lag")))] += 1
    for v in violations:
        if v.get("system") != SYSTEM:
            continue
        c = cluster(v["cluster"])
        c["findings"] += 1
        c["by_check"][v["check"]] = c["by_check"].get(v["check"], 0) + 1
    flows: dict[str, dict[str, Any]] = {}
    ranked: dict[str, list[dict[str, Any]]] = {}
    for r in mm2 or ():
        name = f'{r.get("source")}->{r["cluster"]}'
        f = flows.setdefault(name, {"source": r.get("source"), "target": r["cluster"], "group_partitions": 0,
                                    "inexact": 0, "redelivered_min": 0, "redelivered_max": 0, "skipped_min": 0,
                                    "skipped_max": 0})
        f["group_partitions"] += 1
        f["inexact"] += r.get("exact") is False
        for k in ("redelivered_min", "redelivered_max", "skipped_min", "skipped_max"):
            f[k] += _n(r.get(k))
        if _n(r.get("redelivered_max")) + _n(r.get("skipped_max")):
            ranked.setdefault(name, []).append({k: r.get(k) for k in ("group", "topic", "partition",
                                                                      "redelivered_min", "redelivered_max",
                                                                      "skipped_min", "skipped_max")})
    for name, f in flows.items():
        f["top"] = sorted(ranked.get(name, []), key=lambda g: (-(_n(g["redelivered_max"]) + _n(g["skipped_max"])),
                                                               str(g["group"]), str(g["topic"]),
                                                               _n(g["partition"])))[:TOP_GROUPS]
    out: dict[str, Any] = {"clusters": {k: {**c, "by_check": dict(sorted(c["by_check"].items()))}
                                        for k, c in sorted(clusters.items())},
                           "mm2": dict(sorted(flows.items()))}
    gaps = not_judged(coverage)
    if gaps:
        out["not_judged"] = gaps
    return out


def not_judged(coverage: Iterable[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """Coverage rows grouped by (cluster, what): how many items, how many offsets, a few examples."""
    groups: dict[tuple, dict[str, Any]] = {}
    for r in coverage or ():
        g = groups.setdefault((str(r.get("cluster")), str(r.get("what"))), {
            "cluster": r.get("cluster"), "what": r.get("what"), "items": 0, "entry_count": 0, "examples": []})
        g["items"] += 1
        g["entry_count"] += _n(r.get("entry_count"))
        if len(g["examples"]) < NOT_JUDGED_EXAMPLES:
            g["examples"].append(_where(r))
    return [groups[k] for k in sorted(groups)]


def _where(r: Mapping[str, Any]) -> str:
    where = f'{r.get("topic")}-{r.get("partition")}' if r.get("topic") is not None else ""
    if r.get("broker") is not None:
        where += f' broker {r["broker"]}'
    if r.get("group") is not None:
        where = f'group {r["group"]} {where}'.strip()
    return where or "(cluster)"


# -- report section ------------------------------------------------------------------------
def _optional_rows(outputs: RunOutputs | None, parts: tuple[str, ...], columns: Iterable[str]) -> list[dict] | None:
    """None when the run did not write this output (an estate without Kafka), else its rows."""
    from audit.tables import read_rows

    if outputs is None:
        return None
    path = outputs.root.joinpath(*parts)
    return read_rows(path, columns=columns) if path.exists() else None


def summary(outputs: RunOutputs) -> dict[str, Any]:
    """{"kafka": kafka_metrics(...)} when the run wrote any Kafka metrics."""
    partitions = _optional_rows(outputs, PARTITIONS, _PARTITION_COLUMNS)
    mm2 = _optional_rows(outputs, MM2, _MM2_COLUMNS)
    coverage = _optional_rows(outputs, COVERAGE, COVERAGE_FIELDS)
    if partitions is None and mm2 is None and coverage is None:
        return {}
    return {"kafka": kafka_metrics(partitions, mm2, coverage, outputs.violations)}


def html(summary: Mapping[str, Any], violations: list) -> str:
    """Per cluster totals and the follower-lag histogram, MM2 flows with a redelivered/skipped chart, what was not
    judged, and the lab's MM2 failover comparison; "" when the run has none of them."""
    parts = []
    if summary.get("kafka"):
        parts.append(_kafka_html(summary["kafka"]))
    fo = (summary.get("lab") or {}).get("mm2_failover")
    if fo:
        parts.append(_lab_failover_html(fo))
    return "\n".join(parts)


def _kafka_html(kafka: Mapping[str, Any]) -> str:
    from audit.report.fragments import esc, table
    from audit.report.svg import grouped_bar_chart

    clusters = kafka.get("clusters") or {}
    keys = ("partitions", "replicas", "collected_replicas", "under_replicated", "offline", "diverged", "findings",
            "not_judged")
    out = ["<h2>Kafka replicas</h2>"]
    out.append(table(["cluster", *keys], [[name, *(c.get(k) for k in keys)] for name, c in clusters.items()])
               if clusters else "<p>No partition was audited.</p>")
    if clusters:
        series = {name: [c["lag_histogram"].get(b, 0) for b in LAG_BUCKETS] for name, c in clusters.items()}
        chart = grouped_bar_chart(list(LAG_BUCKETS), series, "Largest follower lag per partition (offsets)",
                                  "partitions")
        out.append(f'<figure class="kafka-lag" id="kafka-lag-histogram">{chart}</figure>')
    checks = sorted({k for c in clusters.values() for k in c.get("by_check") or {}})
    if checks:
        out.append("<h3>Findings by check</h3>")
        out.append(table(["cluster", *checks], [[name, *((c.get("by_check") or {}).get(k, 0) for k in checks)]
                                                 for name, c in clusters.items()]))
    flows = kafka.get("mm2") or {}
    if flows:
        keys = ("group_partitions", "redelivered_min", "redelivered_max", "skipped_min", "skipped_max", "inexact")
        out.append("<h2>Kafka MirrorMaker 2 failover</h2>")
        out.append(table(["source -> target", *keys], [[n, *(f.get(k) for k in keys)] for n, f in flows.items()]))
        for i, (name, f) in enumerate(flows.items()):
            top = f.get("top") or []
            if not top:
                continue
            out.append(f"<h3>{esc(name)}: group partitions by messages a failover would redeliver or skip</h3>")
            out.append(table(["group", "topic", "partition", "redelivered", "skipped"],
                              [[t["group"], t["topic"], t["partition"], _span(t, "redelivered"), _span(t, "skipped")]
                               for t in top]))
            chart = grouped_bar_chart([f'{t["group"]} {t["topic"]}-{t["partition"]}' for t in top],
                                      {"redelivered (max)": [_n(t["redelivered_max"]) for t in top],
                                       "skipped (max)": [_n(t["skipped_max"]) for t in top]},
                                      f"Failover redeliveries and skips, {name}", "messages")
            out.append(f'<figure class="kafka-mm2" id="kafka-mm2-{i}">{chart}</figure>')
    gaps = kafka.get("not_judged") or []
    if gaps:
        out.append("<h3>Not judged</h3>")
        out.append(table(["cluster", "what", "items", "offsets", "e.g."],
                          [[g["cluster"], g["what"], g["items"], g["entry_count"], "; ".join(g["examples"])]
                           for g in gaps]))
    return "\n".join(out)


def _span(row: Mapping[str, Any], name: str) -> str:
    low, high = _n(row.get(f"{name}_min")), _n(row.get(f"{name}_max"))
    return str(low) if low == high else f"{low}..{high}"


def _lab_failover_html(fo: Mapping[str, Any]) -> str:
    from audit.report.fragments import table

    kinds = ("expected", "matched", "mismatched", "missing", "unexpected")
    out = ["<h3>Lab scorecard: Kafka MirrorMaker 2 failover counts</h3>"
           + table(kinds, [[fo.get(k, 0) for k in kinds]])]
    rows = [[i.get("group"), f'{i.get("topic")}-{i.get("partition")}', f'{i.get("source")}->{i.get("cluster")}',
             kind, *(_outcome(i, c) for c in FAILOVER_COUNTS)]
            for kind in ("mismatched", "missing", "unexpected") for i in fo.get(f"{kind}_items") or []]
    if rows:
        out.append(table(["group", "partition", "flow", "outcome", *FAILOVER_COUNTS], rows))
    return "\n".join(out)


def _outcome(item: Mapping[str, Any], count: str) -> Any:
    expected = (item.get("expected") or {}).get(count)
    got = (item.get("got") or {}).get(count)
    return f"{got} (expected {expected})" if got is not None else expected


def text(summary: Mapping[str, Any]) -> list[str]:
    kafka = summary.get("kafka") or {}
    lines = [f"  kafka {name}: {c.get('partitions', 0)} partition(s), {c.get('collected_replicas', 0)} replica(s) "
             f"read, {c.get('findings', 0)} finding(s), {c.get('under_replicated', 0)} under-replicated, "
             f"{c.get('offline', 0)} offline" for name, c in (kafka.get("clusters") or {}).items()]
    lines += [f"  kafka mm2 {name}: {f.get('group_partitions', 0)} group partition(s), redelivered "
              f"{_span(f, 'redelivered')}, skipped {_span(f, 'skipped')}"
              for name, f in (kafka.get("mm2") or {}).items()]
    gaps = kafka.get("not_judged") or []
    if gaps:
        lines.append(f"  kafka not judged: {sum(g['items'] for g in gaps)} item(s) "
                     f"({', '.join(sorted({str(g['what']) for g in gaps}))}); see the report")
    fo = (summary.get("lab") or {}).get("mm2_failover")
    if fo:
        lines.append(f"  lab kafka mm2 failover: {fo.get('matched')}/{fo.get('expected')} matched, mismatched "
                     f"{fo.get('mismatched')}, missing {fo.get('missing')}, unexpected {fo.get('unexpected')}")
    return lines


# -- lab scorecard ---------------------------------------------------------------------------
def _int(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def _offsets(f: Mapping[str, Any]) -> tuple:
    """(offset_from, offset_to) when `f` names either, else ()."""
    if f.get("offset_from") is None and f.get("offset_to") is None:
        return ()
    return (_int(f.get("offset_from")), _int(f.get("offset_to")))


def truth_key(f: Mapping[str, Any]) -> tuple:
    """("kafka", check, cluster, topic, partition, broker, group, source[, offset_from, offset_to]) of a
    ground-truth finding; broker, group and source (the MirrorMaker 2 source alias) are part of the key only when
    the truth names them (the check is about one replica / one consumer group of one flow), the offsets (inclusive)
    only when it names them: a finding at other offsets is then a miss and a false alarm."""
    return (SYSTEM, f.get("check"), f.get("cluster"), f.get("topic"), _int(f.get("partition")),
            _int(f.get("broker")), f.get("group"), f.get("source")) + _offsets(f)


def claims(v: Mapping[str, Any]) -> list[tuple[tuple, Any]]:
    """The violation as its evidence names it; and, when it names a broker, the same without the broker (a truth
    about the partition as a whole). Evidence with offsets claims both keys with its offsets first, then both
    without them (a truth that names no offsets)."""
    ev = evidence(v)
    whole = truth_key({**ev, "check": v.get("check"), "cluster": v.get("cluster"), "offset_from": None,
                       "offset_to": None})
    keys = [whole] if whole[5] is None else [whole, whole[:5] + (None,) + whole[6:]]
    offsets = _offsets(ev)
    if offsets:
        keys = [k + offsets for k in keys] + keys
    return [(k, v.get("entry_count")) for k in keys]


def truth_item(f: Mapping[str, Any]) -> dict[str, Any]:
    return {k: f.get(k) for k in (*KEY[2:], "offset_from", "offset_to") if f.get(k) is not None}


def _fkey(r: Mapping[str, Any]) -> tuple:
    return (r.get("cluster"), r.get("source"), r.get("group"), r.get("topic"), _int(r.get("partition")))


def _kafka_truths(truths: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [t for t in truths if t.get("system", SYSTEM) == SYSTEM]


def failover_scorecard(truths: list[Mapping[str, Any]], rows: Iterable[Mapping[str, Any]] | None,
                       limit: int) -> dict[str, Any] | None:
    """Every ground-truth `mm2_failover` item {cluster (target), source, group, topic, partition, redelivered,
    skipped} against the metrics/kafka_mm2_failover row of the same key: matched when each true count lies within
    the row's [min, max] bounds, mismatched otherwise, missing without a row; rows of lab targets the truth does
    not list are unexpected when they claim a redelivery or a skip. None when no truth carries `mm2_failover`.
    Only Kafka's truths are read (another system's may carry keys of the same name)."""
    truths = _kafka_truths(truths)
    if not any("mm2_failover" in t for t in truths):
        return None
    targets = {t.get("cluster") for t in truths if "mm2_failover" in t}
    got: dict[tuple, Mapping[str, Any]] = {}
    for r in rows or ():
        if r.get("cluster") in targets:
            got.setdefault(_fkey(r), r)
    matched, mismatched, missing, wanted = [], [], [], set()
    for t in truths:
        for f in t.get("mm2_failover", []):
            key = _fkey(f)
            wanted.add(key)
            item = dict(zip(FAILOVER_KEY, key))
            expected = {c: f.get(c) for c in FAILOVER_COUNTS}
            row = got.get(key)
            if row is None:
                missing.append({**item, "expected": expected})
                continue
            bounds = {c: (_n(row.get(f"{c}_min")), _n(row.get(f"{c}_max"))) for c in FAILOVER_COUNTS}
            if all(lo <= _n(expected[c]) <= hi for c, (lo, hi) in bounds.items()):
                matched.append({**item, "expected": expected})
            else:
                mismatched.append({**item, "expected": expected,
                                   "got": {c: lo if lo == hi else f"{lo}..{hi}" for c, (lo, hi) in bounds.items()}})
    claimed = {k: r for k, r in got.items() if _n(r.get("redelivered_max")) + _n(r.get("skipped_max"))}
    unexpected = [{**dict(zip(FAILOVER_KEY, k)), **{c: _span(r, c) for c in FAILOVER_COUNTS}}
                  for k, r in claimed.items() if k not in wanted]
    return {"expected": len(wanted), "matched": len(matched), "mismatched": len(mismatched),
            "missing": len(missing), "unexpected": len(unexpected),
            "perfect": not (mismatched or missing or unexpected),
            "mismatched_items": mismatched[:limit], "missing_items": missing[:limit],
            "unexpected_items": unexpected[:limit]}


def scorecard(truths: list[Mapping[str, Any]], outputs: RunOutputs | None) -> dict[str, Any] | None:
    """The lab's MM2 failover comparison against metrics/kafka_mm2_failover; a malformed `mm2_failover` list
    raises SummaryInputError naming the truth and the field."""
    from audit.report.summary import DETAIL_LIMIT, SummaryInputError

    for i, t in enumerate(truths):
        if t.get("system", SYSTEM) != SYSTEM:
            continue
        items = t.get("mm2_failover", [])
        if not isinstance(items, list):
            raise SummaryInputError(f"ground_truth[{i}]", "mm2_failover", "a list")
        for j, f in enumerate(items):
            for k in (*FAILOVER_KEY, *FAILOVER_COUNTS):
                if not isinstance(f, Mapping) or f.get(k) is None:
                    raise SummaryInputError(f"ground_truth[{i}].mm2_failover[{j}]", k, "a value")
    return failover_scorecard(truths, _optional_rows(outputs, MM2, _MM2_COLUMNS), DETAIL_LIMIT)


def coverage(outputs: RunOutputs) -> list[dict[str, Any]]:
    """metrics/kafka_coverage as coverage gaps, one per (cluster, what): the run is then not complete."""
    return [{"system": SYSTEM, "cluster": g["cluster"], "source": f'{g["items"]} item(s), e.g. '
             + "; ".join(g["examples"]), "what": g["what"],
             "error": f'{g["entry_count"]} offsets not judged' if g["entry_count"] else "not judged"}
            for g in not_judged(_optional_rows(outputs, COVERAGE, COVERAGE_FIELDS))]


def gauges(summary: Mapping[str, Any]) -> list[Gauge]:
    """Per MirrorMaker 2 flow: what a failover of its groups would at least redeliver and skip (the proven
    minimum; the bounds' maximum is in the report)."""
    out = []
    for f in ((summary.get("kafka") or {}).get("mm2") or {}).values():
        labels = {"system": SYSTEM, "source": f["source"], "target": f["target"]}
        for name, key, what in (("replaudit_failover_redelivered_messages", "redelivered_min", "redeliver"),
                                ("replaudit_failover_skipped_messages", "skipped_min", "skip")):
            out.append(Gauge(name, f"messages a failover from source to target would {what}", labels, f[key] or 0))
    return out


SECTION = ReportSection(summary=summary, html=html, text=text, truth_key=truth_key, claims=claims,
                        truth_item=truth_item, truth_required=("check", "cluster", "topic", "partition"),
                        scorecard=scorecard, scorecard_key="mm2_failover", coverage=coverage, gauges=gauges)
