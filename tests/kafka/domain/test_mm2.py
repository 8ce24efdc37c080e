"""MirrorMaker 2: OffsetSyncStoreTest.java facts for every store variant (tags 3.4.0, 3.5.0, 3.6.0,
@1eb7644349c), the sync and checkpoint emission rules, the failover bounds and the per-group verdicts."""
from __future__ import annotations

import random

import pytest

from audit.systems.kafka.domain.checks import CHECKS, COVERAGE
from audit.systems.kafka.domain.mm2 import (SYNCS_PER_PARTITION, Bounds, Checkpoint, GroupPartition, Mm2Settings,
                                    OffsetSyncStore, checkpoint_emitted, checkpoint_justified, downstream_bounds,
                                    evaluate_group, failover, last_checkpoints, rule_for_version, store_variant_for,
                                    sync_emitted, translate, translate_pre_35)

NEW = ("3.5.0", "3.5.2", "3.7.1")


def _store(variant, before=(), must_read_to_end=True):
    store = OffsetSyncStore(variant)
    store.load(before, must_read_to_end)
    return store


def _sparse(store, sync, previous):
    """assertSparseSync: the translations around a stored sync."""
    want = [-1 if previous == -1 else previous + 1, sync, sync + 1, sync + 1]
    return [store.translate_downstream(o) for o in (sync - 1, sync, sync + 1, sync + 2)] == want


def _spaced(step_from, to, step=10):
    return [(o, o) for o in range(step_from, to + 1, step)]


# testOffsetTranslation: (sync, [(group offset, expected)]) in order, per rule
TRANSLATION = [
    ("3.4.0", [((100, 200), [(150, 250)]), ((150, 251), [(150, 251), (5, -1)]), ((200, 10), [(200, 10)]),
               ((20, 20), [(20, 20)])]),
] + [(v, [((100, 200), [(150, 201)]), ((150, 251), [(150, 251), (5, -1)]), ((200, 10), [(200, 10)]),
          ((20, 20), [(20, 20)])]) for v in NEW]


@pytest.mark.parametrize("variant, steps", TRANSLATION, ids=[t[0] for t in TRANSLATION])
def test_offset_translation(variant, steps):
    store = _store(variant)
    for (upstream, downstream), checks in steps:
        store.sync(upstream, downstream)
        for group, expected in checks:
            assert store.translate_downstream(group) == expected


# testPastOffsetTranslation (3.5.0 .. trunk, read to end at start) and ...WithoutInitializationReadToEnd (trunk):
# (variant, must read to end, [(sync, previous)] right after start, later syncs, [(sync, previous)] after them)
PAST = [(v, True, [(1000, -1)], _spaced(1010, 10000),
         [(1000, -1), (4840, 1000), (6760, 4840), (8680, 6760), (9160, 8680), (9640, 9160), (9880, 9640),
          (9940, 9880), (9970, 9940), (9990, 9970), (10000, 9990)]) for v in NEW] + [
    ("3.7.1", False, [(480, 0), (720, 480), (1000, 990)], _spaced(1000, 10000),
     [(3840, 0), (7680, 3840), (8640, 7680), (9120, 8640), (9600, 9120), (9840, 9600), (9900, 9840), (9960, 9900),
      (9990, 9960), (10000, 9990)])]


@pytest.mark.parametrize("variant, must_read, at_start, later, after", PAST,
                         ids=[f"{p[0]}-read-to-end={p[1]}" for p in PAST])
def test_past_offset_translation(variant, must_read, at_start, later, after):
    store = _store(variant, _spaced(0, 1000), must_read)
    assert all(_sparse(store, s, p) for s, p in at_start)
    for upstream, downstream in later:
        store.sync(upstream, downstream)
        _assert_invariants(store)
    assert all(_sparse(store, s, p) for s, p in after)
    store.sync(1500, 11000)     # an upstream rewind clears every older sync
    assert [store.translate_downstream(o) for o in (1499, 1500, 2000)] == [-1, 11000, 11001]


@pytest.mark.parametrize("variant", NEW)
def test_no_translation_before_the_read_to_end(variant):
    store = OffsetSyncStore(variant)
    assert [store.translate_downstream(o) for o in (0, 100, 200)] == [None, None, None]
    store.sync(100, 200)    # read while starting
    assert store.translate_downstream(100) is None
    store.read_to_end = True
    assert [store.translate_downstream(o) for o in (0, 100, 200)] == [-1, 200, 201]


@pytest.mark.parametrize("variant", ("3.4.0",) + NEW)
def test_no_translation_without_a_sync(variant):
    assert _store(variant).translate_downstream(0) is None


