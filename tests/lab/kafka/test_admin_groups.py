"""The group coordinator of the Kafka-protocol loopback server (lab/kafka/admin_server.py): FindCoordinator,
DescribeGroups, ListGroups, OffsetFetch and OffsetCommit, driven by kafka-python's KafkaAdminClient as the repair
applier uses it, and by single requests on a socket at every version the server announces."""
from __future__ import annotations

import socket
import struct
import threading

import kafka.errors as kerrors
import pytest
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import DescribeGroupsRequest, DescribeGroupsResponse, ListGroupsRequest, ListGroupsResponse
from kafka.protocol.consumer import OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, \
    OffsetFetchResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, FindCoordinatorRequest, \
    FindCoordinatorResponse
from kafka.structs import OffsetAndMetadata, TopicPartition

from lab.kafka.admin_server import (COORDINATOR_NOT_AVAILABLE, ILLEGAL_GENERATION, NONE, NOT_COORDINATOR,
                                          OFFSET_METADATA_TOO_LARGE, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID,
                                          UNSUPPORTED_VERSION, AdminServer,
                                          ServedBroker, ServedCluster, ServedCommit, ServedGroup, ServedPartition)

TOPIC = "orders"
MEMBER = "consumer-app-1-0b6f1c2e-6d1a-4c55-9a0e-3f1d2b7c8e90"     # ClassicGroup.generateMemberId: client id + UUID
COORDINATOR = 2


def served() -> ServedCluster:
    """Three brokers, broker 2 coordinating (the controller is 1); `idle` Empty with commits, `live` Stable."""
    s = ServedCluster("lab-cluster-id", controller=1, group_coordinator=COORDINATOR,
                      brokers={b: ServedBroker(b, [f"/k{b}/d0"]) for b in (1, 2, 3)})
    for p in (0, 1):
        s.partitions[(TOPIC, p)] = ServedPartition(TOPIC, p, 1, 3, [1, 2, 3], [1, 2, 3])
    s.groups["idle"] = ServedGroup(state="Empty", committed={(TOPIC, 0): 40, (TOPIC, 1): 7})
    s.groups["live"] = ServedGroup(state="Stable", members=[MEMBER], generation=5, committed={(TOPIC, 0): 12})
    return s


@pytest.fixture
def no_threads_left():
    before = set(threading.enumerate())
    yield
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert left == [], f"threads left running: {left}"


@pytest.fixture
def server(no_threads_left):
    state = served()
    with AdminServer(state) as srv:
        yield srv


@pytest.fixture
def admin(server):
    """kafka-python as the applier builds it: no api_version, so it negotiates with ApiVersions."""
    client = KafkaAdminClient(bootstrap_servers=server.bootstrap_servers(), request_timeout_ms=5000,
                              bootstrap_timeout_ms=10000)
    try:
        yield client
    finally:
        client.close()


def roundtrip(server: AdminServer, broker: int, request, response_cls, version: int):
    """One request at `version` on a fresh socket to `broker`, its answer decoded with kafka-python's class."""
    request.API_VERSION = version
    request.with_header(correlation_id=11, client_id="groups-test")
    host, port = server.address(broker).split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(request.encode(header=True, framed=True))
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        frame = sock.recv(size, socket.MSG_WAITALL)
    response = response_cls.decode(frame, version=version, header=True)
    assert response.header.correlation_id == 11
    return response


def commit_request(group, offsets, generation=-1, member="", instance=None, metadata=""):
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=generation, member_id=member,
                               group_instance_id=instance, retention_time_ms=-1,
                               topics=[T(name=TOPIC, partitions=[
                                   T.OffsetCommitRequestPartition(partition_index=p, committed_offset=o,
                                                                  committed_leader_epoch=-1,
                                                                  committed_metadata=metadata)
                                   for p, o in offsets.items()])])


def commit_errors(response):
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def test_api_versions_announce_the_group_apis_at_kafka_3_6_2(server):
    r = roundtrip(server, 1, ApiVersionsRequest(client_software_name="t", client_software_version="1"),
                  ApiVersionsResponse, 3)
    versions = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
    # clients/src/main/resources/common/message/*Request.json at 3.6.2 (OffsetCommit 9 is latestVersionUnstable)
    assert {k: versions[k] for k in (8, 9, 10, 15, 16)} == {8: (0, 8), 9: (0, 8), 10: (0, 4), 15: (0, 5),
                                                             16: (0, 4)}


