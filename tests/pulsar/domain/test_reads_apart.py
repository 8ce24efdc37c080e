"""Clusters read minutes apart under traffic (docs/pulsar/audit.md "Snapshots minutes apart"): which reads are
compared, and each false finding of simultaneous-snapshot auditing, turned into a case that must stay quiet next
to the real fault it must still find."""
from __future__ import annotations

import dataclasses

import pytest

from audit.systems.pulsar.domain.pairs import UNBRACKETED, UNTIMED
from audit.systems.pulsar.domain.reads import CursorRead, bracket
from audit.systems.pulsar.domain.records import Codes
from audit.systems.pulsar.domain.topic import audit_topic
from tests.pulsar.domain.test_topic import SETTINGS, T, msg, repl, row, side, sub


def read(n, at, cursors=None):
    return CursorRead(n, at, at + 1, cursors or {})


@pytest.mark.parametrize("source, target, want", [
    # the two rereads: X before Y in the pass order -> Y's first reread; Y before X -> Y's second
    ([(0, 100), (1, 300), (2, 304)], [(0, 200), (1, 302), (2, 306)], (1, 1, 2)),
    ([(0, 200), (1, 302), (2, 306)], [(0, 100), (1, 300), (2, 304)], (2, 1, 2)),
    # one collection each, no reread: X before Y -> nothing after; Y before X -> nothing before
    ([(0, 100)], [(0, 200)], (0, 0, None)),
    ([(0, 200)], [(0, 100)], (0, None, 0)),
    # reads that overlap in time bound nothing
    ([(0, 100)], [(0, 100)], (0, None, None)),
])
def test_bracket_picks_the_latest_target_read_with_source_reads_around_it(source, target, want):
    b = bracket([read(n, t) for n, t in source], [read(n, t) for n, t in target])
    assert (b.target.number, b.before and b.before.number, b.after and b.after.number) == want
    assert b.complete == (want[1] is not None and want[2] is not None) and not b.untimed


def test_bracket_without_instants_takes_the_collections_as_simultaneous():
    b = bracket([CursorRead(0, None, None)], [CursorRead(0, None, None)])
    assert b.untimed and (b.target.number, b.before.number, b.after.number) == (0, 0, 0)


B = SETTINGS.as_of_ms - 10_000   # read instants below are offsets from here (publish times are just before)


def _with_reads(s, *reads):
    return dataclasses.replace(s, reads=tuple(reads))


def apart(codes, east_rereads, west_rereads, west_records=None, east_read=1000, west_read=2000,
          east_records=None, east_cursors=None):
    """east publishes e0..e3 (5:0..5:3) and is read at `east_read`; west holds the copies it received by
    `west_read` (default: e0..e5, the last two published on east after east's read)."""
    east_records = east_records or [msg(f"5:{i}", i, t=i) for i in range(4)]
    west_records = west_records if west_records is not None else [
        msg(f"9:{i}", i, "east", f"5:{i}", "p-own", t=i) for i in range(6)]
    east_cursors = east_cursors or {**sub("orders", "5:3"), **repl("west", "5:3")}
    east = side("east", east_records, codes, east_cursors, ["west"], "5:-1")
    west = side("west", west_records, codes, {**sub("orders", "9:1"), **repl("east", "9:-1")}, ["east"], "9:-1")
    east = _with_reads(east, CursorRead(0, B + east_read, B + east_read, east.cursors), *east_rereads)
    west = _with_reads(west, CursorRead(0, B + west_read, B + west_read, west.cursors), *west_rereads)
    return {"east": east, "west": west}


def rereads(cluster_cursors, times):
    return [CursorRead(n, B + t, B + t + 1, c) for n, (c, t) in enumerate(zip(cluster_cursors, times), start=1)]


def test_copies_of_messages_published_after_the_source_was_read_are_not_compared():
    codes = Codes()
    east = {**sub("orders", "5:5"), **repl("west", "5:5")}
    west = {**sub("orders", "9:1"), **repl("east", "9:-1")}
    sides = apart(codes, rereads([east, east], [3000, 3004]), rereads([west, west], [3002, 3006]))
    r = row(audit_topic(T, sides, SETTINGS), "east", "west")
    # 9:2, 9:3 were acked on east before west's cursor was read; 9:4, 9:5 exist on east only after its window
    assert (r["redelivered"], r["skipped"], r["after_source_window"], r["unsettled"]) == (2, 0, 2, 0)
    assert (r["target_read_at_ms"], r["source_read_before_ms"], r["source_read_after_ms"]) == (
        B + 3003, B + 3001, B + 3004)


@pytest.mark.parametrize("east_after, skipped, unsettled", [
    ("5:3", 0, 2),   # east acked e2, e3 between its reads around west's: progress, not a skip
    ("5:1", 2, 0),   # still unacked on east after west had acked them: a skip
])
def test_acks_on_the_target_are_skips_only_when_the_source_had_not_acked_them_after(east_after, skipped,
                                                                                      unsettled):
    codes = Codes()
    before = {**sub("orders", "5:1"), **repl("west", "5:3")}
    after = {**sub("orders", east_after), **repl("west", "5:3")}
    west = {**sub("orders", "9:3"), **repl("east", "9:-1")}
    sides = apart(codes, rereads([before, after], [3000, 3004]), rereads([west, west], [3002, 3006]),
                  west_records=[msg(f"9:{i}", i, "east", f"5:{i}", "p-own", t=i) for i in range(4)])
    a = audit_topic(T, sides, SETTINGS)
    r = row(a, "east", "west")
    assert (r["skipped"], r["unsettled"], r["redelivered"]) == (skipped, unsettled, 0)
    assert [f["entry_count"] for f in a.findings if f["check"] == "pulsar.failover_skip"] == (
        [skipped] if skipped else [])


