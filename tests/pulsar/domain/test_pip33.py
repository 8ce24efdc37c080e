"""PIP-33 read back from markers: expected target markDeletePosition, justification, snapshot health."""
from __future__ import annotations

import pytest

from audit.systems.pulsar.domain.pip33 import expect_target, messages_ahead, snapshot_health
from audit.systems.pulsar.domain.snapshot_cache import NEWEST, SPREAD, CacheModel
from audit.systems.pulsar.domain.records import P, Codes, window_of

T0 = 1_700_000_000_000


def snap(pos, local, y, sid="s1", t=None, **clusters):
    return {"pos": pos, "marker_type": 12, "snapshot_id": sid, "local": local, "clusters": {"y": y, **clusters},
            "publish_time": t}


def update(pos, y, sub="orders", replicated_from=None):
    return {"pos": pos, "marker_type": 13, "subscription": sub, "clusters": {"y": y},
            "replicated_from": replicated_from}


def markers(records):
    return window_of("x", records, Codes()).markers


EXPECT = [
    # (id, source markers, source MDP, source readPosition, cache limit, (expected, basis, justified))
    ("nothing", [], "5:10", "5:11", 10, (None, None, None)),
    ("newest-update-wins", [update("5:3", "9:1"), update("5:8", "9:4"), update("5:9", "9:7", sub="other")],
     "5:10", "5:11", 10, ("9:4", "update", "9:4")),
    ("update-copy-from-elsewhere-is-not-ours", [update("5:8", "9:4", replicated_from="z")], "5:10", "5:11", 10,
     (None, None, None)),
    ("updates-justify-up-to-the-newest-snapshot-below-mdp", [update("5:4", "9:2"), snap("5:6", "5:5", "9:6"),
                                                             snap("5:12", "5:11", "9:9")], "5:10", "5:13", 10,
     ("9:2", "update", "9:6")),
    ("update-preferred-over-newer-snapshot", [update("5:4", "9:2"), snap("5:6", "5:5", "9:6")], "5:10", "5:11", 10,
     ("9:2", "update", "9:6")),
    ("read-snapshot-below-mdp", [snap("5:2", "5:1", "9:1"), snap("5:6", "5:5", "9:6"), snap("5:12", "5:11", "9:9")],
     "5:10", "5:13", 10, ("9:6", "snapshot", "9:6")),
    ("snapshot-not-read-yet-falls-back", [snap("5:2", "5:1", "9:1"), snap("5:6", "5:5", "9:6")], "5:10", "5:5", 10,
     ("9:1", "snapshot", "9:6")),
    ("unknown-read-position-means-read", [snap("5:6", "5:5", "9:6")], "5:10", None, 10, ("9:6", "snapshot", "9:6")),
    ("evicted-by-later-reads", [snap("5:6", "5:5", "9:6"), snap("5:12", "5:11", "9:8"), snap("5:14", "5:13", "9:9")],
     "5:10", "5:20", 2, (None, None, "9:6")),
    ("kept-under-the-limit", [snap("5:6", "5:5", "9:6"), snap("5:12", "5:11", "9:8"), snap("5:14", "5:13", "9:9")],
     "5:10", "5:20", 3, ("9:6", "snapshot", "9:6")),
    ("snapshot-not-naming-target", [{"pos": "5:6", "marker_type": 12, "snapshot_id": "a", "local": "5:5",
                                     "clusters": {"z": "2:2"}}], "5:10", "5:11", 10, (None, None, None)),
    ("snapshot-local-above-mdp", [snap("5:12", "5:11", "9:9")], "5:10", "5:13", 10, (None, None, None)),
    ("local-equal-to-mdp-applies", [snap("5:12", "5:10", "9:9")], "5:10", "5:13", 10, ("9:9", "snapshot", "9:9")),
    ("spans-ledgers", [snap("5:99", "5:98", "9:5"), snap("8:0", "7:-1", "12:3")], "8:4", "8:5", 10,
     ("12:3", "snapshot", "12:3")),
]