def test_kafka_python_negotiates_the_batched_and_multi_group_versions(server, admin):
    admin.list_group_offsets(["idle", "live"])
    admin.alter_group_offsets("idle", {TopicPartition(TOPIC, 0): OffsetAndMetadata(41, "", None)})
    data = admin._manager.broker_version_data
    assert [data.api_version(c) for c in (FindCoordinatorRequest, OffsetFetchRequest, OffsetCommitRequest,
                                          DescribeGroupsRequest, ListGroupsRequest)] == [4, 8, 8, 5, 4]
    with server.state.lock:
        # one batched FindCoordinator (KIP-699) and one OffsetFetch v8 for both groups (KIP-709)
        assert server.state.served[(COORDINATOR, "offset_fetch")] == 1
        assert server.state.commits[0].version == 8


@pytest.mark.parametrize("version", range(5))
def test_find_coordinator_names_the_coordinator_at_every_version(server, version):
    keys = ["idle", "live", "never-seen"]
    if version >= 4:
        r = roundtrip(server, 3, FindCoordinatorRequest(key_type=0, coordinator_keys=keys), FindCoordinatorResponse,
                      version)
        assert [(c.key, c.node_id, c.port, c.error_code) for c in r.coordinators] == \
            [(k, COORDINATOR, server.state.brokers[COORDINATOR].port, NONE) for k in keys]
    else:
        r = roundtrip(server, 3, FindCoordinatorRequest(key="idle", key_type=0), FindCoordinatorResponse, version)
        assert (r.error_code, r.node_id, r.host, r.port) == (NONE, COORDINATOR, "127.0.0.1",
                                                             server.state.brokers[COORDINATOR].port)


def test_a_coordinator_that_is_not_served_is_not_available(server):
    with server.state.lock:
        server.state.group_coordinator = 9
    r = roundtrip(server, 1, FindCoordinatorRequest(key_type=0, coordinator_keys=["idle"]), FindCoordinatorResponse, 4)
    (c,) = r.coordinators
    assert (c.error_code, c.node_id, c.host, c.port) == (COORDINATOR_NOT_AVAILABLE, -1, "", -1)
    r = roundtrip(server, 1, FindCoordinatorRequest(key="idle", key_type=0), FindCoordinatorResponse, 2)
    assert (r.error_code, r.node_id) == (COORDINATOR_NOT_AVAILABLE, -1)


def test_describe_groups(server, admin):
    with server.state.lock:
        server.state.groups["kip848"] = ServedGroup(state="Stable", members=["m1"], group_type="consumer")
    d = admin.describe_groups(["idle", "live", "never-seen", "kip848"])
    assert (d["idle"]["group_state"], d["idle"]["protocol_type"], d["idle"]["members"], d["idle"]["error"]) == \
        ("Empty", "consumer", [], None)
    live = d["live"]
    assert (live["group_state"], live["protocol_data"]) == ("Stable", "range")
    assert [(m["member_id"], m["client_id"]) for m in live["members"]] == [(MEMBER, "consumer-app-1")]
    # GroupMetadataManager.describeGroups: an unknown group, or one that is not classic, is Dead without an error
    assert [(d[g]["group_state"], d[g]["members"], d[g]["error"]) for g in ("never-seen", "kip848")] == \
        [("Dead", [], None)] * 2
    # asked for (kafka-python always asks), without an authorizer: every operation of a GROUP
    assert set(live["authorized_operations"]) == {"READ", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}


def test_list_groups_at_the_coordinator_only(server, admin):
    with server.state.lock:
        server.state.groups["kip848"] = ServedGroup(state="Stable", members=["m1"], group_type="consumer")
    listed = admin.list_groups()          # asks every broker: the others answer an empty list, no error
    assert sorted((g["group_id"], g["group_state"]) for g in listed) == \
        [("idle", "Empty"), ("kip848", "Stable"), ("live", "Stable")]
    assert admin.list_groups(broker_ids=[1, 3]) == []
    assert sorted(g["group_id"] for g in admin.list_groups(states_filter=["stable"])) == ["kip848", "live"]


def test_list_group_offsets(server, admin):
    tps = [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)]
    got = admin.list_group_offsets({"idle": tps, "live": tps, "never-seen": tps})
    offsets = {g: {tp.partition: o.offset for tp, o in found.items()} for g, found in got.items()}
    # no commit (or no group): -1 and no error (OffsetMetadataManager.fetchOffsets, INVALID_OFFSET)
    assert offsets == {"idle": {0: 40, 1: 7}, "live": {0: 12, 1: -1}, "never-seen": {0: -1, 1: -1}}
    whole = admin.list_group_offsets("idle")["idle"]          # topics null: fetchAllOffsets
    assert {tp: o.offset for tp, o in whole.items()} == {TopicPartition(TOPIC, 0): 40, TopicPartition(TOPIC, 1): 7}


