"""Per-ledger audit of one joined row (plain Python values in, plain values out), used by the Spark
transforms in bookkeeper.py. One input row = one ledger with its segments and every bookie answer.

Violation bands: the replica checks report disjoint sets of entries so one entry raises one finding:
bk.entries_lost = 0 replicas, bk.entries_below_ack_quorum = 1..Qa-1 replicas, bk.entries_below_write_quorum =
Qa..Qw-1 replicas. The metrics table keeps BookKeeper's nested counts (< Qa includes lost, ...).

Entries held outside the ensemble the metadata assigns are information (`outside` rows, the metrics column
entries_outside_ensemble); bk.entries_outside_ensemble is raised only for the wrong-ensemble shape
(docs/formats/bookkeeper.md §1.6 step 4).
Findings that rest on read probes say so (`sampled`)."""
from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

from audit.systems.bookkeeper.domain.checks import CHECKS
from audit.systems.bookkeeper.domain.evidence import (ENTRIES_OF_LEDGER, LOCATION_INDEX, READ_PROBE,
                                                      complete_inventory_misses, settled_in_index)
from audit.systems.bookkeeper.domain.invariants import metadata_violations
from audit.systems.bookkeeper.domain.model import IN_RECOVERY, OPEN, LedgerMetadata, Segment, SequenceGroup
from audit.systems.bookkeeper.domain.placement import placement_violations
from audit.systems.bookkeeper.domain.replicas import (NO_SUCH_LEDGER, OK, BookieAnswer, LedgerVerdict, OutsideEnsemble,
                                              audit_ledger, better_answer)
from audit.systems.bookkeeper.domain.striping import count_expected

SYSTEM = "bookkeeper"
EVIDENCE_RANGES = 20  # ranges quoted per fragment in a finding's evidence; the full list is in bk_missing_fragments

UNSETTLED = "location index read before the ledger settled: entries may still be in the bookie's write cache"
DEFAULT_INDEX_SETTLE_MS = 60_000   # the estate's thresholds.location_index_settle

# Bookie registration states in bk_bookies (see bookkeeper.normalize_bookkeeper)
AVAILABLE, READONLY, REGISTERED = "available", "readonly", "registered"


def metadata_from_row(row: Mapping[str, Any]) -> LedgerMetadata:
    return LedgerMetadata(
        ledger_id=row["ledger_id"], format_version=row["format_version"], ensemble_size=row["ensemble_size"],
        write_quorum_size=row["write_quorum"], ack_quorum_size=row["ack_quorum"], state=row["state"],
        last_entry_id=row["last_entry_id"], length=row["length"] or 0,
        segments=tuple(Segment(s["first_entry_id"], tuple(s["ensemble"])) for s in row["segments"] or ()),
        digest_type=row.get("digest_type"), has_password=bool(row.get("has_password")), ctime=row.get("ctime"),
        ctoken=row.get("ctoken"))


def answer(status: str, error: str | None, groups, evidence: str | None = None, probe_share: int | None = None,
           probed: int | None = None, absent=None) -> BookieAnswer:
    """One bk_entry_availability row's answer (`groups` as SequenceGroups)."""
    evidence = evidence or ENTRIES_OF_LEDGER
    if status == OK and evidence == READ_PROBE:
        return BookieAnswer.read_probes(probe_share or 0, probed or 0, absent or ())
    if status == OK:
        return BookieAnswer.ok(groups, evidence)
    if status == NO_SUCH_LEDGER:
        return BookieAnswer.no_such_ledger(evidence)
    return BookieAnswer.unavailable(error or status, evidence)   # unavailable, error: holdings unknown


def add_answer(out: dict[str, BookieAnswer], bookie: str, a: BookieAnswer) -> None:
    """Several rows for one bookie (a list answer and its location index, say): the better one counts."""
    out[bookie] = better_answer(out[bookie], a) if bookie in out else a


def answers_from_row(row: Mapping[str, Any]) -> dict[str, BookieAnswer]:
    out: dict[str, BookieAnswer] = {}
    for a in row["answers"] or ():
        groups = [SequenceGroup(g["first_sequence_start"], g["last_sequence_start"], g["sequence_size"],
                                g["sequence_period"]) for g in a["groups"] or ()]
        add_answer(out, a["bookie"], answer(a["status"], a["error"], groups, a.get("evidence"), a.get("probe_share"),
                                            a.get("probed"), a.get("absent")))
    return out


