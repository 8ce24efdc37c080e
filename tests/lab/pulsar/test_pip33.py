"""The Pulsar lab runs geo-replication and PIP-33 the way docs/formats/pulsar.md §2.5-2.6 describe them."""
from __future__ import annotations

import random

import pytest

from audit.systems.pulsar.formats import markers as mk
from audit.systems.pulsar.formats.entry import REPL_SOURCE_POSITION
from audit.systems.pulsar.formats.stats_internal import REPLICATED_PROPERTY
from lab.pulsar.model import MARKER_PRODUCER, Clock, ClusterLedgerIds
from lab.pulsar.pip33 import (COMPLETE, EARLIEST, LATEST, NEXT_ROUND, WAIT, Controller, PendingSnapshot,
                                    update_creates_at_earliest)
from lab.pulsar.topic import ClusterState, Topic, TopicSettings
from lab.pulsar.snapshots import MarkerInfo, SnapshotCache
from lab.pulsar.runner import lab_world

AS_OF = 1_760_000_000_000
SUB = "orders-processor"
# Production stops at 41 s and the clusters are read right before as_of: PIP-33 has settled where nothing is broken
QUIET = {"seed": 7, "traffic": "quiet", "duration_s": 120, "collection_gap_s": 0}


@pytest.fixture(scope="module")
def world():
    return lab_world(QUIET, AS_OF)[0]


def topic(world, cluster, local):
    return world.topic(cluster, f"persistent://lab/geo/{local}")


def updates_written(t, sub):
    return [e for e in t.ml.entries if e.marker_type == mk.UPDATE and e.replicated_from is None
            and e.marker.subscription == sub]


def test_healthy_target_mdp_is_the_snapshot_mapped_source_mdp(world):
    east, west = topic(world, "east", "orders-healthy"), topic(world, "west", "orders-healthy")
    src, dst = east.subscriptions[SUB].cursor, west.subscriptions[SUB].cursor
    last_update = updates_written(east, SUB)[-1].marker
    assert west.subscriptions[SUB].cursor.mark_delete_position() == dict(last_update.clusters)["west"]
    # ... and that snapshot is the newest one at or below the source MDP: nothing newer could have been used
    snapshots = [e.marker for e in east.ml.entries if e.marker_type == mk.SNAPSHOT]
    usable = [s for s in snapshots if s.local <= src.mark_delete_position()]
    assert dict(usable[-1].clusters) == dict(last_update.clusters)
    # truly in sync: the consumer finished, and every data message on the standby is acked there
    assert src.mdp_idx == len(east.ml.entries) - 1
    assert all(dst.is_acked(i) for i, e in enumerate(west.ml.entries) if not e.is_marker)


def test_backlogged_target_lets_snapshot_requests_time_out(world):
    east = topic(world, "east", "orders-backlog")
    records = list(east.controller.records.values())
    timed_out = [r for r in records if r.timed_out_ms is not None]
    completed = [r for r in records if r.completed_ms is not None]
    assert len(timed_out) >= 30 and len(completed) <= 5
    # the responses that did arrive all came early, before the standby's replicator fell behind
    assert all(r.start_ms < world.t0 + 15_000 for r in completed)
    assert world.topic("west", east.name).replicators["east"].backlog() > 100


def test_one_way_replication_never_completes_a_snapshot(world):
    east, west = topic(world, "east", "orders-one-way"), topic(world, "west", "orders-one-way")
    records = east.controller.records.values()
    assert records and all(r.completed_ms is None for r in records)
    assert not west.replicators and "pulsar.repl.east" not in west.ml.cursors
    assert west.subscriptions[SUB].cursor.mdp_idx == -1  # never moved: no UPDATE can come back


def test_disconnected_replicator_stops_new_snapshots(world):
    east = topic(world, "east", "orders-disconnected")
    rep = east.replicators["west"]
    assert not rep.connected and rep.disconnected_at == world.t0 + 25_000
    assert all(r.start_ms < rep.disconnected_at for r in east.controller.records.values())