@pytest.mark.parametrize("recs,mdp,read,limit,expected", [c[1:] for c in EXPECT], ids=[c[0] for c in EXPECT])
def test_expect_target(recs, mdp, read, limit, expected):
    e = expect_target(markers(recs), "orders", "x", "y", P(mdp), P(read) if read else None,
                      cache=CacheModel(NEWEST, limit))
    as_text = lambda p: None if p is None else str(p)  # noqa: E731
    assert (as_text(e.expected), e.basis, as_text(e.justified)) == expected


def test_updates_seen_on_the_target():
    """Y holds a copy of X's UPDATE (X's own is below X's window) and one from a third cluster z."""
    target = markers([update("9:20", "9:4", replicated_from="x"), update("9:21", "9:15", replicated_from="z"),
                      update("9:22", "9:30", sub="other", replicated_from="z")])
    e = expect_target(markers([snap("5:6", "5:5", "9:6")]), "orders", "x", "y", P("5:10"), None,
                      target_markers=target)
    assert (str(e.expected), e.basis, str(e.justified)) == ("9:4", "update", "9:15")
    # Without a marker of x's own in x's window, x claims nothing, whatever y received.
    e = expect_target(markers([snap("5:12", "5:11", "9:9")]), "orders", "x", "y", P("5:10"), None,
                      target_markers=target)
    assert (str(e.expected), e.basis, e.justified) == ("9:4", "update", None)


@pytest.mark.parametrize("read_up_to, reach", [("9:21", "9:4"), ("9:19", None), (None, None)])
def test_reach_is_what_the_target_replicator_back_had_read(read_up_to, reach):
    """y applies an UPDATE copy from x when its replicator back to x reads it (None: y has no such replicator).
    x's own newer UPDATE (9:8) tells y nothing y applied: its copy is not in y's window."""
    target = markers([update("9:20", "9:4", replicated_from="x"), update("9:21", "9:15", replicated_from="z")])
    e = expect_target(markers([update("5:8", "9:8")]), "orders", "x", "y", P("5:10"), None, target_markers=target,
                      processed=(lambda p: p <= P(read_up_to)) if read_up_to else (lambda p: False))
    assert (str(e.expected), e.basis, None if e.reach is None else str(e.reach)) == ("9:8", "update", reach)


def target_window():
    recs = [{"pos": f"9:{i}", "producer": "p", "sequence": i} for i in range(10)]
    recs[5] = {"pos": "9:5", "marker_type": 10}
    return window_of("y", recs, Codes())


@pytest.mark.parametrize("mdp,justified,ahead", [
    ("9:7", "9:3", 3),        # 9:4, 9:6, 9:7 (9:5 is a marker)
    ("9:5", "9:4", 0),        # only a marker between
    ("9:3", "9:3", 0), ("9:2", "9:3", 0),
    ("9:9", None, 0),         # nothing to judge by
    ("11:0", "9:8", 1),       # beyond the window
])
def test_messages_ahead(mdp, justified, ahead):
    assert messages_ahead(target_window(), P(mdp), P(justified) if justified else None) == ahead


