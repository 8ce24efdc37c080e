"""One topic across clusters: which failover rows exist, snapshot metrics, and the findings of whole scenarios."""
from __future__ import annotations

import json

import pytest

from audit.systems.pulsar.domain.checks import Thresholds, Tolerance
from audit.systems.pulsar.domain.records import P, Codes, cursor_of, window_of
from audit.systems.pulsar.domain.topic import ClusterSide, Cursor, Settings, audit_topic

T = "persistent://acme/orders/created"
T0 = 1_700_000_000_000
SETTINGS = Settings(run_id="r1", as_of_ms=T0 + 60_000, thresholds=Thresholds(1000, 300))


def msg(pos, seq, origin=None, src=None, producer=None, t=0):
    return {"pos": pos, "producer": producer or f"p-{origin or 'own'}", "sequence": seq, "replicated_from": origin,
            "source_position": src, "publish_time": T0 + t}


def side(cluster, records, codes, cursors, replication=(), first=None, last=None, complete=True):
    w = window_of(cluster, records, codes)
    return ClusterSide(cluster, w, P(first) if first else None, P(last) if last else (
        w.position(len(w) - 1) if len(w) else None), complete, cursors,
        {r: (True, 0) for r in replication}, frozenset())


def sub(name, mdp, ranges=(), read=None, replicated=True):
    return {name: Cursor(name, "subscription", cursor_of(mdp, ranges, read), None, replicated)}


def repl(remote, mdp):
    return {f"pulsar.repl.{remote}": Cursor(f"pulsar.repl.{remote}", "replicator", cursor_of(mdp), remote)}


def healthy(codes):
    """east publishes e0..e3, west w0; one PIP-33 round: east's snapshot maps 5:4 -> west 9:4, east's consumer
    passed it and the UPDATE told west 9:4, which west applied."""
    east = [msg("5:0", 0, t=1), msg("5:1", 1, t=2), msg("5:2", 0, "west", "9:1", "p-own", t=3),
            {"pos": "5:3", "marker_type": 10, "snapshot_id": "a", "publish_time": T0 + 4},
            {"pos": "5:4", "marker_type": 11, "snapshot_id": "a", "replicated_from": "west",
             "clusters": {"west": "9:4"}, "publish_time": T0 + 5},
            {"pos": "5:5", "marker_type": 12, "snapshot_id": "a", "local": "5:4", "clusters": {"west": "9:4"},
             "publish_time": T0 + 6},
            msg("5:6", 2, t=7), {"pos": "5:7", "marker_type": 13, "subscription": "orders",
                                 "clusters": {"west": "9:4"}, "publish_time": T0 + 8}, msg("5:8", 3, t=9)]
    west = [msg("9:0", 0, "east", "5:0", "p-own"), msg("9:1", 0, t=3), msg("9:2", 1, "east", "5:1", "p-own"),
            {"pos": "9:3", "marker_type": 10, "snapshot_id": "a", "replicated_from": "east"},
            {"pos": "9:4", "marker_type": 11, "snapshot_id": "a", "clusters": {"west": "9:4"}},
            msg("9:5", 2, "east", "5:6", "p-own"), {"pos": "9:6", "marker_type": 13, "subscription": "orders",
                                                    "clusters": {"west": "9:4"}, "replicated_from": "east"},
            msg("9:7", 3, "east", None, "p-own")]
    return {"east": side("east", east, codes, {**sub("orders", "5:5", read="5:6"), **repl("west", "5:8")},
                         ["west"], "5:-1"),
            "west": side("west", west, codes, {**sub("orders", "9:4"), **repl("east", "9:7")}, ["east"], "9:-1")}


def row(audit, source, target, sub_name="orders"):
    (r,) = [r for r in audit.failover if (r["source_cluster"], r["target_cluster"], r["subscription"]) ==
            (source, target, sub_name)]
    return r