def _assert_invariants(store):
    """assertSparseSyncInvariant: invariants B and C over every pair."""
    for j in range(SYNCS_PER_PARTITION):
        for i in range(j):
            ju, iu = store.sync_for(j).upstream_offset, store.sync_for(i).upstream_offset
            if ju == iu:
                continue
            lower = ju + (1 << max(i - 2, 0))
            if lower >= 0:
                assert iu >= lower
            upper = ju + (1 << j) - (1 << i)
            if upper >= 0:
                assert iu <= upper


def _distinct(store):
    return 1 + sum(store.sync_for(i - 1) is not store.sync_for(i) for i in range(1, SYNCS_PER_PARTITION))


def _expirations(variant, first, steps):
    """assertSyncSpacingHasBoundedExpirations: the most distinct syncs one new sync expired."""
    store = _store(variant)
    store.sync(first, first)
    offset, last, worst = first, 1, 0
    for step in steps:
        offset += step
        store.sync(offset, offset)
        assert store.sync_for(0).upstream_offset == offset           # invariant A
        assert store.sync_for(63).upstream_offset == first           # invariant D
        count = _distinct(store)
        worst, last = max(worst, last - count + 1), count
    return worst


@pytest.mark.parametrize("variant", ["3.5.2", "3.7.1"])
@pytest.mark.parametrize("step", [1, 3, 7, 15, 1023, 2 ** 40 - 1])
def test_consistently_spaced_syncs_expire_one_at_most(variant, step):
    for first in (0, 7, 29):
        assert _expirations(variant, first, [step] * 100) <= 1


@pytest.mark.parametrize("variant", ["3.5.2", "3.7.1"])
def test_dropped_syncs_spacing(variant):
    rnd = random.Random(0)
    assert _expirations(variant, 0, [(2 if rnd.random() < 0.5 else 1) * 100 for _ in range(3000)]) <= 2


@pytest.mark.parametrize("n", [1, 4, 12])
def test_randomly_spaced_syncs(n):
    rnd = random.Random(n)
    assert _expirations("3.7.1", 0, [rnd.randrange(0, 1 << n) for _ in range(1024)]) <= n + 2


def test_keep_most_distinct_syncs_350():
    """testKeepMostDistinctSyncs (3.5.0): with regular spacing the count of distinct syncs never drops."""
    for step in (1, 3, 7, 31):
        store, last = _store("3.5.0"), 1
        for offset in range(5, 3000, step):
            store.sync(offset, offset)
            assert _distinct(store) >= last
            last = _distinct(store)


