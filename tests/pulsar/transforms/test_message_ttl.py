"""The message TTL a broker reported reaches the Spark audit and wins over the estate's: with no TTL in the estate,
a topic whose broker applies 60 s has no message older than that "missing on target"; one whose broker says 0
still has."""
from __future__ import annotations

import json

import pytest

from audit.systems.pulsar.domain.checks import DEFAULT, Thresholds
from audit.systems.pulsar.transforms.audit import INPUTS, audit
from audit.systems.pulsar.transforms.decode import decode_file
from tests.pulsar.transforms.test_audit import T0, SUB, cursor, entry, scenario

NS = "persistent://t/ttl/"
KEY = "raw/pulsar/east/topics/t/ttl/x/"


@pytest.mark.parametrize("name,body,rows", [
    ("message-ttl.json", b"60", [("_message_ttl", {"message_ttl_s": 60})]),
    ("message-ttl.json", b"0", [("_message_ttl", {"message_ttl_s": 0})]),
    ("namespace-message-ttl.json", b"30\n", [("_message_ttl", {"namespace_message_ttl_s": 30})]),
    ("namespace-message-ttl.json", b"", []),        # 204: the namespace sets none
    ("namespace-message-ttl.json", b"null", []),    # pulsar-admin's print of it
])
def test_decode(name, body, rows):
    got = [(table, {k: v for k, v in row.items() if k.endswith("ttl_s")})
           for table, row in decode_file(KEY + name, body)]
    assert got == rows


def test_a_bad_answer_is_quarantined_naming_file_and_field():
    [(table, row)] = decode_file(KEY + "message-ttl.json", b'{"reason": "Topic not found"}')
    assert table == "quarantine" and row["payload_kind"] == "message-ttl"
    assert row["reason"].startswith(KEY + "message-ttl.json: field body: expected messageTTLInSeconds")


# topic -> (east's message_ttl_s, east's namespace_message_ttl_s)
TOPICS = {"broker-60": (60, None), "broker-0": (0, None), "namespace-60": (None, 60), "not-collected": (None, None)}


def _tables(spark):
    """east publishes 5:0..5:9 (T0 .. T0+9 s); west holds every copy but the one of 5:3; east's replicator acked all."""
    rows = {name: [] for name in INPUTS}
    for local, (applied, namespace) in TOPICS.items():
        topic = NS + local
        east = [entry("east", topic, f"5:{i}", seq=i) for i in range(10)]
        west = [entry("west", topic, f"9:{k}", seq=i, origin="east", src=f"5:{i}")
                for k, i in enumerate(i for i in range(10) if i != 3)]
        t = scenario(topic, east, west, [cursor("east", topic, SUB, "5:9")], [cursor("west", topic, SUB, "9:8")])
        for r in t["pulsar_topics"]:
            if r["cluster"] == "east":
                r.update(message_ttl_s=applied, namespace_message_ttl_s=namespace)
        for name, part in t.items():
            rows[name] += part
    return {name: spark.createDataFrame(r, INPUTS[name]) for name, r in rows.items()}


def _missing(spark, estate_ttl_s: int) -> dict[str, tuple[int, int, str]]:
    frames = audit(_tables(spark), run_id="r1", as_of_ms=T0 + 120_000,
                   thresholds=Thresholds(10_000, 300, message_ttl_s=((DEFAULT, estate_ttl_s),)))
    try:
        rows = [v.asDict() for v in frames[2].collect() if v["check"] == "pulsar.message_missing_on_target"]
    finally:
        frames.unpersist()
    out = {}
    for v in rows:
        ev = json.loads(v["evidence"])
        out[ev["topic"].removeprefix(NS)] = (v["entry_count"], ev["message_ttl_s"], ev["message_ttl_from"])
    return out


def test_the_brokers_ttl_wins_over_an_estate_that_sets_none(spark):
    assert _missing(spark, 0) == {"broker-0": (1, 0, "broker"), "not-collected": (1, 0, "estate")}


def test_the_brokers_ttl_wins_over_an_estate_that_sets_one(spark):
    # the estate's 30 s still covers the topic nothing was collected for; a broker that says 0 is believed
    assert _missing(spark, 30) == {"broker-0": (1, 0, "broker")}
