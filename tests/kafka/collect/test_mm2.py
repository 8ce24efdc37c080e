"""The MirrorMaker 2 reader (confluent-kafka) against librdkafka's mock cluster: two clusters on loopback with
real offset-sync and checkpoint records (audit/systems/kafka/formats/mm2.py encoders) and committed group offsets."""
import base64
import json
from types import SimpleNamespace as NS

import pytest

from audit.collectors.base import CollectionReport
from audit.systems.kafka.collect import mm2 as mm2_module
from audit.systems.kafka.collect.mm2 import collect_mirror
from audit.systems.kafka.config import KafkaCluster
from audit.config.secrets import SecretResolver
from audit.systems.kafka.formats.mm2 import Checkpoint, OffsetSync, encode_checkpoint, encode_offset_sync
from tests.kafka.collect.mock_cluster import MockCluster

SYNCS = [OffsetSync("orders", 0, 0, 0), OffsetSync("orders", 0, 100, 98), OffsetSync("orders", 1, 7, 7)]
CHECKPOINTS = [Checkpoint("billing", "west.orders", 0, 150, 99, ""), Checkpoint("billing", "west.orders", 1, 7, 7, "m"),
               Checkpoint("other-app", "west.orders", 0, 100, 98, "")]


class Clock:
    def __init__(self):
        self.t = 0

    def __call__(self):
        self.t += 1
        return self.t


class Store(dict):
    def put(self, key, data):
        assert key not in self
        self[key] = bytes(data)

    def doc(self, name):
        return json.loads(self["mm2/west/" + name])


@pytest.fixture
def clusters():
    with MockCluster(brokers=2) as west, MockCluster(brokers=2) as east:
        west.create_topic("orders", 2)
        west.create_topic("mm2-offset-syncs.east.internal", 1)
        east.create_topic("west.orders", 2)
        east.create_topic("west.checkpoints.internal", 1)
        east.create_topic("mm2-offset-syncs.east.internal", 1)
        west.produce("orders", [(None, b"v")] * 160, partition=0)
        west.produce("orders", [(None, b"v")] * 9, partition=1)
        east.produce("west.orders", [(None, b"v")] * 120, partition=0)
        west.produce("mm2-offset-syncs.east.internal", [encode_offset_sync(s) for s in SYNCS])
        east.produce("west.checkpoints.internal", [encode_checkpoint(c) for c in CHECKPOINTS])
        west.commit("billing", {("orders", 0): 150, ("orders", 1): 7})
        east.commit("billing", {("west.orders", 0): 99})
        west.commit("reporting", {("orders", 0): 3})          # not selected by the patterns below
        yield west, east


def entries(west, east, **mirror):
    target = KafkaCluster(name="east", source="admin", bootstrap_servers=east.bootstraps,
                          mirrors=[{"source_cluster": "west", "groups": ["bill*", "other-*"], **mirror}],
                          timeouts={"request_s": 5})
    source = KafkaCluster(name="west", source="admin", bootstrap_servers=west.bootstraps, timeouts={"request_s": 5})
    return target, source


def collect(target, source, store=None, clock=None):
    store, report = store if store is not None else Store(), CollectionReport("kafka", "east")
    collect_mirror(target, target.mirrors[0], source, store, report, SecretResolver(environ={}),
                   now_ms=clock or Clock())
    return store, report


def raw(doc):
    return [(r["partition"], r["offset"], base64.b64decode(r["key_b64"]), base64.b64decode(r["value_b64"]))
            for r in doc["records"]]


def test_a_flow_is_read_completely(clusters):
    west, east = clusters
    store, report = collect(*entries(west, east))
    syncs, cps, groups = store.doc("offset-syncs.json"), store.doc("checkpoints.json"), store.doc("groups.json")
    assert syncs["topic"] == "mm2-offset-syncs.east.internal" and syncs["end_offsets"] == {"0": 3}
    assert raw(syncs) == [(0, i, *encode_offset_sync(s)) for i, s in enumerate(SYNCS)]
    assert cps["topic"] == "west.checkpoints.internal" and raw(cps) == [(0, i, *encode_checkpoint(c))
                                                                       for i, c in enumerate(CHECKPOINTS)]
    assert all(r["timestamp"] > 0 for r in syncs["records"])
    assert syncs["read_started_at_ms"] < syncs["read_finished_at_ms"] < cps["read_started_at_ms"]
    # the mock answers no ListGroups: the groups named in checkpoints are still read (the gap says so)
    assert groups["source"] == {"billing": [{"topic": "orders", "partition": 0, "offset": 150},
                                            {"topic": "orders", "partition": 1, "offset": 7}], "other-app": []}
    assert groups["target"] == {"billing": [{"topic": "west.orders", "partition": 0, "offset": 99}], "other-app": []}
    assert groups["target_after"] == groups["target"] and "target_after_end_offsets" not in groups
    assert groups["source_end_offsets"] == [{"topic": "orders", "partition": 0, "log_start": 0, "end": 160},
                                            {"topic": "orders", "partition": 1, "log_start": 0, "end": 9}]
    assert groups["target_end_offsets"] == [{"topic": "west.orders", "partition": 0, "log_start": 0, "end": 120},
                                            {"topic": "west.orders", "partition": 1, "log_start": 0, "end": 0}]
    assert {g.what for g in report.gaps} == {"consumer group list (ListGroups)"}
    assert report.counts["mm2_records_read"] == 6 and report.counts["keys_stored"] == 3


