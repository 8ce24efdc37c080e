"""A Kafka-protocol admin endpoint on loopback: one listener per simulated broker, each knowing its broker id,
speaking the real wire encoding through kafka-python's own request/response classes (generated from Kafka's
message schemas). The lab serves its brokers with it; the admin collector's tests run against it.

    state = ServedCluster(cluster_id="c1", controller=1, brokers={1: ServedBroker(1, ["/d0"])}, ...)
    with AdminServer(state) as server:
        KafkaAdminClient(bootstrap_servers=server.bootstrap_servers())

Answers, per the broker's code at apache/kafka@1eb7644349c (docs/formats/kafka.md), with Kafka 3.6's versions:
  ApiVersions (0-3; a higher version gets UNSUPPORTED_VERSION and the list in v0, KIP-511)
  Metadata (0-12): the cluster view, the same from every broker; never ELR (no Metadata version has it)
  DescribeTopicPartitions (0, with `describe_topic_partitions`: brokers >= 3.8): ELR and last known ELR, paged
  DescribeLogDirs (0-4): this broker's log dirs and their replicas (KAFKA_STORAGE_ERROR for an offline dir)
  ListOffsets (0-8), Partition.fetchOffsetForTimestamp: leader only; LATEST = the high watermark
      (read_uncommitted) or last stable offset (read_committed) with the current leader epoch, OFFSET_NOT_AVAILABLE
      while the HW is below that epoch's start; EARLIEST = the log start, with the earliest cached epoch if it
      starts there
  OffsetForLeaderEpoch (0-4), Partition.lastOffsetForLeaderEpoch: the CurrentLeaderEpoch fence (FENCED_ /
      UNKNOWN_LEADER_EPOCH), leader only (fetchOnlyFromLeader; followers answer too with
      `followers_answer_epochs`), from this broker's own cache: LeaderEpochCache.end_offset_for(epoch, its LEO).
Group coordinator, per group-coordinator/src/main/java/org/apache/kafka/coordinator/group/ and KafkaApis.scala at the
same commit, for the groups in `groups` (ServedGroup: classic, or a KIP-848 consumer group), all coordinated by the
broker `group_coordinator` (default: the controller):
  FindCoordinator (0-4; CoordinatorKeys batching from v4, KIP-699), KafkaApis.getCoordinator: that broker for any
      group or transactional id (SHARE keys need v6: INVALID_REQUEST); COORDINATOR_NOT_AVAILABLE and no node
      (-1, "", -1) when it is not a served broker
  DescribeGroups (0-5), GroupMetadataManager.describeGroups: state, protocol type, members (ProtocolData, the chosen
      protocol, for a Stable group only); a group that does not exist, or is not classic, is Dead with error NONE;
      authorized operations, when asked (v3+), all of a GROUP's (AuthHelper.authorizedOperations, no authorizer)
  ListGroups (0-4; StatesFilter v4+, compared in lower case), GroupMetadataManager.listGroups: the coordinator lists
      its groups, any other broker an empty list (GroupCoordinatorService.listGroups drops NOT_COORDINATOR)
  OffsetFetch (0-8; one group before v8, several from v8, KIP-709), OffsetMetadataManager.fetchOffsets /
      fetchAllOffsets: the committed offset, or -1 (INVALID_OFFSET) with error NONE when there is none or the group
      does not exist; committed leader epoch -1 and metadata "" (the lab keeps offsets only); RequireStable ignored
      (no transactions); v0 (ZooKeeper storage in Kafka) is served as v1
  OffsetCommit (0-8; v9 is `latestVersionUnstable` in 3.6.2), KafkaApis.handleOffsetCommitRequest: a topic or
      partition missing from the metadata gets UNKNOWN_TOPIC_OR_PARTITION, the rest goes to
      OffsetMetadataManager.validateOffsetCommit: a group that does not exist is created Empty (protocol type "") by
      a generation -1 commit (the admin client's), else ILLEGAL_GENERATION (GROUP_ID_NOT_FOUND from v9); then
      ClassicGroup.validateOffsetCommit: Dead -> COORDINATOR_NOT_AVAILABLE; generation -1 on an Empty group commits;
      a member id, a generation >= 0 or an instance id must name a member (UNKNOWN_MEMBER_ID) of this generation
      (ILLEGAL_GENERATION); generation -1 without a member on a group that is not Empty -> UNKNOWN_MEMBER_ID;
      CompletingRebalance -> REBALANCE_IN_PROGRESS (a consumer group: see ServedGroup). A group-level error is every
      partition's; metadata over offset.metadata.max.bytes (4096) -> OFFSET_METADATA_TOO_LARGE; v0 (ZooKeeper
      storage in Kafka) is served as v1.
  At a broker other than the coordinator, DescribeGroups, OffsetFetch and OffsetCommit answer NOT_COORDINATOR.
  Every OffsetCommit received, at any broker, is kept in `commits` (ServedCommit) before it is answered.
Faults: `errors[(api, broker, topic, partition)] = code` answers that code for that partition (api one of
"metadata", "list_offsets", "offset_for_leader_epoch", "describe_topic_partitions"), `log_dir_errors[(broker,
dir)]` marks a log dir offline, and a broker in `silent` accepts connections and reads requests but never answers.
With `sasl_plain` ({user: password}) every listener is SASL_PLAINTEXT with PLAIN (SaslHandshake 0-1,
SaslAuthenticate 0-2): nothing but ApiVersions and the handshake is answered before authentication, and a wrong
password gets SASL_AUTHENTICATION_FAILED and a closed connection.
The lab may change the state between requests (traffic keeps flowing): it holds `state.lock` while it does, and
every answer is built under the same lock, so no answer sees half a change; `on_request(broker, api)` runs under
that lock before each answer (a hook to move traffic on between two requests)."""
from __future__ import annotations