def test_three_clusters_take_two_rounds(world):
    east = world.topic("east", "persistent://lab/geo3/payments")
    completed = [r for r in east.controller.records.values() if r.completed_ms is not None]
    assert completed and all(len(r.request_positions) == 2 for r in completed)
    snap = next(e.marker for e in east.ml.entries if e.marker_type == mk.SNAPSHOT)
    assert [c for c, _ in snap.clusters] == ["south", "west"]


def test_replicated_copies_carry_origin_and_never_ping_pong(world):
    for cluster in world.cluster_names:
        for t in world.topics_of(cluster):
            idents = [e.ident for e in t.ml.entries if e.ident is not None]
            assert len(idents) == len(set(idents)), t.name  # each message once per cluster
            for e in t.ml.entries:
                assert e.replicated_from != cluster
                if e.replicated_from is None or e.is_marker:
                    continue
                props = dict(e.properties)
                assert e.ident[0] == e.replicated_from
                if t.settings.recent_pulsar:
                    assert props[REPL_SOURCE_POSITION] == f"{e.ident[1]}:{e.ident[2]}"
                else:
                    assert REPL_SOURCE_POSITION not in props


def test_markers_are_entries_with_the_marker_producer(world):
    east = topic(world, "east", "orders-healthy")
    markers = [e for e in east.ml.entries if e.is_marker]
    assert {e.marker_type for e in markers} == {mk.SNAPSHOT_REQUEST, mk.SNAPSHOT_RESPONSE, mk.SNAPSHOT, mk.UPDATE}
    for e in markers:
        assert (e.producer_name, e.sequence_id) == (MARKER_PRODUCER, 0)
        decoded = mk.decode_marker(e.marker_type, e.payload, "lab")
        if e.marker_type == mk.SNAPSHOT_RESPONSE:
            assert e.replicate_to == (("west",) if e.replicated_from is None else ("east",))  # to the requester
        elif e.marker_type == mk.SNAPSHOT:
            assert e.replicate_to == ("east",) and e.replicated_from is None  # never leaves the cluster
            assert (decoded["local_ledger"], decoded["local_entry"]) == e.marker.local
        else:
            assert e.replicate_to is None
    # the dispatcher of the replicated subscription acked every marker it read
    sub = east.subscriptions[SUB].cursor
    assert all(sub.is_acked(i) for i, e in enumerate(east.ml.entries) if e.is_marker and i < sub.read_idx)


def test_delayed_message_holds_the_mark_delete_position(world):
    east = topic(world, "east", "orders-delayed")
    cursor = east.subscriptions[SUB].cursor
    held = east.ml.entries[cursor.mdp_idx + 1]
    assert held.deliver_at_ms is not None and held.deliver_at_ms > world.as_of_ms
    assert cursor.read_idx > cursor.mdp_idx + 1 and cursor.ranges()  # later messages acked individually


def test_snapshot_cache_evicts_the_oldest_and_pops_up_to_the_mark_delete():
    cache = SnapshotCache(3)
    for e in range(1, 6):
        cache.add(MarkerInfo(mk.SNAPSHOT, f"s{e}", local=(9, e * 10), clusters=(("west", (5, e)),)))
    assert len(cache) == 3  # s1 and s2 evicted
    assert cache.advanced_mark_delete((9, 5)) is None
    assert cache.advanced_mark_delete((9, 45)).snapshot_id == "s4"
    assert len(cache) == 1 and cache.advanced_mark_delete((9, 50)).snapshot_id == "s5"


# -- the snapshot builder (ReplicatedSubscriptionsSnapshotBuilder.receivedSnapshotResponse) -------------------
E1, E2, W1, W2, S1, S2 = (1, 1), (1, 9), (2, 1), (2, 9), (3, 1), (3, 9)


