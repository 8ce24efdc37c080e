"""Ground truth of a lab run, computed from the simulation state -- never from the payloads, and from the audit's
code only for the one choice that is the audit's own: which entries read probes read.

Replica counts follow ReplicasCheck (docs/formats/bookkeeper.md §1.7), one entry at a time: for a CLOSED ledger with
lastEntryId >= 0, m(e) = number of bookies of e's write set in the metadata that answer and are seen not to hold e
(a bookie without the ledger answers ENOLEDGER: it holds nothing); bookies that do not answer are not
counted. lost: Qw - m == 0, below ack quorum: Qw - m < Qa, below write quorum: Qw - m < Qw.

Read probes (read_probe_percent, 100 by default) read the entries LedgerChecker.verifyLedgerFragment would verify:
at 100 % every entry the metadata places on the bookie, below it the first and last of each fragment plus a seeded
share of the rest -- the collector's own selection (audit.systems.bookkeeper.domain.verification.iter_ledger_probes,
seeded by cluster, ledger, bookie and fragment). A probed bookie is seen to lack exactly the entries it really lost (its
simulated store) that this selection reads; a lost entry no probe reads is expected to give no finding and is
listed under `not_probed`, never counted missing. Probes cannot see entries a bookie holds outside its stripe.
Entries outside the ensemble are information; only apache/bookkeeper#4651's shape is a finding: a bookie of e's write
set is seen without e while a bookie outside it, whose holdings the audit can see, holds e.
Each injected fault records what it hit (`hits`: per ledger and bookie the entries lost, how many the bookie's
evidence sees, that evidence) and its `outcome`: "expected" (some lost entry is seen), "not_probed" (entries were
lost, all on read-probe bookies and none probed) or "no_entries_lost".
A location-index bookie whose index was read less than INDEX_SETTLE_MS after the ledger's last znode write (its
mtime, or the stored ctime if later) may lack entries still in its write cache: for that ledger it counts as not
answering (the audit's rule, thresholds.location_index_settle) and is listed under `unsettled_index`.
Creation time is the stored ctime when the metadata has the field (a value <= 0 is unknown), else the znode's ctime
for format v2/v3 (LedgerMetadataSerDe.parseVersion2/3Config, AbstractZkLedgerManager); v1 without one is unknown."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from audit.systems.bookkeeper.config import BookKeeperThresholds
from audit.systems.bookkeeper.domain.model import CLOSED, LedgerMetadata
from audit.systems.bookkeeper.domain.verification import FULL_SHARE, iter_ledger_probes
from lab.bookkeeper.config import LOCATION_INDEX, READ_PROBE
from lab.bookkeeper.scenario import LabState

MIN_RACKS_PER_WRITE_QUORUM = 2   # the estate default (thresholds.min_racks_per_write_quorum)
COUNT_CHECKS = (("bk.entries_lost", "entries_lost", "no replica left"),
                ("bk.entries_below_ack_quorum", "entries_below_ack_quorum", "fewer replicas than the ack quorum"),
                ("bk.entries_below_write_quorum", "entries_below_write_quorum",
                 "fewer replicas than the write quorum"))
UNREACHABLE = "unreachable"
INDEX_SETTLE_MS = BookKeeperThresholds().location_index_settle_s * 1000   # the estate default
EXPECTED, NOT_PROBED, NO_ENTRIES_LOST = "expected", "not_probed", "no_entries_lost"


def ensemble_bookies(md: LedgerMetadata) -> list[str]:
    """Every bookie the metadata names, in order of first appearance."""
    return list(dict.fromkeys(b for seg in md.segments for b in seg.ensemble))


def bookie_lists(state: LabState) -> dict[str, list[str]]:
    """What /ledgers/available, /available/readonly and /cookies list at the snapshot."""
    c, at = state.cluster, state.as_of_ms
    return {"available": sorted(b for b in c.bookies if c.registration(b, at) == "available"),
            "readonly": sorted(b for b in c.bookies if c.registration(b, at) == "readonly"),
            "cookies": sorted(c.bookies)}


def creation_time(md: LedgerMetadata, znode_ctime: int | None) -> int | None:
    if md.ctime is not None:   # the field is present: it wins, even when it says nothing (-1)
        return md.ctime if md.ctime > 0 else None
    return znode_ctime if md.format_version >= 2 else None


@dataclass
class _Rows:
    """The ground truth's lists, filled ledger by ledger in ledger id order."""
    state: LabState
    cluster: str
    findings: list[dict[str, Any]] = field(default_factory=list)
    gaps: list[dict[str, Any]] = field(default_factory=list)
    fragments: list[dict[str, Any]] = field(default_factory=list)
    replicas: list[dict[str, Any]] = field(default_factory=list)
    outside_info: list[dict[str, Any]] = field(default_factory=list)
    not_probed: list[dict[str, Any]] = field(default_factory=list)
    unsettled: list[dict[str, Any]] = field(default_factory=list)
    hits: dict[int, list[dict[str, Any]]] = field(default_factory=dict)   # ledger id -> bookies that lost entries

    def finding(self, check: str, lid: int, detail: str, **extra: Any) -> None:
        self.findings.append({"check": check, "cluster": self.cluster, "ledger_id": lid, **extra, "detail": detail,
                              "faults": sorted(self.state.roles[lid])})