import asyncio
import struct
import threading
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from kafka.protocol.admin import DescribeGroupsRequest, DescribeGroupsResponse, DescribeLogDirsRequest, \
    DescribeLogDirsResponse, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, ListGroupsRequest, \
    ListGroupsResponse
from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse, OffsetCommitRequest, \
    OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse, OffsetForLeaderEpochRequest, \
    OffsetForLeaderEpochResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, FindCoordinatorRequest, \
    FindCoordinatorResponse, MetadataRequest, MetadataResponse
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, \
    SaslHandshakeResponse

from audit.systems.kafka.domain.epochs import LeaderEpochCache
from lab.loopback import LoopbackListeners

# clients/src/main/java/org/apache/kafka/common/protocol/Errors.java
(NONE, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER, UNSUPPORTED_SASL_MECHANISM,
 UNSUPPORTED_VERSION, KAFKA_STORAGE_ERROR, SASL_AUTHENTICATION_FAILED, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
 OFFSET_NOT_AVAILABLE) = 0, 3, 5, 6, 33, 35, 56, 58, 74, 75, 78
(OFFSET_METADATA_TOO_LARGE, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
 REBALANCE_IN_PROGRESS, INVALID_REQUEST, GROUP_ID_NOT_FOUND) = 12, 15, 16, 22, 25, 27, 42, 69
EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1      # ListOffsetsRequest
READ_COMMITTED = 1                                 # IsolationLevel
UNKNOWN_VOLUME_BYTES = -1                          # DescribeLogDirsResponse
AUTHORIZED_OPERATIONS_OMITTED = -2147483648        # MetadataResponse / DescribeTopicPartitionsResponse
INVALID_OFFSET = -1                                # OffsetFetchResponse: no committed offset
OFFSET_METADATA_MAX_SIZE = 4096                    # GroupCoordinatorConfig.OFFSET_METADATA_MAX_SIZE_DEFAULT
# AclEntry.supportedOperations(GROUP): READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS (AclOperation codes);
# kafka-python's DescribeGroupsResponse carries the bitfield as the set of its bits
GROUP_OPERATIONS = frozenset({3, 6, 8, 10, 11})
GROUP_KEY, TRANSACTION_KEY = 0, 1                 # CoordinatorType (SHARE, 2, needs FindCoordinator v6)

# api key -> (name, request class, response class, max version served): Kafka 3.6.2's validVersions
# (clients/src/main/resources/common/message/*Request.json at tag 3.6.2; DescribeTopicPartitions at 3.8.0)
_APIS = {
    18: ("api_versions", ApiVersionsRequest, ApiVersionsResponse, 3),
    3: ("metadata", MetadataRequest, MetadataResponse, 12),
    2: ("list_offsets", ListOffsetsRequest, ListOffsetsResponse, 8),
    23: ("offset_for_leader_epoch", OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, 4),
    35: ("describe_log_dirs", DescribeLogDirsRequest, DescribeLogDirsResponse, 4),
    75: ("describe_topic_partitions", DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, 0),
    10: ("find_coordinator", FindCoordinatorRequest, FindCoordinatorResponse, 4),
    15: ("describe_groups", DescribeGroupsRequest, DescribeGroupsResponse, 5),
    16: ("list_groups", ListGroupsRequest, ListGroupsResponse, 4),
    9: ("offset_fetch", OffsetFetchRequest, OffsetFetchResponse, 8),
    8: ("offset_commit", OffsetCommitRequest, OffsetCommitResponse, 8),     # 9 is latestVersionUnstable
    17: ("sasl_handshake", SaslHandshakeRequest, SaslHandshakeResponse, 1),
    36: ("sasl_authenticate", SaslAuthenticateRequest, SaslAuthenticateResponse, 2),
}
_BEFORE_AUTH = frozenset({18, 17, 36})       # all a SASL listener serves before authentication
API_NAMES = frozenset(name for name, *_ in _APIS.values())


