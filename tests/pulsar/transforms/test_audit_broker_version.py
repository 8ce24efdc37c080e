"""The brokers' version reaches the Spark audit and picks the PIP-33 snapshot cache rule of the source cluster:
the same dump gives a different expected target markDeletePosition under the TreeMap cache (before
apache/pulsar#25044) and the distance-spread cache (since), and an unknown version is noted in the evidence."""
from __future__ import annotations

import json

import pytest

from audit.systems.pulsar.transforms.audit import INPUTS, audit
from tests.pulsar.transforms.test_audit import SUB, cursor, entry, scenario

TOPIC = "persistent://t/ns/versions"
# east's subscription read four snapshots (locals 5:2, 5:3, 5:12, 5:13) and its MDP is 5:5: no UPDATE yet.
SNAPS = [("5:20", "5:2", "9:2"), ("5:21", "5:3", "9:3"), ("5:22", "5:12", "9:12"), ("5:23", "5:13", "9:13")]


def _tables(spark):
    east = [entry("east", TOPIC, f"5:{i}", seq=i) for i in range(20)]
    east += [entry("east", TOPIC, at, marker=12, snapshot_id=f"s{n}", local=local, clusters={"west": y})
             for n, (at, local, y) in enumerate(SNAPS)]
    west = [entry("west", TOPIC, f"9:{i}", seq=i, origin="east", src=f"5:{i}") for i in range(20)]
    t = scenario(TOPIC, east, west, [cursor("east", TOPIC, SUB, "5:5", read="5:24")],
                 [cursor("west", TOPIC, SUB, "9:1")])
    return {name: spark.createDataFrame(rows, INPUTS[name]) for name, rows in t.items()}


@pytest.mark.parametrize("versions, expected, note", [
    ({"east": "3.0.4"}, "9:3", None),   # newest three survive: 5:3 is the newest <= the MDP
    ({"east": "4.2.0"}, "9:2", None),   # 5:3 was the middle closest to its neighbours: evicted, head 5:2 answers
    ({}, "9:2", "broker version unknown"),
])
def test_the_source_clusters_version_picks_the_cache(spark, versions, expected, note):
    frames = audit(_tables(spark), run_id="r1", broker_versions=versions, snapshot_cache_size=3)
    try:
        failover = {r["source_cluster"]: r.asDict() for r in frames[0].collect()}
        evidence = [json.loads(v["evidence"]) for v in frames[2].collect()]
    finally:
        frames.unpersist()
    assert failover["east"]["expected_target_mdp"] == expected
    pair = [e for e in evidence if e.get("target_cluster") == "west" and "snapshot_cache" in e]
    for e in pair:   # findings of the pair carry the rule used, and the note when it was assumed
        assert (e["snapshot_cache_note"] or "").startswith(note or "")
