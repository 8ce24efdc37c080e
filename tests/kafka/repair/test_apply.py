"""Approved Kafka group resets (audit/systems/kafka/repair/apply.py) against librdkafka's mock cluster on loopback
(tests/kafka/collect/mock_cluster.py): real OffsetFetch / OffsetCommit on the wire, offsets committed and read
back by confluent-kafka clients.

What the mock cannot show: it serves no DescribeGroups (API 15) nor ListGroups (16) -- they are not in its
ApiVersions answer and it closes the connection on them (rdkafka_mock_handlers.c, rd_kafka_mock_api_handlers;
rdkafka_mock.c, rd_kafka_mock_connection_parse_request) --, so check() can never read a group state there and
never holds. The mock tests below assert that it fails closed and what it does read (the committed offset); run()
and verify() are called directly; the verdict on a group state is tested on its own (`may_reset`).

The whole check -> run -> verify is then taken against the lab's Kafka-protocol server
(lab/kafka/admin_server.py), which serves the group coordinator (FindCoordinator, DescribeGroups, ListGroups,
OffsetFetch, OffsetCommit) and records every OffsetCommit it receives."""
import json
import threading
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka.admin import KafkaAdminClient

from audit.systems.kafka.config import KafkaCluster
from audit.config.secrets import SecretResolver
from audit.contracts import Precheck
from lab.kafka.admin_server import AdminServer, ServedBroker, ServedCluster, ServedCommit, ServedGroup, \
    ServedPartition
from audit.systems.kafka.repair.apply import actions, may_reset
from lab.loopback import unused_loopback_port
from audit.repair.common import RepairInputError
from audit.systems.kafka.repair.plan import plan_findings
from tests.kafka.collect.mock_cluster import QUIET, MockCluster

TOPIC, GROUP = "primary.orders-mm", "analytics"
NO_SECRETS = SecretResolver(environ={})


def plan(target_committed=1, reset_to=405, cluster="dr"):
    """A group_reset plan as the dry-run planner writes it (a failover would redeliver offsets 1..404)."""
    v = {"system": "kafka", "check": "kafka.mm2_failover_redelivery", "cluster": cluster, "entry_count": 404,
         "evidence": {"group": GROUP, "source": "primary", "topic": "orders-mm", "partition": 0,
                      "bounds": [reset_to, reset_to + 3], "target_committed": target_committed}}
    (p,), errors = plan_findings([v], bootstrap={cluster: "127.0.0.1:9092"})
    assert errors == [] and p["kind"] == "group_reset"
    return p


def mock_client(**config):
    # kafka-python 3.0.12 opens with ApiVersions v4; the mock serves v0-2 and answers v4 in an encoding it cannot
    # decode (a 1-byte count, rdkafka_mock_handlers.c rd_kafka_mock_handle_ApiVersion) where a broker answers v0
    # (RequestContext.apiVersion, KIP-511). A declared 2.3 starts kafka-python at ApiVersions v2.
    return KafkaAdminClient(**config, api_version=(2, 3))


def entry(mc, **extra):
    return KafkaCluster(name="dr", source="admin", bootstrap_servers=mc.bootstraps, timeouts={"request_s": 5},
                        **extra)


def committed(mc, group=GROUP):
    """Read independently of the code under test: a confluent-kafka consumer's OffsetFetch."""
    c = Consumer({"bootstrap.servers": mc.bootstraps, "group.id": group, "log_level": 3}, logger=QUIET)
    try:
        (tp,) = c.committed([TopicPartition(TOPIC, 0)], timeout=10)
        return tp.offset
    finally:
        c.close()


@pytest.fixture
def mc():
    before = set(threading.enumerate())
    with MockCluster(brokers=3) as mc:
        mc.create_topic(TOPIC, partitions=1)
        yield mc
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert left == [], f"threads left running: {left}"


def the_action(mc, p=None):
    (action,) = actions(p or plan(), entry(mc), NO_SECRETS, client_factory=mock_client)
    return action