def ground_truth(state: LabState, cluster: str, znode_ctimes: dict[int, int] | None = None,
                 znode_mtimes: dict[int, int] | None = None, index_reads: dict[str, int] | None = None
                 ) -> dict[str, Any]:
    """`znode_ctimes`/`znode_mtimes`: the times a real ZooKeeper gave the znodes when the lab was loaded into one
    (it stamps its own clock); by default the lab's. `index_reads`: {bookie: read_at_ms} of the location indexes
    read then; by default the snapshot time."""
    lists = bookie_lists(state)
    rows = _Rows(state, cluster)
    for lid in sorted(state.metadata):
        if lid in state.deleted_during_collection:
            continue   # gone before its bookies were asked: nothing to judge (the collector notes the deletion)
        md = state.metadata[lid]
        names = ensemble_bookies(md)
        mtime = (znode_mtimes or {}).get(lid, state.znode_times[lid][1])
        unsettled = _unsettled_index(state, md, names, mtime, index_reads)
        if unsettled:
            rows.unsettled.append({"cluster": cluster, "ledger_id": lid, "bookies": unsettled})
        _judge_ensemble(rows, lid, names, lists)
        _judge_placement(rows, lid, md)
        _judge_open_age(rows, lid, md, (znode_ctimes or {}).get(lid, state.znode_times[lid][0]))
        if md.state == CLOSED and md.last_entry_id >= 0:
            _judge_replicas(rows, lid, md, names, unsettled)
    return _truth_document(rows)


def _judge_ensemble(rows: _Rows, lid: int, names: list[str], lists: dict[str, list[str]]) -> None:
    """A coverage gap per bookie that does not answer; a finding per bookie that is not registered."""
    c, at = rows.state.cluster, rows.state.as_of_ms
    registered = set(lists["available"]) | set(lists["readonly"])
    for b in names:
        if not c.answers(b, at):
            rows.gaps.append({"cluster": rows.cluster, "source": "bookie", "bookie": b, "ledger_id": lid,
                              "error": UNREACHABLE})
        if b not in registered:
            check = "bk.ensemble_dead_bookie" if b in lists["cookies"] else "bk.ensemble_unknown_bookie"
            rows.finding(check, lid, f"ensemble names {b}, which is not registered as available or read-only",
                         bookie=b)


