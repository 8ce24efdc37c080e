"""The `lab:` mapping: defaults, and errors that name the key, what was expected and what was given."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from audit.systems.kafka.config import KafkaThresholds
from lab.kafka.config import (DEFAULT_CLUSTERS, HIGH_WATERMARK, KafkaLabConfigError, LEADER_EPOCH,
                                    parse_kafka_lab)
from lab.kafka.runner import UnknownLabCluster, collect, split_inputs


def test_defaults():
    cfg = parse_kafka_lab({"seed": 7})
    assert cfg.cluster_names == tuple(c["name"] for c in DEFAULT_CLUSTERS)
    assert cfg.cluster("legacy-s1").policy == HIGH_WATERMARK and cfg.cluster("legacy-s1").mode == "zookeeper"
    assert cfg.cluster("primary").policy == LEADER_EPOCH and cfg.cluster("primary").mode == "kraft"
    assert cfg.cluster("primary").dirs_of(2) == 2 and cfg.cluster("primary").dirs_of(1) == 1
    assert [(m.source, m.target, m.mm2_version) for m in cfg.mirrors] == [
        ("primary", "dr", "3.6.0"), ("primary", "dr-legacy", "3.4.0")]
    assert cfg.component("dr") == ("primary", "dr", "dr-legacy")
    assert cfg.component("unclean") == ("unclean",)


def test_own_clusters_have_no_default_mirrors():
    cfg = parse_kafka_lab({"clusters": [{"name": "a", "scenarios": ["healthy-under-load"]}]})
    assert cfg.mirrors == () and cfg.cluster("a").brokers == 3


@pytest.mark.parametrize("lab, key, fragment", [
    ({"sead": 1}, "sead", "one of seed"),
    ({"seed": -1}, "seed", "an integer from 0"),
    ({"seed": True}, "seed", "an integer"),
    ({"fetch_min_ms": 500, "fetch_max_ms": 100}, "fetch_min_ms", "at most fetch_max_ms"),
    ({"clusters": []}, "clusters", "non-empty list"),
    ({"clusters": [{"name": "A"}]}, "clusters[0].name", "cluster name"),
    ({"clusters": [{"name": "a", "policy": "hw"}]}, "clusters[0].policy", "'high-watermark' or 'leader-epoch'"),
    ({"clusters": [{"name": "a", "policy": "high-watermark", "mode": "kraft"}]}, "clusters[0].mode", "zookeeper"),
    ({"clusters": [{"name": "a", "scenarios": ["kip101"]}]}, "clusters[0].scenarios", "names among"),
    ({"clusters": [{"name": "a", "brokers": 2}]}, "clusters[0].brokers", "from 3 to 9"),
    ({"clusters": [{"name": "a", "log_dirs": {4: 2}}]}, "clusters[0].log_dirs", "broker (1..3)"),
    ({"clusters": [{"name": "a", "extra": 1}]}, "clusters[0].extra", "one of name"),
    ({"clusters": [{"name": "a"}, {"name": "a"}]}, "clusters", "distinct cluster names"),
    ({"clusters": [{"name": "a"}], "mirrors": [{"source": "a", "target": "b"}]}, "mirrors[0].target", "a lab cluster"),
    ({"clusters": [{"name": "a"}, {"name": "b"}], "mirrors": [{"source": "a", "target": "b", "mm2_version": "x"}]},
     "mirrors[0].mm2_version", "a release like 3.6.0"),
    ({"duration_s": 130, "collection_gap_s": 60}, "duration_s", "at least"),
])
def test_errors_name_the_key(lab, key, fragment):
    with pytest.raises(KafkaLabConfigError) as err:
        parse_kafka_lab(lab)
    assert err.value.key == key
    assert fragment in str(err.value) and str(err.value).startswith(f"kafka lab: {key}: expected")


def test_unknown_cluster_names_the_known_ones():
    with pytest.raises(UnknownLabCluster) as err:
        collect(SimpleNamespace(name="nope", lab={"clusters": [{"name": "a"}]}, mirrors=()), {}, None, 0)
    assert "nope" in str(err.value) and "known: a" in str(err.value)


def test_thresholds_feed_the_truth_not_the_simulation():
    lab, truth = split_inputs({"seed": 3, "mm2_redelivery_tolerance": 5},
                              KafkaThresholds(kafka_follower_lag_max=7, kafka_mm2_redelivery_tolerance=2))
    assert lab == {"seed": 3}
    assert truth == {"follower_lag_max": 7, "mm2_redelivery_tolerance": 5}