def test_snapshot_health_counts():
    recs = [
        {"pos": "5:0", "producer": "p", "sequence": 0, "publish_time": T0},
        {"pos": "5:1", "marker_type": 10, "snapshot_id": "a", "publish_time": T0 + 1_000},
        {"pos": "5:2", "marker_type": 11, "snapshot_id": "a", "replicated_from": "y", "publish_time": T0 + 1_500},
        {"pos": "5:3", "marker_type": 12, "snapshot_id": "a", "local": "5:2", "publish_time": T0 + 1_600},
        {"pos": "5:4", "marker_type": 10, "snapshot_id": "b", "publish_time": T0 + 2_000},     # never answered
        {"pos": "5:5", "marker_type": 10, "snapshot_id": "b", "publish_time": T0 + 3_000},     # second round
        {"pos": "5:6", "marker_type": 10, "snapshot_id": "zz", "replicated_from": "y", "publish_time": T0 + 3_000},
        {"pos": "5:7", "marker_type": 11, "snapshot_id": "zz", "publish_time": T0 + 3_100},    # our answer to y
        {"pos": "5:8", "marker_type": 13, "subscription": "orders", "publish_time": T0 + 4_000},
        {"pos": "5:9", "producer": "p", "sequence": 1, "publish_time": T0 + 10_000},
        {"pos": "5:10", "producer": "p", "sequence": 2, "publish_time": T0 + 40_000},
        {"pos": "5:11", "marker_type": 10, "snapshot_id": "c", "publish_time": T0 + 39_000},   # recent: pending
    ]
    h = snapshot_health(window_of("x", recs, Codes()), as_of_ms=T0 + 61_600)
    assert (h.requests, h.responses, h.snapshots, h.updates) == (4, 1, 1, 1)
    assert (h.unanswered_requests, h.timed_out) == (2, 1)
    assert h.newest_snapshot_age_s == 60
    assert h.unsnapshotted_since_ms == T0 + 10_000 and h.now_ms == T0 + 61_600


def test_snapshot_health_of_an_empty_window_and_without_reference_time():
    h = snapshot_health(window_of("x", [], Codes()))
    assert (h.requests, h.timed_out, h.newest_snapshot_age_s, h.unsnapshotted_since_ms, h.now_ms) == (0, 0, None,
                                                                                                      None, None)
    only_data = [{"pos": "5:0", "producer": "p", "sequence": 0, "publish_time": T0}]
    h = snapshot_health(window_of("x", only_data, Codes()))
    assert (h.newest_snapshot_age_s, h.unsnapshotted_since_ms, h.now_ms) == (None, T0, T0)


# One snapshot sequence, the two cache rules (ReplicatedSubscriptionSnapshotCache before / since apache/pulsar#25044),
# size 3; distance = entries between two snapshot positions (here: the entry id difference, one ledger).
# Snapshots (marker, local, y): local 5:10, 5:11, 5:30, 5:31; the MDP 5:12 lies between the second and third.
SEQUENCE = [snap("5:10", "5:10", "9:1", "a"), snap("5:11", "5:11", "9:2", "b"), snap("5:30", "5:30", "9:3", "c"),
            snap("5:31", "5:31", "9:4", "d")]
BY_MODEL = [
    # newest three survive: b (5:11) is the newest <= MDP and it is still cached
    ("newest-keeps-the-last-three", CacheModel(NEWEST, 3), "5:12", "9:2"),
    # spread keeps head a and tail d, evicts b or c: b+c's gaps: b (1 + 19), c (19 + 1) -> tie, lower position b goes
    ("spread-evicts-the-closest-middle", CacheModel(SPREAD, 3), "5:12", "9:1"),
    # an MDP below every survivor of the newest rule: nothing cached answers, the spread rule still has head a
    ("newest-lost-the-old-one", CacheModel(NEWEST, 2), "5:10", None),
    ("spread-kept-the-head", CacheModel(SPREAD, 3), "5:10", "9:1"),
]


@pytest.mark.parametrize("model,mdp,expected", [c[1:] for c in BY_MODEL], ids=[c[0] for c in BY_MODEL])
def test_the_broker_cache_rule_decides_the_expected_target(model, mdp, expected):
    distance = lambda a, b: b.entry_id - a.entry_id - 1  # noqa: E731 -- entries strictly between, one ledger
    e = expect_target(markers(SEQUENCE), "orders", "x", "y", P(mdp), P("5:40"), cache=model, distance=distance)
    assert (None if e.expected is None else str(e.expected)) == expected
    assert e.basis == (None if expected is None else "snapshot")
