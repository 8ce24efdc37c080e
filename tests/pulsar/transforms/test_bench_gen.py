"""The failover benchmark's generator (bench/pulsar/gen.py) writes every cursor as the collector and its reread
stage read it: read 0 per cluster a minute apart, then passes 1 and 2 per topic in estate order, east's
subscriptions a few entries further each time (no Spark: the Parquet files are read back directly)."""
from __future__ import annotations

import pyarrow.parquet as pq

from bench.pulsar import gen

SPEC = gen.Spec(messages_per_side=8_000, topics=2, subscriptions=8)


def _cursors(tmp_path):
    expected = gen.generate(SPEC, str(tmp_path))
    rows = pq.read_table(tmp_path / "pulsar_cursors").to_pylist()
    markers = pq.read_table(tmp_path / "pulsar_entries" / "markers.parquet").to_pylist()
    return expected, rows, markers


def test_counts_and_every_cursor_read_three_times(tmp_path):
    expected, rows, _ = _cursors(tmp_path)
    assert expected["failover_rows"] == 2 * 8 and expected["subscriptions"] == 8
    per_cursor: dict[tuple, list[int]] = {}
    for r in rows:
        per_cursor.setdefault((r["cluster"], r["topic"], r["cursor"]), []).append(r["read"])
    # 4 subscriptions + 1 replicator per topic and cluster
    assert len(per_cursor) == 2 * 2 * 5
    assert all(sorted(reads) == [0, 1, 2] for reads in per_cursor.values())


def test_instants_follow_the_collector_and_the_reread_order(tmp_path):
    expected, rows, _ = _cursors(tmp_path)
    last_publish = max(r["publish_time_ms"] for r in pq.read_table(tmp_path / "pulsar_entries").to_pylist())
    for topic in {r["topic"] for r in rows}:
        at = {}
        for r in rows:
            if r["topic"] == topic:
                assert at.setdefault((r["cluster"], r["read"]), (r["read_requested_ms"], r["read_answered_ms"])) \
                       == (r["read_requested_ms"], r["read_answered_ms"])   # one instant per read
        assert last_publish < at[("east", 0)][0]
        assert at[("west", 0)][0] - at[("east", 0)][0] == 60_000
        order = [at[k] for k in (("east", 0), ("west", 0), ("east", 1), ("west", 1), ("east", 2), ("west", 2))]
        for (req, ans), (nxt, _) in zip(order, order[1:]):
            assert req < ans < nxt
        assert order[-1][1] < expected["as_of_ms"]


def test_only_east_subscriptions_move_and_within_what_exists(tmp_path):
    _, rows, markers = _cursors(tmp_path)
    by = {}
    for r in rows:
        by.setdefault((r["cluster"], r["topic"], r["cursor"]), {})[r["read"]] = r
    moved = 0
    for (cluster, topic, cursor), reads in by.items():
        mdp = [(reads[n]["mark_delete_ledger"], reads[n]["mark_delete_entry"]) for n in (0, 1, 2)]
        if cluster == "west" or cursor.startswith("pulsar.repl."):
            assert mdp[0] == mdp[1] == mdp[2]
            continue
        assert mdp[0] <= mdp[1] <= mdp[2]
        moved += mdp[2] > mdp[0]
        r = reads[2]
        first = r["individually_deleted"][0]
        assert mdp[2] < (first["from_ledger"], first["from_entry"])        # the range stays apart
        assert mdp[2] < (r["read_ledger"], r["read_entry"])
        snapshots = [(m["marker_local_ledger"], m["marker_local_entry"]) for m in markers
                     if m["cluster"] == "east" and m["topic"] == topic and m["marker_type"] == 12]
        assert not [s for s in snapshots if mdp[0] < s <= mdp[2]]         # no UPDATE the dump lacks
        assert r["individually_deleted"] == reads[0]["individually_deleted"]
    assert moved >= 4          # of 8: a subscription right below a snapshot cannot move