def test_without_a_source_read_after_the_target_no_skip_is_claimed_and_the_report_says_so():
    codes = Codes()
    sides = apart(codes, [], [], west_records=[msg(f"9:{i}", i, "east", f"5:{i}", "p-own", t=i) for i in range(4)],
                  east_cursors={**sub("orders", "5:1"), **repl("west", "5:3")})
    sides["west"] = dataclasses.replace(sides["west"], cursors={**sub("orders", "9:3"), **repl("east", "9:-1")},
                                        reads=(CursorRead(0, B + 2000, B + 2000, {**sub("orders", "9:3")}),))
    a = audit_topic(T, sides, SETTINGS)
    r = row(a, "east", "west")
    assert (r["skipped"], r["unsettled"], r["complete"]) == (0, 2, False)
    assert not [f for f in a.findings if f["check"] == "pulsar.failover_skip"]
    # (the reverse pair has no west read before east's either, but nothing there depends on it)
    assert [(c["cluster"], c["target_cluster"], c["what"], c["entry_count"]) for c in a.coverage] == [
        ("east", "west", UNBRACKETED, 2)]


def test_without_any_instant_the_collections_are_judged_as_simultaneous_and_the_report_says_so():
    codes = Codes()
    sides = apart(codes, [], [], west_records=[msg(f"9:{i}", i, "east", f"5:{i}", "p-own", t=i) for i in range(4)],
                  east_cursors={**sub("orders", "5:1"), **repl("west", "5:3")})
    sides = {k: dataclasses.replace(v, reads=()) for k, v in sides.items()}
    sides["west"] = dataclasses.replace(sides["west"], cursors={**sub("orders", "9:3"), **repl("east", "9:-1")})
    a = audit_topic(T, sides, SETTINGS)
    assert row(a, "east", "west")["skipped"] == 2
    assert {c["what"] for c in a.coverage} == {UNTIMED}


@pytest.mark.parametrize("west_read, missing", [
    (500, 1),    # west read before east: e3..e5 were sent after it; only e1 (before e2, which west holds) is missing
    (2000, 4),   # west read after east: everything east's replicator had sent must be there
])
def test_missing_on_target_only_before_a_later_copy_unless_the_target_was_read_after(west_read, missing):
    codes = Codes()
    east_records = [msg(f"5:{i}", i, t=i) for i in range(6)]
    west_records = [msg("9:0", 0, "east", "5:0", "p-own"), msg("9:1", 2, "east", "5:2", "p-own")]
    sides = apart(codes, [], [], west_records=west_records, east_records=east_records, west_read=west_read,
                  east_cursors={**sub("orders", "5:-1"), **repl("west", "5:5")})
    found = [f["entry_count"] for f in audit_topic(T, sides, SETTINGS).findings
             if f["check"] == "pulsar.message_missing_on_target"]
    assert found == [missing]


@pytest.mark.parametrize("replicator_before, copy_on_west, west_replicator, lag", [
    ("5:4", True, "9:4", 2),    # sent before west was read, and west's replicator back to east read its copy
    ("5:4", True, "9:3", 0),    # its copy waits unread on west: PIP-33 applied nothing there yet
    ("5:4", False, "9:3", 0),   # sent, but its copy is not in west's window: that it was applied cannot be shown
    ("5:3", False, "9:3", 0),   # not sent when west was read
])
def test_an_update_counts_only_once_the_target_replicator_back_had_read_its_copy(replicator_before, copy_on_west,
                                                                                 west_replicator, lag):
    codes = Codes()
    update = {"pos": "5:4", "marker_type": 13, "subscription": "orders", "clusters": {"west": "9:3"},
              "publish_time": SETTINGS.as_of_ms - 1}
    east_records = [msg(f"5:{i}", i, t=i) for i in range(4)] + [update]
    west_records = [msg(f"9:{i}", i, "east", f"5:{i}", "p-own", t=i) for i in range(4)]
    if copy_on_west:
        west_records.append({**update, "pos": "9:4", "replicated_from": "east"})
    east = {**sub("orders", "5:4"), **repl("west", replicator_before)}
    west = {**sub("orders", "9:1"), **repl("east", west_replicator)}
    sides = apart(codes, rereads([east, east], [3000, 3004]), rereads([west, west], [3002, 3006]),
                  west_records=west_records, east_records=east_records,
                  east_cursors={**sub("orders", "5:4"), **repl("west", replicator_before)})
    a = audit_topic(T, sides, SETTINGS)
    assert row(a, "east", "west")["redelivery_lag"] == lag
    assert [f["entry_count"] for f in a.findings if f["check"] == "pulsar.failover_redelivery"] == (
        [lag] if lag else [])