def test_the_reset_is_committed_and_verified(mc):
    mc.commit(GROUP, {(TOPIC, 0): 1})        # a consumer that commits and closes: no member left
    action = the_action(mc)
    assert (action.name, action.target) == ("alter_group_offsets", f"group {GROUP} on {TOPIC}:0")
    pre = action.check()
    # OffsetFetch is read; the group state is not (no DescribeGroups on the mock): the check fails closed
    assert pre.observed["committed_offset"] == 1 and "group" not in pre.observed
    assert pre.observed["group_error"].startswith("DescribeGroups: KafkaConnectionError") and pre.holds is False
    assert pre.expected == {"group_state": ["Empty", "Dead"], "committed_offset": 1}
    result = action.run()
    assert result == {"call": "AlterConsumerGroupOffsets", "group_id": GROUP, "ok": True,
                      "partitions": [{"topic": TOPIC, "partition": 0, "offset": 405, "error": None}]}
    json.dumps(result)
    assert committed(mc) == 405
    assert action.verify() == Precheck(True, {"committed_offset": 405}, {"committed_offset": 405})


def test_a_moved_commit_is_what_the_check_shows(mc):
    mc.commit(GROUP, {(TOPIC, 0): 7})
    pre = the_action(mc).check()
    assert pre.holds is False and pre.observed["committed_offset"] == 7 and pre.expected["committed_offset"] == 1


def test_a_group_without_a_commit_reads_none(mc):
    pre = the_action(mc).check()
    assert pre.holds is False and pre.observed["committed_offset"] is None


def test_an_active_member_keeps_the_group_and_the_broker_refuses_the_commit(mc):
    mc.commit(GROUP, {(TOPIC, 0): 1})
    member = Consumer({"bootstrap.servers": mc.bootstraps, "group.id": GROUP, "enable.auto.commit": False,
                       "log_level": 3}, logger=QUIET)
    try:
        member.subscribe([TOPIC])
        deadline = time.monotonic() + 20
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(0.1)
        assert member.assignment(), "the consumer did not join the group"
        action = the_action(mc)
        assert action.check().holds is False
        # if run() were called anyway: OffsetCommit with generation -1 and no member id, refused for a group with
        # members (ClassicGroup.validateOffsetCommit; the mock answers the same), reported per partition
        result = action.run()
        assert result["ok"] is False and result["partitions"][0]["error"] == "UNKNOWN_MEMBER_ID"
        assert action.verify().holds is False
    finally:
        member.close()
    assert committed(mc) == 1


@pytest.mark.parametrize("observed, holds", [
    ({"group": {"state": "Empty", "members": 0}, "committed_offset": 1}, True),
    ({"group": {"state": "Dead", "members": 0}, "committed_offset": 1}, True),
    ({"group": {"state": "Empty", "members": 0}, "committed_offset": 2}, False),
    ({"group": {"state": "Empty", "members": 0}, "committed_offset": None}, False),
    ({"group": {"state": "Stable", "members": 1}, "committed_offset": 1}, False),
    ({"group": {"state": "PreparingRebalance", "members": 1}, "committed_offset": 1}, False),
    # DescribeGroups says Dead for a consumer-protocol group; ListGroups' state wins
    ({"group": {"state": "Stable", "described_by": "ListGroups"}, "committed_offset": 1}, False),
    ({"group_error": "DescribeGroups: KafkaConnectionError", "committed_offset": 1}, False),
    ({"group": {"state": "Empty"}, "committed_offset_error": "OffsetFetch: x"}, False),
    ({"connect_error": "KafkaTimeoutError"}, False),
])
def test_the_verdict_on_what_the_check_read(observed, holds):
    assert may_reset(observed, 1) is holds


