"""Dry-run repair plan for BookKeeper from the audit's findings. Pure: no I/O, deterministic output.

Per ledger: each missing fragment (segment, bookie) with a recommended target bookie -- writable, not in
the segment's ensemble, on a rack that the other members of the bookie's write sets do not use when
possible -- and the shell commands an operator runs. BookKeeper's `recover` lets the cluster's placement
policy pick the real target; ours says where placement-aware re-replication should land and is checked by
the apply step. Entries with no replica left cannot be re-replicated: they are listed with the owning
topic for escalation. `preconditions` record the metadata the plan was computed from (state, ctoken,
lastEntryId, segments); the apply step must re-read it and refuse if it changed. `plan_id` is the sha256
of the canonical JSON of everything else, so the same findings give the same id.

`plan_run(outputs)` (the System's plan_repairs) reads the run's findings and tables and plans each cluster."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from audit.repair.common import RepairInputError, error_item, plan_id

__all__ = ["RepairInputError", "plan_id", "plan_repairs", "plan_run"]

SHELL = "bin/bookkeeper shell"
DEFAULT_RACK = "/default-rack"       # what BookKeeper's rack-aware policy assumes for an unmapped bookie
WRITABLE, READABLE = ("available",), ("available", "readonly")


def _need(row: Mapping[str, Any], source: str, key: str, kind: type | tuple[type, ...], expected: str) -> Any:
    value = row.get(key) if isinstance(row, Mapping) else None
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise RepairInputError(source, key, expected)
    return value


def _ranges(value: Any, source: str, key: str) -> list[tuple[int, int]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RepairInputError(source, key, "a list of {first, last}")
    out = []
    for r in value:
        first, last = (r.get("first"), r.get("last")) if isinstance(r, Mapping) else (None, None)
        if not isinstance(first, int) or not isinstance(last, int) or last < first:
            raise RepairInputError(source, key, "ranges {first, last} with first <= last")
        out.append((first, last))
    return sorted(out)


def _overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    return sum(max(0, min(l1, l2) - max(f1, f2) + 1) for f1, l1 in a for f2, l2 in b)


def _write_set_neighbours(index: int, ensemble_size: int, write_quorum: int) -> list[int]:
    """Ensemble indexes sharing at least one write set with `index` (within Qw - 1 positions, cyclically)."""
    near = {(index + d) % ensemble_size for d in range(-(write_quorum - 1), write_quorum)}
    near.discard(index)
    return sorted(near)


def plan_repairs(fragments: list[dict], ledgers: Mapping[int, dict], bookies: Mapping[str, dict],
                 lost: list[dict]) -> dict[str, Any]:
    """`fragments`: findings/bk_missing_fragments rows of one cluster. `ledgers`: ledger id -> bk_ledgers row.
    `bookies`: bookie id -> {"state": available|readonly|registered, "rack": str|None}. `lost`: per ledger
    {"ledger_id", "entry_count"?, "ranges"?: [{first, last}]} for entries without any replica."""
    clusters = {_need(f, f"fragments[{i}]", "cluster", str, "a cluster name") for i, f in enumerate(fragments)}
    if len(clusters) > 1:
        raise RepairInputError("fragments", "cluster", f"one cluster per plan, got {sorted(clusters)}")
    have_racks = any(b.get("rack") for b in bookies.values())
    lost_by_ledger = _lost_by_ledger(lost)
    by_ledger: dict[int, list[tuple[int, dict]]] = {}
    for i, f in enumerate(fragments):
        by_ledger.setdefault(_need(f, f"fragments[{i}]", "ledger_id", int, "an integer ledger id"), []).append((i, f))
    load: dict[str, int] = {}           # fragments assigned per target, to spread the copies
    plan_ledgers, skipped, preconditions = [], [], []
    for lid in sorted(by_ledger):
        md = ledgers.get(lid)
        if md is None:
            skipped.append({"ledger_id": lid, "reason": "no ledger metadata in this run: no preconditions, "
                                                          "so no repair can be planned"})
            continue
        preconditions.append(_precondition(lid, md))
        planned = [_plan_fragment(i, f, md, bookies, load, have_racks, lost_by_ledger.get(lid, []))
                   for i, f in sorted(by_ledger[lid], key=lambda t: (t[1].get("segment_first_entry_id", 0),
                                                                     t[1].get("bookie_index", 0)))]
        _distinct_targets_per_segment(planned, md, bookies, load, have_racks)
        missing_bookies = sorted({p["bookie"] for p in planned})
        src = ",".join(missing_bookies)
        plan_ledgers.append({
            "ledger_id": lid, "state": md.get("state"), "owner_topic": md.get("owner_topic"),
            "fragments": planned,
            "commands": [f"{SHELL} ledgermetadata -l {lid}",
                         f"{SHELL} recover -dr -l {lid} {src}",
                         f"{SHELL} recover -l {lid} {src}"],
        })
    dead = sorted({p["bookie"] for led in plan_ledgers for p in led["fragments"]
                   if p["bookie_state"] not in READABLE})
    plan = {
        "system": "bookkeeper", "cluster": next(iter(clusters), None), "dry_run": True,
        "ledgers": plan_ledgers,
        "dead_bookies": [{"bookie": b, "commands": [f"{SHELL} recover -q {b}", f"{SHELL} recover -dr {b}",
                                                    f"{SHELL} recover {b}"]} for b in dead],
        "after": [f"{SHELL} triggeraudit", f"{SHELL} listunderreplicated -printmissingreplica"],
        "escalations": _escalations(lost_by_ledger, ledgers),
        "skipped": skipped,
        "preconditions": preconditions,
        "notes": ([] if have_racks else ["no rack map: targets were chosen without placement information"]),
    }
    plan["plan_id"] = plan_id(plan)
    return plan


def plan_run(outputs) -> tuple[list[dict], list[dict]]:
    """One plan per cluster with missing fragments (findings/bk_missing_fragments), from tables/bk_ledgers,
    tables/bk_bookies and the bk.entries_lost violations; a cluster whose inputs are malformed gives an error
    item (`cluster`, `source`, `field`, `expected`, `error`) instead of a plan."""
    from audit.tables import read_rows

    root = Path(outputs.root)
    fragments = read_rows(root / "findings" / "bk_missing_fragments")
    ledgers = read_rows(root / "tables" / "bk_ledgers")
    bookies = read_rows(root / "tables" / "bk_bookies")
    plans, errors = [], []
    for cluster in sorted({f["cluster"] for f in fragments}):
        try:
            plans.append(plan_repairs(
                [f for f in fragments if f["cluster"] == cluster],
                {r["ledger_id"]: r for r in ledgers if r["cluster"] == cluster},
                {b["bookie"]: {"state": b["state"], "rack": b.get("rack")} for b in bookies
                 if b["cluster"] == cluster},
                _lost_entries(outputs.violations, cluster)))
        except RepairInputError as exc:
            errors.append(error_item("bookkeeper", exc, cluster=cluster, source=exc.source))
    return plans, errors


def _lost_entries(violations: list[dict], cluster: str) -> list[dict]:
    """{"ledger_id", "entry_count", "ranges"?} of the cluster's bk.entries_lost violations (from their evidence)."""
    lost = []
    for i, v in enumerate(violations):
        if v.get("cluster") != cluster or v.get("check") != "bk.entries_lost":
            continue
        try:
            ev = json.loads(v.get("evidence") or "{}")
            item = {"ledger_id": int(ev["ledger_id"]), "entry_count": int(v["entry_count"])}
        except (ValueError, TypeError, KeyError):
            raise RepairInputError(f"violations[{i}]", "evidence.ledger_id / entry_count",
                                   "JSON evidence with an integer ledger_id and an integer entry_count") from None
        if ev.get("lost_ranges"):
            item["ranges"] = ev["lost_ranges"]
        lost.append(item)
    return lost