def test_kafka_15202_translates_closer_than_14666():
    """Variably spaced syncs: the 3.5.0 store expires syncs the 3.5.2 one keeps, so it redelivers more."""
    rnd, offsets, offset = random.Random(76), [], 0
    for _ in range(300):
        offset += rnd.choice([1, 2, 3, 100, 1000, 5000])
        offsets.append((offset, offset))
    old, new = _store("3.5.0"), _store("3.5.2")
    for s in offsets:
        old.sync(*s)
        new.sync(*s)
    closer = farther = 0
    for q in range(0, offset, max(1, offset // 3000)):
        a, b = old.translate_downstream(q), new.translate_downstream(q)
        if a >= 0 and b >= 0:
            closer, farther = closer + (q - b < q - a), farther + (q - b > q - a)
    assert closer > 1000 and farther < 10


@pytest.mark.parametrize("version, rule, variant", [
    ("2.8.1", "pre-3.4.1", "3.4.0"), ("3.4.0", "pre-3.4.1", "3.4.0"), ("3.4.1", "3.4.1+", "3.5.0"),
    ("3.5", "3.4.1+", "3.5.0"), ("3.5.1", "3.4.1+", "3.5.0"), ("3.5.2", "3.4.1+", "3.5.2"),
    ("3.6.2", "3.4.1+", "3.5.2"), ("3.7.0", "3.4.1+", "3.5.2"), ("3.7.1", "3.4.1+", "3.7.1"),
    ("3.9.0", "3.4.1+", "3.7.1"), ("4.0.0-rc1", "3.4.1+", "3.7.1")])
def test_version_mapping(version, rule, variant):
    assert (rule_for_version(version), store_variant_for(version)) == (rule, variant)


@pytest.mark.parametrize("bad", ["trunk", "3", "x.y"])
def test_bad_version(bad):
    with pytest.raises(ValueError, match="MirrorMaker 2 version"):
        rule_for_version(bad)


@pytest.mark.parametrize("sync, group, expected", [(None, 5, None), ((100, 200), 99, -1), ((100, 200), 100, 200),
                                                   ((100, 200), 150, 250)])
def test_translate_pre_35(sync, group, expected):
    assert translate_pre_35(sync, group) == expected


def test_translate_replays_like_a_starting_task():
    syncs = _spaced(0, 1000)
    assert translate(syncs, 995, "3.6.0") == -1          # only the last startup sync is kept
    assert translate(syncs, 1005, "3.6.0") == 1001
    assert translate(syncs, 995, "3.7.1", initialization_must_read_to_end=False) == 991
    assert translate(syncs, 995, "3.4.0") == -1


# (name, version, records (upstream, downstream), max lag, immediate syncs)
SYNC_EMISSION = [
    ("first-then-every-100", "3.6.0", [(u, u) for u in range(0, 250)], 100, [(0, 0), (101, 101), (202, 202)]),
    ("pre-3.4.1-lag-from-dead-reckoning", "3.4.0", [(u, u) for u in range(0, 250)], 100, [(0, 0)]),
    ("upstream-gap", "3.6.0", [(0, 0), (1, 1), (5, 2), (6, 3)], 100, [(0, 0), (5, 2)]),
    ("downstream-truncated", "3.6.0", [(0, 10), (1, 11), (2, 3)], 100, [(0, 10), (2, 3)]),
    ("pre-3.4.1-downstream-drift", "3.4.0", [(0, 0), (1, 1), (2, 102)], 100, [(0, 0), (2, 102)]),
    ("lag-zero-syncs-everything", "3.7.1", [(0, 0), (1, 1), (2, 2)], 0, [(0, 0), (1, 1), (2, 2)]),
]


@pytest.mark.parametrize("name, version, records, lag, expected", SYNC_EMISSION, ids=[s[0] for s in SYNC_EMISSION])
def test_sync_emission(name, version, records, lag, expected):
    assert sync_emitted(records, lag, version) == expected


# (name, version, previous, upstream, downstream, emitted)
CHECKPOINT_EMISSION = [
    ("untranslatable", "3.6.0", None, 10, None, False),
    ("behind-replication", "3.6.0", None, 10, -1, False),
    ("first", "3.6.0", None, 10, 5, True),
    ("advanced", "3.6.0", Checkpoint(10, 5), 12, 6, True),
    ("repeated", "3.6.0", Checkpoint(10, 5), 12, 5, False),
    ("would-rewind-downstream", "3.6.0", Checkpoint(10, 5), 12, 4, False),
    ("upstream-rewind", "3.6.0", Checkpoint(10, 5), 8, 3, True),
    ("pre-3.4.1-every-poll", "3.4.0", Checkpoint(10, 5), 12, 4, True),
    ("pre-3.4.1-untranslatable", "3.4.0", None, 10, -1, False),
]


@pytest.mark.parametrize("name, version, previous, upstream, downstream, emitted", CHECKPOINT_EMISSION,
                         ids=[c[0] for c in CHECKPOINT_EMISSION])
def test_checkpoint_emission(name, version, previous, upstream, downstream, emitted):
    assert checkpoint_emitted(previous, upstream, downstream, version) is emitted


def test_remote_consumer_offsets_keep_the_last():
    records = [("g", "A.t", 0, 5, 50), ("h", "A.t", 0, 9, 90), ("g", "A.t", 0, 7, 70), ("g", "A.t", 1, 1, 10)]
    assert last_checkpoints(records, "g") == {("A.t", 0): Checkpoint(7, 70), ("A.t", 1): Checkpoint(1, 10)}


SYNCS = ((100, 1000), (200, 1050), (300, 1150))
# (name, syncs, group offset, bounds)
BOUNDS = [
    ("exact-sync", SYNCS, 200, Bounds(1050, 1050)),
    ("between-syncs", SYNCS, 250, Bounds(1051, 1100)),
    ("gap-between-syncs", SYNCS, 150, Bounds(1001, 1050)),
    ("past-the-last", SYNCS, 400, Bounds(1151, 1250)),
    ("before-the-first", SYNCS, 50, Bounds(None, 1000)),
    ("no-sync", (), 50, Bounds(None, None)),
    ("after-rewind", SYNCS + ((10, 2000),), 50, Bounds(2001, 2040)),
]


@pytest.mark.parametrize("name, syncs, group, expected", BOUNDS, ids=[b[0] for b in BOUNDS])
def test_downstream_bounds(name, syncs, group, expected):
    assert downstream_bounds(syncs, group) == expected


@pytest.mark.parametrize("bounds, target, expected", [
    (Bounds(1051, 1100), 1051, (0, 49, 0, 0)),       # 3.4.1+ checkpoint: at most the syncs' spacing redelivered
    (Bounds(1051, 1100), 1100, (0, 0, 0, 49)),       # pre-3.4.1 dead reckoning: may skip
    (Bounds(1001, 1050), 1100, (0, 0, 50, 99)),      # beyond the next sync: certainly skips
    (Bounds(1051, 1100), 1000, (51, 100, 0, 0)),     # the target group lags
    (Bounds(1050, 1050), 1050, (0, 0, 0, 0)),
    (Bounds(None, 1000), 900, (None, 100, 0, None)),
    (Bounds(1051, 1100), None, (None, None, None, None)),
])
def test_failover(bounds, target, expected):
    f = failover(250, bounds, target)
    assert (f.redelivered_min, f.redelivered_max, f.skipped_min, f.skipped_max) == expected


@pytest.mark.parametrize("upstream, downstream, rule, justified", [
    (250, 1051, "3.4.1+", True), (200, 1050, "3.4.1+", True), (250, 1100, "3.4.1+", False),
    (250, 1100, "pre-3.4.1", True), (150, 1050, "pre-3.4.1", True), (250, 1051, "pre-3.4.1", False),
    (50, 1000, "3.4.1+", False)])
def test_checkpoint_justified(upstream, downstream, rule, justified):
    assert checkpoint_justified(upstream, downstream, SYNCS, rule) is justified


def gp(version="3.6.0", checkpoint=None, upstream=250, source_at=10, target=None, target_at=20, syncs=SYNCS):
    return GroupPartition("west", "east", "orders-app", "orders", 0, version, syncs, checkpoint, upstream, source_at,
                          target, target_at)


GAP = ((100, 1000), (200, 1020))     # upstream 101..199 mostly not replicated (transaction markers, filtered)


# (name, group partition, settings, [(check, offset_from, offset_to, entry_count)])
GROUPS = [
    ("in-step-3.5", gp(checkpoint=Checkpoint(250, 1051), target=1051), Mm2Settings(), []),
    ("in-step-pre-3.4.1", gp("3.4.0", Checkpoint(250, 1100), target=1100), Mm2Settings(), []),
    ("checkpoint-mismatch", gp(checkpoint=Checkpoint(250, 1120), target=1051), Mm2Settings(),
     [("kafka.mm2_checkpoint_mismatch", 1120, 1120, 20)]),
    # retention deleted the first syncs: the checkpoint may come from one of them
    ("checkpoint-from-deleted-syncs", gp(checkpoint=Checkpoint(250, 1120), target=1051)._replace(
        syncs_complete=False), Mm2Settings(), [(COVERAGE, 1120, 1120, 20)]),
    # KAFKA-12468: dead reckoning across the gap puts the target group 30 records past anything replicated
    ("kafka-12468-skip", gp("3.4.0", Checkpoint(150, 1050), upstream=150, target=1050, target_at=5, syncs=GAP),
     Mm2Settings(), [("kafka.mm2_target_group_ahead", 1020, 1049, 30)]),
    ("skip-read-after-source", gp("3.4.0", Checkpoint(150, 1050), upstream=150, target=1050, target_at=20, syncs=GAP),
     Mm2Settings(), [(COVERAGE, 1020, 1049, 30)]),
    ("same-gap-3.5", gp("3.6.0", Checkpoint(150, 1001), upstream=150, target=1001, target_at=5, syncs=GAP),
     Mm2Settings(), []),
    ("lagging-target", gp(target=1000), Mm2Settings(redelivery_tolerance=10),
     [("kafka.mm2_failover_redelivery", 1000, 1050, 51)]),
    ("lagging-within-tolerance", gp(target=1000), Mm2Settings(redelivery_tolerance=51), []),
    ("group-tolerance", gp(target=1000), Mm2Settings(0, (("orders-app", 60),)), []),
    ("lag-read-before-source", gp(target=1000, target_at=5), Mm2Settings(), [(COVERAGE, 1000, 1050, 51)]),
    ("no-target-offset", gp(), Mm2Settings(), []),
]


@pytest.mark.parametrize("name, item, settings, expected", GROUPS, ids=[g[0] for g in GROUPS])
def test_group_verdicts(name, item, settings, expected):
    rows, metrics = evaluate_group(item, settings)
    assert sorted((r["check"], r["offset_from"], r["offset_to"], r["entry_count"]) for r in rows) == sorted(expected)
    for r in rows:
        assert r["severity"] == (None if r["check"] == COVERAGE else CHECKS[r["check"]].severity)
        assert (r["cluster"], r["source"], r["group"], r["topic"], r["partition"]) == \
            ("west", "east", "orders-app", "orders", 0)
    assert metrics["bounds"] == list(downstream_bounds(item.syncs, item.upstream_committed))
