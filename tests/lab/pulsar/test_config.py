"""The Pulsar lab's `lab:` mapping: defaults, knobs, and errors that name the key."""
from __future__ import annotations

import pytest

from audit.lab.pulsar.config import SCENARIO_NAMES, PulsarLabConfigError, parse_pulsar_lab
from audit.lab.pulsar.truth import world_truth
from audit.lab.pulsar.world import build_world

AS_OF = 1_760_000_000_000


def test_defaults():
    cfg = parse_pulsar_lab(None)
    assert cfg.clusters == ("east", "west", "south") and cfg.scenarios == SCENARIO_NAMES
    assert (cfg.snapshot_frequency_ms, cfg.snapshot_timeout_s, cfg.snapshot_cache_size) == (1000, 30, 10)
    assert (cfg.replicator_backlog_max, cfg.snapshot_max_age_s) == (10_000, 300)


@pytest.mark.parametrize("lab, key", [
    ({"sed": 1}, "sed"), ({"seed": -1}, "seed"), ({"seed": True}, "seed"), ({"messages": 3}, "messages"),
    ({"clusters": ["east"]}, "clusters"), ({"clusters": ["a", "a"]}, "clusters"),
    ({"scenarios": ["healthy", "bogus"]}, "scenarios"), ({"tenant": "a/b"}, "tenant"),
    ({"duration_s": 30}, "duration_s"),
])
def test_bad_values_name_the_key(lab, key):
    with pytest.raises(PulsarLabConfigError) as err:
        parse_pulsar_lab(lab)
    assert err.value.key == key and key in str(err.value)


def test_two_clusters_leave_out_the_three_cluster_scenario_and_names_follow_the_config():
    world = build_world({"seed": 5, "clusters": ["eu", "us"], "messages": 30,
                         "scenarios": ["healthy", "three-clusters", "one-way"]}, AS_OF)
    assert world.cluster_names == ("eu", "us")
    assert [m.name for m in world.scenarios] == ["healthy", "one-way"]
    assert set(world.topic("us", "persistent://lab/geo/orders-one-way").subscriptions) == {"orders-processor"}
    truth = world_truth(world)
    # One way, no snapshot completes and PIP-33 tells the target nothing: its redeliveries are a metric (the
    # failover row), no longer a pulsar.failover_redelivery finding.
    assert {f["check"] for f in truth["findings"]} == {"pulsar.replicated_subscription_one_way"}
    assert any(r["redelivered"] for r in truth["failover"])


def test_size_knobs_change_the_world():
    small = build_world({"seed": 5, "messages": 20, "scenarios": ["healthy"], "ledger_max_entries": 10}, AS_OF)
    east = small.topic("east", "persistent://lab/geo/orders-healthy")
    assert sum(1 for e in east.ml.entries if not e.is_marker) == 30  # 20 local + 10 replicated from west
    assert len(east.ml.ledgers) >= 5  # rolled over every 5 to 10 entries
    assert all(t["redelivered"] == t["skipped"] == 0 for t in world_truth(small)["failover"])
