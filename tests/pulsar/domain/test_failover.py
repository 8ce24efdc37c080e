"""Failover of one subscription from x to y: counts, target ranges, exact target markDeletePosition, acks."""
from __future__ import annotations

import numpy as np
import pytest

from audit.systems.pulsar.domain.failover import compare, failover
from audit.systems.pulsar.domain.identity import match
from audit.systems.pulsar.domain.records import P, Codes, cursor_of, window_of


def x_msgs(n, ledger=5):
    return [{"pos": f"{ledger}:{i}", "producer": "p", "sequence": i} for i in range(n)]


def y_copies(n, ledger=9, src_ledger=5, prop=True):
    return [{"pos": f"{ledger}:{i}", "producer": "p", "sequence": i, "replicated_from": "x",
             "source_position": f"{src_ledger}:{i}" if prop else None} for i in range(n)]


def mk(pos, t=12):
    return {"pos": pos, "marker_type": t}


def run(xs, ys, cx, cy, target_end=None, max_acknowledge=10_000):
    codes = Codes()
    x, y = window_of("x", xs, codes), window_of("y", ys, codes)
    return failover(compare(x, y), cx, cy, target_end=P(target_end) if target_end else None,
                    max_acknowledge=max_acknowledge)


def rng(*pairs):
    return tuple((P(a), P(b)) for a, b in pairs)


CASES = [
    # (id, x entries, y entries, x cursor, y cursor, target_end,
    #  (redelivered, skipped, lost), redelivered ranges, skipped ranges, exact, to_acknowledge, backward)
    ("in-step", x_msgs(6), y_copies(6), cursor_of("5:3", read="5:4"), cursor_of("9:3"), "9:5",
     (0, 0, 0), (), (), "9:3", [], False),
    ("individual-ack-holes", x_msgs(10), y_copies(10), cursor_of("5:2", ["5:3..5:5", "5:7..5:8"], "5:9"),
     cursor_of("9:2"), "9:9",
     (3, 0, 0), rng(("9:4", "9:5"), ("9:8", "9:8")), (), "9:2", ["9:4", "9:5", "9:8"], False),
    ("target-ahead-skips-and-loses", x_msgs(10), y_copies(10), cursor_of("5:2", read="5:5"), cursor_of("9:7"),
     "9:9", (0, 5, 3), (), rng(("9:3", "9:7")), "9:2", [], True),
    ("target-behind-after-pip33", x_msgs(8), y_copies(8), cursor_of("5:6", read="5:7"), cursor_of("9:3"), "9:7",
     (3, 0, 0), rng(("9:4", "9:6")), (), "9:6", [], False),
    ("all-acked-exact-is-window-end", x_msgs(4), y_copies(4), cursor_of("5:3", read="5:4"), cursor_of("9:-1"),
     "9:4", (4, 0, 0), rng(("9:0", "9:3")), (), "9:4", [], False),
    ("trailing-markers-keep-current", x_msgs(4), y_copies(4) + [mk("9:4"), mk("9:5", 10)],
     cursor_of("5:3", read="5:4"), cursor_of("9:3"), "9:5", (0, 0, 0), (), (), "9:3", [], False),
    ("markers-inside-a-run-do-not-split-it", x_msgs(4), [*y_copies(2), mk("9:2"), *(
        {"pos": f"9:{i + 1}", "producer": "p", "sequence": i, "replicated_from": "x", "source_position": f"5:{i}"}
        for i in (2, 3))], cursor_of("5:3", read="5:4"), cursor_of("9:-1"), "9:4",
     (4, 0, 0), rng(("9:0", "9:4")), (), "9:4", [], False),
    ("first-bad-at-entry-0-gives-L:-1", x_msgs(3), [{"pos": "8:0", "marker_type": 10}, *y_copies(3, ledger=9)],
     cursor_of("5:-1", read="5:0"), cursor_of("8:0"), "9:2", (0, 0, 0), (), (), "8:0", [], False),
    ("reset-to-L:-1-when-cursor-past-it", x_msgs(3), y_copies(3, ledger=9), cursor_of("5:-1", read="5:3"),
     cursor_of("9:1"), "9:2", (0, 2, 0), (), rng(("9:0", "9:1")), "9:-1", [], True),
    ("ranges-span-ledgers", x_msgs(6), y_copies(3, ledger=9) + [
        {"pos": f"11:{i}", "producer": "p", "sequence": i + 3, "replicated_from": "x", "source_position": f"5:{i + 3}"}
        for i in range(3)], cursor_of("5:0", ["5:1..5:4"], "5:6"), cursor_of("9:0"), "11:2",
     (3, 0, 0), rng(("9:2", "11:1")), (), "9:0", ["9:2", "11:0", "11:1"], False),
    ("copies-without-property", x_msgs(5), y_copies(5, prop=False), cursor_of("5:1", ["5:2..5:3"], "5:5"),
     cursor_of("9:0", ["9:3..9:4"]), "9:4", (2, 1, 0), rng(("9:1", "9:1"), ("9:3", "9:3")),
     rng(("9:4", "9:4")), "9:1", ["9:3"], False),
    ("only-on-target-follows-target-acks", x_msgs(2),
     [*y_copies(2), {"pos": "9:2", "producer": "q", "sequence": 0}, {"pos": "9:3", "producer": "q", "sequence": 1}],
     cursor_of("5:1", read="5:2"), cursor_of("9:2"), "9:3", (0, 0, 0), (), (), "9:2", [], False),
    ("only-on-source-changes-nothing", x_msgs(4), y_copies(2), cursor_of("5:3", read="5:4"), cursor_of("9:1"),
     "9:1", (0, 0, 0), (), (), "9:1", [], False),
    ("empty-target-window", x_msgs(3), [], cursor_of("5:2", read="5:3"), cursor_of("9:4"), None,
     (0, 0, 0), (), (), "9:4", [], False),
    ("acknowledge-after-the-first-hole", x_msgs(8), y_copies(8), cursor_of("5:0", ["5:1..5:7"], "5:8"),
     cursor_of("9:-1"), "9:7", (7, 0, 0), rng(("9:0", "9:0"), ("9:2", "9:7")), (), "9:0",
     ["9:2", "9:3", "9:4", "9:5", "9:6", "9:7"], False),
]