def test_alter_group_offsets_on_an_empty_group_is_the_admin_commit(server, admin):
    answer = admin.alter_group_offsets("idle", {TopicPartition(TOPIC, 0): OffsetAndMetadata(405, "", None),
                                                TopicPartition("gone", 0): OffsetAndMetadata(1, "", None)})
    assert answer == {TopicPartition(TOPIC, 0): kerrors.NoError,
                      TopicPartition("gone", 0): kerrors.UnknownTopicOrPartitionError}
    with server.state.lock:
        assert server.state.commits == [ServedCommit(broker=COORDINATOR, version=8, group_id="idle", generation_id=-1,
                                                     member_id="", group_instance_id=None,
                                                     offsets=((TOPIC, 0, 405, -1, ""), ("gone", 0, 1, -1, "")))]
        assert server.state.groups["idle"].committed == {(TOPIC, 0): 405, (TOPIC, 1): 7}
    assert admin.list_group_offsets({"idle": [TopicPartition(TOPIC, 0)]})["idle"][TopicPartition(TOPIC, 0)].offset \
        == 405


def test_a_commit_to_an_unknown_group_creates_a_simple_group(server, admin):
    answer = admin.alter_group_offsets("fresh", {TopicPartition(TOPIC, 1): OffsetAndMetadata(3, "", None)})
    assert answer == {TopicPartition(TOPIC, 1): kerrors.NoError}
    assert admin.describe_groups(["fresh"])["fresh"]["group_state"] == "Empty"
    with server.state.lock:
        g = server.state.groups["fresh"]
        # getOrMaybeCreateClassicGroup: Empty, no protocol type
        assert (g.state, g.protocol_type, g.members, g.committed) == ("Empty", "", [], {(TOPIC, 1): 3})


@pytest.mark.parametrize("state, members, group_type, error", [
    ("Stable", [MEMBER], "classic", kerrors.UnknownMemberIdError),
    ("PreparingRebalance", [MEMBER], "classic", kerrors.UnknownMemberIdError),
    ("CompletingRebalance", [MEMBER], "classic", kerrors.UnknownMemberIdError),
    ("Dead", [], "classic", kerrors.CoordinatorNotAvailableError),
    ("Stable", ["m1"], "consumer", kerrors.UnknownMemberIdError),
])
def test_a_group_that_is_not_empty_refuses_the_admin_commit(server, admin, state, members, group_type, error):
    with server.state.lock:
        server.state.groups["busy"] = ServedGroup(state=state, members=list(members), group_type=group_type,
                                                  generation=5, committed={(TOPIC, 0): 12})
    answer = admin.alter_group_offsets("busy", {TopicPartition(TOPIC, 0): OffsetAndMetadata(405, "", None)})
    # ClassicGroup.validateOffsetCommit / ConsumerGroup.validateOffsetCommit, for every partition of the request
    assert answer == {TopicPartition(TOPIC, 0): error}
    with server.state.lock:
        assert server.state.groups["busy"].committed == {(TOPIC, 0): 12}
        (c,) = server.state.commits
        assert (c.group_id, c.generation_id, c.member_id) == ("busy", -1, "")


def test_an_empty_consumer_protocol_group_takes_the_admin_commit(server, admin):
    with server.state.lock:
        server.state.groups["kip848"] = ServedGroup(state="Empty", group_type="consumer")
    answer = admin.alter_group_offsets("kip848", {TopicPartition(TOPIC, 0): OffsetAndMetadata(9, "", None)})
    assert answer == {TopicPartition(TOPIC, 0): kerrors.NoError}


@pytest.mark.parametrize("group, generation, member, instance, state, expected", [
    ("live", 5, MEMBER, None, "Stable", NONE),                       # the member's own commit
    ("live", 4, MEMBER, None, "Stable", ILLEGAL_GENERATION),
    ("live", 5, "consumer-other-1", None, "Stable", UNKNOWN_MEMBER_ID),
    ("live", 5, MEMBER, "static-1", "Stable", UNKNOWN_MEMBER_ID),     # no static member of that instance id
    ("live", 5, MEMBER, None, "CompletingRebalance", REBALANCE_IN_PROGRESS),
    ("never-seen", 3, MEMBER, None, None, ILLEGAL_GENERATION),       # < v9: not GROUP_ID_NOT_FOUND
    ("idle", -1, "consumer-gone-1", None, "Empty", NONE),           # generation -1 on Empty: before any member check
])
def test_member_commits_follow_classic_group_validation(server, group, generation, member, instance, state,
                                                         expected):
    with server.state.lock:
        if state is not None:
            server.state.groups[group].state = state
    r = roundtrip(server, COORDINATOR, commit_request(group, {0: 50}, generation, member, instance),
                  OffsetCommitResponse, 8)
    assert commit_errors(r) == {(TOPIC, 0): expected}
    with server.state.lock:
        committed = server.state.groups.get(group)
        assert (committed is not None and committed.committed.get((TOPIC, 0)) == 50) is (expected == NONE)