def test_records_appended_after_the_read_started_are_left_for_the_next_run(clusters, monkeypatch):
    west, east = clusters

    class Busy(mm2_module.Consumer):       # MirrorMaker keeps writing right after the end offsets are taken
        def get_watermark_offsets(self, tp, *args, **kw):
            answer = super().get_watermark_offsets(tp, *args, **kw)
            west.produce(tp.topic, [encode_offset_sync(OffsetSync("orders", 0, 200, 190))])
            return answer

    monkeypatch.setattr(mm2_module, "Consumer", Busy)
    target, source = entries(west, east)
    store, report = collect(target, source)
    assert store.doc("offset-syncs.json")["end_offsets"] == {"0": 3}
    assert [r["offset"] for r in store.doc("offset-syncs.json")["records"]] == [0, 1, 2]


def test_offset_syncs_on_the_target_and_a_record_that_does_not_decode(clusters):
    west, east = clusters
    # on the target east, the topic is named after the source alias west (MirrorCheckpointConfig.offsetSyncsTopic)
    east.produce("mm2-offset-syncs.west.internal", [encode_offset_sync(SYNCS[0]), (b"\x00\x09or", b"\x00")])
    store, report = collect(*entries(west, east, offset_syncs_location="target"))
    doc = store.doc("offset-syncs.json")
    assert len(doc["records"]) == 2 and base64.b64decode(doc["records"][1]["key_b64"]) == b"\x00\x09or"
    bad = [g for g in report.gaps if g.what.startswith("MirrorMaker 2 record")]
    assert len(bad) == 1 and bad[0].source == "cluster east mm2-offset-syncs.west.internal-0@1"


def test_missing_topics_and_an_unknown_source_are_gaps(clusters):
    west, east = clusters
    target, source = entries(west, east, source_alias="north")      # north.checkpoints.internal does not exist
    store, report = collect(target, source)
    assert "mm2/north/checkpoints.json" not in store and "mm2/north/offset-syncs.json" in store
    assert any(g.source == "cluster east north.checkpoints.internal" for g in report.gaps)
    store, report = Store(), CollectionReport("kafka", "east")
    collect_mirror(target, target.mirrors[0], None, store, report, SecretResolver(environ={}), now_ms=Clock())
    assert store == {} and report.gaps[0].error == "source cluster 'west' is not known to this collection"


def test_an_unreachable_source_cluster_is_a_gap_and_the_target_is_still_read(clusters):
    west, east = clusters
    target, _ = entries(west, east)
    dead = NS(name="west", bootstrap_servers="127.0.0.1:1", timeouts=NS(request_s=0.5), sasl=None,
              security_protocol="PLAINTEXT")
    store, report = collect(target, dead)
    assert "mm2/west/offset-syncs.json" not in store and len(store.doc("checkpoints.json")["records"]) == 3
    assert store.doc("groups.json")["target"]["billing"] == [{"topic": "west.orders", "partition": 0, "offset": 99}]
    assert any(g.source == "cluster west mm2-offset-syncs.east.internal" for g in report.gaps)
    assert store.doc("groups.json")["source"] == {} and any(g.what == "source groups and offsets (not asked)"
                                                            for g in report.gaps)
    doc = store.doc("groups.json")      # the side not asked still says when it was (not) read
    assert (doc["target_read_finished_at_ms"] < doc["source_read_started_at_ms"] <= doc["source_read_finished_at_ms"]
            < doc["target_after_read_started_at_ms"])
    assert doc["target_after"] == doc["target"]
    assert [g.what for g in report.gaps].count("source groups and offsets (not asked)") == 1


def test_target_source_then_target_again_each_read_with_its_instants(clusters, monkeypatch):
    west, east = clusters
    clock, asked = Clock(), []

    class Recording(mm2_module.GroupReader):      # which cluster answered what, at which clock reading
        def committed(self, groups, partitions):
            asked.append((self.where, "committed", clock.t))
            if self.where == "cluster west":      # MirrorMaker syncs the target group while the source is read
                east.commit("billing", {("west.orders", 0): 105})
            return super().committed(groups, partitions)

        def end_offsets(self, partitions):
            asked.append((self.where, "end_offsets", clock.t))
            return super().end_offsets(partitions)

    monkeypatch.setattr(mm2_module, "GroupReader", Recording)
    store, _ = collect(*entries(west, east), clock=clock)
    doc = store.doc("groups.json")
    assert [(w, what) for w, what, _ in asked] == [
        ("cluster east", "committed"), ("cluster east", "end_offsets"), ("cluster west", "committed"),
        ("cluster west", "end_offsets"), ("cluster east", "committed")]
    sides = ("target", "source", "target_after")
    instants = [doc["read_started_at_ms"]] + [doc[f"{s}_read_{e}_at_ms"] for s in sides
                                              for e in ("started", "finished")] + [doc["read_finished_at_ms"]]
    assert instants == sorted(set(instants))      # strictly in that order, each read within its own pair
    for (where, _, at), side in zip(asked, ("target", "target", "source", "source", "target_after")):
        assert doc[f"{side}_read_started_at_ms"] <= at < doc[f"{side}_read_finished_at_ms"]
    assert doc["source"]["billing"][0]["offset"] == 150
    assert doc["target"]["billing"] == [{"topic": "west.orders", "partition": 0, "offset": 99}]
    assert doc["target_after"]["billing"] == [{"topic": "west.orders", "partition": 0, "offset": 105}]
    assert doc["target_after"].keys() == doc["target"].keys()      # the same groups asked again
