"""The Pulsar part of a run's summary, from metrics/pulsar_failover and metrics/pulsar_snapshots rows
(docs/pulsar-contracts.md), and the lab's failover comparison. Pure: values in, dicts out."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

TOP_SUBSCRIPTIONS = 10      # per cluster pair, by redelivered + skipped
FAILOVER_COUNTS = ("redelivered", "skipped", "lost")
SNAPSHOT_FIELDS = ("requests", "responses", "snapshots", "updates", "unanswered_requests", "timed_out",
                   "newest_snapshot_age_s", "replicated_subscriptions")


def _n(value: Any) -> int:
    return int(value or 0)


def pulsar_metrics(failover: Iterable[Mapping[str, Any]] | None,
                   snapshots: Iterable[Mapping[str, Any]] | None) -> dict[str, Any]:
    """{"pairs": {"<source>-><target>": totals + top subscriptions}, "snapshots": {cluster: {topic: health}}}."""
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
    return {"pairs": dict(sorted(pairs.items())),
            "snapshots": {c: dict(sorted(t.items())) for c, t in sorted(health.items())}}


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


def failover_scorecard(truths: list[Mapping[str, Any]], rows: Iterable[Mapping[str, Any]] | None,
                       limit: int) -> dict[str, Any] | None:
    """Every ground-truth `failover` row against the metrics/pulsar_failover row of the same (topic, subscription,
    source, target): matched, mismatched (both counts), missing; rows the lab does not list are unexpected
    (scored only for sources that have ground truth). None when no ground truth carries `failover`."""
    if not any("failover" in t for t in truths):
        return None
    lab_sources = {t.get("cluster") for t in truths if "failover" in t}
    got: dict[tuple, Mapping[str, Any]] = {}
    unexpected = []
    for r in rows or ():
        if r.get("source_cluster") not in lab_sources:
            continue
        if _key(r) in got:
            unexpected.append({**_item(_key(r)), **{k: r.get(k) for k in FAILOVER_COUNTS}, "duplicate": True})
        else:
            got[_key(r)] = r
    matched, mismatched, missing = [], [], []
    wanted = set()
    for t in truths:
        for f in t.get("failover", []):
            key = _key(f)
            wanted.add(key)
            expected = {k: f.get(k) for k in FAILOVER_COUNTS}
            row = got.get(key)
            if row is None:
                missing.append({**_item(key), "expected": expected})
                continue
            actual = {k: row.get(k) for k in FAILOVER_COUNTS}
            (matched if actual == expected else mismatched).append(
                {**_item(key), "expected": expected, **({"got": actual} if actual != expected else {})})
    for key, r in got.items():
        if key not in wanted:
            unexpected.append({**_item(key), **{k: r.get(k) for k in FAILOVER_COUNTS}})
    return {"expected": len(wanted), "matched": len(matched), "mismatched": len(mismatched),
            "missing": len(missing), "unexpected": len(unexpected),
            "perfect": not (mismatched or missing or unexpected),
            "mismatched_items": mismatched[:limit], "missing_items": missing[:limit],
            "unexpected_items": unexpected[:limit]}