@pytest.mark.parametrize("kind", ["replica", "data_loss"])
def test_replica_and_data_loss_plans_are_manual(kind):
    c = KafkaCluster(name="dr", source="admin", bootstrap_servers="127.0.0.1:9092")
    with pytest.raises(RepairInputError) as e:
        actions({"system": "kafka", "kind": kind, "cluster": "dr", "plan_id": "p1"}, c, NO_SECRETS)
    assert (e.value.source, e.value.field) == ("plan p1", "kind") and "by hand" in e.value.expected


@pytest.mark.parametrize("cluster", [KafkaCluster(name="dr", source="lab", lab={}),
                                     KafkaCluster(name="dr", source="log-dirs")])
def test_a_cluster_without_an_admin_endpoint_is_refused(cluster):
    with pytest.raises(RepairInputError) as e:
        actions(plan(), cluster, NO_SECRETS)
    assert (e.value.source, e.value.field) == ("cluster dr", "source")
    assert e.value.expected.startswith("a cluster with an admin endpoint")


def test_a_plan_whose_call_differs_from_its_fields_is_refused():
    p = plan()
    p["admin_api"] = {**p["admin_api"], "offsets": [{"topic": TOPIC, "partition": 0, "offset": 999}]}
    c = KafkaCluster(name="dr", source="admin", bootstrap_servers="127.0.0.1:9092")
    with pytest.raises(RepairInputError) as e:
        actions(p, c, NO_SECRETS)
    assert e.value.field == "admin_api"
    with pytest.raises(RepairInputError) as e:
        actions(plan(cluster="east"), c, NO_SECRETS)
    assert e.value.field == "cluster"


def test_an_unreachable_cluster_does_not_hold_and_leaves_no_thread():
    before = set(threading.enumerate())
    c = KafkaCluster(name="dr", source="admin", bootstrap_servers=f"127.0.0.1:{unused_loopback_port()}",
                     timeouts={"request_s": 0.5})
    (action,) = actions(plan(), c, NO_SECRETS)
    for pre in (action.check(), action.verify()):
        assert pre.holds is False and set(pre.observed) == {"connect_error"}
    assert [t for t in threading.enumerate() if t not in before and t.is_alive()] == []


def test_the_request_is_the_exact_call_without_secrets():
    secrets = SecretResolver(environ={"KUSER": "svc-user-4f2", "KPASS": "pw-very-secret-91"})
    c = KafkaCluster(name="dr", source="admin", bootstrap_servers="127.0.0.1:9092",
                     sasl={"mechanism": "SCRAM-SHA-512", "username": {"env": "KUSER"}, "password": {"env": "KPASS"}})
    (action,) = actions(plan(), c, secrets)
    text = json.dumps(action.request)
    assert "pw-very-secret-91" not in text and "svc-user-4f2" not in text
    assert action.request["offsets"] == [{"topic": TOPIC, "partition": 0, "offset": 405, "leader_epoch": -1,
                                          "metadata": ""}]
    assert (action.request["generation_id"], action.request["member_id"]) == (-1, "")
    assert action.request["command"].endswith(f"--topic {TOPIC}:0 --to-offset 405 --execute")


# -- against the lab's Kafka-protocol server: DescribeGroups and ListGroups are served ---------------------------
COORDINATOR = 2


@pytest.fixture
def lab():
    """Brokers 1-3, broker 2 coordinating every group; the mirrored topic's partition is known to the metadata."""
    before = set(threading.enumerate())
    state = ServedCluster("dr-cluster", controller=1, group_coordinator=COORDINATOR,
                          brokers={b: ServedBroker(b, [f"/k{b}/d0"]) for b in (1, 2, 3)})
    state.partitions[(TOPIC, 0)] = ServedPartition(TOPIC, 0, 1, 4, [1, 2, 3], [1, 2, 3])
    with AdminServer(state) as server:
        yield server
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert left == [], f"threads left running: {left}"


def lab_action(server):
    # kafka-python's own client, no api_version: it negotiates through the server's ApiVersions answer
    (action,) = actions(plan(), KafkaCluster(name="dr", source="admin", bootstrap_servers=server.bootstrap_servers(),
                                             timeouts={"request_s": 5}), NO_SECRETS)
    return action