def _judge_placement(rows: _Rows, lid: int, md: LedgerMetadata) -> None:
    bad = _placement_violations(md, rows.state.cluster.racks)
    if bad:
        rows.finding("bk.placement_violation", lid,
                     f"{len(bad)} write set(s) span fewer than {MIN_RACKS_PER_WRITE_QUORUM} racks, e.g. "
                     f"segment {bad[0][0]} bookies {list(bad[0][1])}")


def _judge_open_age(rows: _Rows, lid: int, md: LedgerMetadata, znode_ctime: int) -> None:
    """An OPEN ledger older than open_ledger_max_age_s; one of unknown age is not judged."""
    ctime = creation_time(md, znode_ctime)
    if md.state == CLOSED or ctime is None:
        return
    age = rows.state.as_of_ms - ctime
    limit_s = rows.state.config.open_ledger_max_age_s
    if age > limit_s * 1000:
        rows.finding("bk.ledger_open_too_long", lid, f"{md.state} for {age // 3_600_000} h (ctime {ctime}), limit "
                     f"{limit_s} s", open_age_ms=age)


def _judge_replicas(rows: _Rows, lid: int, md: LedgerMetadata, names: list[str], unsettled: list[str]) -> None:
    """Replica counts, missing fragments, fault hits and findings of a CLOSED ledger with entries; unsettled index
    bookies count as not answering."""
    state = rows.state
    c, at = state.cluster, state.as_of_ms

    def held(b: str) -> set[int]:
        return c.entries(b, lid) or set()

    def answers(b: str) -> bool:
        return c.answers(b, at) and b not in unsettled

    probes = _probe_sets(state, md, names, rows.cluster)
    counts, frags = _replica_counts(md, held, answers, probes)
    counts["ledger_id"] = lid
    rows.replicas.append(counts)
    rows.hits[lid] = _fragment_rows(rows, lid, frags)
    _replica_findings(rows, lid, md, counts)
    per_bookie, misplaced = _outside(md, held, _stray_visible(state, names) - set(unsettled), answers, probes)
    for b, n in sorted(per_bookie.items()):
        rows.outside_info.append({"cluster": rows.cluster, "ledger_id": lid, "bookie": b, "entry_count": n})
    if misplaced:
        rows.finding("bk.entries_outside_ensemble", lid,
                     f"{misplaced} entries are missing on a bookie the metadata names while a bookie it does not "
                     "name holds them (apache/bookkeeper#4651)", entry_count=misplaced)