def test_a_modern_member_must_commit_with_v9(server):
    with server.state.lock:
        server.state.groups["kip848"] = ServedGroup(state="Stable", members=["m1"], group_type="consumer",
                                                    generation=2)
    r = roundtrip(server, COORDINATOR, commit_request("kip848", {0: 5}, 2, "m1"), OffsetCommitResponse, 8)
    assert commit_errors(r) == {(TOPIC, 0): UNSUPPORTED_VERSION}


def test_metadata_over_the_limit_is_refused_per_partition(server):
    r = roundtrip(server, COORDINATOR, commit_request("idle", {0: 50}, metadata="x" * 4097), OffsetCommitResponse, 8)
    assert commit_errors(r) == {(TOPIC, 0): OFFSET_METADATA_TOO_LARGE}


def test_group_apis_at_another_broker_answer_not_coordinator(server):
    r = roundtrip(server, 1, DescribeGroupsRequest(groups=["idle"], include_authorized_operations=True),
                  DescribeGroupsResponse, 5)
    assert [(g.group_id, g.error_code) for g in r.groups] == [("idle", NOT_COORDINATOR)]
    G = OffsetFetchRequest.OffsetFetchRequestGroup
    r = roundtrip(server, 1, OffsetFetchRequest(groups=[G(group_id="idle", topics=None)]), OffsetFetchResponse, 8)
    assert [(g.group_id, g.error_code, g.topics) for g in r.groups] == [("idle", NOT_COORDINATOR, [])]
    r = roundtrip(server, 3, OffsetFetchRequest(group_id="idle", topics=None), OffsetFetchResponse, 7)
    assert (r.error_code, r.topics) == (NOT_COORDINATOR, [])
    r = roundtrip(server, 3, commit_request("idle", {0: 1, 1: 1}), OffsetCommitResponse, 8)
    assert commit_errors(r) == {(TOPIC, 0): NOT_COORDINATOR, (TOPIC, 1): NOT_COORDINATOR}
    r = roundtrip(server, 1, ListGroupsRequest(), ListGroupsResponse, 4)
    assert (r.error_code, r.groups) == (NONE, [])
    with server.state.lock:
        assert server.state.groups["idle"].committed == {(TOPIC, 0): 40, (TOPIC, 1): 7}
        assert [c.broker for c in server.state.commits] == [3]       # received (and recorded), not committed


@pytest.mark.parametrize("version", range(9))
def test_offset_commit_and_fetch_round_trip_at_every_version(server, version):
    if version >= 8:
        G = OffsetFetchRequest.OffsetFetchRequestGroup
        fetch = OffsetFetchRequest(groups=[G(group_id="idle", topics=[G.OffsetFetchRequestTopics(
            name=TOPIC, partition_indexes=[0, 1])])])
    else:
        T = OffsetFetchRequest.OffsetFetchRequestTopic
        fetch = OffsetFetchRequest(group_id="idle", topics=[T(name=TOPIC, partition_indexes=[0, 1])])
    r = roundtrip(server, COORDINATOR, commit_request("idle", {1: 100 + version}), OffsetCommitResponse, version)
    assert commit_errors(r) == {(TOPIC, 1): NONE}
    r = roundtrip(server, COORDINATOR, fetch, OffsetFetchResponse, version)
    topics = r.groups[0].topics if version >= 8 else r.topics
    assert [(p.partition_index, p.committed_offset, p.error_code) for t in topics for p in t.partitions] == \
        [(0, 40, NONE), (1, 100 + version, NONE)]


@pytest.mark.parametrize("version", range(6))
def test_describe_groups_at_every_version(server, version):
    r = roundtrip(server, COORDINATOR, DescribeGroupsRequest(groups=["live", "idle"],
                                                             include_authorized_operations=True),
                  DescribeGroupsResponse, version)
    assert [(g.group_id, g.group_state, g.protocol_data, [m.member_id for m in g.members]) for g in r.groups] == \
        [("live", "Stable", "range", [MEMBER]), ("idle", "Empty", "", [])]


@pytest.mark.parametrize("version", range(5))
def test_list_groups_at_every_version(server, version):
    r = roundtrip(server, COORDINATOR, ListGroupsRequest(states_filter=["Empty"] if version >= 4 else []),
                  ListGroupsResponse, version)
    expected = [("idle", "Empty")] if version >= 4 else [("idle", None), ("live", None)]
    assert [(g.group_id, g.group_state if version >= 4 else None) for g in r.groups] == expected