def set_group(server, **group):
    with server.state.lock:
        server.state.groups[GROUP] = ServedGroup(**group)


def test_an_empty_group_at_the_audits_commit_is_reset_end_to_end(lab):
    set_group(lab, state="Empty", committed={(TOPIC, 0): 1})
    action = lab_action(lab)
    pre = action.check()
    assert pre == Precheck(True, {"group": {"state": "Empty", "members": 0, "described_by": "DescribeGroups"},
                                  "committed_offset": 1},
                           {"group_state": ["Empty", "Dead"], "committed_offset": 1})
    with lab.state.lock:
        assert lab.state.commits == []                 # check() reads only
    result = action.run()
    assert result == {"call": "AlterConsumerGroupOffsets", "group_id": GROUP, "ok": True,
                      "partitions": [{"topic": TOPIC, "partition": 0, "offset": 405, "error": None}]}
    with lab.state.lock:
        # exactly the request the plan shows: OffsetCommit to the coordinator, generation -1, no member id
        assert lab.state.commits == [ServedCommit(broker=COORDINATOR, version=8, group_id=GROUP, generation_id=-1,
                                                  member_id="", group_instance_id=None,
                                                  offsets=((TOPIC, 0, 405, -1, ""),))]
        assert (action.request["generation_id"], action.request["member_id"]) == (-1, "")
        assert lab.state.groups[GROUP].committed == {(TOPIC, 0): 405}
    assert action.verify() == Precheck(True, {"committed_offset": 405}, {"committed_offset": 405})


def test_a_stable_group_does_not_hold_and_refuses_the_commit(lab):
    set_group(lab, state="Stable", members=["consumer-analytics-1-6c1f0d5e-2b7a-4e0b-9d3c-8a4f1e2b3c4d"],
              generation=3, committed={(TOPIC, 0): 1})
    action = lab_action(lab)
    pre = action.check()
    assert pre.holds is False
    assert pre.observed == {"group": {"state": "Stable", "members": 1, "described_by": "DescribeGroups"},
                            "committed_offset": 1}
    # run() anyway: ClassicGroup.validateOffsetCommit refuses generation -1 without a member on a non-Empty group
    result = action.run()
    assert result["ok"] is False and result["partitions"][0]["error"] == "UNKNOWN_MEMBER_ID"
    assert action.verify().holds is False
    with lab.state.lock:
        assert lab.state.groups[GROUP].committed == {(TOPIC, 0): 1}


def test_a_moved_commit_does_not_hold_on_the_lab_server(lab):
    set_group(lab, state="Empty", committed={(TOPIC, 0): 7})
    pre = lab_action(lab).check()
    assert pre.holds is False
    assert pre.observed == {"group": {"state": "Empty", "members": 0, "described_by": "DescribeGroups"},
                            "committed_offset": 7}
    with lab.state.lock:
        assert lab.state.commits == []


def test_an_unknown_group_reads_dead_without_a_commit(lab):
    pre = lab_action(lab).check()
    # DescribeGroups: Dead (no such group); ListGroups does not list it; OffsetFetch: -1 -> None
    assert pre.holds is False
    assert pre.observed == {"group": {"state": "Dead", "members": 0, "described_by": "DescribeGroups"},
                            "committed_offset": None}


@pytest.mark.parametrize("state, members, holds", [("Stable", ["m1"], False), ("Empty", [], True)])
def test_a_consumer_protocol_group_is_judged_by_list_groups(lab, state, members, holds):
    # KIP-848: DescribeGroups describes classic groups only and answers Dead; ListGroups gives the real state
    set_group(lab, state=state, members=members, group_type="consumer", committed={(TOPIC, 0): 1})
    pre = lab_action(lab).check()
    assert pre.holds is holds
    assert pre.observed["group"] == {"state": state, "members": 0, "described_by": "ListGroups", "group_type": None}