def test_healthy_bidirectional():
    a = audit_topic(T, healthy(Codes()), SETTINGS)
    assert a.findings == []
    ew, we = row(a, "east", "west"), row(a, "west", "east")
    assert {k: ew[k] for k in ("compared", "only_on_source", "only_on_target", "redelivered", "skipped", "lost",
                               "source_mdp", "target_mdp", "expected_target_mdp", "exact_target_mdp",
                               "to_acknowledge_count", "complete", "window_from", "window_to")} == {
        "compared": 5, "only_on_source": 0, "only_on_target": 0, "redelivered": 0, "skipped": 0, "lost": 0,
        "source_mdp": "5:5", "target_mdp": "9:4", "expected_target_mdp": "9:4", "exact_target_mdp": "9:4",
        "to_acknowledge_count": 0, "complete": True, "window_from": "5:-1", "window_to": "5:8"}
    assert (we["redelivered"], we["skipped"], we["exact_target_mdp"], we["expected_target_mdp"]) == (0, 0, "5:5",
                                                                                                     None)
    snaps = {s["cluster"]: s for s in a.snapshots}
    assert {k: snaps["east"][k] for k in ("requests", "responses", "snapshots", "updates", "unanswered_requests",
                                          "timed_out", "newest_snapshot_age_s", "replicated_subscriptions")} == {
        "requests": 1, "responses": 1, "snapshots": 1, "updates": 1, "unanswered_requests": 0, "timed_out": 0,
        "newest_snapshot_age_s": 59, "replicated_subscriptions": 1}
    assert (snaps["west"]["requests"], snaps["west"]["responses"], snaps["west"]["snapshots"]) == (0, 0, 0)


def test_holes_and_target_ahead():
    sides = healthy(Codes())
    sides["east"].cursors["orders"] = Cursor("orders", "subscription", cursor_of("5:5", ["5:7..5:8"], "5:9"),
                                             None, True)
    sides["west"].cursors["orders"] = Cursor("orders", "subscription", cursor_of("9:5"), None, True)
    a = audit_topic(T, sides, SETTINGS)
    r = row(a, "east", "west")
    assert (r["redelivered"], r["skipped"], r["lost"]) == (1, 1, 0)
    assert json.loads(r["redelivered_ranges"]) == [["9:7", "9:7"]]
    assert json.loads(r["skipped_ranges"]) == [["9:5", "9:5"]]
    assert (r["exact_target_mdp"], json.loads(r["to_acknowledge"])) == ("9:4", ["9:7"])
    got = sorted((f["check"], f["cluster"], f["entry_count"]) for f in a.findings)
    # west -> east mirrors it: e2 acked on west only, e3 acked individually on east only. Both redeliveries lie
    # past what PIP-33 told the other side (east's UPDATE: 9:4; west wrote none): by design, metrics only (they
    # were failover_redelivery findings before PIP-33's design was taken into account).
    assert got == [("pulsar.failover_skip", "east", 1), ("pulsar.failover_skip", "west", 1),
                   ("pulsar.target_cursor_ahead", "east", 1)]


@pytest.mark.parametrize("tolerance,found", [
    ((), [1]),                                           # default 0/0: west lags behind east's UPDATE (9:4)
    ((("acme/orders", Tolerance(messages=1)),), []),     # within the namespace's count
    ((("*", Tolerance(age_s=120)),), []),                # the lagging copy is 60 s old: within the age
    ((("*", Tolerance(age_s=30)),), [1]),
])
def test_redelivery_is_a_finding_only_behind_pip33(tolerance, found):
    sides = healthy(Codes())
    sides["west"].cursors["orders"] = Cursor("orders", "subscription", cursor_of("9:1"), None, True)
    settings = Settings(run_id="r1", as_of_ms=T0 + 60_000, thresholds=Thresholds(1000, 300,
                                                                                redelivery_tolerance=tolerance))
    a = audit_topic(T, sides, settings)
    assert row(a, "east", "west")["redelivered"] == 1          # 9:2 (e1): acked on east, told to west, unacked
    assert [f["entry_count"] for f in a.findings if f["check"] == "pulsar.failover_redelivery"] == found


