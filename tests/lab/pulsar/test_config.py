"""The Pulsar lab's `lab:` mapping: defaults, knobs, and errors that name the key."""
from __future__ import annotations

import pytest

from lab.pulsar.config import SCENARIO_NAMES, PulsarLabConfigError, parse_pulsar_lab
from lab.pulsar.truth import world_truth
from lab.pulsar.world import build_world

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
    small = build_world({"seed": 5, "messages": 20, "scenarios": ["healthy"], "ledger_max_entries": 10,
                         "traffic": "quiet"}, AS_OF)
    east = small.topic("east", "persistent://lab/geo/orders-healthy")
    assert sum(1 for e in east.ml.entries if not e.is_marker) == 30  # 20 local + 10 replicated from west
    assert len(east.ml.ledgers) >= 5  # rolled over every 5 to 10 entries
    assert all(t["redelivered"] == t["skipped"] == 0 for t in world_truth(small)["failover"])


@pytest.mark.parametrize("lab, key", [
    ({"traffic": "bursty"}, "traffic"), ({"collection_gap_s": 601}, "collection_gap_s"),
    ({"collection_gap_s": 120, "duration_s": 240}, "duration_s"),   # 2 gaps + a minute of traffic do not fit
    ({"message_ttl_s": {"lab": 20}}, "message_ttl_s"), ({"message_ttl_s": {"lab/geo": -1}}, "message_ttl_s"),
    ({"redelivery_tolerance": {"*": [1]}}, "redelivery_tolerance"),
])
def test_bad_profile_values_name_the_key(lab, key):
    with pytest.raises(PulsarLabConfigError) as err:
        parse_pulsar_lab(lab)
    assert err.value.key == key


def test_profile_defaults_and_the_estates_values():
    from pydantic import TypeAdapter

    from audit.systems.pulsar.config import PulsarThresholds
    from lab.pulsar.config import estate_inputs

    cfg = parse_pulsar_lab(None)
    assert (cfg.traffic, cfg.collection_gap_s, cfg.duration_s) == ("continuous", 60, 240)
    assert cfg.ttl_ms("lab/geo-ttl") == 0 and cfg.tolerance("lab/geo") == (0, 0)
    th = TypeAdapter(PulsarThresholds).validate_python({
        "pulsar_message_ttl": {"default": "1m", "namespaces": {"lab/geo-ttl": "20s"}},
        "pulsar_redelivery_tolerance": {"namespaces": {"lab/geo": {"messages": 5, "age": "2m"}}}})
    cfg = parse_pulsar_lab(estate_inputs(th))
    assert (cfg.ttl_ms("lab/geo-ttl"), cfg.ttl_ms("lab/other")) == (20_000, 60_000)
    assert (cfg.tolerance("lab/geo"), cfg.tolerance("lab/other")) == ((5, 120), (0, 0))
    assert estate_inputs(PulsarThresholds())["message_ttl_s"] == {}   # the broker's default says nothing


def test_an_estate_may_hold_several_lab_worlds_with_their_own_cluster_names():
    from audit.config.errors import EstateError
    from audit.config.estate import parse_estate

    head = "estate: t\nstore: {uri: 'file:///tmp/x'}\nsystems:\n  pulsar:\n"
    one = "    - {name: a1, source: lab, lab: {seed: 1, clusters: [a1, a2]}}\n" \
          "    - {name: a2, source: lab, lab: {seed: 1, clusters: [a1, a2]}}\n"
    ok = parse_estate(head + one + "    - {name: b1, source: lab, lab: {seed: 2, clusters: [b1, b2]}}\n")
    assert [c.name for c in ok.clusters("pulsar")] == ["a1", "a2", "b1"]
    for other, why in (("{seed: 2, clusters: [a2, b2]}", "distinct cluster names"), ("{seed: 2}", "lab.clusters")):
        with pytest.raises(EstateError, match=why):
            parse_estate(head + one + f"    - {{name: b1, source: lab, lab: {other}}}\n")
