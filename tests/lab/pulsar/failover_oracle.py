"""The failover rule of docs/pulsar/audit.md recomputed from emitted lab payloads alone: dump windows, the internal
stats of the collection and of the two reread passes, and their `.read.json` instants. Shares no code with
lab's ground truth (which works on the simulation's state), so the two agreeing shows the truth is what an
audit can know. Identities by source position: topics whose copies carry __MSG_PROP_REPL_SOURCE_POSITION."""
from __future__ import annotations

import json
from dataclasses import dataclass

from audit.systems.pulsar.domain.positions import Position, parse_position
from audit.systems.pulsar.formats.entry import EntryRecord, decode_dump_chunk
from audit.systems.pulsar.formats.read_instant import decode_read_instant
from audit.systems.pulsar.formats.stats_internal import CursorStats, decode_stats_internal

UPDATE = 13


@dataclass
class Read:
    number: int
    requested: int
    answered: int
    cursors: dict[str, CursorStats]


@dataclass
class Evidence:
    cluster: str
    reads: list[Read]            # the collection's first
    start: Position              # dump window, exclusive
    end: Position                # inclusive
    records: list[EntryRecord]   # the window, markers included, in position order

    def messages(self) -> list[EntryRecord]:
        return [r for r in self.records if r.marker_type is None]

    def ident(self, r: EntryRecord) -> tuple:
        return (r.replicated_from or self.cluster, r.source_position if r.replicated_from else r.position)

    def cursor(self, name: str, read: Read | None = None) -> CursorStats | None:
        return (read or self.reads[0]).cursors.get(name)


def acked(c: CursorStats, p: Position) -> bool:
    return p <= c.mark_delete or c.individually_deleted.contains(p)


def load(payloads: dict[str, bytes], cluster: str, folder: str) -> Evidence:
    reads = []
    for number, key in [(0, f"{folder}/stats-internal.json")] + [
            (n, f"{folder}/rereads/{n}/stats-internal.json") for n in (1, 2)]:
        if key in payloads:
            at = decode_read_instant(payloads[key + ".read.json"], key)
            reads.append(Read(number, at.requested_at_ms, at.answered_at_ms,
                              dict(decode_stats_internal(payloads[key], key).cursors)))
    window = json.loads(payloads[f"{folder}/dump.json"])
    records = [r for k in sorted(k for k in payloads if k.startswith(f"{folder}/dump/"))
               for r in decode_dump_chunk(payloads[k], k) if isinstance(r, EntryRecord)]
    records.sort(key=lambda r: r.position)
    return Evidence(cluster, reads, parse_position(window["from"], folder), parse_position(window["to"], folder),
                    records)


def bracket(xs: list[Read], ys: list[Read]):
    def before(r):
        found = [s for s in xs if s.answered <= r.requested]
        return max(found, key=lambda s: (s.answered, s.number)) if found else None

    def after(r):
        found = [s for s in xs if s.requested >= r.answered]
        return min(found, key=lambda s: (s.requested, s.number)) if found else None
    for r in sorted(ys, key=lambda r: (r.answered, r.number), reverse=True):
        if before(r) and after(r):
            return r, before(r), after(r)
    raise AssertionError("the lab's rereads bracket every pair")


def _below(w: Evidence, other: Evidence, paired: set, ambiguous: set, unsent) -> list[EntryRecord]:
    """Messages of w's window on `other` below other's window (acked there)."""
    own = [r for r in w.messages() if w.ident(r)[0] == w.cluster]
    seen = [r.position for r in own if w.ident(r) in paired]
    limit = seen[0] if seen else (None if other.reads[0].answered >= w.reads[0].answered else Position(-1, -1))
    repl = w.cursor(f"pulsar.repl.{other.cluster}")
    out = []
    for r in w.messages():
        i = w.ident(r)
        if i in paired or i in ambiguous:
            continue
        if i[0] == other.cluster and i[1] <= other.start:
            out.append(r)
        elif i[0] == w.cluster and (limit is None or r.position < limit) and repl is not None \
                and acked(repl, r.position) and not unsent(r, other.cluster, w.reads[0].answered):
            out.append(r)
    return out


def failover(x: Evidence, y: Evidence, sub: str, unsent) -> dict:
    """redelivered, skipped, lost, unsettled, after_source_window, lag of failing `sub` over from x to y.
    `unsent(record, remote, now)`: the replicator may have dropped it unsent by `now`, the instant its cluster was
    read (replicate_to, message TTL)."""
    key = lambda w, r: (w.ident(r)[0], r.producer_name, r.sequence_id)   # noqa: E731
    wx, wy = x.messages(), y.messages()
    in_x = {x.ident(r): r for r in wx}
    in_y = {y.ident(r): r for r in wy}
    kx, ky = {}, {}
    for w, rows, count in ((x, wx, kx), (y, wy, ky)):
        for r in rows:
            count[key(w, r)] = count.get(key(w, r), 0) + 1
    repeated = {k for k in kx if k in ky and (kx[k] > 1 or ky[k] > 1)}
    amb_y = {y.ident(r) for r in wy if y.ident(r) not in in_x and key(y, r) in repeated}
    amb_x = {x.ident(r) for r in wx if x.ident(r) not in in_y and key(x, r) in repeated} if amb_y else set()
    paired = set(in_x) & set(in_y)
    y_below = {y.ident(r) for r in _below(y, x, paired, amb_y, unsent)}
    x_below = _below(x, y, paired, amb_x, unsent)
    r_y, xb, xa = bracket(x.reads, y.reads)
    cy, cb, ca = r_y.cursors[sub], xb.cursors[sub], xa.cursors[sub]

    def on_x(i, c):
        return i in y_below or acked(c, in_x[i].position)
    compared = [r for r in wy if y.ident(r) in paired or y.ident(r) in y_below]
    redelivered = [r for r in compared if not acked(cy, r.position) and on_x(y.ident(r), cb)]
    skipped = [in_x[y.ident(r)] for r in compared if y.ident(r) in paired and acked(cy, r.position)
               and not acked(ca, in_x[y.ident(r)].position)]
    skipped += [r for r in x_below if not acked(ca, r.position)]
    after = sum(1 for r in wy if y.ident(r) not in paired and y.ident(r) not in amb_y
                and y.ident(r)[0] == x.cluster and y.ident(r)[1] > x.end)
    # y applied an UPDATE copy from x only once its replicator back to x had read (and acked) it by r_y
    repl = r_y.cursors.get(f"pulsar.repl.{x.cluster}")
    told = []
    for r in y.records:
        if r.marker_type != UPDATE or r.marker["subscription"] != sub or r.replicated_from != x.cluster:
            continue
        if repl is not None and acked(repl, r.position):
            told += [Position(c["ledger_id"], c["entry_id"]) for c in r.marker["clusters"] if c["cluster"] == y.cluster]
    reach = max(told) if told else None
    lag = [r for r in redelivered if reach is not None and r.position <= reach]
    return {"redelivered": len(redelivered), "skipped": len(skipped),
            "lost": sum(1 for r in skipped if r.position >= ca.read_position),
            "unsettled": sum(1 for r in compared if on_x(y.ident(r), ca) and not on_x(y.ident(r), cb)),
            "after_source_window": after, "ambiguous": len(amb_x) + len(amb_y), "lag": len(lag)}
