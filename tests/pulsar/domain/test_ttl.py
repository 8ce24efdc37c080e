"""The message TTL a cluster's replicator applies: what its broker reported wins over the estate's."""
from __future__ import annotations

import json

import pytest

from audit.systems.pulsar.domain.checks import Thresholds
from audit.systems.pulsar.domain.records import Codes
from audit.systems.pulsar.domain.topic import Settings, audit_topic
from audit.systems.pulsar.domain.ttl import BROKER, ESTATE, NAMESPACE, applied_ttl_s
from tests.pulsar.domain.test_topic import T, T0, msg, repl, side

CASES = [
    # (id, GET ...?applied=true, namespace's own (no topic-level GET), estate's, expected)
    ("broker-applied", 60, None, 0, (60, BROKER)),
    ("broker-says-none-over-the-estate", 0, None, 3600, (0, BROKER)),
    ("broker-wins-over-a-namespace-file", 60, 30, 0, (60, BROKER)),
    ("old-broker-namespace-ttl", None, 30, 3600, (30, NAMESPACE)),
    ("namespace-unset-leaves-the-broker-default-unknown", None, None, 3600, (3600, ESTATE)),
    ("namespace-0-is-unset-on-old-brokers", None, 0, 3600, (3600, ESTATE)),
    ("not-collected", None, None, 0, (0, ESTATE)),
]


@pytest.mark.parametrize("applied,namespace,estate,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_applied_ttl(applied, namespace, estate, expected):
    assert applied_ttl_s(applied, namespace, estate) == expected


@pytest.mark.parametrize("applied,namespace,missing", [
    (60, None, 0),      # e2 published 120 s before the read: may have expired unsent
    (None, 60, 0),      # the same TTL, from a broker without the topic-level GET
    (0, None, 1),       # the broker says no TTL: e2 was sent and is missing
    (None, None, 1),    # nothing collected: the estate's (none)
    (3600, None, 1),    # younger than the TTL: cannot have expired
])
def test_collected_ttl_decides_what_is_missing_when_the_estate_sets_none(applied, namespace, missing):
    codes = Codes()
    east = [msg(f"5:{i}", i, t=i) for i in range(5)]            # published T0..T0+4 ms; as_of is T0 + 120 s
    west = [msg(f"9:{k}", i, "east", f"5:{i}", "p-own") for k, i in enumerate((0, 1, 3))]   # no copy of e2
    sides = {"east": side("east", east, codes, repl("west", "5:3"), ["west"], "5:-1"),
             "west": side("west", west, codes, repl("east", "9:-1"), ["east"], "9:-1")}
    sides["east"].message_ttl_s, sides["east"].namespace_message_ttl_s = applied, namespace
    sides["west"].message_ttl_s = 0   # west's own TTL says nothing of what east's replicator dropped
    settings = Settings(run_id="r1", as_of_ms=T0 + 120_000, thresholds=Thresholds(1000, 300))   # estate: no TTL
    found = [f for f in audit_topic(T, sides, settings).findings if f["check"] == "pulsar.message_missing_on_target"]
    assert [f["entry_count"] for f in found] == ([missing] if missing else [])
    if found:   # the finding says which TTL it judged by
        ev = json.loads(found[0]["evidence"])
        assert (ev["message_ttl_s"], ev["message_ttl_from"]) == applied_ttl_s(applied, namespace, 0)
