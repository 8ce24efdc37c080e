"""Property: the vectorized identity + failover agree with a slow per-message oracle that reads the contract's
definitions literally, on random two- and three-cluster histories with markers, holes, copies with and without
the source-position property, messages below one window, replicator progress, ledgers with ids beyond 2^32 and
ranges spanning ledgers. The oracle's "is m on / acked on cluster C" follows the lab's raw-payload oracle
(tests/lab/pulsar/test_truth.py): in C's window -> C's cursor; published on C, or sent to C by the other
side's replicator -> below C's window, acked; else not on C."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.systems.pulsar.domain.acked import CursorAcks
from audit.systems.pulsar.domain.failover import compare, failover
from audit.systems.pulsar.domain.identity import match
from audit.systems.pulsar.domain.positions import Position
from audit.systems.pulsar.domain.records import Codes, window_of

LEDGER_IDS = [3, 4, 7, 1 << 33, (1 << 33) + 5]


@st.composite
def histories(draw):
    n = draw(st.integers(0, 25))
    origins = draw(st.lists(st.sampled_from("xyz"), min_size=n, max_size=n))
    # A message is missing from its own cluster's window only when it is older than the window.
    on_x = [draw(st.booleans()) or draw(st.booleans()) if o == "x" else draw(st.booleans()) for o in origins]
    on_y = [draw(st.booleans()) or draw(st.booleans()) if o == "y" else draw(st.booleans()) for o in origins]
    placed = {}
    for cluster, present in (("x", on_x), ("y", on_y)):
        items = [("m", k) for k in range(n) if present[k]] + [("marker", j) for j in range(draw(st.integers(0, 4)))]
        items = draw(st.permutations(items))
        cuts = sorted(draw(st.lists(st.integers(0, len(items)), max_size=2)))
        ledgers = sorted(draw(st.lists(st.sampled_from(LEDGER_IDS), min_size=3, max_size=3, unique=True)))
        bounds = [0, *cuts, len(items)]
        for part, (a, b) in enumerate(zip(bounds, bounds[1:])):
            for e, item in enumerate(items[a:b]):
                placed[(cluster, item)] = Position(ledgers[part], e)
    records = {"x": [], "y": []}
    for (cluster, (kind, k)), pos in placed.items():
        if kind == "marker":
            records[cluster].append({"pos": str(pos), "marker_type": 12})
            continue
        origin = origins[k]
        rec = {"pos": str(pos), "producer": f"p{origin}", "sequence": k}
        if origin != cluster:
            home = placed.get((origin, ("m", k)), Position(2, k))   # z's own position is outside the audit
            rec.update(replicated_from=origin, source_position=str(home) if draw(st.booleans()) else None)
        records[cluster].append(rec)
    return records


@st.composite
def cursors(draw, positions):
    pool = sorted(positions) + [Position(3, -1), Position(7, -1), Position(1 << 34, 0)]
    mdp = draw(st.sampled_from(pool))
    pairs = draw(st.lists(st.tuples(st.sampled_from(pool), st.sampled_from(pool)).filter(lambda r: r[0] < r[1]),
                          max_size=4))
    read = draw(st.one_of(st.none(), st.sampled_from([p for p in pool if p > mdp] or [mdp])))
    return CursorAcks.of(mdp, pairs, read)


def oracle(xs, ys, cx: CursorAcks, cy: CursorAcks, end, x_sent: set, y_sent: set, y_from):  # noqa: C901
    # one straight per-message simulation, kept in one piece: it shares no structure with the range arithmetic it checks
    P = lambda r: Position(*map(int, r["pos"].split(":")))  # noqa: E731

    def origin(rec, cluster):
        return rec.get("replicated_from") or cluster

    def pos_id(rec, cluster):
        if not rec.get("replicated_from"):
            return (cluster, rec["pos"])
        return (rec["replicated_from"], rec["source_position"]) if rec.get("source_position") else None

    def same(s, t):
        if origin(s, "x") != origin(t, "y"):
            return False
        a, b = pos_id(s, "x"), pos_id(t, "y")
        if a is not None and b is not None:
            return a == b
        return (s["producer"], s["sequence"]) == (t["producer"], t["sequence"])

    def held_by_other(r, here):
        return r["pos"] in on_y if here == "x" else copy_on_x[r["pos"]] is not None

    def below_other(rec, here, other, sent):
        """A message of `here`'s window missing from `other`'s: on `other` below its window? Published there
        (with its position there known: the other window's bounds are not given, so it is older; without it,
        only when it precedes the first message of `other` that `other`'s window holds); or published here, sent
        by the replicator, and older than every own message `other` holds."""
        if origin(rec, here) == other:
            if rec.get("source_position"):
                return True
            held = [P(r) for r in (x_msgs if here == "x" else y_msgs)
                    if origin(r, here) == other and held_by_other(r, here)]
            return bool(held) and P(rec) < min(held)
        own_seen = [P(r) for r in (x_msgs if here == "x" else y_msgs) if origin(r, here) == here and
                    (r["pos"] in on_y if here == "x" else copy_on_x[r["pos"]] is not None)]
        return origin(rec, here) == here and rec["pos"] in sent and all(P(rec) < p for p in own_seen)

    x_msgs = [r for r in xs if "marker_type" not in r]
    y_msgs = sorted((r for r in ys if "marker_type" not in r), key=P)
    copy_on_x = {}
    for t in y_msgs:
        hits = [s for s in x_msgs if same(s, t)]
        assert len(hits) <= 1
        copy_on_x[t["pos"]] = hits[0] if hits else None
    on_y = {s["pos"] for s in copy_on_x.values() if s is not None}

    def acked_on_x(t):           # None: t is not on x
        s = copy_on_x[t["pos"]]
        if s is not None:
            return cx.contains(P(s))
        return True if below_other(t, "y", "x", y_sent) else None

    red, skip_in_window, should = set(), set(), {}
    for t in y_msgs:
        ax, ay = acked_on_x(t), cy.contains(P(t))
        should[t["pos"]] = ay if ax is None else ax
        if ax and not ay:
            red.add(t["pos"])
        if ax is False and ay:
            skip_in_window.add(t["pos"])
    skipped = lost = skip_below = 0
    for s in x_msgs:
        copies = [t for t in y_msgs if copy_on_x[t["pos"]] is s]
        if copies:
            ay = cy.contains(P(copies[0]))
        else:
            ay = below_other(s, "x", "y", x_sent)
            skip_below += ay and not cx.contains(P(s))
        if ay and not cx.contains(P(s)):
            skipped += 1
            lost += cx.read_position is not None and P(s) >= cx.read_position
    exact = None
    if skip_below:
        exact = y_from or cy.mark_delete
    else:
        for t in y_msgs:
            if not should[t["pos"]]:
                exact = Position(P(t).ledger_id, P(t).entry_id - 1)
                break
        if exact is None:
            exact = end if end is not None else (max(map(P, ys)) if ys else cy.mark_delete)
        lo, hi = sorted((exact, cy.mark_delete))
        if not any(lo < P(t) <= hi for t in y_msgs):
            exact = cy.mark_delete

    def runs(flagged):
        out, cur = [], None
        for t in y_msgs:
            if t["pos"] in flagged:
                cur = (P(t), P(t)) if cur is None else (cur[0], P(t))
            elif cur is not None:
                out.append(cur)
                cur = None
        return tuple(out + ([cur] if cur else []))

    y_on_x = sum(1 for t in y_msgs if acked_on_x(t) is not None)
    x_below = sum(1 for s in x_msgs if s["pos"] not in on_y and below_other(s, "x", "y", x_sent))
    return {"compared": y_on_x + x_below, "only_on_source": len(x_msgs) - len(on_y) - x_below,
            "only_on_target": len(y_msgs) - y_on_x, "redelivered": len(red), "skipped": skipped, "lost": lost,
            "redelivered_ranges": runs(red), "skipped_ranges": runs(skip_in_window), "exact_target_mdp": exact,
            "to_acknowledge_count": sum(1 for t in y_msgs if should[t["pos"]] and P(t) > exact)}


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_failover_matches_per_message_oracle(data):
    recs = data.draw(histories())
    codes = Codes()
    x, y = window_of("x", recs["x"], codes), window_of("y", recs["y"], codes)
    cx = data.draw(cursors([x.position(i) for i in range(len(x))]))
    cy = data.draw(cursors([y.position(i) for i in range(len(y))]))
    end = y.position(len(y) - 1) if len(y) and data.draw(st.booleans()) else None
    y_from = Position(3, -1) if data.draw(st.booleans()) else None
    x_sent = data.draw(st.lists(st.booleans(), min_size=len(x), max_size=len(x)))
    y_sent = data.draw(st.lists(st.booleans(), min_size=len(y), max_size=len(y)))
    c = compare(x, y, match(x, y), source_sent=np.array(x_sent, dtype=bool), target_sent=np.array(y_sent, dtype=bool))
    fo = failover(c, cx, cy, target_end=end, target_from=y_from)
    got = {k: getattr(fo, k) for k in ("compared", "only_on_source", "only_on_target", "redelivered", "skipped",
                                       "lost", "redelivered_ranges", "skipped_ranges", "exact_target_mdp",
                                       "to_acknowledge_count")}
    want = oracle(recs["x"], recs["y"], cx, cy, end, {str(x.position(i)) for i, v in enumerate(x_sent) if v},
                  {str(y.position(i)) for i, v in enumerate(y_sent) if v}, y_from)
    assert got == want
