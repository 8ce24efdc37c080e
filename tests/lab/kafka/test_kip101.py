"""The seed's two scenarios (KIP-101) happen for real under the high-watermark policy and not under the
leader-epoch policy; the ground truth names exactly the offsets, which the raw evidence confirms."""
from __future__ import annotations

import pytest

from lab.kafka import runner
from lab.kafka.config import parse_kafka_lab
from tests.lab.kafka.evidence import batches, differing_offsets, epochs, high_watermark
from tests.lab.kafka.helpers import AS_OF, cluster, collect, findings

SEEDS = (7, 11, 23)


def lab(seed: int) -> dict:
    return {"seed": seed, "clusters": [cluster("s1-hw", "high-watermark", "kip101-scenario-1"),
                                       cluster("s1-epoch", "leader-epoch", "kip101-scenario-1"),
                                       cluster("s2-hw", "high-watermark", "kip101-scenario-2"),
                                       cluster("s2-epoch", "leader-epoch", "kip101-scenario-2")]}


def _fault(truth: dict, kind: str) -> dict:
    return next(f for f in truth["faults"] if f["kind"] == kind)


@pytest.mark.parametrize("seed", SEEDS)
def test_scenario_1_loses_the_committed_message_under_the_high_watermark_policy(seed):
    raw, _, truth = collect(lab(seed), "s1-hw")
    restart, crash = _fault(truth, "follower-restart-then-leader-crash"), _fault(truth, "leader-crash")
    a, b = restart["follower"], restart["leader"]
    # A truncated to its checkpointed high watermark on restart, below what B had committed
    cut = [t for t in truth["truncations"] if t["broker"] == a and t["rule"] == "high-watermark"]
    assert cut[0]["to"] == restart["follower_hw_checkpoint"] < crash["high_watermark_checkpoint"]
    # A was elected (clean: it never left the ISR) and B, down, keeps the committed offsets A lost
    assert any(e["leader"] == a and not e["unclean"] for e in truth["elections"])
    by_broker = {f["broker"]: f for f in findings(truth, "kafka.divergent_logs")}
    fb = by_broker[b]
    assert fb["offset_to"] == crash["high_watermark_checkpoint"] - 1
    differ = {o for o in differing_offsets(batches(raw, a, "kip101-s1"), batches(raw, b, "kip101-s1"))
              if o < high_watermark(raw, b, "kip101-s1")}
    assert fb["entry_count"] == len(differ) and fb["offset_from"] == min(differ) >= restart["follower_hw_checkpoint"]
    assert not findings(truth, "kafka.committed_data_lost")


@pytest.mark.parametrize("seed", SEEDS)
def test_scenario_1_prevented_by_leader_epochs(seed):
    raw, _, truth = collect(lab(seed), "s1-epoch")
    restart = _fault(truth, "follower-restart-then-leader-crash")
    assert not [t for t in truth["truncations"] if t["broker"] == restart["follower"]]   # A kept everything
    assert findings(truth) == []
    # the new leader's epoch starts at its log end when elected, at or above what B had committed
    a, b = restart["follower"], restart["leader"]
    start = epochs(raw, a, "kip101-s1")[-1][1]
    assert start >= high_watermark(raw, b, "kip101-s1")


@pytest.mark.parametrize("seed", SEEDS)
def test_scenario_2_diverges_under_the_high_watermark_policy(seed):
    raw, _, truth = collect(lab(seed), "s2-hw")
    _assert_scenario_2_diverged(raw, truth)


def test_scenario_2_in_a_longer_world():
    # ten minutes of traffic: the backlog a producer queues while the partition is offline is acknowledged batch
    # by batch as it is sent (regression: this recursed once per batch and overflowed Python's stack)
    raw, _, truth = collect({**lab(7), "duration_s": 600}, "s2-hw")
    _assert_scenario_2_diverged(raw, truth)


def _assert_scenario_2_diverged(raw, truth) -> None:
    loss = _fault(truth, "power-loss")
    a, b = loss["brokers"]
    durable_a, durable_b = loss["durable"][str(a)], loss["durable"][str(b)]
    assert durable_a >= durable_b + 5
    (f,) = findings(truth)
    assert f["check"] == "kafka.divergent_logs" and f["broker"] == a
    assert f["offset_from"] == durable_b                       # B leads from what survived on its disk
    # up to what A kept (its high watermark after the restart), less a tail B's first batches overwrote with the
    # same retried content at the same offsets
    assert durable_b < f["offset_to"] + 1 <= min(durable_a, loss["high_watermark_checkpoint"][str(a)])
    differ = differing_offsets(batches(raw, a, "kip101-s2"), batches(raw, b, "kip101-s2"))
    assert sorted(differ) == list(range(f["offset_from"], f["offset_to"] + 1)) and f["entry_count"] == len(differ)
    assert f["offset_to"] < min(high_watermark(raw, a, "kip101-s2"), high_watermark(raw, b, "kip101-s2"))
    assert epochs(raw, b, "kip101-s2")[-1][1] == durable_b


@pytest.mark.parametrize("seed", SEEDS)
def test_scenario_2_prevented_by_leader_epochs(seed):
    raw, _, truth = collect(lab(seed), "s2-epoch")
    loss = _fault(truth, "power-loss")
    a, b = loss["brokers"]
    durable_b = loss["durable"][str(b)]
    (cut,) = [t for t in truth["truncations"] if t["broker"] == a]
    assert cut["rule"] == "leader-epoch" and cut["to"] == durable_b      # OffsetsForLeaderEpoch -> B's epoch start
    assert findings(truth) == []
    assert differing_offsets(batches(raw, a, "kip101-s2"), batches(raw, b, "kip101-s2")) == set()
    # what B lost is gone from both: acknowledged, lost, and no evidence is left of it
    assert truth["acknowledged_lost"].get("kip101-s2", 0) > 0


def test_unclean_election_loses_committed_offsets():
    raw, _, truth = collect({"seed": 7, "clusters": [cluster("u", "leader-epoch", "unclean-election")]}, "u")
    (election,) = [e for e in truth["elections"] if e["unclean"]]
    (f,) = findings(truth)
    assert f["check"] == "kafka.committed_data_lost" and f["broker"] == election["leader"]
    old = election["previous"]
    new_start = epochs(raw, election["leader"], "unclean")[-1][1]
    assert f["offset_from"] == new_start and f["offset_to"] == high_watermark(raw, old, "unclean") - 1
    assert f["entry_count"] == f["offset_to"] - f["offset_from"] + 1


def test_follower_truncation_rule_in_the_simulation():
    world = runner.lab_world(parse_kafka_lab(lab(7)), AS_OF, "s2-epoch")
    c = world.clusters["s2-epoch"]
    assert c.policy == "leader-epoch" and not c.policy_truncates_to_hw()
    assert world.clusters["s2-epoch"].replication.truncations[0]["rule"] == "leader-epoch"
