"""The admin collector (kafka-python) against the Kafka-protocol server on loopback (lab/kafka/admin_server.py):
real wire encoding, per-broker answers, error codes, a broker that stops answering, SASL."""
import json
import logging
from types import SimpleNamespace as NS

import pytest

from audit.collectors.base import CollectionReport
from audit.systems.kafka.collect import admin as admin_module
from audit.systems.kafka.collect.admin import collect_admin
from audit.config.secrets import SecretResolver
from lab.kafka.admin_server import (FENCED_LEADER_EPOCH, KAFKA_STORAGE_ERROR, NOT_LEADER_OR_FOLLOWER,
                                          UNKNOWN_TOPIC_OR_PARTITION, AdminServer, ServedBroker, ServedCluster,
                                          ServedPartition, ServedReplica)
from lab.loopback import unused_loopback_port

PASSWORD = "pw-7d1f-very-secret"


class Clock:
    def __init__(self):
        self.t = 1_000

    def __call__(self):
        self.t += 1
        return self.t


def served() -> ServedCluster:
    """orders-0: leader 1 at epoch 7, follower 2 in step, follower 3 on a diverged lineage; orders-1 led by 2."""
    s = ServedCluster("lab-cluster-id", controller=1, brokers={1: ServedBroker(1, ["/k1/d0"], rack="r1"),
                                                               2: ServedBroker(2, ["/k2/d0", "/k2/d1"]),
                                                               3: ServedBroker(3, ["/k3/d0"])})
    s.partitions[("orders", 0)] = ServedPartition("orders", 0, 1, 7, [1, 2, 3], [1, 2], elr=[3], last_known_elr=[])
    s.partitions[("orders", 1)] = ServedPartition("orders", 1, 2, 5, [2, 1], [2, 1])
    s.partitions[("audit", 0)] = ServedPartition("audit", 0, 3, 0, [3], [3])
    lineage = [(3, 10), (5, 20), (7, 30)]
    s.replicas[(1, "orders", 0)] = ServedReplica("/k1/d0", 0, 40, 35, lineage, size=4000, offset_lag=0)
    s.replicas[(2, "orders", 0)] = ServedReplica("/k2/d1", 0, 38, 35, lineage, size=3800, offset_lag=2)
    s.replicas[(3, "orders", 0)] = ServedReplica("/k3/d0", 0, 25, 25, [(3, 10), (4, 18)], size=2500, offset_lag=15)
    s.replicas[(2, "orders", 1)] = ServedReplica("/k2/d0", 5, 12, 12, [(0, 0), (5, 8)], size=700)
    s.replicas[(1, "orders", 1)] = ServedReplica("/k1/d0", 5, 12, 12, [(0, 0), (5, 8)], size=700)
    s.replicas[(3, "audit", 0)] = ServedReplica("/k3/d0", 0, 3, 3, [(0, 0)], size=90)
    return s


def cluster(servers: str, request_s: float = 2.0, sasl=None, protocol="PLAINTEXT"):
    return NS(name="east", bootstrap_servers=servers, timeouts=NS(request_s=request_s, connect_s=1.0), sasl=sasl,
              security_protocol=protocol)


class Store(dict):
    def put(self, key, data):
        assert key not in self
        self[key] = bytes(data)

    def doc(self, name):
        return json.loads(self["admin/" + name])


def run(state, request_s=2.0, secrets=None, sasl=None, protocol="PLAINTEXT", bootstrap=None,
        silent_after_bootstrap=()):
    store, report = Store(), CollectionReport("kafka", "east")

    def client(**config):                  # bootstrapped, then the brokers stop answering
        from kafka.admin import KafkaAdminClient
        c = KafkaAdminClient(**config)
        with state.lock:
            state.silent.update(silent_after_bootstrap)
        return c

    with AdminServer(state) as server:
        c = cluster(bootstrap or server.bootstrap_servers(), request_s, sasl, protocol)
        collect_admin(c, store, report, secrets or SecretResolver(environ={}), now_ms=Clock(), client_factory=client)
    return store, report


def answers(store, broker=None, topic="orders", partition=0):
    return [(a["requested_epoch"], a["leader_epoch"], a["end_offset"], a["error_code"])
            for a in store.doc("offsets-for-leader-epoch.json")["answers"]
            if (broker is None or a["broker"] == broker) and (a["topic"], a["partition"]) == (topic, partition)]