@pytest.mark.parametrize("remotes, arrivals, steps, kept", [
    # one remote: one round, its response is the snapshot's
    (("west",), [("west", W1)], [COMPLETE], {"west": W1}),
    # two remotes: the first round's positions are kept (putIfAbsent); the second round only waits again
    (("south", "west"), [("west", W1), ("south", S1), ("south", S2), ("west", W2)],
     [WAIT, NEXT_ROUND, WAIT, COMPLETE], {"west": W1, "south": S1}),
    # a duplicate within a round neither replaces the first nor counts as another remote
    (("south", "west"), [("west", W1), ("west", W2), ("south", S1)], [WAIT, WAIT, NEXT_ROUND],
     {"west": W1, "south": S1}),
    # the second round ends on the last remote still awaited, whichever order they answer in
    (("east", "south", "west"), [("east", E1), ("west", W1), ("south", S1), ("south", S2), ("east", E2),
                                 ("west", W2)],
     [WAIT, WAIT, NEXT_ROUND, WAIT, WAIT, COMPLETE], {"east": E1, "west": W1, "south": S1}),
])
def test_snapshot_builder_keeps_each_remotes_first_response(remotes, arrivals, steps, kept):
    p = PendingSnapshot("s", 0, remotes, two_rounds=len(remotes) > 1)
    assert [p.received(cluster, pos) for cluster, pos in arrivals] == steps
    assert p.responses == kept


def test_three_cluster_snapshots_carry_the_first_rounds_positions(world):
    """Each SNAPSHOT's remote positions are those the first round's RESPONSE markers carried."""
    east = world.topic("east", "persistent://lab/geo3/payments")
    responses = [e for e in east.ml.entries if e.marker_type == mk.SNAPSHOT_RESPONSE and e.replicated_from]
    snapshots = [e.marker for e in east.ml.entries if e.marker_type == mk.SNAPSHOT]
    assert snapshots
    for snap in snapshots:
        answers = [dict(e.marker.clusters) for e in responses if e.marker.snapshot_id == snap.snapshot_id]
        first = {c: next(a[c] for a in answers if c in a) for c in ("south", "west")}
        assert dict(snap.clusters) == first
        assert len(answers) == 4  # two rounds of two remotes


# -- a subscription the UPDATE names but the target lacks (ReplicatedSubscriptionsController) -----------------
@pytest.mark.parametrize("version, earliest", [
    ("2.9.5", False), ("2.10.4", False), ("2.10.5", True), ("2.11.1", False), ("2.11.2", True),
    ("3.0.1", False), ("3.0.2", True), ("3.0.12", True), ("3.0.x", True), ("3.1.0", True), ("4.0.9", True),
])
def test_missing_subscription_is_created_as_the_broker_version_does(version, earliest):
    assert update_creates_at_earliest(version) is earliest
    clock = Clock(AS_OF)
    cluster = ClusterState("west", ClusterLedgerIds(random.Random(1)), "10.0.0.1")
    at = EARLIEST if earliest else LATEST
    west = Topic(clock, cluster, "persistent://lab/geo/t", TopicSettings(missing_subscription_at=(("west", at),)),
                 random.Random(2), 80, Controller)
    for seq in range(5):
        west.publish("p", seq, b"x", ())
    target = west.ml.positions[2]
    update = west.ml.append(clock.now, 10, producer_name=MARKER_PRODUCER, sequence_id=0, publish_ms=clock.now,
                            payload=b"", replicated_from="east", marker_type=mk.UPDATE,
                            marker=MarkerInfo(mk.UPDATE, subscription=SUB, clusters=(("west", target),)))
    ctl = west.ensure_controller()
    ctl.received_marker(update, len(west.ml.entries) - 1)
    sub = west.subscriptions[SUB]
    assert sub.replicated and sub.cursor.properties == {REPLICATED_PROPERTY: 1}
    if earliest:  # at Earliest, then the cumulative ack at the UPDATE's position
        assert sub.cursor.mark_delete_position() == target and ctl.updates_applied == [(SUB, "east", target)]
    else:  # at Latest (the UPDATE marker itself was the last entry), the UPDATE not applied
        assert sub.cursor.mdp_idx == len(west.ml.entries) - 1 and ctl.updates_applied == []


def test_the_lab_config_picks_each_clusters_subscription_creation():
    w = lab_world({"seed": 7, "scenarios": ["healthy"], "broker_versions": {"west": "3.0.1"}}, AS_OF)[0]
    settings = w.topic("east", "persistent://lab/geo/orders-healthy").settings
    assert dict(settings.missing_subscription_at) == {"east": EARLIEST, "west": LATEST, "south": EARLIEST}
