"""What failing a subscription over from cluster X to cluster Y would do, from the simulation's true state at the
instants the clusters were read (docs/pulsar/lab.md "Ground truth", the rule of docs/pulsar/audit.md).

X's and Y's dump windows are what each held when its collection read its internal stats (W_X at t_X, W_Y at
t_Y, minutes apart). Messages are known by their true identity (origin cluster and position). What is compared
is what both windows can speak for:
  (a) messages of W_Y whose copy is in W_X;
  (b) messages of W_Y published on X at or below W_X's start (older than X's window: acked there);
  (c) messages of W_Y published on Y that Y's replicator had sent to X at t_Y (not dropped unsent), before the
      first one whose copy W_X holds (when W_X holds none: only when W_X was read after W_Y).
Copies in W_Y of messages X published after t_X are not compared (`after_source_window`), nor are messages whose
pairing no evidence can settle: without the source-position property a copy is known by (origin, producer,
sequence id), and a key that repeats in either window names no single message (`ambiguous`).

Y's cursor is the one of the Y read with an X read answered before it was asked and an X read asked after it was
answered (r_Y; X_before, X_after). A consumer connects to a copy of Y's cursor at r_Y and receives every message
of W_Y it does not consider acked: redelivered = compared, received, acked on X at X_before. skipped = compared,
acked on Y, not acked on X at X_after (plus messages of W_X that lie below W_Y -- the mirror of (b), (c) -- not
acked at X_after); lost = skipped and at or after X's readPosition at X_after; unsettled = compared and acked on X
at X_after but not at X_before. lag = redelivered at or below the newest position an UPDATE for the subscription
had told Y and Y had applied: the UPDATE copies from X on Y that Y's replicator back to X had read by r_Y (Y's
broker hands a marker to PIP-33 only then, PersistentReplicator.checkReplicatedSubscriptionMarker; the lab's
replicator acks the copy in that same read, replication.py). No replicator back to X: none."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from audit.systems.pulsar.formats.entry import REPL_SOURCE_POSITION
from audit.systems.pulsar.formats.markers import UPDATE
from lab.pulsar.model import Entry
from lab.pulsar.reads import CursorState, Read
from lab.pulsar.topic import Topic


def bracket(source: list[Read], target: list[Read]) -> tuple[Read, Read | None, Read | None]:
    """(r_Y, X_before, X_after): the latest target read with a source read on both sides, else the latest with
    one after, else the latest with one before, else the latest."""
    def before(r: Read) -> Read | None:
        found = [s for s in source if s.answered_ms <= r.requested_ms]
        return max(found, key=lambda s: (s.answered_ms, s.number)) if found else None

    def after(r: Read) -> Read | None:
        found = [s for s in source if s.requested_ms >= r.answered_ms]
        return min(found, key=lambda s: (s.requested_ms, s.number)) if found else None

    options = [(r, before(r), after(r)) for r in sorted(target, key=lambda r: (r.answered_ms, r.number),
                                                        reverse=True)]
    for wanted in (lambda o: o[1] and o[2], lambda o: o[2], lambda o: o[1]):
        for o in options:
            if wanted(o):
                return o
    return options[0]


@dataclass
class Side:
    """One cluster's topic and its reads (the collection's first)."""
    topic: Topic
    reads: list[Read]
    may_be_unsent: Callable[[Entry, str, int], bool]   # (entry, remote, now): the replicator may have dropped it
    _index: dict = field(default_factory=dict, repr=False)

    @property
    def cluster(self) -> str:
        return self.topic.cluster_name

    @property
    def primary(self) -> Read:
        return self.reads[0]

    def window(self) -> list[int]:
        """The window's messages (markers are never messages), as indices."""
        entries = self.topic.ml.entries
        return [i for i in self.primary.window if not entries[i].is_marker]

    def index_of(self, ident) -> int | None:
        """Where the message with this identity is in the topic (None: never here)."""
        if not self._index:
            self._index = {e.ident: i for i, e in enumerate(self.topic.ml.entries) if e.ident is not None}
        return self._index.get(ident)

    def positioned(self, idx: int) -> bool:
        e = self.topic.ml.entries[idx]
        return e.ident[0] == self.cluster or any(k == REPL_SOURCE_POSITION for k, _ in e.properties)

    def sent(self, idx: int, remote: str) -> bool:
        """This cluster's replicator to `remote` had sent the message when the collection read its cursors."""
        c = self.primary.cursors.get(f"pulsar.repl.{remote}")
        return c is not None and c.is_acked(idx) and not self.may_be_unsent(self.topic.ml.entries[idx], remote,
                                                                             self.primary.answered_ms)


def _key(e: Entry) -> tuple:
    return e.ident[0], e.producer_name, e.sequence_id


@dataclass
class PairTruth:
    """Everything about the ordered pair (X, Y) of one topic that does not depend on a subscription."""
    x: Side
    y: Side
    paired: dict[int, int]        # W_Y message -> its copy in W_X
    y_below_x: list[int]          # W_Y messages on X below W_X (acked there): (b), (c)
    x_below_y: list[int]          # W_X messages on Y below W_Y (acked there)
    ambiguous: int                # messages of both windows left unpaired for a repeated key
    after_source_window: int
    mispaired: int = 0            # W_Y messages a key unique in both windows would pair with another message


