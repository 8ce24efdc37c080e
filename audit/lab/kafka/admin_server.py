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

from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse, \
    DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse
from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse, OffsetForLeaderEpochRequest, \
    OffsetForLeaderEpochResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, \
    SaslHandshakeResponse

from audit.domain.kafka.epochs import LeaderEpochCache
from audit.lab.loopback import LoopbackListeners

# clients/src/main/java/org/apache/kafka/common/protocol/Errors.java
(NONE, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER, UNSUPPORTED_SASL_MECHANISM,
 UNSUPPORTED_VERSION, KAFKA_STORAGE_ERROR, SASL_AUTHENTICATION_FAILED, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
 OFFSET_NOT_AVAILABLE) = 0, 3, 5, 6, 33, 35, 56, 58, 74, 75, 78
EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1      # ListOffsetsRequest
READ_COMMITTED = 1                                 # IsolationLevel
UNKNOWN_VOLUME_BYTES = -1                          # DescribeLogDirsResponse
AUTHORIZED_OPERATIONS_OMITTED = -2147483648        # MetadataResponse / DescribeTopicPartitionsResponse

# api key -> (name, request class, response class, max version served): Kafka 3.6.2's validVersions
# (clients/src/main/resources/common/message/*Request.json at tag 3.6.2; DescribeTopicPartitions at 3.8.0)
_APIS = {
    18: ("api_versions", ApiVersionsRequest, ApiVersionsResponse, 3),
    3: ("metadata", MetadataRequest, MetadataResponse, 12),
    2: ("list_offsets", ListOffsetsRequest, ListOffsetsResponse, 8),
    23: ("offset_for_leader_epoch", OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, 4),
    35: ("describe_log_dirs", DescribeLogDirsRequest, DescribeLogDirsResponse, 4),
    75: ("describe_topic_partitions", DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, 0),
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
                (api_key in (17, 36) and not sasl) or (sasl and not conn["authenticated"] and api_key not in _BEFORE_AUTH):
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