@pytest.mark.parametrize("xs,ys,cx,cy,end,counts,red,skip,exact,acks,backward", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_failover(xs, ys, cx, cy, end, counts, red, skip, exact, acks, backward):
    fo = run(xs, ys, cx, cy, end)
    assert (fo.redelivered, fo.skipped, fo.lost) == counts
    assert fo.redelivered_ranges == red and fo.skipped_ranges == skip
    assert fo.exact_target_mdp == P(exact)
    assert [str(p) for p in fo.to_acknowledge] == acks
    assert fo.target_moves_backward is backward


def test_acknowledge_count_is_the_full_count():
    fo = run(x_msgs(8), y_copies(8), cursor_of("5:0", ["5:1..5:7"], "5:8"), cursor_of("9:-1"), "9:7",
             max_acknowledge=2)
    assert fo.to_acknowledge_count == 6 and len(fo.to_acknowledge) == 2


def test_unknown_read_position_loses_nothing():
    fo = run(x_msgs(5), y_copies(5), cursor_of("5:1"), cursor_of("9:4"), "9:4")
    assert (fo.skipped, fo.lost) == (3, 0)


def inferred(xs, ys, cx, cy, x_sent=None, y_sent=None, fallback=None):
    codes = Codes()
    x, y = window_of("x", xs, codes), window_of("y", ys, codes)
    mask = lambda w, v: None if v is None else np.array([v] * len(w), dtype=bool)  # noqa: E731
    c = compare(x, y, match(x, y), source_sent=mask(x, x_sent), target_sent=mask(y, y_sent))
    return failover(c, cx, cy, target_from=P("9:-1"), fallback=P(fallback) if fallback else None)


def test_source_messages_below_the_target_window_are_skipped():
    """y's window starts after y's consumer acked 5:0..5:2 (their copies are older than it): x never acked
    5:1, 5:2, so failing over skips them; where on y is unknown, so the reset point is the PIP-33 one."""
    xs, ys = x_msgs(5), y_copies(2, ledger=9, src_ledger=5)
    ys = [{**r, "source_position": f"5:{i + 3}", "sequence": i + 3} for i, r in enumerate(ys)]
    fo = inferred(xs, ys, cursor_of("5:0", read="5:2"), cursor_of("9:-1"), x_sent=True, fallback="8:7")
    assert (fo.compared, fo.only_on_source, fo.skipped, fo.lost, fo.redelivered) == (5, 0, 2, 1, 0)
    assert (fo.skipped_ranges, fo.exact_target_mdp, fo.exact_known, fo.target_moves_backward) == ((), P("8:7"),
                                                                                                  False, True)
    # Not sent by x's replicator (not yet, or dropped unsent): only on x. A window that seems to hold the whole
    # topic says nothing more: trimmed ledgers leave no trace in the ledger list.
    for kw in ({"x_sent": False}, {"x_sent": None}):
        fo = inferred(xs, ys, cursor_of("5:0", read="5:2"), cursor_of("9:-1"), **kw)
        assert (fo.compared, fo.only_on_source, fo.skipped, fo.exact_known) == (2, 3, 0, True), kw


def test_after_the_first_delivered_copy_a_missing_message_is_not_below():
    xs = x_msgs(4)
    ys = [{"pos": "9:0", "producer": "p", "sequence": 1, "replicated_from": "x", "source_position": "5:1"},
          {"pos": "9:1", "producer": "p", "sequence": 3, "replicated_from": "x", "source_position": "5:3"}]
    fo = inferred(xs, ys, cursor_of("5:-1", read="5:0"), cursor_of("9:1"), x_sent=True)
    # 5:0 is below y's window (acked there: skipped); 5:2 went missing after 5:1 was delivered.
    assert (fo.compared, fo.only_on_source, fo.skipped) == (3, 1, 3)


def test_target_messages_below_the_source_window_are_redelivered():
    """x's window starts after x's consumer acked 5:0, 5:1; y still holds their copies, unacked."""
    xs = [{"pos": "5:2", "producer": "p", "sequence": 2}]
    fo = inferred(xs, y_copies(3), cursor_of("5:1", read="5:3"), cursor_of("9:-1"))
    assert (fo.compared, fo.redelivered, fo.redelivered_ranges, fo.exact_target_mdp) == (
        3, 2, ((P("9:0"), P("9:1")),), P("9:1"))
    # y's own messages: on x once y's replicator sent them.
    ys = [{"pos": f"9:{i}", "producer": "q", "sequence": i} for i in range(2)]
    assert inferred([], ys, cursor_of("5:1"), cursor_of("9:-1"), y_sent=True).redelivered == 2
    assert inferred([], ys, cursor_of("5:1"), cursor_of("9:-1"), y_sent=False).redelivered == 0
