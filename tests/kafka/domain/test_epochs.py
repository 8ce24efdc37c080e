"""The leader-epoch cache against LeaderEpochFileCacheTest.scala (@1eb7644349c), transcribed as facts: a sequence of
operations -> the entries left and the answers of endOffsetFor / latestEpoch / epochForOffset."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from audit.systems.kafka.domain.epochs import (EpochEntry as E, LeaderEpochCache, checkpoint_problem_entries,
                                       checkpoint_problems, epoch_differences)

U = -1   # UNDEFINED_EPOCH / UNDEFINED_EPOCH_OFFSET

# (test name upstream, operations, entries after, [(requested epoch, log end offset) -> answer], latest epoch)
CASES = [
    ("shouldAddEpochAndMessageOffsetToCache", [("a", 2, 10)], [E(2, 10)], [((2, 11), (2, 11))], 2),
    ("shouldReturnLogEndOffsetIfLatestEpochRequested", [("a", 2, 11), ("a", 2, 12)], [E(2, 11)],
     [((2, 14), (2, 14))], 2),
    ("shouldReturnUndefinedOffsetIfUndefinedEpochRequested", [("a", 2, 11), ("a", 3, 12)], [E(2, 11), E(3, 12)],
     [((U, 0), (U, U))], 3),
    ("shouldNotOverwriteLogEndOffsetForALeaderEpochOnceItHasBeenAssigned", [("a", 2, 9), ("a", 2, 10)], [E(2, 9)],
     [], 2),
    ("shouldEnforceMonotonicallyIncreasingStartOffsets", [("a", 2, 9), ("a", 3, 9)], [E(3, 9)], [], 3),
    ("shouldNotOverwriteOffsetForALeaderEpochOnceItHasBeenAssigned", [("a", 2, 6), ("a", 2, 10)], [E(2, 6)], [], 2),
    ("shouldReturnUnsupportedIfNoEpochRecorded", [], [], [((0, 0), (U, U))], None),
    ("shouldReturnUnsupportedIfNoEpochRecordedAndUndefinedEpochRequested", [], [], [((U, 73), (U, U))], None),
    ("shouldReturnFirstEpochIfRequestedEpochLessThanFirstEpoch", [("a", 5, 11), ("a", 6, 12), ("a", 7, 13)],
     [E(5, 11), E(6, 12), E(7, 13)], [((4, 0), (4, 11))], 7),
    ("shouldTruncateIfMatchingEpochButEarlierStartingOffset",
     [("a", 5, 11), ("a", 6, 12), ("a", 7, 13), ("a", 7, 12)], [E(5, 11), E(7, 12)],
     [((5, 0), (5, 12)), ((6, 0), (5, 12))], 7),
    ("shouldGetFirstOffsetOfSubsequentEpochWhenOffsetRequestedForPreviousEpoch",
     [("a", 1, 11), ("a", 1, 12), ("a", 2, 13), ("a", 2, 14), ("a", 3, 15), ("a", 3, 16)],
     [E(1, 11), E(2, 13), E(3, 15)], [((2, 17), (2, 15))], 3),
    ("shouldReturnNextAvailableEpochIfThereIsNoExactEpochForTheOneRequested",
     [("a", 0, 10), ("a", 2, 13), ("a", 4, 17)], [E(0, 10), E(2, 13), E(4, 17)],
     [((1, 0), (0, 13)), ((2, 0), (2, 17)), ((3, 0), (2, 17))], 4),
    ("shouldNotUpdateEpochAndStartOffsetIfItDidNotChange", [("a", 2, 6), ("a", 2, 7)], [E(2, 6)], [], 2),
    ("shouldReturnInvalidOffsetIfEpochIsRequestedWhichIsNotCurrentlyTracked", [("a", 2, 100)], [E(2, 100)],
     [((3, 100), (U, U))], 2),
    ("shouldSupportEpochsThatDoNotStartFromZero", [("a", 2, 6)], [E(2, 6)], [((2, 7), (2, 7))], 2),
    ("shouldEnforceMonotonicallyIncreasingEpochs", [("a", 1, 5), ("a", 2, 6), ("a", 1, 7)], [E(1, 7)],
     [((1, 8), (1, 8)), ((2, 8), (U, U))], 1),
    ("shouldEnforceOffsetsIncreaseMonotonically", [("a", 2, 6), ("a", 3, 5)], [E(3, 5)], [], 3),
    ("shouldIncreaseAndTrackEpochsAsLeadersChangeManyTimes/before-writes", [("a", 0, 0), ("a", 1, 0)], [E(1, 0)],
     [((1, 0), (1, 0)), ((0, 0), (0, 0)), ((1, 5), (1, 5)), ((0, 5), (0, 0))], 1),
    ("shouldIncreaseAndTrackEpochsAsLeadersChangeManyTimes/after", [("a", 0, 0), ("a", 1, 0), ("a", 2, 5)],
     [E(1, 0), E(2, 5)], [((2, 10), (2, 10)), ((1, 10), (1, 5)), ((0, 10), (0, 0))], 2),
    ("shouldIncreaseAndTrackEpochsAsFollowerReceivesManyMessages",
     [("a", 0, 0), ("a", 0, 1), ("a", 0, 2), ("a", 1, 3), ("a", 1, 4), ("a", 1, 5), ("a", 2, 6), ("a", 2, 7),
      ("a", 2, 8)], [E(0, 0), E(1, 3), E(2, 6)], [((2, 9), (2, 9)), ((0, 9), (0, 3)), ((1, 9), (1, 6))], 2),
    ("shouldDropEntriesOnEpochBoundaryWhenRemovingLatestEntries", [("a", 2, 6), ("a", 3, 8), ("a", 4, 11),
                                                                    ("end", 8)], [E(2, 6)], [], 2),
    ("shouldPreserveResetOffsetOnClearEarliestIfOneExists", [("a", 2, 6), ("a", 3, 8), ("a", 4, 11), ("start", 8)],
     [E(3, 8), E(4, 11)], [], 4),
    ("shouldUpdateSavedOffsetWhenOffsetToClearToIsBetweenEpochs",
     [("a", 2, 6), ("a", 3, 8), ("a", 4, 11), ("start", 9)], [E(3, 9), E(4, 11)], [], 4),
    ("shouldNotClearAnythingIfOffsetToEarly", [("a", 2, 6), ("a", 3, 8), ("a", 4, 11), ("start", 1)],
     [E(2, 6), E(3, 8), E(4, 11)], [], 4),
    ("shouldNotClearAnythingIfOffsetToFirstOffset", [("a", 2, 6), ("a", 3, 8), ("a", 4, 11), ("start", 6)],
     [E(2, 6), E(3, 8), E(4, 11)], [], 4),
    ("shouldRetainLatestEpochOnClearAllEarliest", [("a", 2, 6), ("a", 3, 8), ("a", 4, 11), ("start", 11)],
     [E(4, 11)], [], 4),
    ("shouldUpdateOffsetBetweenEpochBoundariesOnClearEarliest2", [("a", 0, 0), ("a", 1, 7), ("a", 2, 10),
                                                                  ("start", 5)], [E(0, 5), E(1, 7), E(2, 10)], [], 2),
    ("shouldRetainLatestEpochOnClearAllEarliestAndUpdateItsOffset",
     [("a", 2, 6), ("a", 3, 8), ("a", 4, 11), ("start", 15)], [E(4, 15)], [], 4),
    ("shouldDropEntriesBetweenEpochBoundaryWhenRemovingNewest", [("a", 2, 6), ("a", 3, 8), ("a", 4, 11), ("end", 9)],
     [E(2, 6), E(3, 8)], [], 3),
    ("shouldNotResetEpochHistoryHeadIfUndefinedPassed", [("a", 2, 6), ("a", 3, 8), ("a", 4, 11), ("start", U)],
     [E(2, 6), E(3, 8), E(4, 11)], [], 4),
    ("shouldNotResetEpochHistoryTailIfUndefinedPassed", [("a", 2, 6), ("a", 3, 8), ("a", 4, 11), ("end", U)],
     [E(2, 6), E(3, 8), E(4, 11)], [], 4),
    ("shouldFetchEndOffsetOfEmptyCache", [], [], [((7, 0), (U, U))], None),
    ("shouldClearEarliestOnEmptyCache", [("start", 7)], [], [], None),
    ("shouldClearLatestOnEmptyCache", [("end", 7)], [], [], None),
    ("shouldWriteCheckpointOnTruncation", [("a", 2, 6), ("a", 3, 8), ("a", 4, 11), ("end", 11), ("start", 8)],
     [E(3, 8)], [], 3),
    ("testPreviousEpoch/truncated", [("a", 2, 10), ("a", 4, 15), ("a", 10, 20), ("end", 18)], [E(2, 10), E(4, 15)],
     [], 4),
    # a real checkpoint `0\n1\n1 0` (layout: docs/formats/kafka.md §1): epoch 0, with no data, replaced by epoch 1
    ("sample-02/epoch-without-record-replaced", [("a", 0, 0), ("a", 1, 0)], [E(1, 0)], [((0, 3), (0, 0))], 1),
    ("lower-epoch-removes-higher-ones", [("a", 0, 0), ("a", 2, 10), ("a", 1, 5)], [E(0, 0), E(1, 5)], [], 1),
    ("lower-epoch-after-all-starts", [("a", 0, 0), ("a", 2, 10), ("a", 1, 20)], [E(0, 0), E(1, 20)], [], 1),
]


def _run(ops):
    cache = LeaderEpochCache()
    for op in ops:
        if op[0] == "a":
            cache.assign(op[1], op[2])
        elif op[0] == "end":
            cache.truncate_from_end(op[1])
        else:
            cache.truncate_from_start(op[1])
    return cache


@pytest.mark.parametrize("name, ops, entries, answers, latest", CASES, ids=[c[0] for c in CASES])
def test_leader_epoch_file_cache(name, ops, entries, answers, latest):
    cache = _run(ops)
    assert cache.entries == tuple(entries)
    assert cache.latest_epoch == latest
    for (requested, log_end), expected in answers:
        assert cache.end_offset_for(requested, log_end) == expected


# (name, entries, question, expected): epochForOffset, previousEpoch, nextEpoch, epochEntry, entries_in_range
QUERIES = [
    ("shouldFetchEpochForGivenOffset/25", [E(0, 10), E(1, 20), E(5, 30)], ("for", 25), 1),
    ("shouldFetchEpochForGivenOffset/20", [E(0, 10), E(1, 20), E(5, 30)], ("for", 20), 1),
    ("shouldFetchEpochForGivenOffset/30", [E(0, 10), E(1, 20), E(5, 30)], ("for", 30), 5),
    ("shouldFetchEpochForGivenOffset/50", [E(0, 10), E(1, 20), E(5, 30)], ("for", 50), 5),
    ("shouldFetchEpochForGivenOffset/5", [E(0, 10), E(1, 20), E(5, 30)], ("for", 5), None),
    ("testFindPreviousEpoch/empty", [], ("previous", 2), None),
    ("testFindPreviousEpoch/one", [E(2, 10)], ("previous", 2), None),
    ("testFindPreviousEpoch/4", [E(2, 10), E(4, 15)], ("previous", 4), 2),
    ("testFindPreviousEpoch/10", [E(2, 10), E(4, 15), E(10, 20)], ("previous", 10), 4),
    ("testPreviousEpoch/latest", [E(2, 10), E(4, 15), E(10, 20)], ("previous", None), 4),
    ("testFindNextEpoch/-1", [E(0, 0), E(1, 100), E(2, 200)], ("next", -1), 0),
    ("testFindNextEpoch/1", [E(0, 0), E(1, 100), E(2, 200)], ("next", 1), 2),
    ("testFindNextEpoch/2", [E(0, 0), E(1, 100), E(2, 200)], ("next", 2), None),
    ("testFindNextEpoch/100", [E(0, 0), E(1, 100), E(2, 200)], ("next", 100), None),
    ("testGetEpochEntry", [E(2, 100), E(3, 500), E(5, 1000)], ("entry", 3), E(3, 500)),
    ("testGetEpochEntry/absent", [E(2, 100), E(3, 500), E(5, 1000)], ("entry", 4), None),
    ("epochEntriesInRange", [E(2, 6), E(3, 8), E(4, 11)], ("range", (7, 11)), (E(2, 7), E(3, 8))),
    ("epochEntriesInRange/undefined-start", [E(2, 6), E(3, 8), E(4, 11)], ("range", (-1, 9)), (E(2, 6), E(3, 8))),
]


@pytest.mark.parametrize("name, entries, question, expected", QUERIES, ids=[q[0] for q in QUERIES])
def test_cache_queries(name, entries, question, expected):
    cache = LeaderEpochCache(entries)
    kind, arg = question
    got = {"for": lambda: cache.epoch_for_offset(arg), "previous": lambda: cache.previous_epoch(arg),
           "next": lambda: cache.next_epoch(arg), "entry": lambda: cache.epoch_entry(arg),
           "range": lambda: cache.entries_in_range(*arg)}[kind]()
    assert got == expected


@pytest.mark.parametrize("epoch, start", [(-1, 0), (0, -1)])
def test_negative_entries_are_refused(epoch, start):
    with pytest.raises(ValueError, match="invalid partition leader epoch entry"):
        LeaderEpochCache().assign(epoch, start)


def test_assign_returns_what_it_removed():
    cache = LeaderEpochCache([(0, 0), (2, 10), (3, 12)])
    assert cache.assign(1, 11) == (E(3, 12), E(2, 10))
    assert cache.assign(1, 15) == ()


# (name, entries as written, problems as (index, why prefix))
CHECKPOINTS = [
    ("sample-01", [(0, 0), (1, 1), (2, 2)], []),
    ("empty", [], []),
    ("epoch-repeats", [(0, 0), (0, 5)], [(1, "epoch not above")]),
    ("start-goes-back", [(0, 5), (1, 3)], [(1, "start offset not above")]),
    ("start-repeats", [(0, 5), (1, 5)], [(1, "start offset not above")]),
    ("both", [(3, 5), (2, 4)], [(1, "epoch not above"), (1, "start offset not above")]),
    ("negative", [(-1, 0), (0, 1)], [(0, "negative")]),
]


@pytest.mark.parametrize("name, entries, problems", CHECKPOINTS, ids=[c[0] for c in CHECKPOINTS])
def test_checkpoint_problems(name, entries, problems):
    found = checkpoint_problem_entries(entries)
    assert [(i, why.split(" ")[0]) for i, _, why in found] == [(i, p.split(" ")[0]) for i, p in problems]
    assert all(why.startswith(p) for (_, _, why), (_, p) in zip(found, problems))
    assert len(checkpoint_problems(entries)) == len(problems)


def test_a_broken_checkpoint_loads_as_the_broker_loads_it():
    # LeaderEpochFileCache's constructor assigns every line: the conflicting entries are dropped
    assert LeaderEpochCache([(0, 0), (2, 10), (1, 5)]).entries == (E(0, 0), E(1, 5))


@pytest.mark.parametrize("a, b, start, end, expected", [
    ([(0, 0), (1, 10)], [(0, 0), (1, 10)], 0, 20, 0),
    ([(0, 0), (1, 10)], [(0, 0), (1, 12)], 0, 20, 2),
    ([(0, 0), (1, 10)], [(0, 0), (2, 10)], 0, 20, 10),
    ([(0, 0), (1, 10)], [(0, 0), (2, 10)], 0, 10, 0),
    ([(3, 5)], [(3, 0)], 0, 8, 5),          # below a cache's first entry counts as differing
    ([(3, 5)], [(3, 0)], 5, 8, 0),
])
def test_epoch_differences(a, b, start, end, expected):
    assert epoch_differences(LeaderEpochCache(a), LeaderEpochCache(b), start, end) == expected


def _oracle(entries, requested, log_end):
    """endOffsetFor spelled out from its javadoc, on a plain sorted list."""
    if requested == U:
        return U, U
    if entries and entries[-1][0] == requested:
        return requested, log_end
    higher = [e for e in entries if e[0] > requested]
    if not higher:
        return U, U
    lower = [e for e in entries if e[0] <= requested]
    return (lower[-1][0] if lower else requested), higher[0][1]


@st.composite
def caches(draw):
    epochs = sorted(draw(st.sets(st.integers(0, 30), max_size=8)))
    starts = sorted(draw(st.sets(st.integers(0, 200), min_size=len(epochs), max_size=len(epochs))))
    return list(zip(epochs, starts))


@given(caches(), st.integers(-1, 35), st.integers(0, 400))
def test_end_offset_for_matches_the_oracle(entries, requested, extra):
    log_end = (entries[-1][1] if entries else 0) + extra
    assert LeaderEpochCache(entries).end_offset_for(requested, log_end) == _oracle(entries, requested, log_end)


@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 100)), max_size=12))
def test_assign_keeps_both_orders_strict(assignments):
    cache = LeaderEpochCache()
    for epoch, start in assignments:
        cache.assign(epoch, start)
        assert checkpoint_problems(cache.entries) == []
        assert cache.latest_epoch == epoch and cache.latest_entry.start_offset <= start


@given(st.lists(st.tuples(st.integers(-1, 20), st.integers(-1, 100)), max_size=12))
def test_loading_is_assigning_each_entry(entries):
    """The constructor's shortcut for strictly increasing entries keeps what assign would keep, one by one."""
    replayed = LeaderEpochCache()
    try:
        for epoch, start in entries:
            replayed.assign(epoch, start)
    except ValueError:
        with pytest.raises(ValueError):
            LeaderEpochCache(entries)
        return
    loaded = LeaderEpochCache(entries)
    assert loaded.entries == replayed.entries
    copy = loaded.copy()
    copy.truncate_from_end(0)
    assert loaded.entries == replayed.entries     # a copy is its own
