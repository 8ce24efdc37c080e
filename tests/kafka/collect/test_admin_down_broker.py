"""The admin collector when brokers are down or one broker's sends fail, against the Kafka-protocol server on loopback
(lab/kafka/admin_server.py): a real Metadata answer lists a down broker in a partition's replicas and offline
replicas but not among the brokers (KRaftMetadataCache.getPartitionMetadata @1eb7644349c); that broker is not asked,
and whatever fails for one broker costs that broker only."""
import kafka.errors as kerrors
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import DescribeLogDirsRequest
from kafka.protocol.consumer import ListOffsetsRequest, OffsetForLeaderEpochRequest

from audit.collectors.base import CollectionReport
from audit.systems.kafka.collect.admin import collect_admin
from audit.config.secrets import SecretResolver
from lab.kafka.admin_server import LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER, AdminServer, ServedPartition, \
    ServedReplica
from tests.kafka.collect.test_admin import Clock, Store, answers, cluster, run, served

DOCS = ("metadata.json", "log-dirs.json", "list-offsets.json", "offsets-for-leader-epoch.json")
DOWN = 4                        # a broker of the partitions' replica lists that the server does not serve


def with_down_follower():
    """orders-0 replicated on 1, 2, 3 and the down broker 4 (offline); events-0 on 2 and 4, led by 2."""
    s = served()
    o0 = s.partitions[("orders", 0)]
    o0.replicas, o0.offline = [1, 2, 3, DOWN], [DOWN]
    s.partitions[("events", 0)] = ServedPartition("events", 0, 2, 3, [DOWN, 2], [2], offline=[DOWN])
    s.replicas[(2, "events", 0)] = ServedReplica("/k2/d0", 0, 9, 9, [(0, 0), (3, 6)], size=300)
    return s


def test_a_replica_on_a_broker_absent_from_metadata_is_not_asked_and_the_rest_is_read():
    s = with_down_follower()
    store, report = run(s)
    assert all("admin/" + name in store for name in DOCS)
    assert report.gaps == []                    # a down follower is not a coverage gap: there is nothing to ask
    assert DOWN not in {b["id"] for b in store.doc("metadata.json")["brokers"]}
    doc = store.doc("offsets-for-leader-epoch.json")
    assert doc["not_asked"] == [
        {"broker": DOWN, "topic": "events", "partition": 0, "why": "broker not in metadata"},
        {"broker": DOWN, "topic": "orders", "partition": 0, "why": "broker not in metadata"}]
    assert report.counts["epoch_replicas_not_asked"] == 2
    assert DOWN not in {a["broker"] for a in doc["answers"]}
    # the live brokers' answers: the leader's whole chain, the followers' refusals, the other partitions
    assert answers(store, broker=1) == [(7, 7, 40, 0), (6, 5, 30, 0), (4, 3, 20, 0), (2, 2, 10, 0), (1, 1, 10, 0)]
    assert answers(store, broker=2) == answers(store, broker=3) == [(7, -1, -1, NOT_LEADER_OR_FOLLOWER)]
    assert answers(store, broker=2, topic="events") == [(3, 3, 9, 0), (2, 0, 6, 0)]
    assert answers(store, broker=2, partition=1) == [(5, 5, 12, 0), (4, 0, 8, 0)]
    offsets = {(p["topic"], p["partition"]): p for p in store.doc("list-offsets.json")["partitions"]}
    assert (offsets[("events", 0)]["latest"], offsets[("orders", 0)]["latest"]) == (9, 35)
    assert sorted(b["broker"] for b in store.doc("log-dirs.json")["brokers"]) == [1, 2, 3]
    assert not any(b == DOWN for b, _ in s.served)


def test_a_leader_absent_from_metadata_is_a_gap_for_its_partition_only():
    """A real broker answers leader -1 for a dead leader; should a Metadata answer name one anyway, nothing can
    reach it: its partition's high watermark and epoch chain are not covered, everything else is read."""
    s = with_down_follower()
    s.partitions[("events", 0)].leader = DOWN
    store, report = run(s)
    gaps = {(g.source, g.what): g.error for g in report.gaps}
    assert gaps == {("events-0", "log start / high watermark (ListOffsets)"): "leader 4: broker not in metadata",
                    ("events-0", "leader epoch chain (OffsetForLeaderEpoch)"): "leader 4: broker not in metadata"}
    offsets = {(p["topic"], p["partition"]): p for p in store.doc("list-offsets.json")["partitions"]}
    assert offsets[("events", 0)]["error_code"] == LEADER_NOT_AVAILABLE and offsets[("events", 0)]["latest"] is None
    assert offsets[("orders", 0)]["latest"] == 35
    assert store.doc("list-offsets.json")["not_asked"] == [
        {"broker": DOWN, "topic": "events", "partition": 0, "why": "broker not in metadata"}]
    # its live follower is asked once (a real one refuses: not the leader), and the walk stops there
    assert answers(store, broker=2, topic="events") == [(3, -1, -1, NOT_LEADER_OR_FOLLOWER)]
    assert answers(store, broker=1)[0] == (7, 7, 40, 0)


def test_a_send_that_fails_at_once_costs_that_broker_only():
    """kafka-python raises from the send itself (not from its future) for a broker its own cluster view lacks:
    UnknownBrokerIdError, the failure the lab's down brokers met. Here broker 2's every send fails that way."""
    s = served()
    failing = (DescribeLogDirsRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest)
    refused = []

    def client(**config):
        c = KafkaAdminClient(**config)
        send = c._manager.send

        def send_or_fail(request, node_id=None, request_timeout_ms=None):
            if node_id == 2 and isinstance(request, failing):
                refused.append(type(request).__name__)
                raise kerrors.UnknownBrokerIdError(node_id)
            return send(request, node_id=node_id, request_timeout_ms=request_timeout_ms)
        c._manager.send = send_or_fail
        return c

    store, report = Store(), CollectionReport("kafka", "east")
    with AdminServer(s) as server:
        collect_admin(cluster(server.bootstrap_servers()), store, report, SecretResolver(environ={}), now_ms=Clock(),
                      client_factory=client)
    assert all("admin/" + name in store for name in DOCS)
    assert refused == ["DescribeLogDirsRequest"]            # then broker 2 is not asked again
    assert {g.source for g in report.gaps} == {"broker 2"}
    dirs = {b["broker"]: b for b in store.doc("log-dirs.json")["brokers"]}
    assert "UnknownBrokerIdError" in dirs[2]["error"] and dirs[2]["log_dirs"] == []
    assert dirs[1]["error"] is None and dirs[3]["log_dirs"][0]["partitions"]
    offsets = {(p["topic"], p["partition"]): p for p in store.doc("list-offsets.json")["partitions"]}
    assert offsets[("orders", 1)]["error_code"] == -1 and offsets[("orders", 1)]["latest"] is None
    assert (offsets[("orders", 0)]["latest"], offsets[("audit", 0)]["latest"]) == (35, 3)
    assert answers(store, broker=1) == [(7, 7, 40, 0), (6, 5, 30, 0), (4, 3, 20, 0), (2, 2, 10, 0), (1, 1, 10, 0)]
    assert answers(store, broker=2) == [(7, None, None, -1)]
    assert answers(store, broker=3, topic="audit") == [(0, 0, 3, 0)]
