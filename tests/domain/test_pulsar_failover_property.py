"""Property: the vectorized identity + failover agree with a slow per-message oracle that reads the contract's
definitions literally, on random two- and three-cluster histories with markers, holes, copies with and without
the source-position property, ledgers with ids beyond 2^32 and ranges spanning ledgers."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from audit.domain.pulsar.acked import CursorAcks
from audit.domain.pulsar.failover import failover
from audit.domain.pulsar.identity import match
from audit.domain.pulsar.positions import Position
from audit.domain.pulsar.records import Codes, window_of

LEDGER_IDS = [3, 4, 7, 1 << 33, (1 << 33) + 5]


@st.composite
def histories(draw):
    n = draw(st.integers(0, 25))
    origins = draw(st.lists(st.sampled_from("xyz"), min_size=n, max_size=n))
    on_x = [o == "x" or (o != "y" or draw(st.booleans())) and draw(st.booleans()) for o in origins]
    on_y = [o == "y" or (o != "x" or draw(st.booleans())) and draw(st.booleans()) for o in origins]
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


def oracle(xs, ys, cx: CursorAcks, cy: CursorAcks, end: Position | None):
    def pos_id(rec, cluster):
        if not rec.get("replicated_from"):
            return (cluster, rec["pos"])
        return (rec["replicated_from"], rec["source_position"]) if rec.get("source_position") else None

    def origin(rec, cluster):
        return rec.get("replicated_from") or cluster

    def same(s, t):
        if origin(s, "x") != origin(t, "y"):
            return False
        a, b = pos_id(s, "x"), pos_id(t, "y")
        if a is not None and b is not None:
            return a == b
        return (s["producer"], s["sequence"]) == (t["producer"], t["sequence"])

    P = lambda r: Position(*map(int, r["pos"].split(":")))  # noqa: E731
    x_msgs = [r for r in xs if "marker_type" not in r]
    y_all = sorted(ys, key=P)
    pairs = {}
    for t in y_all:
        if "marker_type" not in t:
            hits = [s for s in x_msgs if same(s, t)]
            assert len(hits) <= 1
            pairs[t["pos"]] = hits[0] if hits else None
    red, skip, lost, should = set(), set(), 0, {}
    for t in y_all:
        if "marker_type" in t:
            continue
        s, ay = pairs[t["pos"]], cy.contains(P(t))
        ax = s is not None and cx.contains(P(s))
        if s is not None and ax and not ay:
            red.add(t["pos"])
        if s is not None and ay and not ax:
            skip.add(t["pos"])
            lost += cx.read_position is not None and P(s) >= cx.read_position
        should[t["pos"]] = ax if s is not None else ay
    exact = None
    for t in y_all:
        if t["pos"] in should and not should[t["pos"]]:
            exact = Position(P(t).ledger_id, P(t).entry_id - 1)
            break
    if exact is None:
        exact = end if end is not None else (P(y_all[-1]) if y_all else cy.mark_delete)
    lo, hi = sorted((exact, cy.mark_delete))
    if not any(lo < P(t) <= hi for t in y_all if t["pos"] in should):
        exact = cy.mark_delete

    def runs(flagged):
        out, cur = [], None
        for t in y_all:
            if t["pos"] not in should:
                continue
            if t["pos"] in flagged:
                cur = [P(t), P(t)] if cur is None else [cur[0], P(t)]
            elif cur is not None:
                out.append(tuple(cur))
                cur = None
        return tuple(out + ([tuple(cur)] if cur else []))

    matched = [s["pos"] for s in pairs.values() if s is not None]
    return {"compared": len(matched), "only_on_source": sum(1 for s in x_msgs if s["pos"] not in matched),
            "only_on_target": sum(1 for s in pairs.values() if s is None), "redelivered": len(red),
            "skipped": len(skip), "lost": lost, "redelivered_ranges": runs(red), "skipped_ranges": runs(skip),
            "exact_target_mdp": exact,
            "to_acknowledge_count": sum(1 for t in y_all if should.get(t["pos"]) and P(t) > exact)}


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_failover_matches_per_message_oracle(data):
    recs = data.draw(histories())
    codes = Codes()
    x, y = window_of("x", recs["x"], codes), window_of("y", recs["y"], codes)
    cx = data.draw(cursors([x.position(i) for i in range(len(x))]))
    cy = data.draw(cursors([y.position(i) for i in range(len(y))]))
    end = y.position(len(y) - 1) if len(y) and data.draw(st.booleans()) else None
    fo = failover(x, y, match(x, y), cx, cy, target_end=end)
    got = {k: getattr(fo, k) for k in ("compared", "only_on_source", "only_on_target", "redelivered", "skipped",
                                       "lost", "redelivered_ranges", "skipped_ranges", "exact_target_mdp",
                                       "to_acknowledge_count")}
    assert got == oracle(recs["x"], recs["y"], cx, cy, end)