def _lost_by_ledger(lost: list[dict]) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for i, item in enumerate(lost):
        src = f"lost[{i}]"
        lid = _need(item, src, "ledger_id", int, "an integer ledger id")
        ranges = _ranges(item.get("ranges"), src, "ranges")
        count = item.get("entry_count")
        if count is None:
            count = sum(last - first + 1 for first, last in ranges)
        if not isinstance(count, int) or count < 0:
            raise RepairInputError(src, "entry_count", "a non-negative integer")
        out.setdefault(lid, []).append({"ranges": ranges, "entry_count": count})
    return out


def _precondition(lid: int, md: Mapping[str, Any]) -> dict[str, Any]:
    src = f"ledgers[{lid}]"
    segments = _need(md, src, "segments", list, "a list of {first_entry_id, ensemble}")
    return {"ledger_id": lid, "state": md.get("state"), "ctoken": md.get("ctoken"),
            "last_entry_id": md.get("last_entry_id"),
            "ensemble_size": md.get("ensemble_size"), "write_quorum": md.get("write_quorum"),
            "ack_quorum": md.get("ack_quorum"),
            "segments": [{"first_entry_id": s["first_entry_id"], "ensemble": list(s["ensemble"])} for s in segments],
            "verify": f"{SHELL} ledgermetadata -l {lid}"}


def _segment_ensemble(md: Mapping[str, Any], first: int) -> list[str] | None:
    for s in md.get("segments") or []:
        if s.get("first_entry_id") == first:
            return list(s.get("ensemble") or [])
    return None