def test_a_healthy_cluster_is_read_completely():
    store, report = run(served())
    assert report.gaps == []
    md = store.doc("metadata.json")
    assert md["cluster_id"] == "lab-cluster-id" and md["controller"] == 1
    assert [(b["id"], b["rack"]) for b in md["brokers"]] == [(1, "r1"), (2, None), (3, None)]
    o0 = next(p for p in md["partitions"] if (p["topic"], p["partition"]) == ("orders", 0))
    assert (o0["leader"], o0["leader_epoch"], o0["replicas"], o0["isr"], o0["offline"]) == (1, 7, [1, 2, 3], [1, 2], [])
    assert o0["elr"] is None and md["elr_source"] is None and o0["topic_id"] and o0["error_code"] == 0
    dirs = {b["broker"]: b for b in store.doc("log-dirs.json")["brokers"]}
    assert [d["log_dir"] for d in dirs[2]["log_dirs"]] == ["/k2/d0", "/k2/d1"]
    assert dirs[2]["log_dirs"][1]["partitions"] == [{"topic": "orders", "partition": 0, "size": 3800,
                                                     "offset_lag": 2, "is_future": False}]
    assert dirs[3]["log_dirs"][0]["partitions"][1]["offset_lag"] == 15
    offsets = {(p["topic"], p["partition"]): p for p in store.doc("list-offsets.json")["partitions"]}
    assert (offsets[("orders", 0)]["earliest"], offsets[("orders", 0)]["latest"]) == (0, 35)
    assert offsets[("orders", 0)]["latest_leader_epoch"] == 7
    assert offsets[("orders", 0)]["earliest_leader_epoch"] is None      # the first cached epoch starts at 10 > 0
    assert (offsets[("orders", 1)]["earliest"], offsets[("orders", 1)]["earliest_leader_epoch"]) == (5, 0)
    # the leader's whole chain: 7 ends at its LEO, 5 at 30, 3 at 20; below 3 the earliest start again (then stop)
    assert answers(store, broker=1) == [(7, 7, 40, 0), (6, 5, 30, 0), (4, 3, 20, 0), (2, 2, 10, 0), (1, 1, 10, 0)]
    # followers are asked too; a real broker answers only as leader, so they are asked once
    assert answers(store, broker=2) == answers(store, broker=3) == [(7, -1, -1, NOT_LEADER_OR_FOLLOWER)]
    assert answers(store, broker=2, partition=1) == [(5, 5, 12, 0), (4, 0, 8, 0)]
    assert report.counts["epoch_answers_refused_by_followers"] == 3
    assert store.doc("offsets-for-leader-epoch.json")["not_asked"] == store.doc("list-offsets.json")["not_asked"] == []
    for name in ("metadata.json", "log-dirs.json", "list-offsets.json", "offsets-for-leader-epoch.json"):
        doc = store.doc(name)
        assert doc["read_started_at_ms"] < doc["read_finished_at_ms"]
    assert all(a["read_started_at_ms"] <= a["read_finished_at_ms"]
               for a in store.doc("offsets-for-leader-epoch.json")["answers"])


def test_followers_that_answer_show_their_own_lineage():
    s = served()
    s.followers_answer_epochs = True
    store, report = run(s)
    assert answers(store, broker=2) == [(7, 7, 38, 0)] + answers(store, broker=1)[1:]   # in step, 2 behind
    # the diverged follower knows no epoch above 4: undefined for 7 and 6, its LEO for 4, then its own start
    assert answers(store, broker=3) == [(7, -1, -1, 0), (6, -1, -1, 0), (4, 4, 25, 0), (2, 2, 10, 0), (1, 1, 10, 0)]
    assert report.gaps == []


def test_error_codes_are_data_and_gaps():
    s = served()
    s.errors[("list_offsets", 1, "orders", 0)] = NOT_LEADER_OR_FOLLOWER
    s.errors[("offset_for_leader_epoch", 2, "orders", 1)] = UNKNOWN_TOPIC_OR_PARTITION
    s.errors[("metadata", 1, "audit", 0)] = 5
    s.log_dir_errors[(2, "/k2/d1")] = KAFKA_STORAGE_ERROR
    s.replicas[(3, "orders", 0)].leader_epoch = 8            # broker 3 already knows a newer leader epoch
    s.followers_answer_epochs = True
    store, report = run(s, bootstrap=None)
    gaps = {(g.source, g.what): g.error for g in report.gaps}
    offsets = {(p["topic"], p["partition"]): p for p in store.doc("list-offsets.json")["partitions"]}
    assert offsets[("orders", 0)]["error_code"] == NOT_LEADER_OR_FOLLOWER and offsets[("orders", 0)]["latest"] is None
    assert gaps[("broker 1 orders-0", "ListOffsets LATEST")] == "NOT_LEADER_OR_FOLLOWER"
    assert answers(store, broker=2, partition=1) == [(5, -1, -1, UNKNOWN_TOPIC_OR_PARTITION)]
    assert gaps[("broker 2 orders-1", "OffsetForLeaderEpoch epoch 5")] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert answers(store, broker=3) == [(7, -1, -1, FENCED_LEADER_EPOCH)]
    assert gaps[("broker 3 orders-0", "OffsetForLeaderEpoch epoch 7")] == "FENCED_LEADER_EPOCH"
    md = {(p["topic"], p["partition"]): p for p in store.doc("metadata.json")["partitions"]}
    assert md[("audit", 0)]["error_code"] == 5 and gaps[("audit-0", "partition metadata")] == "LEADER_NOT_AVAILABLE"
    d1 = store.doc("log-dirs.json")["brokers"][1]["log_dirs"][1]
    assert (d1["log_dir"], d1["error_code"], d1["partitions"]) == ("/k2/d1", KAFKA_STORAGE_ERROR, [])
    assert gaps[("broker 2 /k2/d1", "log dir")] == "KAFKA_STORAGE_ERROR"
    assert answers(store, broker=1)[0] == (7, 7, 40, 0)                   # the rest was read