class Settings:
    """What the per-ledger checks need beyond the ledger itself.

    `bookies`: {cluster: {bookie: (state, rack)}} from bk_bookies; a cluster absent from it is not judged
    for unknown/dead bookies (its registration lists were not collected).
    `inventories`: {cluster: {bookie: asked ledger ids or None (all)}} of the bookies whose location-index
    inventory is complete (bk_bookie_evidence): a member without an answer for a ledger holds nothing of it.
    `index_reads`: {cluster: {bookie: read_at_ms}} of every location-index bookie; `index_settle_ms`: how long
    after a ledger's last metadata write its entries are surely in a bookie's index (evidence.settled_in_index)."""

    def __init__(self, run_id: str = "", bookies: Mapping[str, Mapping[str, tuple[str, str | None]]] | None = None,
                 as_of_ms: int | None = None, open_ledger_max_age_ms: int | None = None,
                 min_racks_per_write_quorum: int = 2, max_ranges: int = 1000,
                 inventories: Mapping[str, Mapping[str, frozenset[int] | None]] | None = None,
                 index_reads: Mapping[str, Mapping[str, int | None]] | None = None,
                 index_settle_ms: int = DEFAULT_INDEX_SETTLE_MS):
        self.run_id, self.bookies, self.inventories = run_id, bookies or {}, inventories or {}
        self.index_reads, self.index_settle_ms = index_reads or {}, index_settle_ms
        self.as_of_ms, self.open_ledger_max_age_ms = as_of_ms, open_ledger_max_age_ms
        self.min_racks_per_write_quorum, self.max_ranges = min_racks_per_write_quorum, max_ranges


def audit_row(row: Mapping[str, Any], s: Settings) -> dict:
    """{metric columns..., fragments: [...], violations: [...]} for one ledger row."""
    return audit_parsed(row["cluster"], metadata_from_row(row), answers_from_row(row), s, row.get("znode_mtime"))


def unsettled_index_bookies(cluster: str, md: LedgerMetadata, answers: Mapping[str, BookieAnswer],
                            znode_mtime_ms: int | None, s: Settings) -> list[str]:
    """Ensemble members whose only evidence for the ledger is a location index read before the ledger settled:
    unavailable for it tonight (never missing entries); the next night judges it."""
    reads = s.index_reads.get(cluster) or {}
    out = []
    for b in dict.fromkeys(b for seg in md.segments for b in seg.ensemble):
        if b not in reads or (b in answers and answers[b].evidence != LOCATION_INDEX):
            continue
        if not settled_in_index(md, znode_mtime_ms, reads[b], s.index_settle_ms):
            out.append(b)
    return out


def audit_parsed(cluster: str, md: LedgerMetadata, answers: Mapping[str, BookieAnswer], s: Settings,
                 znode_mtime_ms: int | None = None) -> dict:
    unsettled = unsettled_index_bookies(cluster, md, answers, znode_mtime_ms, s)
    if unsettled:
        answers = {**answers, **{b: BookieAnswer.unavailable(UNSETTLED, LOCATION_INDEX) for b in unsettled}}
    inventories = s.inventories.get(cluster)
    if inventories:
        misses = complete_inventory_misses(md, answers, inventories)
        if misses:
            answers = {**answers, **{b: BookieAnswer.no_such_ledger(LOCATION_INDEX) for b in misses}}
    v = audit_ledger(md, answers, s.max_ranges)
    out = {"cluster": cluster, "ledger_id": md.ledger_id, "state": md.state, "audited": v.audited,
           "least_replicas": v.least_replicas if v.audited else None,
           "entries": v.entries if v.audited else max(md.last_entry_id + 1, 0) if md.is_closed else 0,
           "entries_lost": v.entries_lost, "entries_below_ack_quorum": v.entries_below_ack_quorum,
           "entries_below_write_quorum": v.entries_below_write_quorum,
           "unavailable_bookies": len(v.unavailable_bookies),
           "entries_outside_ensemble": sum(o.entry_count for o in v.outside_ensemble), "ctime": known_ctime(md),
           # the ledger's own quorums, so row-level expectations compare least_replicas with them
           "write_quorum": md.write_quorum_size, "ack_quorum": md.ack_quorum_size}
    out["fragments"] = [
        {"cluster": cluster, "ledger_id": md.ledger_id, "segment_first_entry_id": f.segment_first_entry_id,
         "segment_last_entry_id": f.segment_last_entry_id, "ensemble": list(f.ensemble), "bookie": f.bookie,
         "bookie_index": f.bookie_index, "missing_count": f.missing_count,
         "missing_ranges": [{"first": a, "last": b} for a, b in f.missing_ranges]}
        for f in v.fragments]
    out["outside"] = [
        {"cluster": cluster, "ledger_id": md.ledger_id, "segment_first_entry_id": o.segment_first_entry_id,
         "segment_last_entry_id": o.segment_last_entry_id, "ensemble": list(o.ensemble), "bookie": o.bookie,
         "entry_count": o.entry_count, "ranges": [{"first": a, "last": b} for a, b in o.ranges]}
        for o in v.outside_ensemble]
    out["violations"] = list(_violations(md, v, cluster, s, _sampled(md, answers)))
    return out