def _fragment_rows(rows: _Rows, lid: int, frags: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Lists the ledger's missing fragments (seen) and not-probed ones (lost, unread); -> its hits per bookie."""
    c, share = rows.state.cluster, rows.state.config.read_probe_percent
    per_bookie_lost: dict[str, list[int]] = {}   # bookie -> [entries lost, entries seen lost]
    for frag in frags:
        unprobed = frag.pop("not_probed_count")
        lost = per_bookie_lost.setdefault(frag["bookie"], [0, 0])
        lost[0] += frag["missing_count"] + unprobed
        lost[1] += frag["missing_count"]
        if frag["missing_count"]:
            rows.fragments.append({"cluster": rows.cluster, "ledger_id": lid, **frag})
        if unprobed:
            rows.not_probed.append({"cluster": rows.cluster, "ledger_id": lid, **frag, "missing_count": unprobed,
                                    "share_percent": share})
    return [{"ledger_id": lid, "bookie": b, "evidence": c.evidence.get(b), "lost": n, "seen": seen,
             **({"share_percent": share} if c.evidence.get(b) == READ_PROBE else {})}
            for b, (n, seen) in sorted(per_bookie_lost.items())]


def _replica_findings(rows: _Rows, lid: int, md: LedgerMetadata, counts: dict[str, Any]) -> None:
    # One finding per entry: disjoint bands (0 replicas; 1..Qa-1; Qa..Qw-1) of the nested counts.
    bands = {"entries_lost": counts["entries_lost"],
             "entries_below_ack_quorum": counts["entries_below_ack_quorum"] - counts["entries_lost"],
             "entries_below_write_quorum": counts["entries_below_write_quorum"]
             - counts["entries_below_ack_quorum"]}
    for check, key, what in COUNT_CHECKS:
        if bands[key] > 0:
            rows.finding(check, lid, f"{bands[key]} of {counts['entries']} entries with {what} "
                         f"(Qw {md.write_quorum_size}, Qa {md.ack_quorum_size})", entry_count=bands[key])


def _truth_document(rows: _Rows) -> dict[str, Any]:
    state, c = rows.state, rows.state.cluster
    by_check: dict[str, int] = {}
    for f in rows.findings:
        by_check[f["check"]] = by_check.get(f["check"], 0) + 1
    flagged = {f["ledger_id"] for f in rows.findings}
    return {
        "system": "bookkeeper", "cluster": rows.cluster, "seed": state.config.seed, "as_of_ms": state.as_of_ms,
        "findings": rows.findings,
        "coverage_gaps": rows.gaps,
        "missing_fragments": rows.fragments,
        "outside_ensemble": rows.outside_info,
        "not_probed": rows.not_probed,
        "unsettled_index": rows.unsettled,   # not judged: index bookies read before the ledger settled
        "replicas": rows.replicas,
        "read_probe_percent": state.config.read_probe_percent,
        "bookie_evidence": {b: c.evidence.get(b) for b in c.bookies},
        "faults": [_fault_record(f, c.evidence, rows.hits) for f in state.faults],
        "summary": {"ledgers": len(state.metadata), "ledgers_with_findings": len(flagged),
                    "healthy_ledgers": len(state.metadata) - len(flagged),
                    "open_ledgers": sum(1 for md in state.metadata.values() if md.state != CLOSED),
                    "findings_by_check": dict(sorted(by_check.items())),
                    "unavailable_bookies": sorted({g["bookie"] for g in rows.gaps})},
    }


def _unsettled_index(state: LabState, md: LedgerMetadata, names: list[str], mtime: int,
                     index_reads: dict[str, int] | None) -> list[str]:
    """Answering location-index bookies of the ensemble read less than INDEX_SETTLE_MS after the ledger's last
    metadata write."""
    c, at = state.cluster, state.as_of_ms
    last = max(mtime, md.ctime or 0)
    return [b for b in names if c.evidence.get(b) == LOCATION_INDEX and c.answers(b, at)
            and last + INDEX_SETTLE_MS > (index_reads or {}).get(b, at)]


def _probe_sets(state: LabState, md: LedgerMetadata, names: list[str], cluster: str) -> dict[str, set[int]]:
    """{bookie: the entries its read probes read} for the ledger's read-probe bookies below the full share (at 100 %
    probes read every entry the metadata places on a bookie: no entry goes unseen)."""
    share = state.config.read_probe_percent
    if share >= FULL_SHARE:
        return {}
    return {b: set(iter_ledger_probes(md, b, share, cluster)) for b in names
            if state.cluster.evidence.get(b) == READ_PROBE}


def _fault_record(fault: dict[str, Any], evidence: dict[str, str], hits: dict[int, list[dict[str, Any]]]
                  ) -> dict[str, Any]:
    """The injected fault, with the evidence of its bookie, the entries it made bookies lose and what is expected."""
    out = dict(fault)
    bookie = fault.get("params", {}).get("bookie")
    if bookie:
        out["bookie_evidence"] = evidence.get(bookie)
    out["hits"] = [h for lid in fault.get("ledgers", []) for h in hits.get(lid, [])]
    out["outcome"] = (NO_ENTRIES_LOST if not out["hits"] else EXPECTED if any(h["seen"] for h in out["hits"])
                      else NOT_PROBED)
    return out


def _replica_counts(md: LedgerMetadata, held, answers, probes: dict[str, set[int]]
                    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Counts of what the audit can see; fragments carry missing_count (seen) and not_probed_count (lost entries
    no read probe reads)."""
    E, Qw, Qa = md.ensemble_size, md.write_quorum_size, md.ack_quorum_size
    lost = below_ack = below_write = entries = 0
    worst = 0
    frags = []
    for seg, first, last in md.segment_bounds():
        if last < first:
            continue   # an empty segment expects nothing
        holders = [held(b) if answers(b) else None for b in seg.ensemble]
        probed = [probes.get(b) for b in seg.ensemble]
        missing_at = [0] * len(seg.ensemble)
        unprobed_at = [0] * len(seg.ensemble)
        for e in range(first, last + 1):
            m = 0
            for w in range(Qw):
                i = (e + w) % E
                h = holders[i]
                if h is not None and e not in h:
                    if probed[i] is not None and e not in probed[i]:
                        unprobed_at[i] += 1   # lost, but no probe reads it: the audit takes it as held
                        continue
                    m += 1
                    missing_at[i] += 1
            copies = Qw - m
            entries += 1
            worst = max(worst, m)
            lost += copies == 0
            below_ack += copies < Qa
            below_write += copies < Qw
        for i, count in enumerate(missing_at):
            if count or unprobed_at[i]:
                frags.append({"segment_first_entry_id": first, "segment_last_entry_id": last,
                              "bookie": seg.ensemble[i], "bookie_index": i, "missing_count": count,
                              "not_probed_count": unprobed_at[i]})
    unavailable = sum(1 for b in ensemble_bookies(md) if not answers(b))
    return ({"state": md.state, "entries": entries, "least_replicas": Qw - worst, "entries_lost": lost,
             "entries_below_ack_quorum": below_ack, "entries_below_write_quorum": below_write,
             "unavailable_bookies": unavailable}, frags)


def _stray_visible(state: LabState, names: list[str]) -> set[str]:
    """Answering bookies whose entries outside their stripe the audit can see: a list answer (asked when the
    metadata names the bookie) or the location index (read whole on the bookie's host, so also for ledgers that
    no longer name it). Read probes only read entries the metadata places on the bookie."""
    c, at = state.cluster, state.as_of_ms
    out = set()
    for b in c.bookies:
        evidence = c.evidence.get(b, "entries_of_ledger")
        if c.answers(b, at) and evidence != "read_probe" and (b in names or evidence == "location_index"):
            out.add(b)
    return out


def _outside(md: LedgerMetadata, held, visible: set[str], answers, probes: dict[str, set[int]]
             ) -> tuple[dict[str, int], int]:
    """({bookie: entries it holds outside e's write set}, #entries of the #4651 shape) for a CLOSED ledger;
    `held(bookie)` -> its entry set, `visible`: bookies whose strays can be seen, `probes`: see _probe_sets."""
    E, Qw = md.ensemble_size, md.write_quorum_size
    holdings = {b: held(b) for b in visible}
    per_bookie: dict[str, int] = {}
    misplaced = 0
    for seg, first, last in md.segment_bounds():
        for e in range(max(first, 0), last + 1):
            write_set = {seg.ensemble[(e + w) % E] for w in range(Qw)}
            holders = [b for b, entries in holdings.items() if e in entries and b not in write_set]
            for b in holders:
                per_bookie[b] = per_bookie.get(b, 0) + 1
            if holders and any(answers(b) and e not in held(b) and (b not in probes or e in probes[b])
                               for b in write_set):
                misplaced += 1
    return per_bookie, misplaced


def _placement_violations(md: LedgerMetadata, racks: dict[str, str]) -> list[tuple[int, tuple[str, ...]]]:
    need = min(md.write_quorum_size, MIN_RACKS_PER_WRITE_QUORUM)
    bad = []
    for seg in md.segments:
        size = len(seg.ensemble)
        for i in range(size):
            ws = tuple(seg.ensemble[(i + w) % size] for w in range(md.write_quorum_size))
            if len({racks.get(b, "?" + b) for b in ws}) < need:
                bad.append((seg.first_entry_id, ws))
    return bad
