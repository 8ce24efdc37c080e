"""Dump window, chunk plan and the reader complement: pure logic over real stats-internal outputs."""
import pytest

from audit.systems.pulsar.collect.reader import ReaderEntry, ReaderFeed, server_only_positions
from audit.systems.pulsar.collect.dump_window import (WHOLE_TOPIC, Chunk, DumpWindow, LedgerSpan, plan_chunks,
                                                      plan_window, replicated_subscriptions)
from audit.systems.pulsar.domain.positions import Position
from audit.systems.pulsar.formats.stats import decode_topic_stats
from audit.systems.pulsar.formats.stats_internal import decode_stats_internal
from tests.pulsar.collect.recorded import ORDERS_STATS_INTERNAL, ORDERS_WINDOW, orders_stats, real_body

P = Position


def orders():
    return decode_stats_internal(ORDERS_STATS_INTERNAL, "orders")


def test_window_starts_at_the_smallest_replicated_mark_delete_and_ends_at_lce():
    si = orders()
    w = plan_window(si, replicated_subscriptions(si, None))
    assert (w.start, w.end, w.from_cursor) == (P(10, 1), P(12, 3), "orders-sub")
    assert w.spans == (LedgerSpan(10, 2, 4), LedgerSpan(12, 0, 3))  # open ledger 12: currentLedgerEntries 4
    assert [(p.ledger_id, p.entry_id) for p in w.positions()] == ORDERS_WINDOW
    assert w.basis == "smallest markDeletePosition: subscription cursor orders-sub"


def test_replicator_cursor_bounds_the_window_without_replicated_subscriptions():
    w = plan_window(orders(), [])
    assert (w.start, w.from_cursor, w.count) == (P(10, 2), "pulsar.repl.west", 6)


def test_is_replicated_from_stats_counts_too():
    si, stats = orders(), decode_topic_stats(orders_stats(), "stats")
    assert replicated_subscriptions(si, stats) == ["audit/sub 1", "orders-sub"]
    stats_only = decode_topic_stats(orders_stats().replace(b'"isReplicated": false', b'"isReplicated": true'), "s")
    subs = replicated_subscriptions(si, stats_only)
    assert "local-sub" in subs
    assert plan_window(si, subs).start == P(10, 0)  # local-sub now bounds it


def test_open_ledger_is_bounded_by_last_confirmed_entry_not_current_ledger_entries():
    # Sample -02: currentLedgerEntries 104 = 52 confirmed + 52 adds in flight; lastConfirmedEntry 64:51.
    si = decode_stats_internal(real_body("pulsar-stats-internal-02.json"), "02")
    w = plan_window(si, replicated_subscriptions(si, None))
    assert (w.start, w.end, w.from_cursor, w.basis) == (P(56, -1), P(64, 51), None, WHOLE_TOPIC)
    assert w.spans == (LedgerSpan(56, 0, 2194), LedgerSpan(64, 0, 51))
    assert w.count == si.number_of_entries == 2247


@pytest.mark.parametrize("fixture, spans", [
    ("pulsar-stats-internal-01.json", (LedgerSpan(13, 0, 2),)),  # only ledger open, 3 entries
    ("pulsar-stats-internal-08.txt", (LedgerSpan(0, 0, 8),)),  # no cursors at all
])
def test_topics_without_bounding_cursors_are_dumped_whole(fixture, spans):
    si = decode_stats_internal(real_body(fixture), fixture)
    assert plan_window(si, []).spans == spans


def test_empty_window_when_every_cursor_is_at_the_end():
    doc = ORDERS_STATS_INTERNAL.replace(b'"10:1"', b'"12:3"').replace(b'"10:2",\n      "readPosition" : "12:4"',
                                                                        b'"12:3",\n      "readPosition" : "12:4"')
    w = plan_window(decode_stats_internal(doc, "x"), ["orders-sub"])
    assert (w.start, w.end, w.spans, w.count) == (P(12, 3), P(12, 3), (), 0)


def window(*spans):
    return DumpWindow(P(spans[0][0], spans[0][1] - 1), P(spans[-1][0], spans[-1][2]),
                      tuple(LedgerSpan(*s) for s in spans), None, "test")


def test_chunks_are_aligned_per_ledger():
    chunks, beyond = plan_chunks(window((10, 2, 4), (12, 0, 3)), 2, 1000)
    assert chunks == [Chunk(10, 2, 3), Chunk(10, 4, 4), Chunk(12, 0, 1), Chunk(12, 2, 3)]
    assert [c.key for c in chunks] == ["dump/10/2-3.jsonl", "dump/10/4-4.jsonl", "dump/12/0-1.jsonl",
                                       "dump/12/2-3.jsonl"]
    assert beyond == []
    chunks, _ = plan_chunks(window((7, 998, 2001),), 1000, 10**6)
    assert chunks == [Chunk(7, 998, 999), Chunk(7, 1000, 1999), Chunk(7, 2000, 2001)]


def test_cap_cuts_the_plan_and_returns_what_is_beyond():
    chunks, beyond = plan_chunks(window((10, 2, 4), (12, 0, 3), (15, 0, 9)), 2, 4)
    assert chunks == [Chunk(10, 2, 3), Chunk(10, 4, 4), Chunk(12, 0, 0)]
    assert beyond == [LedgerSpan(12, 1, 3), LedgerSpan(15, 0, 9)]
    assert sum(c.count for c in chunks) + sum(b.count for b in beyond) == 3 + 4 + 10


def test_server_only_positions_are_the_complement_in_window_order():
    win = [P(10, 2), P(10, 3), P(10, 4), P(12, 0), P(12, 1)]
    returned = [P(12, 1), P(10, 2), P(10, 4), P(99, 0)]  # 99:0 is outside the window: ignored
    assert server_only_positions(win, returned) == [P(10, 3), P(12, 0)]
    assert server_only_positions(win, []) == win
    assert server_only_positions([], returned) == []


class ListReader:
    def __init__(self, positions, fail_after=None):
        self.positions, self.fail_after, self.calls = positions, fail_after, []

    def read(self, topic, after, until):
        self.calls.append((topic, after, until))
        for i, p in enumerate(self.positions):
            if self.fail_after is not None and i == self.fail_after:
                raise ConnectionError("broker closed the connection")
            yield ReaderEntry(p, {"X-Pulsar-Message-ID": str(p)}, b"x")


def test_reader_feed_hands_out_entries_chunk_by_chunk():
    src = ListReader([P(10, 2), P(10, 4), P(12, 0), P(12, 3)])
    feed = ReaderFeed(src, "persistent://a/b/c", P(10, 1), P(12, 3))
    assert list(feed.take(P(10, 2), P(10, 3))) == [P(10, 2)]
    assert list(feed.take(P(12, 0), P(12, 1))) == [P(12, 0)]  # 10:4 belonged to a skipped chunk: dropped
    assert list(feed.take(P(12, 2), P(12, 3))) == [P(12, 3)]
    assert (feed.returned, feed.error, src.calls) == (3, None, [("persistent://a/b/c", P(10, 1), P(12, 3))])


def test_a_failing_reader_stops_the_feed_with_the_reason():
    feed = ReaderFeed(ListReader([P(1, 0), P(1, 1), P(1, 2)], fail_after=1), "t", P(1, -1), P(1, 2))
    assert list(feed.take(P(1, 0), P(1, 2))) == [P(1, 0)]
    assert feed.error == "reader failed: ConnectionError: broker closed the connection"
    assert feed.take(P(1, 3), P(1, 4)) == {}
