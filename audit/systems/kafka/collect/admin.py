"""The admin collector: one cluster's metadata, log dirs, offsets and leader-epoch answers over the Kafka protocol
with kafka-python 3.0.12 (docs/kafka/collector.md), read-only. Writes under raw/kafka/<cluster>/admin/:

  metadata.json                  Metadata (all topics): brokers, controller, per partition leader, leader epoch,
                                 replicas, ISR, offline replicas, topic id; ELR from DescribeTopicPartitions
                                 (API 75, brokers >= 3.8) when the broker has it, else null: no Metadata
                                 version carries ELR (docs/formats/kafka.md §14.1)
  log-dirs.json                  DescribeLogDirs from every broker
  list-offsets.json              ListOffsets EARLIEST and LATEST (read_uncommitted: the high watermark) from each
                                 partition's leader, with the leader epochs the broker returns
  offsets-for-leader-epoch.json  OffsetForLeaderEpoch from every replica (below)

Every request goes through the client's connection manager (`_manager.send`, private in kafka-python;
OffsetForLeaderEpoch has no public call, and the public calls raise on the first error code where the audit needs
every code as data). Each document has `read_started_at_ms` / `read_finished_at_ms`, and each broker's or
partition's entry the instants of its own request: brokers are read at different moments under traffic.

OffsetForLeaderEpoch, which epochs: round 1 asks every replica for the partition's leader epoch from the metadata
(as CurrentLeaderEpoch too, so an answer belongs to that leader epoch: FENCED_LEADER_EPOCH means it moved on).
The leader answers (epoch e, end offset); the next round asks for e - 1, whose answer names the largest epoch below
e and where it ends (LeaderEpochFileCache.endOffsetFor), and so on: the rounds walk the leader's whole epoch chain.
The walk stops at epoch 0, an undefined answer (-1), an error, or an end offset equal to the previous one (the
epoch asked is below the leader's earliest epoch: endOffsetFor answers it with the earliest epoch's start offset
again). Every replica is asked the same epochs in the same round. A real broker answers only as leader
(Partition.lastOffsetForLeaderEpoch with fetchOnlyFromLeader = true): a follower's NOT_LEADER_OR_FOLLOWER is kept
as data and counted, and that follower is not asked again for the partition; other error codes are data and
coverage gaps. A broker that does not answer within `timeouts.request_s` is a gap and is not asked again.

Only brokers in the Metadata answer are asked anything. A replica on a broker absent from it (a broker that is down:
the metadata cache lists it in the partition's replicas and offline replicas, not among the brokers:
docs/formats/kafka.md §14.3) is written under `not_asked` with the reason and counted, not a gap: there is
nothing to ask. Any failed send is a gap for that broker only and the rest goes on; each phase writes what it read
even when something stops it.

An incident check (`scope`: audit.contracts.Scope with subject patterns): Metadata is read whole (one small
answer; the audit picks the wanted partitions from it), and DescribeLogDirs (asked for the wanted partitions by
name), ListOffsets and OffsetForLeaderEpoch are sent for the topic-partitions a pattern wants only
(audit/systems/kafka/domain/subjects.py); the others are counted as `partitions_not_in_scope`, never gaps, and nothing
is asked when no partition is wanted."""
from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, Callable

import kafka.errors as kerrors
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import DescribeLogDirsRequest, DescribeTopicPartitionsRequest
from kafka.protocol.consumer import ListOffsetsRequest, OffsetForLeaderEpochRequest
from kafka.protocol.metadata import MetadataRequest

from audit.collectors.base import CollectionReport, RawSink
from audit.systems.kafka.collect.admin_client import (BootstrapFailed, Requests, bootstrapped, describe, error_name,
                                                 nodes)
from audit.systems.kafka.domain.subjects import wanted

PREFIX = "admin/"
EARLIEST, LATEST = -2, -1                 # ListOffsetsRequest.EARLIEST_TIMESTAMP / LATEST_TIMESTAMP
NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE = 6, 5
DESCRIBE_TOPIC_PARTITIONS = 75            # ApiKeys.DESCRIBE_TOPIC_PARTITIONS
PAGE_PARTITIONS = 2000                    # DescribeTopicPartitions response_partition_limit (the broker's default)
MAX_EPOCH_ROUNDS = 1000
NOT_IN_METADATA = "broker not in metadata"


