"""The Pulsar lab runs geo-replication and PIP-33 the way docs/formats/pulsar.md §2.5-2.6 describe them."""
from __future__ import annotations

import pytest

from audit.formats.pulsar import markers as mk
from audit.formats.pulsar.entry import REPL_SOURCE_POSITION
from audit.lab.pulsar.model import MARKER_PRODUCER
from audit.lab.pulsar.snapshots import MarkerInfo, SnapshotCache
from audit.lab.pulsar.runner import lab_world

AS_OF = 1_760_000_000_000
SUB = "orders-processor"


@pytest.fixture(scope="module")
def world():
    return lab_world({"seed": 7}, AS_OF)[0]


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