@dataclass
class ServedBroker:
    broker_id: int
    log_dirs: list[str]
    rack: str | None = None
    host: str = "127.0.0.1"
    port: int = 0             # set by AdminServer when it listens


@dataclass
class ServedPartition:
    """The controller's view of one partition (what Metadata and DescribeTopicPartitions answer)."""

    topic: str
    partition: int
    leader: int               # -1: no leader
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    elr: list[int] | None = None
    last_known_elr: list[int] | None = None
    offline: list[int] = field(default_factory=list)
    error_code: int = NONE


@dataclass
class ServedReplica:
    """One broker's local log of one partition."""

    log_dir: str
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    epochs: list[tuple[int, int]]          # (epoch, start offset), the replica's leader-epoch cache
    size: int = 0
    offset_lag: int = 0                    # DescribeLogDirs offsetLag as the lab computes it
    last_stable_offset: int | None = None  # None: the high watermark (no open transaction)
    is_future: bool = False
    leader_epoch: int | None = None        # this broker's view of the leader epoch; None: the controller's


@dataclass
class ServedGroup:
    """A group at its coordinator: what DescribeGroups and ListGroups say, and its commits. `group_type` "classic"
    (ClassicGroup) or "consumer" (KIP-848's ConsumerGroup, modern/consumer/ConsumerGroup.java: DescribeGroups answers
    it Dead, ListGroups lists it with its state, and its members commit with OffsetCommit v9+ only)."""

    state: str = "Empty"          # ClassicGroupState: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead
    protocol_type: str = "consumer"
    members: list[str] = field(default_factory=list)      # member ids (dynamic: client id + "-" + a UUID)
    committed: dict[tuple[str, int], int] = field(default_factory=dict)    # (topic, partition) -> offset
    protocol: str = "range"       # the chosen protocol, DescribeGroups' ProtocolData while Stable
    generation: int = 0
    group_type: str = "classic"


@dataclass(frozen=True)
class ServedCommit:
    """One OffsetCommit request as received (`offsets`: (topic, partition, offset, leader epoch, metadata))."""

    broker: int
    version: int
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    offsets: tuple[tuple[str, int, int, int, str | None], ...]


@dataclass
class ServedCluster:
    cluster_id: str
    controller: int
    brokers: dict[int, ServedBroker]
    partitions: dict[tuple[str, int], ServedPartition] = field(default_factory=dict)
    replicas: dict[tuple[int, str, int], ServedReplica] = field(default_factory=dict)   # (broker, topic, p)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    internal_topics: set[str] = field(default_factory=lambda: {"__consumer_offsets", "__transaction_state"})
    errors: dict[tuple[str, int, str, int], int] = field(default_factory=dict)
    log_dir_errors: dict[tuple[int, str], int] = field(default_factory=dict)
    silent: set[int] = field(default_factory=set)
    followers_answer_epochs: bool = False
    describe_topic_partitions: bool = False
    sasl_plain: dict[str, str] | None = None     # username -> password: a SASL_PLAINTEXT listener with PLAIN
    groups: dict[str, ServedGroup] = field(default_factory=dict)      # group id -> the group (classic or consumer)
    group_coordinator: int | None = None         # the broker coordinating every group; None: the controller
    commits: list[ServedCommit] = field(default_factory=list)         # every OffsetCommit received, in order
    # called as on_request(broker, api) under the lock before each answer: the lab moves traffic on here
    on_request: Callable[[int, str], None] | None = field(default=None, repr=False, compare=False)
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)
    served: Counter = field(default_factory=Counter, repr=False, compare=False)   # (broker, api) -> requests

    def topic_id(self, topic: str) -> uuid.UUID:
        """A stable id per topic name (the lab may set its own)."""
        if topic not in self.topic_ids:
            self.topic_ids[topic] = uuid.uuid5(uuid.NAMESPACE_URL, f"lab-topic:{self.cluster_id}:{topic}")
        return self.topic_ids[topic]

    def topics(self) -> list[str]:
        return sorted({t for t, _ in self.partitions})

    def coordinator(self) -> int:
        """The group coordinator's broker id (KafkaApis.getCoordinator: the leader of the group's
        __consumer_offsets partition; here one broker for every group)."""
        return self.controller if self.group_coordinator is None else self.group_coordinator