class AdminCollection:
    """One pass over a bootstrapped KafkaAdminClient; `collect()` writes the four documents."""

    def __init__(self, client: KafkaAdminClient, sink: RawSink, report: CollectionReport, *, timeout_ms: int,
                 now_ms: Callable[[], int], scope: Any = None):
        self.sink, self.report, self.now_ms = sink, report, now_ms
        self.scope = scope if scope is not None and scope.subjects else None
        self.requests = Requests(client, timeout_ms, now_ms)
        self.send_all = self.requests.send_all
        self.answering: int | None = None       # the broker whose Metadata answer is used

    def put(self, name: str, doc: dict) -> None:
        self.sink.put(PREFIX + name, json.dumps(doc, sort_keys=True, separators=(",", ":")).encode())
        self.report.count("keys_stored")

    def gap(self, source: str, what: str, error: str) -> None:
        self.report.gap(source, what, error)

    def wanted(self, p: dict) -> bool:
        """A metadata partition the check asks about (always, without a scope)."""
        return self.scope is None or wanted(self.scope, p["topic"], p["partition"])

    def asked(self, md: dict) -> list[dict]:
        """The metadata's partitions the later phases ask about."""
        return [p for p in md["partitions"] if self.wanted(p)]

    # -- phases ---------------------------------------------------------------------------------------------
    def collect(self) -> None:
        md = self.metadata()
        if md is None:
            return
        for phase, what in ((self.log_dirs, "log-dirs.json"), (self.list_offsets, "list-offsets.json"),
                            (self.offsets_for_leader_epoch, "offsets-for-leader-epoch.json")):
            try:
                phase(md)
            except Exception as exc:      # one phase stopping costs its own document, never the others'
                self.gap("admin", f"{what} (read stopped)", describe(exc))

    def metadata(self) -> dict | None:
        started = self.now_ms()
        resp = err = None
        for node in self.requests.known_brokers():     # any broker answers Metadata; one that does not is skipped
            request = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                      include_topic_authorized_operations=False)
            ((resp, err, sent, answered),) = self.send_all([(node, request)])
            if err is None:
                self.answering = node
                break
            self.gap(f"broker {node}", "cluster metadata", describe(err))
        if resp is None:
            self.gap("metadata", "cluster metadata (nothing else read)", "no broker answered" if err is None else
                     describe(err))
            return None
        partitions, topic_errors = [], []
        for t in resp.topics:
            if t.error_code:
                topic_errors.append({"topic": t.name, "error_code": t.error_code})
                self.gap(f"topic {t.name}", "topic metadata", error_name(t.error_code))
            topic_id = str(t.topic_id) if t.topic_id is not None and t.topic_id.int else None
            for p in t.partitions:
                partitions.append({"topic": t.name, "partition": p.partition_index, "topic_id": topic_id,
                                   "leader": p.leader_id, "leader_epoch": p.leader_epoch,
                                   "replicas": nodes(p.replica_nodes), "isr": nodes(p.isr_nodes),
                                   "offline": nodes(p.offline_replicas), "elr": None, "last_known_elr": None,
                                   "error_code": p.error_code})
                if p.error_code and self.wanted(partitions[-1]):
                    self.gap(f"{t.name}-{p.partition_index}", "partition metadata", error_name(p.error_code))
        partitions.sort(key=lambda p: (p["topic"], p["partition"]))
        elr_source = self.elr(partitions)
        doc = {"read_started_at_ms": started, "read_finished_at_ms": self.now_ms(), "answered_at_ms": answered,
               "answered_by": self.answering,
               "cluster_id": resp.cluster_id, "controller": resp.controller_id,
               "brokers": sorted(({"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                                  for b in resp.brokers), key=lambda b: b["id"]),
               "partitions": partitions, "topic_errors": topic_errors, "elr_source": elr_source}
        self.put("metadata.json", doc)
        self.report.count("partitions", len(partitions))
        if self.scope is not None:
            self.report.count("partitions_not_in_scope", sum(1 for p in partitions if not self.wanted(p)))
        self.report.count("brokers", len(doc["brokers"]))
        return doc

    def elr(self, partitions: list[dict]) -> str | None:
        """Fill `elr` / `last_known_elr` from DescribeTopicPartitions when the broker serves it."""
        versions = self.requests.api_versions()
        topics = sorted({p["topic"] for p in partitions})
        if DESCRIBE_TOPIC_PARTITIONS not in versions or not topics:
            return None
        by_tp = {(p["topic"], p["partition"]): p for p in partitions}
        cursor = None
        Topic, Cursor = DescribeTopicPartitionsRequest.TopicRequest, DescribeTopicPartitionsRequest.Cursor
        while True:
            request = DescribeTopicPartitionsRequest(topics=[Topic(name=t) for t in topics],
                                                     response_partition_limit=PAGE_PARTITIONS, cursor=cursor)
            ((resp, err, _, _),) = self.send_all([(self.answering, request)])
            if err is not None:
                self.gap("metadata", "eligible leader replicas (DescribeTopicPartitions)",
                         describe(err))
                return None
            for t in resp.topics:
                for p in t.partitions:
                    entry = by_tp.get((t.name, p.partition_index))
                    if entry is not None:
                        entry["elr"] = nodes(p.eligible_leader_replicas)
                        entry["last_known_elr"] = nodes(p.last_known_elr)
            if resp.next_cursor is None:
                return "DescribeTopicPartitions"
            cursor = Cursor(topic_name=resp.next_cursor.topic_name, partition_index=resp.next_cursor.partition_index)

    def log_dirs(self, md: dict) -> None:
        started = self.now_ms()
        brokers = [b["id"] for b in md["brokers"]]
        topics = None          # every replica of the broker
        if self.scope is not None:
            by_topic: dict[str, list[int]] = defaultdict(list)
            for p in self.asked(md):
                by_topic[p["topic"]].append(p["partition"])
            Topic = DescribeLogDirsRequest.DescribableLogDirTopic
            topics = [Topic(topic=t, partitions=sorted(ps)) for t, ps in sorted(by_topic.items())]
            if not topics:       # nothing wanted: nothing to ask (an empty list would be "no topic" anyway)
                brokers = []
        answers = self.send_all([(b, DescribeLogDirsRequest(topics=topics)) for b in brokers]) if brokers else []
        entries = []
        for broker, (resp, err, sent, answered) in zip(brokers, answers):
            entry = {"broker": broker, "error": None, "log_dirs": [], "read_started_at_ms": sent,
                     "read_finished_at_ms": answered}
            entries.append(entry)
            if err is None and getattr(resp, "error_code", 0):
                err = kerrors.for_code(resp.error_code)(error_name(resp.error_code))
            if err is not None:
                entry["error"] = describe(err)
                self.gap(f"broker {broker}", "log dirs (DescribeLogDirs)", entry["error"])
                continue
            for r in resp.results:
                entry["log_dirs"].append({"log_dir": r.log_dir, "error_code": r.error_code, "partitions": [
                    {"topic": t.name, "partition": p.partition_index, "size": p.partition_size,
                     "offset_lag": p.offset_lag, "is_future": p.is_future_key}
                    for t in r.topics for p in t.partitions]})
                if r.error_code:
                    self.gap(f"broker {broker} {r.log_dir}", "log dir", error_name(r.error_code))
        self.put("log-dirs.json", {"read_started_at_ms": started, "read_finished_at_ms": self.now_ms(),
                                   "brokers": entries})

    def list_offsets(self, md: dict) -> None:
        started = self.now_ms()
        rows, by_leader, not_asked = self._offset_rows(md)
        sends, keys = [], []
        for leader, parts in sorted(by_leader.items()):
            for spec in (EARLIEST, LATEST):
                sends.append((leader, _list_offsets_request(parts, spec)))
                keys.append((leader, spec))
        for (leader, spec), (resp, err, sent, answered) in zip(keys, self.send_all(sends)):
            parts = by_leader[leader]
            if err is not None:
                for p in parts:
                    rows[(p["topic"], p["partition"])]["error_code"] = -1
                self.gap(f"broker {leader}", f"ListOffsets of {len(parts)} partitions", describe(err))
                continue
            self._record_offsets(rows, leader, spec, resp, sent, answered)
        self.put("list-offsets.json", {"read_started_at_ms": started, "read_finished_at_ms": self.now_ms(),
                                       "partitions": [rows[k] for k in sorted(rows)], "not_asked": not_asked})

    def _offset_rows(self, md: dict) -> tuple[dict[tuple[str, int], dict], dict[int, list[dict]], list[dict]]:
        """(topic-partition -> its row, leader -> the partitions it is asked about, replicas not asked): a partition
        without a live leader is not asked, and is a gap."""
        live = _live(md)
        by_leader: dict[int, list[dict]] = defaultdict(list)
        rows, not_asked = {}, []
        for p in self.asked(md):
            row = {"topic": p["topic"], "partition": p["partition"], "leader": p["leader"], "earliest": None,
                   "earliest_leader_epoch": None, "latest": None, "latest_leader_epoch": None, "error_code": 0,
                   "read_started_at_ms": None, "read_finished_at_ms": None}
            rows[(p["topic"], p["partition"])] = row
            if p["leader"] < 0:
                row["error_code"] = p["error_code"] or LEADER_NOT_AVAILABLE
                self.gap(f"{p['topic']}-{p['partition']}", "log start / high watermark (ListOffsets)", "no leader")
            elif p["leader"] not in live:
                # a real Metadata answer names no dead leader (it says -1): only the leader knows the high
                # watermark, so the partition is not covered
                row["error_code"] = LEADER_NOT_AVAILABLE
                not_asked.append(_not_asked(p["leader"], p, NOT_IN_METADATA))
                self.gap(f"{p['topic']}-{p['partition']}", "log start / high watermark (ListOffsets)",
                         f"leader {p['leader']}: {NOT_IN_METADATA}")
            else:
                by_leader[p["leader"]].append(p)
        return rows, by_leader, not_asked

    def _record_offsets(self, rows: dict[tuple[str, int], dict], leader: int, spec: int, resp, sent: int,
                        answered: int) -> None:
        """One leader's ListOffsets answer (EARLIEST: the log start, LATEST: the high watermark) into the rows it
        names, with the leader epoch when the broker gives one; a partition's error code is data and a gap."""
        name = "earliest" if spec == EARLIEST else "latest"
        for t in resp.topics:
            for a in t.partitions:
                row = rows.get((t.name, a.partition_index))
                if row is None:
                    continue
                row["read_started_at_ms"] = sent if row["read_started_at_ms"] is None else row["read_started_at_ms"]
                row["read_finished_at_ms"] = answered
                if a.error_code:
                    row["error_code"] = row["error_code"] or a.error_code
                    self.gap(f"broker {leader} {t.name}-{a.partition_index}", f"ListOffsets {name.upper()}",
                             error_name(a.error_code))
                    continue
                row[name] = a.offset
                row[f"{name}_leader_epoch"] = a.leader_epoch if a.leader_epoch is not None and \
                    a.leader_epoch >= 0 else None

    def offsets_for_leader_epoch(self, md: dict) -> None:
        started = self.now_ms()
        live = _live(md)
        chains, not_asked = {}, []      # chains: (topic, p) -> {"next", "current", "leader", "ask": set, "prev_end"}
        for p in self.asked(md):
            if p["leader"] < 0 or p["leader_epoch"] < 0:
                continue
            replicas = set(p["replicas"]) | {p["leader"]}
            not_asked += [_not_asked(b, p, NOT_IN_METADATA) for b in sorted(replicas - live)]
            if p["leader"] not in live:      # the chain is walked with the leader's answers: not covered
                self.gap(f"{p['topic']}-{p['partition']}", "leader epoch chain (OffsetForLeaderEpoch)",
                         f"leader {p['leader']}: {NOT_IN_METADATA}")
            if replicas & live:
                chains[(p["topic"], p["partition"])] = {
                    "next": p["leader_epoch"], "current": p["leader_epoch"], "leader": p["leader"],
                    "ask": replicas & live, "prev_end": None}
        self.report.count("epoch_replicas_not_asked", len(not_asked))
        answers, walk = [], {"rounds": 0}
        try:
            self._walk(chains, answers, walk)
        except Exception as exc:             # the answers read so far are kept and written
            self.gap("admin", "leader epoch chains (OffsetForLeaderEpoch, read stopped)", describe(exc))
        else:
            for tp, c in chains.items():
                if c["next"] is not None:
                    self.gap(f"{tp[0]}-{tp[1]}", "leader epoch chain (OffsetForLeaderEpoch)",
                             f"not walked to the end within {MAX_EPOCH_ROUNDS} requests")
        self.report.count("epoch_rounds", walk["rounds"])
        self.report.count("epoch_answers", len(answers))
        self.put("offsets-for-leader-epoch.json", {"read_started_at_ms": started,
                                                   "read_finished_at_ms": self.now_ms(), "answers": answers,
                                                   "not_asked": not_asked})

    def _walk(self, chains: dict, answers: list, walk: dict) -> None:
        """The rounds: every replica still asked gets the partition's next epoch, the leader's answer picks the
        one after."""
        while walk["rounds"] < MAX_EPOCH_ROUNDS and any(c["next"] is not None for c in chains.values()):
            walk["rounds"] += 1
            asked = defaultdict(list)      # broker -> [(tp, epoch, current)]
            for tp, c in chains.items():
                if c["next"] is not None:
                    for b in sorted(c["ask"]):
                        asked[b].append((tp, c["next"], c["current"]))
            brokers = sorted(asked)
            results = self.send_all([(b, _epoch_request(asked[b])) for b in brokers])
            leader_answers = {}
            for b, (resp, err, sent, answered) in zip(brokers, results):
                self._epoch_answers(b, asked[b], resp, err, sent, answered, walk["rounds"], chains, answers,
                                    leader_answers)
            for tp, c in chains.items():
                if c["next"] is not None:
                    c["next"] = self._next_epoch(c, leader_answers.get(tp))

    def _epoch_answers(self, broker, asked, resp, err, sent, answered, round_, chains, answers, leader_answers):
        got = {}
        if err is None:
            for t in resp.topics:
                for a in t.partitions:
                    got[(t.topic, a.partition)] = a
        else:
            self.gap(f"broker {broker}", f"OffsetForLeaderEpoch of {len(asked)} partitions",
                     describe(err))
        for tp, epoch, current in asked:
            c = chains[tp]
            a = got.get(tp)
            code = a.error_code if a is not None else -1
            answers.append({"broker": broker, "topic": tp[0], "partition": tp[1], "requested_epoch": epoch,
                            "current_leader_epoch": current, "round": round_,
                            "leader_epoch": a.leader_epoch if a is not None else None,
                            "end_offset": a.end_offset if a is not None else None, "error_code": code,
                            "read_started_at_ms": sent, "read_finished_at_ms": answered})
            if broker == c["leader"]:
                leader_answers[tp] = a
                if a is not None and a.error_code:
                    self.gap(f"broker {broker} {tp[0]}-{tp[1]}", f"OffsetForLeaderEpoch epoch {epoch}",
                             error_name(a.error_code))
            elif a is None or a.error_code:
                c["ask"].discard(broker)          # a follower that refused once is not asked again
                if a is not None and a.error_code == NOT_LEADER_OR_FOLLOWER:
                    self.report.count("epoch_answers_refused_by_followers")
                elif a is not None:
                    self.gap(f"broker {broker} {tp[0]}-{tp[1]}", f"OffsetForLeaderEpoch epoch {epoch}",
                             error_name(a.error_code))

    @staticmethod
    def _next_epoch(c: dict, a) -> int | None:
        if a is None or a.error_code or a.leader_epoch < 0 or a.end_offset < 0:
            return None
        if a.end_offset == c["prev_end"]:
            return None      # asked below the earliest epoch: the earliest epoch's start offset again
        c["prev_end"] = a.end_offset
        return a.leader_epoch - 1 if a.leader_epoch > 0 else None


def _live(md: dict) -> set[int]:
    """The brokers of the Metadata answer: the only ones asked anything."""
    return {b["id"] for b in md["brokers"]}


def _not_asked(broker: int, p: dict, why: str) -> dict:
    return {"broker": broker, "topic": p["topic"], "partition": p["partition"], "why": why}


def _list_offsets_request(parts: list[dict], timestamp: int):
    Topic = ListOffsetsRequest.ListOffsetsTopic
    Partition = Topic.ListOffsetsPartition
    by_topic: dict[str, list] = defaultdict(list)
    for p in parts:
        by_topic[p["topic"]].append(Partition(partition_index=p["partition"], current_leader_epoch=-1,
                                              timestamp=timestamp, max_num_offsets=1))
    return ListOffsetsRequest(replica_id=-1, isolation_level=0, timeout_ms=0,
                              topics=[Topic(name=t, partitions=ps) for t, ps in sorted(by_topic.items())])


def _epoch_request(asked: list[tuple[tuple[str, int], int, int]]):
    Topic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    Partition = Topic.OffsetForLeaderPartition
    by_topic: dict[str, list] = defaultdict(list)
    for (topic, partition), epoch, current in asked:
        by_topic[topic].append(Partition(partition=partition, current_leader_epoch=current, leader_epoch=epoch))
    return OffsetForLeaderEpochRequest(replica_id=-1, topics=[Topic(topic=t, partitions=ps)
                                                              for t, ps in sorted(by_topic.items())])


def collect_admin(cluster: Any, sink: RawSink, report: CollectionReport, secrets, *,
                  now_ms: Callable[[], int], client_factory: Callable[..., KafkaAdminClient] = KafkaAdminClient,
                  scope: Any = None) -> None:
    """Bootstrap a client from the estate entry and collect; a cluster that cannot be bootstrapped is a gap.
    `scope`: an incident check's audit.contracts.Scope (None: every partition)."""
    try:
        with bootstrapped(cluster, secrets, client_factory) as (client, config):
            AdminCollection(client, sink, report, timeout_ms=config["request_timeout_ms"], now_ms=now_ms,
                            scope=scope).collect()
    except BootstrapFailed as exc:      # unreachable, refused, authentication failed: the cluster is not covered
        report.gap(cluster.bootstrap_servers, "admin endpoint (nothing read)", str(exc))