def _plan_fragment(i: int, f: Mapping[str, Any], md: Mapping[str, Any], bookies: Mapping[str, dict],
                   load: dict[str, int], have_racks: bool, lost: list[dict]) -> dict[str, Any]:
    src = f"fragments[{i}]"
    first = _need(f, src, "segment_first_entry_id", int, "an integer entry id")
    last = _need(f, src, "segment_last_entry_id", int, "an integer entry id")
    bookie = _need(f, src, "bookie", str, "a bookie id")
    index = _need(f, src, "bookie_index", int, "an integer ensemble index")
    ensemble = _segment_ensemble(md, first)
    if ensemble is None:
        raise RepairInputError(src, "segment_first_entry_id", f"a segment of ledger {f['ledger_id']}'s metadata")
    if not 0 <= index < len(ensemble) or ensemble[index] != bookie:
        raise RepairInputError(src, "bookie_index", f"the index of {bookie} in the metadata ensemble {ensemble}")
    missing_ranges = _ranges(f.get("missing_ranges"), src, "missing_ranges")
    wq = _need(md, f"ledgers[{f['ledger_id']}]", "write_quorum", int, "an integer write quorum")
    neighbours = [ensemble[j] for j in _write_set_neighbours(index, len(ensemble), wq)]
    lost_here = _overlap(missing_ranges, [r for item in lost for r in item["ranges"]])
    out = {"segment_first_entry_id": first, "segment_last_entry_id": last, "ensemble": ensemble,
           "bookie": bookie, "bookie_index": index, "bookie_state": _state(bookies, bookie),
           "missing_count": f.get("missing_count"), "missing_ranges": [{"first": a, "last": b}
                                                                    for a, b in missing_ranges],
           "sources": [b for b in neighbours if _state(bookies, b) in READABLE],
           "notes": []}
    if lost_here:
        out["notes"].append(f"{lost_here} of these entries have no replica left: re-replication cannot restore "
                            f"them (see escalations)")
    _choose_target(out, set(ensemble), neighbours, bookies, load, have_racks)
    return out


def _state(bookies: Mapping[str, dict], b: str) -> str:
    return (bookies.get(b) or {}).get("state") or "unknown"


def _rack(bookies: Mapping[str, dict], b: str) -> str:
    return (bookies.get(b) or {}).get("rack") or DEFAULT_RACK


def _choose_target(frag: dict, excluded: set[str], neighbours: list[str], bookies: Mapping[str, dict],
                   load: dict[str, int], have_racks: bool) -> None:
    used_racks = {_rack(bookies, b) for b in neighbours}
    candidates = sorted(b for b in bookies if _state(bookies, b) in WRITABLE and b not in excluded)
    preferred = [b for b in candidates if _rack(bookies, b) not in used_racks]
    pick_from = preferred or candidates
    if not pick_from:
        frag.update(target=None, target_rack=None, placement="none")
        frag["notes"].append("no writable bookie outside the ensemble: add or re-enable a bookie first")
        return
    target = min(pick_from, key=lambda b: (load.get(b, 0), b))
    load[target] = load.get(target, 0) + 1
    frag.update(target=target, target_rack=_rack(bookies, target) if have_racks else None,
                placement="unknown" if not have_racks else "rack_diverse" if preferred else "fallback")
    if not preferred and have_racks:
        frag["notes"].append(f"every writable bookie outside the ensemble is on a rack the write sets already "
                             f"use ({', '.join(sorted(used_racks))}): placement will stay weak")


def _distinct_targets_per_segment(planned: list[dict], md: Mapping[str, Any], bookies: Mapping[str, dict],
                                  load: dict[str, int], have_racks: bool) -> None:
    """Two bookies replaced in one segment end up in the same new ensemble: they need different targets."""
    taken: dict[int, set[str]] = {}
    for frag in planned:
        seg = frag["segment_first_entry_id"]
        seen = taken.setdefault(seg, set())
        if frag["target"] in seen:
            load[frag["target"]] -= 1
            frag["notes"] = [n for n in frag["notes"] if not n.startswith("every writable")]
            neighbours = [frag["ensemble"][j] for j in _write_set_neighbours(
                frag["bookie_index"], len(frag["ensemble"]), md["write_quorum"])]
            _choose_target(frag, set(frag["ensemble"]) | seen, neighbours, bookies, load, have_racks)
        if frag["target"]:
            seen.add(frag["target"])


def _escalations(lost_by_ledger: dict[int, list[dict]], ledgers: Mapping[int, dict]) -> list[dict[str, Any]]:
    out = []
    for lid in sorted(lost_by_ledger):
        md = ledgers.get(lid) or {}
        ranges = sorted(r for item in lost_by_ledger[lid] for r in item["ranges"])
        count = sum(item["entry_count"] for item in lost_by_ledger[lid])
        topic = md.get("owner_topic")
        out.append({
            "ledger_id": lid, "owner_topic": topic, "state": md.get("state"), "entry_count": count,
            "ranges": [{"first": a, "last": b} for a, b in ranges],
            "reason": "no bookie holds these entries; tell the owner of "
                      + (topic if topic else "the ledger (no owning topic in its custom metadata)"),
            "commands": [f"{SHELL} readledger -l {lid} -fe {a} -le {b}" for a, b in ranges],
        })
    return out