def _below(w: Side, other: Side, rows: list[int], unmatched: set[int], paired_rows: set[int]) -> list[int]:
    """Rows of w's window on `other` below other's window: published there at or below its window's start, or
    published here and sent by w's replicator to it before the first one whose copy the other window holds
    (when it holds none: only when the other window was read after this one)."""
    entries, out = w.topic.ml.entries, []
    own = [i for i in rows if entries[i].ident[0] == w.cluster]
    seen = [i for i in own if i in paired_rows]
    limit = seen[0] if seen else (len(entries) if other.primary.answered_ms >= w.primary.answered_ms else -1)
    for i in rows:
        if i not in unmatched:
            continue
        origin = entries[i].ident[0]
        if origin == other.cluster:
            j = other.index_of(entries[i].ident)
            if j is not None and j <= other.primary.floor:
                out.append(i)
        elif origin == w.cluster and i < limit and w.sent(i, other.cluster):
            out.append(i)
    return out


def pair_truth(x: Side, y: Side) -> PairTruth:
    xe, ye = x.topic.ml.entries, y.topic.ml.entries
    wx, wy = x.window(), y.window()
    in_wx = {xe[i].ident: i for i in wx}
    in_wy = {ye[i].ident: i for i in wy}
    kx, ky = Counter(_key(xe[i]) for i in wx), Counter(_key(ye[i]) for i in wy)
    repeated = {k for k in kx if k in ky and (kx[k] > 1 or ky[k] > 1)}
    by_position = {i for i in wy if ye[i].ident in in_wx and y.positioned(i) and x.positioned(in_wx[ye[i].ident])}
    target_amb = {i for i in wy if i not in by_position and _key(ye[i]) in repeated}
    paired = {i: in_wx[ye[i].ident] for i in wy if i not in target_amb and ye[i].ident in in_wx}
    on_target = {j for j in wx if xe[j].ident in in_wy and (
        _key(xe[j]) not in repeated or in_wy[xe[j].ident] in by_position)}
    source_amb = {j for j in wx if _key(xe[j]) in repeated and j not in on_target} if target_amb else set()
    y_unmatched = {i for i in wy if i not in paired and i not in target_amb}
    x_unmatched = {j for j in wx if j not in on_target and j not in source_amb}
    after = sum(1 for i in y_unmatched if ye[i].ident[0] == x.cluster
                and (x.index_of(ye[i].ident) or 0) >= x.primary.entries)
    by_key = {_key(xe[j]): j for j in wx}
    mispaired = sum(1 for i in y_unmatched if _key(ye[i]) in by_key and _key(ye[i]) not in repeated
                    and not (y.positioned(i) and x.positioned(by_key[_key(ye[i])])))
    return PairTruth(x, y, paired, _below(y, x, wy, y_unmatched, set(paired)),
                     _below(x, y, wx, x_unmatched, on_target), len(target_amb) + len(source_amb), after, mispaired)


def _reach(p: PairTruth, subscription: str, y_read: Read) -> int:
    """Index on Y of the newest position an UPDATE for the subscription from X that Y had applied by r_Y told Y
    (-1: none)."""
    x, y = p.x, p.y
    repl = y_read.cursors.get(f"pulsar.repl.{x.cluster}")
    entries = y.topic.ml.entries
    told = [dict(e.marker.clusters)[y.cluster] for i, e in enumerate(entries[:y_read.entries])
            if e.marker_type == UPDATE and e.replicated_from == x.cluster and e.marker.subscription == subscription
            and y.cluster in dict(e.marker.clusters) and repl is not None and repl.is_acked(i)]
    return y.topic.ml.floor_index(max(told)) if told else -1


def failover_counts(p: PairTruth, subscription: str) -> dict:
    """The failover row of the subscription: redelivered, skipped, lost, unsettled, after_source_window,
    ambiguous, and what the redelivery finding reads (lag, lag_oldest_ms, and lag_now_ms: the age is taken when Y's
    window was read) and the instants chosen."""
    y_read, before, after = bracket(p.x.reads, p.y.reads)
    judged_skips = after is not None   # without an X read after Y's, nothing is called a skip (X may ack it later)
    before, after = before or after, after or before
    cy: CursorState = y_read.cursors[subscription]
    cb = before.cursors[subscription] if before else None
    ca = after.cursors[subscription] if after else None
    ye = p.y.topic.ml.entries
    below = set(p.y_below_x)
    compared = sorted(set(p.paired) | below)
    received = [i for i in p.y.window() if not cy.is_acked(i)]   # the failover consumer on Y's cursor at r_Y

    def acked_on_x(i: int, c: CursorState | None) -> bool:
        return i in below or (c is not None and c.is_acked(p.paired[i]))

    known = set(compared)
    redelivered = [i for i in received if i in known and acked_on_x(i, cb)]
    skipped_rows = [p.paired[i] for i in compared if i not in below and cy.is_acked(i) and not acked_on_x(i, ca)]
    skipped_rows += [j for j in p.x_below_y if ca is not None and not ca.is_acked(j)]
    if ca is None or not judged_skips:
        skipped_rows = []
    lost = sum(1 for j in skipped_rows if j >= ca.read_idx) if ca is not None else 0
    unsettled = sum(1 for i in compared if acked_on_x(i, ca) and not acked_on_x(i, cb))
    reach = _reach(p, subscription, y_read)
    lagging = [ye[i].publish_ms for i in redelivered if i <= reach]
    return {"redelivered": len(redelivered), "skipped": len(skipped_rows), "lost": lost, "unsettled": unsettled,
            "after_source_window": p.after_source_window, "ambiguous": p.ambiguous, "lag": len(lagging),
            "lag_oldest_ms": min(lagging) if lagging else None, "lag_now_ms": p.y.primary.answered_ms,
            "target_read_at_ms": y_read.answered_ms,
            "source_read_before_ms": before.answered_ms if before else None,
            "source_read_after_ms": after.requested_ms if after else None,
            "reads": (y_read.number, before.number if before else None, after.number if after else None)}