def two_updates(codes, west_replicator, west_mdp, connected=True):
    """healthy() with a second PIP-33 round: east's UPDATEs tell west 9:4 (its copy at 9:6) and then 9:9 (copy at
    9:11); east acked e0..e4. `west_replicator`: the markDeletePosition of west's replicator back to east (None:
    west does not replicate back): west's broker applies an UPDATE copy only when that replicator reads it."""
    east = [msg("5:0", 0, t=1), msg("5:1", 1, t=2), msg("5:2", 0, "west", "9:1", "p-own", t=3),
            {"pos": "5:3", "marker_type": 10, "snapshot_id": "a"},
            {"pos": "5:4", "marker_type": 11, "snapshot_id": "a", "replicated_from": "west",
             "clusters": {"west": "9:4"}},
            {"pos": "5:5", "marker_type": 12, "snapshot_id": "a", "local": "5:4", "clusters": {"west": "9:4"}},
            msg("5:6", 2, t=7), {"pos": "5:7", "marker_type": 13, "subscription": "orders",
                                 "clusters": {"west": "9:4"}},
            msg("5:8", 3, t=9), {"pos": "5:9", "marker_type": 10, "snapshot_id": "b"},
            {"pos": "5:10", "marker_type": 11, "snapshot_id": "b", "replicated_from": "west",
             "clusters": {"west": "9:9"}},
            {"pos": "5:11", "marker_type": 12, "snapshot_id": "b", "local": "5:10", "clusters": {"west": "9:9"}},
            msg("5:12", 4, t=13), {"pos": "5:13", "marker_type": 13, "subscription": "orders",
                                   "clusters": {"west": "9:9"}}, msg("5:14", 5, t=15)]
    west = [msg("9:0", 0, "east", "5:0", "p-own", t=1), msg("9:1", 0, t=3), msg("9:2", 1, "east", "5:1", "p-own", t=2),
            {"pos": "9:3", "marker_type": 10, "snapshot_id": "a", "replicated_from": "east"},
            {"pos": "9:4", "marker_type": 11, "snapshot_id": "a", "clusters": {"west": "9:4"}},
            msg("9:5", 2, "east", "5:6", "p-own", t=7),
            {"pos": "9:6", "marker_type": 13, "subscription": "orders", "clusters": {"west": "9:4"},
             "replicated_from": "east"},
            msg("9:7", 3, "east", "5:8", "p-own", t=9),
            {"pos": "9:8", "marker_type": 10, "snapshot_id": "b", "replicated_from": "east"},
            {"pos": "9:9", "marker_type": 11, "snapshot_id": "b", "clusters": {"west": "9:9"}},
            msg("9:10", 4, "east", "5:12", "p-own", t=13),
            {"pos": "9:11", "marker_type": 13, "subscription": "orders", "clusters": {"west": "9:9"},
             "replicated_from": "east"},
            msg("9:12", 5, "east", "5:14", "p-own", t=15)]
    back = repl("east", west_replicator) if west_replicator else {}
    sides = {"east": side("east", east, codes, {**sub("orders", "5:12", read="5:13"), **repl("west", "5:14")},
                          ["west"], "5:-1"),
             "west": side("west", west, codes, {**sub("orders", west_mdp), **back},
                          ["east"] if west_replicator else (), "9:-1")}
    if west_replicator and not connected:
        sides["west"].replication = {"east": (False, 6)}
    return sides


PARTLY_READ = [
    # (id, west's replicator back to east (None: none), whether connected, west's cursor, redelivery findings)
    ("read-both-updates", "9:12", True, "9:9", []),
    # Its replicator read the first UPDATE copy only: PIP-33 reached 9:4 on west, and west is there (the second
    # UPDATE, 9:9, was a false lag of 2: e2, e3).
    ("read-the-first-only", "9:7", True, "9:4", []),
    ("disconnected-after-the-first", "9:7", False, "9:4", []),
    # Behind even what the UPDATE it applied told it: w0 and e1 (not e2, e3: the second UPDATE was never applied).
    ("behind-the-applied-update", "9:7", True, "9:0", [2]),
    ("behind-with-the-replicator-disconnected", "9:7", False, "9:0", [2]),
    # Read nothing yet: no UPDATE applied, however far behind.
    ("read-no-update", "9:5", True, "9:0", []),
    # West does not replicate back: no replicator hands it an UPDATE (PersistentTopic is told of markers by its
    # replicators only).
    ("no-replicator-back", None, True, "9:0", []),
]