def test_a_broker_that_stops_answering_is_a_gap_and_the_rest_goes_on():
    s = served()
    s.silent.add(3)
    store, report = run(s, request_s=0.4)
    gaps = {(g.source, g.what): g.error for g in report.gaps}
    assert gaps[("broker 3", "log dirs (DescribeLogDirs)")]              # whatever the client says: no answer
    assert "not asked" in gaps[("broker 3", "ListOffsets of 1 partitions")]
    brokers = {b["broker"]: b for b in store.doc("log-dirs.json")["brokers"]}
    assert brokers[3]["log_dirs"] == [] and brokers[3]["error"] and brokers[1]["error"] is None
    assert answers(store, broker=1)[0] == (7, 7, 40, 0) and answers(store, broker=2, partition=1)[0] == (5, 5, 12, 0)
    assert answers(store, broker=3) == [(7, None, None, -1)]
    # its connection never got past ApiVersions, and it was not asked again
    assert {api: n for (b, api), n in s.served.items() if b == 3} == {"api_versions": 1}


def test_metadata_comes_from_another_broker_when_the_first_is_silent():
    s = served()
    store, report = run(s, request_s=0.4, bootstrap=None, silent_after_bootstrap={1})
    assert store.doc("metadata.json")["answered_by"] == 2
    assert [g.what for g in report.gaps if g.source == "broker 1"][0] == "cluster metadata"
    offsets = {(p["topic"], p["partition"]): p for p in store.doc("list-offsets.json")["partitions"]}
    assert offsets[("orders", 1)]["latest"] == 12 and offsets[("orders", 0)]["latest"] is None


def test_state_changing_between_requests_is_read_as_it_is_then():
    """Traffic goes on: an election after the metadata read fences the epoch questions asked for the old epoch."""
    s = served()

    def elect(broker, api):
        if api == "list_offsets" and s.partitions[("orders", 0)].leader_epoch == 7:
            s.partitions[("orders", 0)].leader_epoch = 8
            s.replicas[(1, "orders", 0)].epochs.append((8, 40))
            s.replicas[(1, "orders", 0)].high_watermark = 40
    s.on_request = elect
    store, report = run(s)
    md = {(p["topic"], p["partition"]): p for p in store.doc("metadata.json")["partitions"]}
    assert md[("orders", 0)]["leader_epoch"] == 7
    offsets = {(p["topic"], p["partition"]): p for p in store.doc("list-offsets.json")["partitions"]}
    assert (offsets[("orders", 0)]["latest"], offsets[("orders", 0)]["latest_leader_epoch"]) == (40, 8)
    assert answers(store, broker=1) == [(7, -1, -1, FENCED_LEADER_EPOCH)]
    assert {g.error for g in report.gaps} == {"FENCED_LEADER_EPOCH"}


def test_eligible_leader_replicas_from_describe_topic_partitions_in_pages(monkeypatch):
    s = served()
    s.describe_topic_partitions = True
    monkeypatch.setattr(admin_module, "PAGE_PARTITIONS", 1)
    store, report = run(s)
    md = store.doc("metadata.json")
    parts = {(p["topic"], p["partition"]): p for p in md["partitions"]}
    assert md["elr_source"] == "DescribeTopicPartitions" and report.gaps == []
    assert (parts[("orders", 0)]["elr"], parts[("orders", 0)]["last_known_elr"]) == ([3], [])
    assert parts[("orders", 1)]["elr"] == [] and parts[("audit", 0)]["elr"] == []
    assert sum(n for (b, api), n in s.served.items() if api == "describe_topic_partitions") == 3   # one per page


def test_an_unreachable_cluster_is_one_gap():
    store, report = run(served(), request_s=0.3, bootstrap=f"127.0.0.1:{unused_loopback_port()}")
    assert store == {} and [g.what for g in report.gaps] == ["admin endpoint (nothing read)"]


@pytest.mark.parametrize("password, works", [(PASSWORD, True), ("not-" + PASSWORD, False)])
def test_sasl_secrets_never_reach_logs_raw_files_or_gaps(caplog, password, works):
    s = served()
    s.sasl_plain = {"auditor": PASSWORD}
    secrets = SecretResolver(environ={"K_USER": "auditor", "K_PASS": password})
    sasl = NS(mechanism="PLAIN", username={"env": "K_USER"}, password={"env": "K_PASS"})
    with caplog.at_level(logging.DEBUG, logger="kafka"):
        store, report = run(s, request_s=0.5, secrets=secrets, sasl=sasl, protocol="SASL_PLAINTEXT")
    assert bool(store) is works and (report.gaps == []) is works
    assert "sasl_plain_password': '***'" in caplog.text        # kafka-python logged its config, redacted
    everything = caplog.text + json.dumps(report.to_dict()) + "".join(v.decode("latin-1") for v in store.values())
    assert password not in everything and PASSWORD not in everything