class _Broker:
    """The answers of one broker. Each `_api` method runs under the state's lock and returns a response."""

    def __init__(self, state: ServedCluster, broker_id: int):
        self.state, self.broker_id = state, broker_id

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = {"authenticated": False}
        while True:
            try:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
            except asyncio.CancelledError:
                # the server is stopping: end quietly (Python 3.11's StreamReaderProtocol reports a cancelled
                # handler task as an error)
                return
            with self.state.lock:
                out = self._answer(frame, conn)
            if out is None:
                return                # Kafka closes the connection on a request it cannot parse or allow
            if not out:
                continue              # silent: reads and never answers (the client's timeout must fire)
            writer.write(out)
            await writer.drain()
            if conn.get("close"):
                return                # a failed authentication ends the connection after its answer

    def _answer(self, frame: bytes, conn: dict) -> bytes | None:
        api_key, version, correlation_id = struct.unpack_from(">hhi", frame)
        spec = _APIS.get(api_key)
        sasl = self.state.sasl_plain is not None
        if spec is None or (api_key == 75 and not self.state.describe_topic_partitions) or \
                (api_key in (17, 36) and not sasl) or \
                (sasl and not conn["authenticated"] and api_key not in _BEFORE_AUTH):
            return None
        name, request_cls, response_cls, max_version = spec
        self.state.served[(self.broker_id, name)] += 1
        if self.state.on_request is not None:
            self.state.on_request(self.broker_id, name)
        if self.broker_id in self.state.silent:
            return b""
        if version > max_version:
            if api_key != 18:
                return None
            # KIP-511: an unknown ApiVersions version is answered in v0 with the versions we do serve
            response, version = self._api_versions(error=UNSUPPORTED_VERSION), 0
        else:
            request = request_cls.decode(frame, version=version, header=True)
            if api_key == 36:
                response = self._sasl_authenticate(request, conn)
            else:
                response = getattr(self, "_" + name)(request, version)
        response.API_VERSION = version          # before with_header: the header takes the version
        response.with_header(correlation_id=correlation_id)
        return response.encode(header=True, framed=True)

    def _sasl_handshake(self, request, version: int):
        ok = request.mechanism == "PLAIN"
        return SaslHandshakeResponse(error_code=NONE if ok else UNSUPPORTED_SASL_MECHANISM, mechanisms=["PLAIN"])

    def _sasl_authenticate(self, request, conn: dict):
        """PlainSaslServer: `authzid NUL authcid NUL passwd`, checked against `sasl_plain`."""
        parts = bytes(request.auth_bytes).split(b"\0")
        users = self.state.sasl_plain or {}
        ok = len(parts) == 3 and users.get(parts[1].decode("utf-8", "replace")) == parts[2].decode("utf-8", "replace")
        conn["authenticated"], conn["close"] = ok, not ok
        return SaslAuthenticateResponse(error_code=NONE if ok else SASL_AUTHENTICATION_FAILED,
                                        error_message=None if ok else "Authentication failed: Invalid username or "
                                                                      "password", auth_bytes=b"",
                                        session_lifetime_ms=0)

    # -- APIs ---------------------------------------------------------------------------------------------
    def _api_versions(self, request=None, version: int = 0, error: int = NONE):
        keys = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=0, max_version=spec[3])
                for k, spec in sorted(_APIS.items()) if (k != 75 or self.state.describe_topic_partitions)
                and (k not in (17, 36) or self.state.sasl_plain is not None)]
        return ApiVersionsResponse(error_code=error, api_keys=keys, throttle_time_ms=0)

    def _error(self, api: str, topic: str, partition: int) -> int:
        return self.state.errors.get((api, self.broker_id, topic, partition), NONE)

    def _metadata(self, request, version: int):
        s = self.state
        brokers = [MetadataResponse.MetadataResponseBroker(node_id=b.broker_id, host=b.host, port=b.port, rack=b.rack)
                   for b in sorted(s.brokers.values(), key=lambda b: b.broker_id)]
        if request.topics is None or (version == 0 and not request.topics):
            names = s.topics()
        else:
            names = [t.name for t in request.topics]
        topics = []
        Topic = MetadataResponse.MetadataResponseTopic
        Partition = Topic.MetadataResponsePartition
        known = set(s.topics())
        for name in names:
            if name not in known:
                topics.append(Topic(error_code=UNKNOWN_TOPIC_OR_PARTITION, name=name, topic_id=uuid.UUID(int=0),
                                    is_internal=False, partitions=[], authorized_operations=None))
                continue
            parts = [Partition(error_code=self._error("metadata", name, p.partition) or p.error_code,
                               partition_index=p.partition, leader_id=p.leader, leader_epoch=p.leader_epoch,
                               replica_nodes=list(p.replicas), isr_nodes=list(p.isr), offline_replicas=list(p.offline))
                     for (t, _), p in sorted(s.partitions.items()) if t == name]
            topics.append(Topic(error_code=NONE, name=name, topic_id=s.topic_id(name),
                                is_internal=name in s.internal_topics, partitions=parts, authorized_operations=None))
        return MetadataResponse(throttle_time_ms=0, brokers=brokers, cluster_id=s.cluster_id,
                                controller_id=s.controller, topics=topics, authorized_operations=None)

    def _describe_topic_partitions(self, request, version: int):
        """KafkaApis.handleDescribeTopicPartitionsRequest: topics sorted by name, partitions by index, from the
        cursor on, at most `response_partition_limit` partitions; the cursor names the first one left out."""
        s = self.state
        R = DescribeTopicPartitionsResponse
        Topic = R.DescribeTopicPartitionsResponseTopic
        Partition = Topic.DescribeTopicPartitionsResponsePartition
        names = sorted({t.name for t in request.topics}) if request.topics else s.topics()
        cursor = request.cursor
        if cursor is not None:
            names = [n for n in names if n >= cursor.topic_name]
        limit = request.response_partition_limit
        known = set(s.topics())
        topics, next_cursor = [], None
        for name in names:
            if name not in known:
                topics.append(Topic(error_code=UNKNOWN_TOPIC_OR_PARTITION, name=name, topic_id=uuid.UUID(int=0),
                                    is_internal=False, partitions=[],
                                    topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
                continue
            first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
            parts = []
            for (t, pi), p in sorted(s.partitions.items()):
                if t != name or pi < first:
                    continue
                if limit <= 0:
                    next_cursor = R.Cursor(topic_name=name, partition_index=pi)
                    break
                limit -= 1
                parts.append(Partition(error_code=self._error("describe_topic_partitions", name, pi) or p.error_code,
                                       partition_index=pi, leader_id=p.leader, leader_epoch=p.leader_epoch,
                                       replica_nodes=list(p.replicas), isr_nodes=list(p.isr),
                                       eligible_leader_replicas=None if p.elr is None else list(p.elr),
                                       last_known_elr=None if p.last_known_elr is None else list(p.last_known_elr),
                                       offline_replicas=list(p.offline)))
            if parts or next_cursor is None:
                topics.append(Topic(error_code=NONE, name=name, topic_id=s.topic_id(name),
                                    is_internal=name in s.internal_topics, partitions=parts,
                                    topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
            if next_cursor is not None:
                break
        return R(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)

    def _describe_log_dirs(self, request, version: int):
        s = self.state
        R = DescribeLogDirsResponse
        Result = R.DescribeLogDirsResult
        Topic = Result.DescribeLogDirsTopic
        Partition = Topic.DescribeLogDirsPartition
        wanted = None if request.topics is None else {(t.topic, p) for t in request.topics for p in t.partitions}
        broker = s.brokers[self.broker_id]
        results = []
        for log_dir in broker.log_dirs:
            error = s.log_dir_errors.get((self.broker_id, log_dir), NONE)
            by_topic: dict[str, list] = {}
            if error == NONE:
                for (b, topic, p), r in sorted(s.replicas.items()):
                    if b == self.broker_id and r.log_dir == log_dir and (wanted is None or (topic, p) in wanted):
                        by_topic.setdefault(topic, []).append(
                            Partition(partition_index=p, partition_size=r.size, offset_lag=r.offset_lag,
                                      is_future_key=r.is_future))
            results.append(Result(error_code=error, log_dir=log_dir,
                                  topics=[Topic(name=t, partitions=ps) for t, ps in by_topic.items()],
                                  total_bytes=UNKNOWN_VOLUME_BYTES, usable_bytes=UNKNOWN_VOLUME_BYTES))
        return R(throttle_time_ms=0, error_code=NONE, results=results)

    def _local(self, api: str, topic: str, partition: int, current_leader_epoch: int, require_leader: bool):
        """(replica, partition, error): ReplicaManager.getPartitionOrError + Partition.getLocalLog."""
        s = self.state
        injected = self._error(api, topic, partition)
        if injected != NONE:
            return None, None, injected
        part = s.partitions.get((topic, partition))
        replica = s.replicas.get((self.broker_id, topic, partition))
        if replica is None:
            return None, part, NOT_LEADER_OR_FOLLOWER if part is not None else UNKNOWN_TOPIC_OR_PARTITION
        local_epoch = replica.leader_epoch if replica.leader_epoch is not None else \
            (part.leader_epoch if part is not None else -1)
        if current_leader_epoch >= 0 and local_epoch > current_leader_epoch:
            return None, part, FENCED_LEADER_EPOCH
        if current_leader_epoch >= 0 and local_epoch < current_leader_epoch:
            return None, part, UNKNOWN_LEADER_EPOCH
        if require_leader and (part is None or part.leader != self.broker_id):
            return None, part, NOT_LEADER_OR_FOLLOWER
        return replica, part, NONE

    def _list_offsets(self, request, version: int):
        R = ListOffsetsResponse
        Topic = R.ListOffsetsTopicResponse
        Partition = Topic.ListOffsetsPartitionResponse
        topics = []
        for t in request.topics:
            parts = []
            for p in t.partitions:
                replica, part, error = self._local("list_offsets", t.name, p.partition_index,
                                                   p.current_leader_epoch, require_leader=True)
                offset, epoch = -1, -1
                if error == NONE:
                    offset, epoch, error = self._offset_for(replica, part, p.timestamp, request.isolation_level)
                parts.append(Partition(partition_index=p.partition_index, error_code=error, old_style_offsets=[],
                                       timestamp=-1, offset=offset, leader_epoch=epoch))
            topics.append(Topic(name=t.name, partitions=parts))
        return R(throttle_time_ms=0, topics=topics)

    @staticmethod
    def _offset_for(replica: ServedReplica, part: ServedPartition, timestamp: int, isolation: int):
        cache = LeaderEpochCache(replica.epochs)
        leader_epoch = replica.leader_epoch if replica.leader_epoch is not None else part.leader_epoch
        if timestamp == LATEST_TIMESTAMP:
            start = cache.epoch_entry(leader_epoch)
            if start is not None and start.start_offset > replica.high_watermark:
                return -1, -1, OFFSET_NOT_AVAILABLE
            lso = replica.last_stable_offset if replica.last_stable_offset is not None else replica.high_watermark
            return (lso if isolation == READ_COMMITTED else replica.high_watermark), leader_epoch, NONE
        if timestamp == EARLIEST_TIMESTAMP:
            first = cache.earliest_entry
            epoch = first.epoch if first is not None and first.start_offset <= replica.log_start_offset else -1
            return replica.log_start_offset, epoch, NONE
        return -1, -1, NONE          # a timestamp search: the lab keeps no time index

    def _offset_for_leader_epoch(self, request, version: int):
        R = OffsetForLeaderEpochResponse
        Topic = R.OffsetForLeaderTopicResult
        Answer = Topic.EpochEndOffset
        topics = []
        for t in request.topics:
            parts = []
            for p in t.partitions:
                replica, _, error = self._local("offset_for_leader_epoch", t.topic, p.partition,
                                                p.current_leader_epoch,
                                                require_leader=not self.state.followers_answer_epochs)
                epoch, end = -1, -1
                if error == NONE:
                    epoch, end = LeaderEpochCache(replica.epochs).end_offset_for(p.leader_epoch,
                                                                                 replica.log_end_offset)
                    if end == -1:          # UnifiedLog.endOffsetForEpoch: None -> the defaults (-1, -1)
                        epoch = -1
                parts.append(Answer(error_code=error, partition=p.partition, leader_epoch=epoch, end_offset=end))
            topics.append(Topic(topic=t.topic, partitions=parts))
        return R(throttle_time_ms=0, topics=topics)

    # -- group coordinator ------------------------------------------------------------------------------------
    def _is_coordinator(self) -> bool:
        return self.broker_id == self.state.coordinator()

    def _find_coordinator(self, request, version: int):
        """KafkaApis.handleFindCoordinatorRequest(LessThanV4 / V4AndAbove) + getCoordinator."""
        R = FindCoordinatorResponse
        keys = list(request.coordinator_keys) if version >= 4 else [request.key]
        answers = []
        for key in keys:
            broker = self.state.brokers.get(self.state.coordinator())
            if request.key_type not in (GROUP_KEY, TRANSACTION_KEY):      # SHARE needs v6 (and a share coordinator)
                error, message = INVALID_REQUEST, "This most likely occurs because of a request being malformed " \
                    "by the client library or the message was sent to an incompatible broker. See the broker " \
                    "logs for more details."
            elif broker is None:
                error, message = COORDINATOR_NOT_AVAILABLE, "The coordinator is not available."
            else:
                error, message = NONE, None
            node = (broker.broker_id, broker.host, broker.port) if error == NONE else (-1, "", -1)   # Node.noNode
            answers.append((key, error, message, node))
        if version >= 4:
            return R(throttle_time_ms=0, coordinators=[
                R.Coordinator(key=key, node_id=node[0], host=node[1], port=node[2], error_code=error,
                              error_message=message) for key, error, message, node in answers])
        (_, error, message, (node_id, host, port)), = answers
        # below v4 a success carries Errors.NONE.message(), "NONE" (Errors.message: toString() without an exception)
        return R(throttle_time_ms=0, error_code=error, error_message=message if error != NONE else "NONE",
                 node_id=node_id, host=host, port=port)

    def _describe_groups(self, request, version: int):
        """GroupMetadataManager.describeGroups (GroupCoordinatorService: NOT_COORDINATOR per group elsewhere)."""
        R = DescribeGroupsResponse
        Group = R.DescribedGroup
        Member = Group.DescribedGroupMember
        ops = version >= 3 and request.include_authorized_operations
        out = []
        for group_id in request.groups:
            if not self._is_coordinator():
                # DescribeGroupsRequest.getErrorDescribedGroupList: the group id and the error, defaults otherwise
                out.append(Group(error_code=NOT_COORDINATOR, group_id=group_id, group_state="", protocol_type="",
                                 protocol_data="", members=[], authorized_operations=None))
                continue
            g = self.state.groups.get(group_id)
            if g is None or g.group_type != "classic":      # classicGroup(): GroupIdNotFoundException -> Dead
                out.append(Group(error_code=NONE, group_id=group_id, group_state="Dead", protocol_type="",
                                 protocol_data="", members=[], authorized_operations=set(GROUP_OPERATIONS) if ops
                                 else None))
                continue
            stable = g.state == "Stable"
            # ClassicGroupMember.describe / describeNoMetadata; the lab keeps no subscription nor assignment bytes.
            # A dynamic member id is clientId + "-" + a UUID (ClassicGroup.generateMemberId): its client id is that
            members = [Member(member_id=m, group_instance_id=None,
                              client_id=m[:-37] if len(m) > 37 and m[-37] == "-" else "", client_host="/127.0.0.1",
                              member_metadata=b"", member_assignment=b"") for m in g.members]
            out.append(Group(error_code=NONE, group_id=group_id, group_state=g.state, protocol_type=g.protocol_type,
                             protocol_data=g.protocol if stable else "", members=members,
                             authorized_operations=set(GROUP_OPERATIONS) if ops else None))
        return R(throttle_time_ms=0, groups=out)

    def _list_groups(self, request, version: int):
        """GroupMetadataManager.listGroups: the states filter (v4+) lower-cased and trimmed; Group.asListedGroup."""
        R = ListGroupsResponse
        wanted = {s.strip().lower() for s in request.states_filter} if version >= 4 and request.states_filter else None
        groups = []
        if self._is_coordinator():
            for group_id, g in sorted(self.state.groups.items()):
                if wanted is None or g.state.lower() in wanted:
                    groups.append(R.ListedGroup(group_id=group_id, protocol_type=g.protocol_type, group_state=g.state,
                                                group_type=g.group_type))
        return R(throttle_time_ms=0, error_code=NONE, groups=groups)

    def _fetched(self, group_id: str, topics: list[tuple[str, list[int]]] | None):
        """(group error, [(topic, [(partition, offset)])]): OffsetMetadataManager.fetchOffsets (topics given) or
        fetchAllOffsets (None); a Dead or unknown group reads as no commit (validateOffsetFetch ->
        GroupIdNotFoundException: every partition -1, or no topics)."""
        if not self._is_coordinator():
            return NOT_COORDINATOR, []
        g = self.state.groups.get(group_id)
        # ClassicGroup.validateOffsetFetch refuses a Dead group; ConsumerGroup's takes the admin's (no member, epoch -1)
        committed = g.committed if g is not None and (g.state != "Dead" or g.group_type != "classic") else {}
        if topics is None:
            names = sorted({t for t, _ in committed})
            topics = [(t, sorted(p for tt, p in committed if tt == t)) for t in names]
        return NONE, [(t, [(p, committed.get((t, p), INVALID_OFFSET)) for p in ps]) for t, ps in topics]

    def _offset_fetch(self, request, version: int):
        """KafkaApis.handleOffsetFetchRequestFromCoordinator; OffsetFetchResponse(groups, version): before v8 one
        group and its error top level (v2+; a group error comes without partitions, so v0-1 show none)."""
        R = OffsetFetchResponse
        if version >= 8:
            G = R.OffsetFetchResponseGroup
            T = G.OffsetFetchResponseTopics
            P = T.OffsetFetchResponsePartitions
            groups = []
            for req in request.groups:
                topics = None if req.topics is None else [(t.name, list(t.partition_indexes)) for t in req.topics]
                error, found = self._fetched(req.group_id, topics)
                groups.append(G(group_id=req.group_id, error_code=error, topics=[
                    T(name=t, partitions=[P(partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                                            metadata="", error_code=NONE) for p, o in ps]) for t, ps in found]))
            return R(throttle_time_ms=0, groups=groups)
        T = R.OffsetFetchResponseTopic
        P = T.OffsetFetchResponsePartition
        topics = None if request.topics is None else [(t.name, list(t.partition_indexes)) for t in request.topics]
        error, found = self._fetched(request.group_id, topics)
        return R(throttle_time_ms=0, error_code=error, topics=[
            T(name=t, partitions=[P(partition_index=p, committed_offset=o, committed_leader_epoch=-1, metadata="",
                                    error_code=NONE) for p, o in ps]) for t, ps in found])

    def _commit_error(self, request, version: int) -> int:
        """OffsetMetadataManager.validateOffsetCommit + ClassicGroup.validateOffsetCommit (not transactional);
        a group created here is a simple group (getOrMaybeCreateClassicGroup: Empty, no protocol type)."""
        if not self._is_coordinator():
            return NOT_COORDINATOR
        generation = request.generation_id_or_member_epoch if version >= 1 else -1
        member = request.member_id if version >= 1 else ""
        instance = request.group_instance_id if version >= 7 else None
        g = self.state.groups.get(request.group_id)
        if g is None:
            if generation >= 0:
                return GROUP_ID_NOT_FOUND if version >= 9 else ILLEGAL_GENERATION
            g = self.state.groups[request.group_id] = ServedGroup(state="Empty", protocol_type="")
        if g.group_type != "classic":
            return self._consumer_group_commit_error(g, generation, member)
        return self._classic_group_commit_error(g, generation, member, instance)

    @staticmethod
    def _consumer_group_commit_error(g: ServedGroup, generation: int, member: str) -> int:
        """ConsumerGroup.validateOffsetCommit: epoch -1 commits while the group has no member; otherwise the
        member must exist, and a modern-protocol member must use v9+ (which this server does not serve)."""
        if generation < 0 and not g.members:
            return NONE
        return UNKNOWN_MEMBER_ID if member not in g.members else UNSUPPORTED_VERSION

    @staticmethod
    def _classic_group_commit_error(g: ServedGroup, generation: int, member: str, instance: str | None) -> int:
        """ClassicGroup.validateOffsetCommit."""
        if g.state == "Dead":
            return COORDINATOR_NOT_AVAILABLE
        if generation < 0 and g.state == "Empty":
            return NONE
        if generation >= 0 or member or instance is not None:
            # validateMember: the lab has no static members, so an instance id names none
            if instance is not None or member not in g.members:
                return UNKNOWN_MEMBER_ID
            if generation != g.generation:
                return ILLEGAL_GENERATION
        elif g.state != "Empty":
            return UNKNOWN_MEMBER_ID
        if g.state == "CompletingRebalance":
            return REBALANCE_IN_PROGRESS
        return NONE

    def _offset_commit(self, request, version: int):
        """KafkaApis.handleOffsetCommitRequest: unknown topics/partitions answered first, the rest validated and
        committed by the coordinator (OffsetMetadataManager.commitOffset), merged as OffsetCommitResponse.Builder."""
        s = self.state
        s.commits.append(ServedCommit(
            broker=self.broker_id, version=version, group_id=request.group_id,
            generation_id=request.generation_id_or_member_epoch if version >= 1 else -1,
            member_id=request.member_id if version >= 1 else "",
            group_instance_id=request.group_instance_id if version >= 7 else None,
            offsets=tuple((t.name, p.partition_index, p.committed_offset,
                           p.committed_leader_epoch if version >= 6 else -1, p.committed_metadata)
                          for t in request.topics for p in t.partitions)))
        answers: dict[str, list[tuple[int, int]]] = {}
        valid = []
        for t in request.topics:
            for p in t.partitions:
                if (t.name, p.partition_index) in s.partitions:
                    valid.append((t.name, p))
                else:
                    answers.setdefault(t.name, []).append((p.partition_index, UNKNOWN_TOPIC_OR_PARTITION))
        if valid:
            error = self._commit_error(request, version)
            for topic, p in valid:
                code = error
                if code == NONE and p.committed_metadata is not None and \
                        len(p.committed_metadata) > OFFSET_METADATA_MAX_SIZE:
                    code = OFFSET_METADATA_TOO_LARGE
                if code == NONE:
                    s.groups[request.group_id].committed[(topic, p.partition_index)] = p.committed_offset
                answers.setdefault(topic, []).append((p.partition_index, code))
        R = OffsetCommitResponse
        T = R.OffsetCommitResponseTopic
        return R(throttle_time_ms=0, topics=[
            T(name=t, partitions=[T.OffsetCommitResponsePartition(partition_index=p, error_code=e) for p, e in ps])
            for t, ps in answers.items()])


class AdminServer:
    """Serves `state` on one loopback port per broker (`state.brokers[b].port` is set on entry)."""

    def __init__(self, state: ServedCluster, name: str = "lab-kafka-admin"):
        self.state, self.name = state, name
        self._listeners: LoopbackListeners | None = None

    def __enter__(self) -> "AdminServer":
        ids = sorted(self.state.brokers)
        self._listeners = LoopbackListeners([_Broker(self.state, b).serve for b in ids], self.name)
        self._listeners.__enter__()
        with self.state.lock:
            for b, port in zip(ids, self._listeners.ports):
                self.state.brokers[b].port = port
        return self

    def __exit__(self, *exc) -> None:
        if self._listeners is not None:
            self._listeners.__exit__()
            self._listeners = None

    def address(self, broker_id: int) -> str:
        b = self.state.brokers[broker_id]
        return f"{b.host}:{b.port}"

    def bootstrap_servers(self, brokers: list[int] | None = None) -> str:
        """`host:port,...` of `brokers` (default: every broker not silent)."""
        with self.state.lock:
            ids = brokers if brokers is not None else [b for b in sorted(self.state.brokers)
                                                       if b not in self.state.silent]
            return ",".join(self.address(b) for b in ids)