@pytest.mark.parametrize("west_replicator,connected,west_mdp,found", [c[1:] for c in PARTLY_READ],
                         ids=[c[0] for c in PARTLY_READ])
def test_pip33_reaches_the_target_only_through_what_its_replicator_back_read(west_replicator, connected, west_mdp,
                                                                             found):
    a = audit_topic(T, two_updates(Codes(), west_replicator, west_mdp, connected), SETTINGS)
    r = row(a, "east", "west")
    assert r["expected_target_mdp"] == "9:9"                    # what east's subscription told west, applied or not
    assert [f["entry_count"] for f in a.findings
            if f["check"] == "pulsar.failover_redelivery" and f["cluster"] == "east"] == found
    assert r["redelivery_lag"] == (found[0] if found else 0)


def test_one_way_replication():
    codes = Codes()
    east = [msg("5:0", 0), msg("5:1", 1)]
    west = [msg("9:0", 0, "east", "5:0", "p-own"), msg("9:1", 1, "east", "5:1", "p-own")]
    sides = {"east": side("east", east, codes, {**sub("orders", "5:1", read="5:2"), **repl("west", "5:1")},
                          ["west"], "5:-1"),
             "west": side("west", west, codes, sub("orders", "9:-1"), (), "9:-1")}
    a = audit_topic(T, sides, SETTINGS)
    assert [(r["source_cluster"], r["target_cluster"]) for r in a.failover] == [("east", "west")]
    assert (a.failover[0]["redelivered"], a.failover[0]["expected_target_mdp"]) == (2, None)
    # No snapshot can complete one way, so PIP-33 told west nothing: the redeliveries are no finding (they were);
    # the one-way finding says why.
    assert sorted((f["check"], f["subject"]) for f in a.findings) == [
        ("pulsar.replicated_subscription_one_way", f"{T} sub=orders east->west")]


MISSING = [
    # (id, west holds copies of east's e<i>, west has cursors, east's replicator MDP, overrides of east's
    #  messages {i: fields}, namespace TTL s, missing). as_of is 60 s after e0..e4 were published.
    ("lost-on-the-way", [0, 1, 3], True, "5:3", {}, 0, 1),
    ("older-than-west-window-not-judged", [1, 3], True, "5:3", {}, 0, 1),
    # West without cursors dumps its whole retained topic, but ManagedLedgerImpl trims every closed ledger of a
    # topic without durable cursors: e0 may be trimmed there, never "missing" (was 2, a false critical).
    ("trimmed-target-without-cursors", [1, 3], False, "5:3", {}, 0, 1),
    ("not-acked-by-the-replicator-yet", [0, 1, 3], True, "5:1", {}, 0, 0),
    ("nothing-seen-on-west", [], True, "5:3", {}, 0, 0),
    # GeoPersistentReplicator acks without sending what replicate_to excludes, and what expired by TTL.
    ("replicate-to-excludes-west", [0, 1, 3], True, "5:3", {2: {"replicate_to": ["south"]}}, 0, 0),
    ("replicate-to-names-west", [0, 1, 3], True, "5:3", {2: {"replicate_to": ["south", "west"]}}, 0, 1),
    ("ttl-may-have-expired-it", [0, 1, 3], True, "5:3", {}, 30, 0),
    ("younger-than-the-ttl-cannot-expire", [0, 1, 3], True, "5:3", {}, 3600, 1),
    ("ttl-and-no-publish-time", [0, 1, 3], True, "5:3", {2: {"publish_time": None}}, 3600, 0),
]


@pytest.mark.parametrize("west_has,west_cursors,rep_mdp,overrides,ttl_s,missing", [c[1:] for c in MISSING],
                         ids=[c[0] for c in MISSING])
