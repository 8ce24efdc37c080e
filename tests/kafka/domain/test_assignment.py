"""The assignment rule as one table of cases: which assigned replicas with no folder are missing, which are not
judged, and why (audit/systems/kafka/domain/assignment.py)."""
from __future__ import annotations

import pytest

from audit.systems.kafka.domain.assignment import (MISSING, STRAY, Assigned, BrokerRead, is_stray, missing_replicas,
                                                   stray_replica, unread_metrics)
from audit.systems.kafka.domain.checks import COVERAGE
from audit.systems.kafka.domain.subjects import special_partition

T = 1_800_000_000_000
SETTLE = 60_000


def _p(since=T, isr=(1, 2, 3)) -> Assigned:
    return Assigned("c", "orders", 4, (1, 2, 3), isr, 1, 7, since)


READ_LATER = BrokerRead(T + 10 * 60_000)


CASES = [
    # every assigned replica has a folder: nothing
    ({1, 2, 3}, {1: READ_LATER, 2: READ_LATER, 3: READ_LATER}, T, []),
    # broker 2 read ten minutes after the assignment, no folder: missing
    ({1, 3}, {1: READ_LATER, 2: READ_LATER, 3: READ_LATER}, T, [(MISSING, 2)]),
    # two of them missing, each its own finding
    ({1}, {1: READ_LATER, 2: READ_LATER, 3: READ_LATER}, T, [(MISSING, 2), (MISSING, 3)]),
    # the broker was not read: not judged
    ({1, 3}, {1: READ_LATER, 3: READ_LATER}, T, [(COVERAGE, 2)]),
    # one of its declared log dirs was not read: the folder may be there
    ({1, 3}, {1: READ_LATER, 2: BrokerRead(T + 600_000, complete=False), 3: READ_LATER}, T, [(COVERAGE, 2)]),
    # listed 30 s after the assignment (a reassignment or topic creation under way): not judged
    ({1, 3}, {1: READ_LATER, 2: BrokerRead(T + 30_000), 3: READ_LATER}, T, [(COVERAGE, 2)]),
    # listed exactly the settle time after: judged
    ({1, 3}, {1: READ_LATER, 2: BrokerRead(T + SETTLE), 3: READ_LATER}, T, [(MISSING, 2)]),
    # listed before the assignment was made
    ({1, 3}, {1: READ_LATER, 2: BrokerRead(T - 5_000), 3: READ_LATER}, T, [(COVERAGE, 2)]),
    # when the assignment was made is not known, or when the broker was listed
    ({1, 3}, {1: READ_LATER, 2: READ_LATER, 3: READ_LATER}, None, [(COVERAGE, 2)]),
    ({1, 3}, {1: READ_LATER, 2: BrokerRead(None), 3: READ_LATER}, T, [(COVERAGE, 2)]),
    # a -delete / -future / -stray folder of the partition on the broker: a deletion, move or re-creation
    ({1, 3}, {1: READ_LATER, 2: BrokerRead(T + 600_000, in_motion=frozenset({("orders", 4)})), 3: READ_LATER}, T,
     [(COVERAGE, 2)]),
    # ... of another partition changes nothing
    ({1, 3}, {1: READ_LATER, 2: BrokerRead(T + 600_000, in_motion=frozenset({("orders", 5)})), 3: READ_LATER}, T,
     [(MISSING, 2)]),
]


@pytest.mark.parametrize("found, reads, since, expected", CASES)
def test_missing_replicas(found, reads, since, expected):
    items = missing_replicas(_p(since), found, reads, SETTLE)
    assert [(i["check"], i["broker"]) for i in items] == expected
    for i in items:
        assert (i["cluster"], i["topic"], i["partition"]) == ("c", "orders", 4)
        if i["check"] == MISSING:
            assert i["severity"] == "major" and i["detail"]["assigned_for_ms"] >= SETTLE
            assert i["detail"]["in_isr"] is True and "though the ISR names it" in i["message"]


def test_a_replica_out_of_the_isr_is_missing_all_the_same_and_says_so():
    (item,) = missing_replicas(_p(isr=(1, 3)), {1, 3}, {b: READ_LATER for b in (1, 2, 3)}, SETTLE)
    assert item["check"] == MISSING and item["detail"]["in_isr"] is False and "ISR" not in item["message"]


def test_a_partition_no_log_dir_showed_still_counts():
    m = unread_metrics(_p())
    assert (m["replica_count"], m["collected_replicas"], m["reference_rule"], m["leader"]) == (
        3, 0, "no-replica-collected", 1)


@pytest.mark.parametrize("name, expected", [
    ("orders-4.0f1e2d3c4b5a69788796a5b4c3d2e1f0-delete", ("orders", 4)),
    ("my.topic-12.abcdef-future", ("my.topic", 12)),
    ("orders-4.xyz-stray", ("orders", 4)),
    ("orders-4", None), ("orders-4.xyz-moved", None), ("__cluster_metadata-0", None),
])
def test_special_partition_dirs(name, expected):
    assert special_partition(name) == expected


B64 = "AQIDBAUGBwgJCgsMDQ4PEA"                     # bytes 1..16, as partition.metadata and KRaft write it
STRAY_CASES = [
    (B64, "01020304-0506-0708-090a-0b0c0d0e0f10", False),   # the same id, as an admin client prints it
    (B64, B64, False),
    ("EBESExQVFhcYGRobHB0eHw", B64, True),                 # another topic id: a deleted topic's copy
    (None, B64, False), (B64, None, False),                 # unknown on either side: nothing to say
    ("not a uuid", B64, False),
]


@pytest.mark.parametrize("replica, metadata, stray", STRAY_CASES)
def test_a_replica_of_another_topic_id_is_stray(replica, metadata, stray):
    assert is_stray(replica, metadata) is stray


def test_the_stray_finding_names_both_ids():
    f = stray_replica("c", "orders", 0, 3, "EBESExQVFhcYGRobHB0eHw", B64, "dir0")
    assert (f["check"], f["severity"], f["broker"]) == (STRAY, "warning", 3)
    assert f["detail"] == {"replica_topic_id": "EBESExQVFhcYGRobHB0eHw", "metadata_topic_id": B64, "dir": "dir0"}
