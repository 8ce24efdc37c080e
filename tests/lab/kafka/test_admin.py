"""The admin documents come from the real admin collector against the lab's loopback server: they say what the
simulated controller and brokers said at the collection's start, with the brokers' advertised addresses."""
from __future__ import annotations

import json

from lab.kafka import runner
from lab.kafka.config import parse_kafka_lab
from tests.lab.kafka.helpers import AS_OF, collect


def test_admin_documents_match_the_simulation():
    raw, report, truth = collect({"seed": 7}, "legacy-s2")
    assert report.gaps == []
    world = runner.lab_world(parse_kafka_lab({"seed": 7}), AS_OF, "legacy-s2")
    view = world.collections["legacy-s2"].partitions[("kip101-s2", 0)]
    md = json.loads(raw["admin/metadata.json"])
    (part,) = md["partitions"]
    assert (part["leader"], part["leader_epoch"], part["isr"]) == (view.leader, view.leader_epoch, list(view.isr))
    assert [b["host"] for b in md["brokers"]] == ["b1.legacy-s2.lab", "b2.legacy-s2.lab", "b3.legacy-s2.lab"]
    assert {b["port"] for b in md["brokers"]} == {9092}
    offsets = json.loads(raw["admin/list-offsets.json"])["partitions"]
    assert [(p["topic"], p["latest"]) for p in offsets] == [("kip101-s2", view.leader_hw)]
    answers = json.loads(raw["admin/offsets-for-leader-epoch.json"])["answers"]
    leader = [a for a in answers if a["broker"] == view.leader and a["error_code"] == 0]
    assert leader and leader[0]["requested_epoch"] == view.leader_epoch
    assert md["read_started_at_ms"] == truth["collected_at_ms"]


def test_down_brokers_are_not_served():
    raw, _, truth = collect({"seed": 7}, "unclean")
    md = json.loads(raw["admin/metadata.json"])
    down = {e["broker"] for e in truth["faults"] if e["kind"] in ("crash", "leader-crash")}
    assert down and not down & {b["id"] for b in md["brokers"]}
    assert set(md["partitions"][0]["offline"]) == down