def test_message_missing_on_target(west_has, west_cursors, rep_mdp, overrides, ttl_s, missing):
    codes = Codes()
    east = [{**msg(f"5:{i}", i, t=i), **overrides.get(i, {})} for i in range(5)]
    west = [msg(f"9:{k}", i, "east", f"5:{i}", "p-own") for k, i in enumerate(west_has)]
    sides = {"east": side("east", east, codes, repl("west", rep_mdp), ["west"], "5:-1"),
             "west": side("west", west, codes, repl("east", "9:-1") if west_cursors else {},
                          ["east"] if west_cursors else (), "9:-1")}
    settings = Settings(run_id="r1", as_of_ms=T0 + 60_000,
                        thresholds=Thresholds(1000, 300, message_ttl_s=(("acme/orders", ttl_s),)))
    a = audit_topic(T, sides, settings)
    got = [f["entry_count"] for f in a.findings if f["check"] == "pulsar.message_missing_on_target"]
    assert got == ([missing] if missing else [])


@pytest.mark.parametrize("overrides,ttl_s,skipped,only_on_source", [
    ({}, 0, 1, 0),                                     # e0 below west's window, acked there: x never acked it
    ({0: {"replicate_to": ["south"]}}, 0, 0, 1),        # never sent to west: only on east (was skipped)
    ({}, 30, 0, 1),                                     # may have expired unsent: only on east (was skipped)
])
def test_messages_the_replicator_never_sends_are_not_skipped(overrides, ttl_s, skipped, only_on_source):
    codes = Codes()
    east = [{**msg(f"5:{i}", i, t=i), **overrides.get(i, {})} for i in range(3)]
    west = [msg(f"9:{k}", i, "east", f"5:{i}", "p-own") for k, i in enumerate((1, 2))]
    sides = {"east": side("east", east, codes, {**sub("orders", "5:-1", read="5:0"), **repl("west", "5:2")},
                          ["west"], "5:-1"),
             "west": side("west", west, codes, {**sub("orders", "9:-1"), **repl("east", "9:-1")}, ["east"], "9:-1")}
    settings = Settings(run_id="r1", as_of_ms=T0 + 60_000,
                        thresholds=Thresholds(1000, 300, message_ttl_s=(("*", ttl_s),)))
    r = row(audit_topic(T, sides, settings), "east", "west")
    assert (r["skipped"], r["only_on_source"], r["redelivered"]) == (skipped, only_on_source, 0)


def test_three_clusters_and_incomplete_dump():
    codes = Codes()
    east = [msg("5:0", 7, "south", "2:0", "p-s"), msg("5:1", 8, "south", None, "p-s"), msg("5:2", 0)]
    west = [msg("9:0", 8, "south", "2:1", "p-s"), msg("9:1", 7, "south", None, "p-s")]
    sides = {"east": side("east", east, codes, {**sub("orders", "5:0", read="5:2"), **repl("west", "5:1")},
                          ["west", "south"], "5:-1", complete=False),
             "west": side("west", west, codes, {**sub("orders", "9:0"), **repl("east", "9:1")}, ["east"], "9:-1")}
    a = audit_topic(T, sides, SETTINGS)
    r = row(a, "east", "west")
    # 5:0 (acked on east) = 9:1 (not acked on west); 5:1 (not acked) = 9:0 (acked on west, east dispatched it).
    assert (r["compared"], r["only_on_source"], r["redelivered"], r["skipped"], r["lost"], r["complete"]) == (
        2, 1, 1, 1, 0, False)
    assert (r["exact_target_mdp"], r["to_acknowledge"]) == ("9:-1", '["9:1"]')
    assert sorted({f["check"] for f in a.findings}) == ["pulsar.failover_skip"]   # no PIP-33 marker: no lag


def test_acks_below_mark_delete_and_replicator_state():
    codes = Codes()
    sides = {"east": side("east", [msg("5:0", 0)], codes, {
        **sub("orders", "5:4", ["5:2..5:6"], replicated=False), **repl("west", "5:0")}, [], "5:-1")}
    sides["east"].replication = {"west": (False, 5000)}
    a = audit_topic(T, sides, SETTINGS)
    assert sorted((f["check"], f["cluster"], f["entry_count"]) for f in a.findings) == [
        ("pulsar.acks_below_mark_delete", "east", None), ("pulsar.replicator_backlog", "east", 5000),
        ("pulsar.replicator_disconnected", "east", None)]
    assert a.failover == [] and a.snapshots[0]["replicated_subscriptions"] == 0