def _sampled(md: LedgerMetadata, answers: Mapping[str, BookieAnswer]) -> list[dict]:
    """The ledger's ensemble bookies whose evidence is read probes."""
    members = dict.fromkeys(b for seg in md.segments for b in seg.ensemble)
    return [{"bookie": b, "share_percent": answers[b].share_percent, "probed": answers[b].probed}
            for b in members if b in answers and answers[b].is_probe]


def _note(sampled: list[dict]) -> str:
    if not sampled:
        return ""
    return "; sampled evidence: " + ", ".join(f"read probes at {p['share_percent']} % on {p['bookie']}"
                                              for p in sampled)


def known_ctime(md: LedgerMetadata) -> int | None:
    """The ledger's creation time, None when unknown: bk_ledgers.ctime is already the effective one (null when
    unknown); a stored -1 (or any value <= 0) reaching here by another path is unknown too, never 1970."""
    return md.ctime if md.ctime is not None and md.ctime > 0 else None


def _subject(md: LedgerMetadata) -> str:
    return f"ledger {md.ledger_id}"


def _violation(s: Settings, cluster: str, check: str, subject: str, entry_count: int, message: str,
               evidence: dict) -> dict:
    """One findings row; its severity is the check's (audit.systems.bookkeeper.domain.checks.CHECKS)."""
    return {"run_id": s.run_id, "system": SYSTEM, "cluster": cluster, "check": check,
            "severity": CHECKS[check].severity, "subject": subject, "entry_count": int(entry_count),
            "message": message, "evidence": json.dumps(evidence, sort_keys=True)}


def _fragment_evidence(v: LedgerVerdict) -> list[dict]:
    return [{"segment_first_entry_id": f.segment_first_entry_id, "bookie": f.bookie, "bookie_index": f.bookie_index,
             "missing_count": f.missing_count, "missing_ranges": [list(r) for r in f.missing_ranges[:EVIDENCE_RANGES]],
             "ranges_truncated": f.ranges_truncated or len(f.missing_ranges) > EVIDENCE_RANGES}
            for f in v.fragments]


def _violations(md: LedgerMetadata, v: LedgerVerdict, cluster: str, s: Settings,
                sampled: list[dict]) -> Iterable[dict]:
    subject = _subject(md)
    quorum = f"E={md.ensemble_size} Qw={md.write_quorum_size} Qa={md.ack_quorum_size}"
    for code, message in metadata_violations(md):
        yield _violation(s, cluster, "bk.metadata_invariant", subject, 0, f"ledger {md.ledger_id}: {message}",
                         {"ledger_id": md.ledger_id, "code": code})
    if v.audited:
        yield from _replica_violations(md, v, cluster, s, subject, quorum, sampled)
    yield from _bookie_violations(md, cluster, s, subject)
    for pv in _placement(md, cluster, s):
        yield pv
    ctime = known_ctime(md)
    if (md.state in (OPEN, IN_RECOVERY) and ctime is not None and s.as_of_ms is not None
            and s.open_ledger_max_age_ms is not None and s.as_of_ms - ctime > s.open_ledger_max_age_ms):
        age = s.as_of_ms - ctime
        yield _violation(s, cluster, "bk.ledger_open_too_long", subject, 0,
                         f"ledger {md.ledger_id} is {md.state} for {age} ms (limit {s.open_ledger_max_age_ms} ms)",
                         {"ledger_id": md.ledger_id, "state": md.state, "ctime": md.ctime, "as_of_ms": s.as_of_ms,
                          "age_ms": age})


def _replica_violations(md, v: LedgerVerdict, cluster, s, subject, quorum, sampled) -> Iterable[dict]:
    bands = (("bk.entries_lost", v.entries_lost, "have no replica left"),
             ("bk.entries_below_ack_quorum", v.entries_below_ack_quorum - v.entries_lost,
              f"have fewer than Qa={md.ack_quorum_size} replicas"),
             ("bk.entries_below_write_quorum", v.entries_below_write_quorum - v.entries_below_ack_quorum,
              f"have fewer than Qw={md.write_quorum_size} replicas"))
    evidence = None
    for check, n, what in bands:
        if n <= 0:
            continue
        if evidence is None:
            evidence = {"ledger_id": md.ledger_id, "least_replicas": v.least_replicas, "entries": v.entries,
                        "entries_lost": v.entries_lost, "entries_below_ack_quorum": v.entries_below_ack_quorum,
                        "entries_below_write_quorum": v.entries_below_write_quorum,
                        "unavailable_bookies": [list(u) for u in v.unavailable_bookies],
                        "fragments": _fragment_evidence(v)}
            if sampled:
                evidence["sampled"] = sampled
        yield _violation(s, cluster, check, subject, n,
                         f"ledger {md.ledger_id} ({quorum}): {n} entries {what}; least replicas {v.least_replicas}"
                         + _note(sampled), evidence)
    if v.wrong_ensemble_entries:
        n = v.wrong_ensemble_entries
        parts = _per_bookie(v.wrong_ensemble)
        evidence = {"ledger_id": md.ledger_id, "outside": parts}
        if sampled:
            evidence["sampled"] = sampled
        yield _violation(
            s, cluster, "bk.entries_outside_ensemble", subject, n,
            f"ledger {md.ledger_id}: {n} entries lack a replica on a write-set bookie the metadata lists while "
            f"{', '.join(p['bookie'] for p in parts)}, not listed for them, hold them; the metadata may name the "
            f"wrong ensemble (apache/bookkeeper#4651)" + _note(sampled), evidence)


