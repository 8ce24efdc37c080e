"""Plans and runs one lab BookKeeper cluster: bookie events on a timeline, ledgers written through
LedgerWriter, then the after-the-fact losses (disk loss, #4287 metadata without data).

Every fault ledger keeps the other faults' bookies out of its ensembles (`exclude`), so each fault's
consequence is its own; ordinary ledgers pick from all writable bookies and meet the faults naturally
(a healthy ledger written across a bookie restart gets an ensemble change, one created before a crash
names the dead bookie)."""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from audit.systems.bookkeeper.domain.model import CLOSED, INVALID_ENTRY_ID, LedgerMetadata, Segment
from lab.bookkeeper.config import (BOOKIE_FAULTS, LOCATION_INDEX, FaultSpec, LabConfig, LabConfigError, SOURCE,
                                         bookie_ids, evidence_of, rack_of, storage_of)
from lab.bookkeeper.production import (grow_tail, rereplicate, retention_deletes, stores_ctime,
                                             write_with_slow_bookie)
from lab.bookkeeper.sim import Cluster, LabError, LedgerWriter

MINUTE = 60_000
HEALTHY_CTIME_MIN = (10, 6 * 60)      # ordinary ledgers are created 10 min to 6 h before the snapshot
QUORUMS = [((2, 2, 2), 30), ((3, 3, 2), 25), ((3, 2, 2), 20), ((2, 2, 1), 10), ((4, 2, 2), 10), ((6, 3, 2), 5)]
VERSION_CYCLE = (1, 3, 3, 2, 3, 3, 3, 2, 3, 3)   # ordinary ledgers: 70 % v3, 20 % v2, 10 % v1
DISK_LOSS_QUORUMS = [(2, 2, 2), (3, 3, 2), (3, 2, 2)]   # -> below Qa and Qw / below Qw only / below Qa and Qw
ADD_INTERVALS_MS = (5, 10, 20, 40)
OPEN_TAIL = 3            # adds of a live OPEN ledger still in flight at the snapshot
MIN_FAULT_ENTRIES = 12
FLUSH_INTERVAL_MS = 10_000   # DbLedgerStorage flushInterval as shipped: the write cache reaches the index this late
RECENT_ADDS_MS = 20_000      # a recently closed ledger's adds span its last ~20 s
# Fault bookies usable again by the snapshot (back up, or only slow for one client): a recently closed ledger may
# need one, since at the default shares few bookies have a location index.
REUSABLE_FAULT_BOOKIES = ("ensemble_change", "slow_bookie")


@dataclass
class LedgerPlan:
    role: str                       # "healthy" or the fault kind it was made for
    start: int                      # ctime and time of the first add (ms)
    entries: int
    quorum: tuple[int, int, int]    # E, Qw, Qa
    dt: int                         # ms between adds
    version: int = 3
    include: tuple[str, ...] = ()
    exclude: frozenset[str] = frozenset()
    fault: FaultSpec | None = None
    ledger_id: int = 0
    event_ms: int | None = None     # when the fault's event happens to this ledger (slow_bookie)


@dataclass
class LabState:
    config: LabConfig
    as_of_ms: int
    cluster: Cluster
    metadata: dict[int, LedgerMetadata]
    passwords: dict[int, bytes]
    roles: dict[int, set[str]]                  # ledger id -> fault kinds that shaped it
    faults: list[dict[str, Any]]                # what was injected, with its parameters and ledgers
    writers: dict[int, LedgerWriter] = field(default_factory=dict)
    # ledger id -> (ctime, mtime, version) of its znode: created with the ledger, updated by every metadata write
    znode_times: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    # OPEN ledger -> its first entry added after the snapshot (written while the cluster was being collected)
    tail_after_snapshot: dict[int, int] = field(default_factory=dict)
    # ledgers retention deletes after the metadata was read and before the bookies are asked (their data is gone)
    deleted_during_collection: set[int] = field(default_factory=set)
    # location-index bookie -> ledger -> entries it holds that its write cache has not flushed to the index yet
    unflushed: dict[str, dict[int, set[int]]] = field(default_factory=dict)