def _per_bookie(parts: Iterable[OutsideEnsemble]) -> list[dict]:
    """One evidence part per holder bookie (the lab scorecard matches on the bookie), its segments inside."""
    out: dict[str, dict] = {}
    for o in parts:
        p = out.setdefault(o.bookie, {"bookie": o.bookie, "entry_count": 0, "ranges": [], "ranges_truncated": False,
                                      "segments": []})
        p["entry_count"] += o.entry_count
        p["segments"].append({"segment_first_entry_id": o.segment_first_entry_id, "ensemble": list(o.ensemble),
                              "entry_count": o.entry_count})
        room = EVIDENCE_RANGES - len(p["ranges"])
        p["ranges"] += [list(r) for r in o.ranges[:max(room, 0)]]
        p["ranges_truncated"] |= o.ranges_truncated or len(o.ranges) > room
    return list(out.values())


def _expected_on_bookie(md: LedgerMetadata, bookie: str) -> int:
    """Entries the metadata places on `bookie` (CLOSED ledgers; 0 when the end is not known)."""
    if not md.is_closed or md.ensemble_size < 1:
        return 0
    total = 0
    for seg, first, last in md.segment_bounds():
        idx = [i for i, b in enumerate(seg.ensemble) if b == bookie and i < md.ensemble_size]
        for i in idx[:1]:  # a repeated bookie stores each entry once
            total += count_expected(i, max(first, 0), last, md.ensemble_size, md.write_quorum_size)
    return total


def _bookie_violations(md: LedgerMetadata, cluster: str, s: Settings, subject: str) -> Iterable[dict]:
    known = s.bookies.get(cluster)
    if not known:
        return
    seen = []
    for seg in md.segments:
        for b in seg.ensemble:
            if b not in seen:
                seen.append(b)
    for b in seen:
        state = known.get(b, (None, None))[0]
        if state in (AVAILABLE, READONLY):
            continue
        segs = [seg.first_entry_id for seg in md.segments if b in seg.ensemble]
        n = _expected_on_bookie(md, b)
        if state is None:
            check, what = "bk.ensemble_unknown_bookie", "was never registered (no cookie, not available)"
        else:
            check, what = "bk.ensemble_dead_bookie", "is registered but neither available nor read-only"
        yield _violation(s, cluster, check, subject, n,
                         f"ledger {md.ledger_id}: ensemble bookie {b} {what}; {n} entries are placed on it",
                         {"ledger_id": md.ledger_id, "bookie": b, "bookie_state": state, "segments": segs})


def _placement(md: LedgerMetadata, cluster: str, s: Settings) -> Iterable[dict]:
    known = s.bookies.get(cluster) or {}
    racks = {b: rack for b, (_, rack) in known.items() if rack}
    if not racks:
        return
    found = placement_violations(md, racks, s.min_racks_per_write_quorum)
    if not found:
        return
    n = 0
    if md.is_closed:
        bounds = {seg.first_entry_id: (first, last) for seg, first, last in md.segment_bounds()}
        for p in found:
            first, last = bounds[p.segment_first_entry_id]
            # entries e of [first, last] with e mod E == write_set_index use this write set
            n += count_expected(p.write_set_index, max(first, 0), last, md.ensemble_size, 1)
    yield _violation(
        s, cluster, "bk.placement_violation", _subject(md), n,
        f"ledger {md.ledger_id}: {len(found)} write sets span fewer than "
        f"{min(s.min_racks_per_write_quorum, md.write_quorum_size)} racks",
        {"ledger_id": md.ledger_id, "write_sets": [
            {"segment_first_entry_id": p.segment_first_entry_id, "write_set_index": p.write_set_index,
             "bookies": list(p.bookies), "racks": list(p.racks)} for p in found]})