def _weighted(rng: random.Random, table: list[tuple[Any, int]]) -> Any:
    return rng.choices([v for v, _ in table], weights=[w for _, w in table])[0]


class _Planner:
    def __init__(self, cfg: LabConfig, as_of_ms: int):
        self.cfg, self.now = cfg, as_of_ms
        self.rng = random.Random(f"bookkeeper-lab:{cfg.seed}")
        ids = bookie_ids(cfg.bookies)
        self.cluster = Cluster(ids, {b: rack_of(n, cfg.racks) for n, b in enumerate(ids, start=1)},
                               {b: storage_of(n, cfg.db_ledger_storage_percent) for n, b in enumerate(ids, start=1)})
        self.cluster.evidence = {b: evidence_of(n, cfg) for n, b in enumerate(ids, start=1)}
        self.plans: list[LedgerPlan] = []
        self.special: dict[int, str] = {}       # fault index -> its bookie
        self.fault_log: list[dict[str, Any]] = []
        self.after: list[tuple[int, str, FaultSpec, list[LedgerPlan]]] = []   # (time, action, fault, ledgers)

    # ---------------------------------------------------------------- bookies
    def pick_bookies(self) -> None:
        used = {f["bookie"] for f in self.cfg.faults if f.kind in BOOKIE_FAULTS and f["bookie"]}
        for f in self.cfg.faults:
            if f.kind not in BOOKIE_FAULTS:
                continue
            chosen = f["bookie"]
            if not chosen:
                free = [b for b in self.cluster.bookies if b not in used]
                if not free:
                    raise LabConfigError(SOURCE, f"lab.faults[{f.index}].bookie",
                                         "a free bookie (more bookies than bookie faults)", None)
                load = {r: sum(1 for b in used if self.cluster.racks[b] == r) for r in self.cluster.rack_names()}
                least = min(load[self.cluster.racks[b]] for b in free)   # spread fault bookies over racks
                chosen = self.rng.choice([b for b in free if load[self.cluster.racks[b]] == least])
                used.add(chosen)
            self.special[f.index] = chosen

    def others(self, f: FaultSpec | None) -> frozenset[str]:
        mine = self.special.get(f.index) if f is not None else None
        return frozenset(b for b in self.special.values() if b != mine)

    # ---------------------------------------------------------------- ledgers
    def entries(self, minimum: int = 3) -> int:
        epl = self.cfg.entries_per_ledger
        return max(minimum, self.rng.randint(max(3, epl // 3), max(3, epl * 5 // 3)))

    def quorum(self, version: int) -> tuple[int, int, int]:
        if version == 1:
            return (2, 2, 2)   # v1 has no ack quorum field: Qa = Qw
        fits = [(q, w) for q, w in QUORUMS
                if q[0] <= self.cfg.bookies - len(self.special) - 1 and self.cluster.feasible(q[0], q[1])]
        return _weighted(self.rng, fits)

    def add(self, role: str, start: int, entries: int, quorum: tuple[int, int, int], f: FaultSpec | None,
            include: tuple[str, ...] = (), version: int = 3, dt: int | None = None) -> LedgerPlan:
        plan = LedgerPlan(role, start, entries, quorum, dt or self.rng.choice(ADD_INTERVALS_MS), version, include,
                          self.others(f) if role != "healthy" else frozenset(), f)
        self.plans.append(plan)
        return plan

    def fault_plan(self, f: FaultSpec) -> None:
        plan_kind = self._KIND_PLANS.get(f.kind)
        if plan_kind is None:  # parse_lab_config admits only the kinds that have a plan
            raise LabError(f"fault kind {f.kind!r} has no plan")
        bookie = self.special.get(f.index)
        params = dict(f.params, bookie=bookie) if f.kind in BOOKIE_FAULTS else dict(f.params)
        log: dict[str, Any] = {"kind": f.kind, "index": f.index, "params": params}
        at = self.now - f.params.get("ago_min", 0) * MINUTE
        log["_plans"] = plan_kind(self, f, bookie, at, log)
        self.fault_log.append(log)

    # Each kind's plan: (planner, fault, its bookie, when it strikes, its ground-truth record) -> the fault's ledgers.
    # The record gets the event's times (at_ms, back_ms); a loss after the fact is queued on `after`.
    def _plan_bookie_crash(self, f: FaultSpec, bookie: str, at: int, log: dict[str, Any]) -> list[LedgerPlan]:
        self.cluster.crash(bookie, at)
        log["at_ms"] = at
        before = [self._written_before(f, bookie, at) for _ in range(f["ledgers_before"])]
        return before + self._written_across(f, bookie, at, f["ledgers_across"])

    def _plan_ensemble_change(self, f: FaultSpec, bookie: str, at: int, log: dict[str, Any]) -> list[LedgerPlan]:
        self._down_for_a_while(f, bookie, at, log)
        return self._written_across(f, bookie, at, f["ledgers"])

    def _plan_bookie_readonly(self, f: FaultSpec, bookie: str, at: int, log: dict[str, Any]) -> list[LedgerPlan]:
        self.cluster.set_readonly(bookie, at)
        log["at_ms"] = at
        return self._written_across(f, bookie, at, f["ledgers"])

    def _plan_replaced_ensemble_race(self, f: FaultSpec, bookie: None, at: int, log: dict[str, Any]
                                     ) -> list[LedgerPlan]:
        planned = []
        for _ in range(f["ledgers"]):
            n = self.entries(3 * f["in_flight"] + MIN_FAULT_ENTRIES)
            planned.append(self.add(f.kind, self.now - self.rng.randint(20, 90) * MINUTE - n * 40, n, (2, 2, 1), f))
        return planned

    def _plan_disk_loss(self, f: FaultSpec, bookie: str, at: int, log: dict[str, Any]) -> list[LedgerPlan]:
        log["at_ms"] = at
        quorums = [q for q in DISK_LOSS_QUORUMS if self.cluster.feasible(q[0], q[1])]
        planned = []
        for i in range(f["ledgers"]):
            n, dt = self.entries(MIN_FAULT_ENTRIES), self.rng.choice(ADD_INTERVALS_MS)
            start = at - self.rng.randint(5, 120) * MINUTE - n * dt
            planned.append(self.add(f.kind, start, n, quorums[i % len(quorums)], f,
                                    (bookie,), version=2 if i == 0 else 3, dt=dt))
        self.after.append((at, "drop_on_bookie", f, planned))
        return planned

    def _plan_unreachable_bookie(self, f: FaultSpec, bookie: str, at: int, log: dict[str, Any]) -> list[LedgerPlan]:
        self.cluster.unreachable_at_snapshot.add(bookie)
        planned = []
        for _ in range(f["ledgers"]):   # ordinary ledgers that name the bookie
            n, dt = self.entries(), self.rng.choice(ADD_INTERVALS_MS)
            start = self.now - self.rng.randint(*HEALTHY_CTIME_MIN) * MINUTE - n * dt
            planned.append(self.add(f.kind, start, n, self.quorum(3), f, (bookie,), dt=dt))
        return planned

    def _plan_closed_without_data(self, f: FaultSpec, bookie: None, at: int, log: dict[str, Any]
                                  ) -> list[LedgerPlan]:
        vanish = self.now - 30 * MINUTE
        log["at_ms"] = vanish
        planned = []
        for _ in range(f["ledgers"]):
            n = self.entries(MIN_FAULT_ENTRIES)
            planned.append(self.add(f.kind, self.now - self.rng.randint(60, 180) * MINUTE, n, self.quorum(3), f))
        self.after.append((vanish, "drop_everywhere", f, planned))
        return planned

    def _plan_open_ledger_writing(self, f: FaultSpec, bookie: None, at: int, log: dict[str, Any]
                                  ) -> list[LedgerPlan]:
        planned = []
        for _ in range(f["ledgers"]):
            n, dt = self.entries(MIN_FAULT_ENTRIES), self.rng.choice(ADD_INTERVALS_MS)
            # the last add leaves the client just before the snapshot
            start = self.now - (n - 1) * dt - self.rng.randint(1, dt)
            planned.append(self.add(f.kind, start, n, self.quorum(3), f, dt=dt))
        return planned

    def _plan_open_ledger_abandoned(self, f: FaultSpec, bookie: None, at: int, log: dict[str, Any]
                                    ) -> list[LedgerPlan]:
        planned = []
        for _ in range(f["ledgers"]):
            n = self.entries(MIN_FAULT_ENTRIES)
            start = self.now - f["age_hours"] * 60 * MINUTE - self.rng.randint(0, 59) * MINUTE
            planned.append(self.add(f.kind, start, n, self.quorum(3), f))
        return planned

    def _plan_slow_bookie(self, f: FaultSpec, bookie: str, at: int, log: dict[str, Any]) -> list[LedgerPlan]:
        log["at_ms"] = at
        planned = self._written_across(f, bookie, at, f["ledgers"])
        for plan in planned:
            plan.event_ms = at
        return planned

    def _plan_rereplication(self, f: FaultSpec, bookie: str, at: int, log: dict[str, Any]) -> list[LedgerPlan]:
        self._down_for_a_while(f, bookie, at, log)
        # closed before the bookie is lost
        planned = [self._written_before(f, bookie, at) for _ in range(f["ledgers"])]
        self.after.append((at + MINUTE, "rereplicate", f, planned))
        return planned

    def _plan_recently_closed(self, f: FaultSpec, bookie: None, at: int, log: dict[str, Any]) -> list[LedgerPlan]:
        close = self.now - f["closed_s_ago"] * 1000
        planned = []
        for _ in range(f["ledgers"]):
            n = self.entries(MIN_FAULT_ENTRIES)
            dt = max(1, RECENT_ADDS_MS // n)
            start = close - n * dt    # closed_at = start + n * dt (run_scenario)
            index, exclude = self._index_bookie(start, close)
            plan = self.add(f.kind, start, n, self.quorum(3), f, index, dt=dt)
            plan.exclude = exclude
            planned.append(plan)
        return planned

    def _plan_placement_violation(self, f: FaultSpec, bookie: None, at: int, log: dict[str, Any]
                                  ) -> list[LedgerPlan]:
        planned = []
        for _ in range(f["ledgers"]):
            n = self.entries(MIN_FAULT_ENTRIES)
            start = self.now - self.rng.randint(*HEALTHY_CTIME_MIN) * MINUTE - n * 40
            planned.append(self.add(f.kind, start, n, (3, 2, 2), f))
        return planned

    _KIND_PLANS = {"bookie_crash": _plan_bookie_crash, "ensemble_change": _plan_ensemble_change,
                   "bookie_readonly": _plan_bookie_readonly, "replaced_ensemble_race": _plan_replaced_ensemble_race,
                   "disk_loss": _plan_disk_loss, "unreachable_bookie": _plan_unreachable_bookie,
                   "closed_without_data": _plan_closed_without_data, "open_ledger_writing": _plan_open_ledger_writing,
                   "open_ledger_abandoned": _plan_open_ledger_abandoned, "slow_bookie": _plan_slow_bookie,
                   "rereplication": _plan_rereplication, "recently_closed": _plan_recently_closed,
                   "placement_violation": _plan_placement_violation}

    def _down_for_a_while(self, f: FaultSpec, bookie: str, at: int, log: dict[str, Any]) -> None:
        """The bookie crashes at `at` and is back down_min later."""
        back = at + f["down_min"] * MINUTE
        self.cluster.crash(bookie, at, back)
        log["at_ms"], log["back_ms"] = at, back

    def _written_before(self, f: FaultSpec, bookie: str, at: int) -> LedgerPlan:
        """A ledger on `bookie`, closed 10 to 60 min before the event at `at`."""
        n, dt = self.entries(MIN_FAULT_ENTRIES), self.rng.choice(ADD_INTERVALS_MS)
        start = at - self.rng.randint(10, 60) * MINUTE - n * dt
        return self.add(f.kind, start, n, self.quorum(3), f, (bookie,), dt=dt)

    def _written_across(self, f: FaultSpec, bookie: str, at: int, count: int) -> list[LedgerPlan]:
        """`count` ledgers on `bookie` written across the event at `at`: half the adds before it, half after."""
        planned = []
        for _ in range(count):
            n, dt = self.entries(MIN_FAULT_ENTRIES), self.rng.choice(ADD_INTERVALS_MS)
            planned.append(self.add(f.kind, at - (n // 2) * dt, n, self.quorum(3), f, (bookie,), dt=dt))
        return planned

    def _index_bookie(self, start: int, end: int) -> tuple[tuple[str, ...], frozenset[str]]:
        """(a location-index bookie to pin, the bookies to keep out) for a recently closed ledger; free bookies first,
        then fault bookies usable again. No pin when no index bookie fits."""
        kinds = {f.index: f.kind for f in self.cfg.faults}
        reusable = {b for i, b in self.special.items() if kinds[i] in REUSABLE_FAULT_BOOKIES}
        exclude = frozenset(b for b in self.special.values() if b not in reusable)
        fits = [b for b in self.cluster.bookies
                if self.cluster.evidence.get(b) == LOCATION_INDEX and b not in exclude
                and self.cluster.writable(b, start) and self.cluster.writable(b, end)
                and self.cluster.answers(b, self.now)]
        free = [b for b in fits if b not in reusable]
        pool = free or fits
        if not pool:
            return (), exclude
        return (self.rng.choice(pool),), exclude

    def healthy_plans(self) -> None:
        special = len(self.plans)
        if special > self.cfg.ledgers:
            raise LabConfigError(SOURCE, "lab.ledgers", f">= {special}, the ledgers the faults need", self.cfg.ledgers)
        for i in range(self.cfg.ledgers - special):
            version = VERSION_CYCLE[i % len(VERSION_CYCLE)]
            n, dt = self.entries(), self.rng.choice(ADD_INTERVALS_MS)
            start = self.now - self.rng.randint(*HEALTHY_CTIME_MIN) * MINUTE - n * dt
            self.add("healthy", start, n, self.quorum(version), None, version=version, dt=dt)

    def assign_ids(self) -> None:
        """The id generator is a counter: ids grow with creation time; deleted ledgers leave gaps."""
        self.plans.sort(key=lambda p: (p.start, p.role, p.entries))
        next_id = 1000 + self.rng.randrange(9000)
        for p in self.plans:
            p.ledger_id = next_id
            next_id += 1 + (self.rng.randint(1, 6) if self.rng.random() < 0.15 else 0)


def run_scenario(cfg: LabConfig, as_of_ms: int) -> LabState:
    planner = _Planner(cfg, as_of_ms)
    planner.pick_bookies()
    for f in cfg.faults:
        planner.fault_plan(f)
    planner.healthy_plans()
    planner.assign_ids()
    cluster = planner.cluster
    topics = _topics(cfg.ledgers)
    state = LabState(cfg, as_of_ms, cluster, {}, {}, {}, [])
    for plan in planner.plans:
        rng = random.Random(f"bookkeeper-lab:{cfg.seed}:ledger:{plan.ledger_id}")
        writer = _write(plan, cluster, rng)
        state.writers[plan.ledger_id] = writer
        state.metadata[plan.ledger_id] = _metadata(plan, writer, _custom_metadata(rng, topics, plan.version))
        closed_at = plan.start + plan.entries * plan.dt
        updates = writer.ensemble_changes + (writer.state == CLOSED)
        state.znode_times[plan.ledger_id] = (plan.start, closed_at if updates else plan.start, updates)
        if plan.role == "open_ledger_writing":
            # the metadata above is what the collector reads; the writer goes on while bookies are asked
            state.tail_after_snapshot[plan.ledger_id] = writer.lap + 1
            grow_tail(writer, max(as_of_ms, plan.start + plan.entries * plan.dt), plan.dt)
        if plan.version > 1:
            state.passwords[plan.ledger_id] = f"lab-pw-{cfg.seed}-{plan.ledger_id}".encode()
        state.roles[plan.ledger_id] = set() if plan.role == "healthy" else {plan.role}
    for at, action, f, plans in sorted(planner.after, key=lambda a: (a[0], a[2].index)):
        if action == "rereplicate":
            _rereplicate(state, planner.special[f.index], at)
            continue
        for plan in plans:
            _after_the_fact(state, plan, at, action, planner.special.get(f.index))
    _mark_bookie_roles(state, planner)
    state.unflushed = _unflushed(state, planner.plans)
    state.deleted_during_collection = retention_deletes(state.cluster, state.metadata, state.roles)
    for log in planner.fault_log:
        log["ledgers"] = sorted(p.ledger_id for p in log.pop("_plans"))
        state.faults.append(log)
    return state


# ------------------------------------------------------------------------------------------ writing
def _write(plan: LedgerPlan, cluster: Cluster, rng: random.Random) -> LedgerWriter:
    E, Qw, Qa = plan.quorum
    if plan.role == "placement_violation":
        try:
            ensemble = cluster.choose_one_rack(rng, E, plan.start, plan.exclude)
        except LabError:   # small clusters: two bookies of one rack violate the rule just as well
            E, Qw, Qa = plan.quorum = (2, 2, 2)
            ensemble = cluster.choose_one_rack(rng, E, plan.start, plan.exclude)
    else:
        ensemble = cluster.choose_ensemble(rng, E, Qw, plan.start, plan.include, plan.exclude)
    w = LedgerWriter(cluster, plan.ledger_id, ensemble, Qw, Qa, rng)
    w.avoid = set(plan.exclude)
    n = plan.entries

    def t(e: int) -> int:
        return plan.start + e * plan.dt

    if plan.role == "replaced_ensemble_race":
        _race(w, plan.fault["in_flight"], n, t)
    elif plan.role == "slow_bookie":
        write_with_slow_bookie(w, plan.include[0], plan.event_ms, n, t)
    elif plan.role == "open_ledger_writing":
        for e in range(n - OPEN_TAIL):
            w.add(e, t(e))
        for e in range(n - OPEN_TAIL, n - 1):
            w.send(e, t(e))                      # stored on the whole write set, acks still on the wire
        w.send(n - 1, t(n - 1), only_indexes={(n - 1) % E})   # the newest add has reached one bookie
    else:
        for e in range(n):
            w.add(e, t(e))
        if plan.role != "open_ledger_abandoned":  # an abandoned ledger's writer died without closing it
            w.close()
    return w


def _race(w: LedgerWriter, in_flight: int, n: int, t) -> None:
    """apache/bookkeeper#4651 with E=2, Qw=2, Qa=1. An ensemble change makes segment k; adds k..k+in_flight-1
    go to it and are stored but not yet acked when the next add fails on both bookies. That second change is
    keyed at LAC + 1 == k again, so it REPLACES segment k; then the held acks arrive (LAC passes them) and
    only the still-pending add is re-sent. Metadata now names new bookies for entries only the old ones hold."""
    k = max(1, n // 3)
    for e in range(k):
        w.add(e, t(e))
    w.unwritable.add(w.ensemble[1])              # one bookie's channel fails: ordinary change at k
    w.add(k, t(k), deliver=False)
    for e in range(k + 1, k + in_flight):
        w.add(e, t(e), deliver=False)            # in flight to the new segment's bookies
    w.unwritable.update(w.ensemble)              # both channels unwritable for the next add
    last = k + in_flight
    failed = w.send(last, t(last))
    w.change_ensemble(failed, t(last))           # key LAC+1 == k == last key -> replace
    w.deliver_acks()                             # acks of k..k+in_flight-1 from the old bookies
    failed = w.resend_pending(set(failed), t(last))
    if failed:
        raise LabError(f"ledger {w.ledger_id}: replacement bookies refused the re-sent add")
    w.deliver_acks()
    for e in range(last + 1, n):
        w.add(e, t(e))
    w.close()


def _unflushed(state: LabState, plans: list[LedgerPlan]) -> dict[str, dict[int, set[int]]]:
    """Entries of CLOSED ledgers added within the flush interval before the snapshot, per location-index bookie
    holding them: in its journal and write cache, not yet in its index (entry e is added at start + e * dt)."""
    c, cutoff = state.cluster, state.as_of_ms - FLUSH_INTERVAL_MS
    out: dict[str, dict[int, set[int]]] = {}
    for p in plans:
        if state.metadata[p.ledger_id].state != CLOSED or p.start + (p.entries - 1) * p.dt <= cutoff:
            continue
        for b in c.bookies:
            held = c.entries(b, p.ledger_id)
            if c.evidence.get(b) == LOCATION_INDEX and held:
                recent = {e for e in held if p.start + e * p.dt > cutoff}
                if recent:
                    out.setdefault(b, {})[p.ledger_id] = recent
    return out


def _after_the_fact(state: LabState, plan: LedgerPlan, at: int, action: str, bookie: str | None) -> None:
    lid = plan.ledger_id
    md = state.metadata[lid]
    closed_at = plan.start + plan.entries * plan.dt
    if md.state != CLOSED or closed_at >= at:
        raise LabError(f"ledger {lid} must be closed before its data is lost at {at} (closed {closed_at})")
    if action == "drop_on_bookie":
        if not state.cluster.drop_ledger(bookie, lid):
            raise LabError(f"disk loss: bookie {bookie} held nothing of ledger {lid}")
        state.roles[lid].add("disk_loss")
    else:
        for b in state.cluster.bookies:
            state.cluster.drop_ledger(b, lid)


def _rereplicate(state: LabState, lost: str, at: int) -> None:
    def updated(lid: int, when: int) -> None:
        ctime, _, version = state.znode_times[lid]
        state.znode_times[lid] = (ctime, when, version + 1)
        state.roles[lid].add("rereplication")

    rereplicate(state.cluster, state.metadata, lost, at, state.config.seed, updated)


def _mark_bookie_roles(state: LabState, planner: _Planner) -> None:
    """Ledgers that meet a crashed or unreachable bookie by chance carry that fault too."""
    for f in state.config.faults:
        if f.kind not in ("bookie_crash", "unreachable_bookie"):
            continue
        bookie = planner.special[f.index]
        for lid, md in state.metadata.items():
            if any(bookie in seg.ensemble for seg in md.segments):
                state.roles[lid].add(f.kind)


# ------------------------------------------------------------------------------------------ metadata
def _topics(ledgers: int) -> list[str]:
    return [f"lab-tenant/ns-{i % 3 + 1}/persistent/topic-{i:02d}" for i in range(max(2, ledgers // 5))]


def _custom_metadata(rng: random.Random, topics: list[str], version: int) -> dict[str, bytes]:
    if version == 1:      # v1 cannot store custom metadata
        return {}
    md = {"application": b"pulsar", "component": b"managed-ledger",
          "pulsar/managed-ledger": rng.choice(topics).encode()}
    if rng.random() < 0.1:
        md["pulsar/cursor"] = f"sub-{rng.randint(1, 4)}".encode()
    return md


def _metadata(plan: LedgerPlan, w: LedgerWriter, custom: dict[str, bytes]) -> LedgerMetadata:
    v = plan.version
    closed = w.state == CLOSED
    return LedgerMetadata(
        ledger_id=plan.ledger_id, format_version=v, ensemble_size=w.ensemble_size,
        write_quorum_size=w.write_quorum, ack_quorum_size=w.ack_quorum, state=w.state,
        last_entry_id=w.lac if closed else INVALID_ENTRY_ID, length=w.length() if closed else 0,
        segments=tuple(Segment(first, tuple(ens)) for first, ens in w.segments),
        digest_type=None if v == 1 else ("CRC32" if v == 2 else "CRC32C"),
        has_password=v > 1, ctime=plan.start if stores_ctime(plan.ledger_id, v) else None,
        ctoken=0 if v == 3 else None,
        custom_metadata=custom)
