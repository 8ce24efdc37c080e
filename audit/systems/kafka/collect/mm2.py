"""The MirrorMaker 2 reader: one mirror flow (declared on the TARGET cluster's estate entry) read with
confluent-kafka, read-only, into raw/kafka/<target>/mm2/<source alias>/ (docs/kafka/collector.md):

  offset-syncs.json  the offset-syncs topic (`mirror.offset_syncs_topic`, in the source cluster unless
                     offset-syncs.topic.location = target), every partition from its log start to the end offset
                     seen when the read started (records appended later are left for the next run)
  checkpoints.json   `<source alias>.checkpoints.internal` on the target, the same way
  groups.json        the committed offsets of the selected groups on both clusters, and the log start / end
                     offsets of the mirrored partitions (upstream on the source, the remote topics on the target):
                     the TARGET side, then the source side, then the target groups' committed offsets again
                     (`target_after`), each read with its own instants

Record keys and values are stored as read (base64), decoded here only to learn which partitions and groups to ask
about (audit/systems/kafka/formats/mm2.py): a record that does not decode is still stored, and is a coverage gap.

Which groups: those the clusters list (ListGroups) plus those named in checkpoints, kept when they match the
mirror's `groups` patterns (MirrorMaker only checkpoints groups it was told to; a group may exist on one side only).
Which partitions: OffsetFetch for all of a group's partitions, then the mirrored partitions explicitly (upstream
ones from the syncs on the source, their remote topics and the checkpointed ones on the target): a broker answers
the first with every committed partition, and the explicit ask covers any it leaves out (librdkafka's mock cluster
answers "all" with nothing). Offsets below 0 mean "nothing committed" (OFFSET_INVALID) and are left out.

Read order (target, source, target again). A target group's committed offset D is what MirrorMaker synced from a
checkpoint of an EARLIER source offset U (MirrorCheckpointTask.syncGroupOffset, never moving it back), and both
only grow. With the target read at t1, the source at t2 >= t1 and the target again at t3 >= t2:
- D(t1) beyond where U(t2) lands downstream proves a skip (D(t1) <= position(U(t1)) <= position(U(t2)) would have
  to hold); a later target read proves nothing of the kind (D may have followed a newer U);
- where U(t2) lands downstream minus D(t3) is a lower bound of what a failover at t3 redelivers (U(t3) >= U(t2));
  an earlier target read gives only an upper bound (D may have advanced since).
Each read's [started, finished] instants are recorded so the audit can tell
(audit/systems/kafka/transforms/mm2_state.py). The second target read asks the same groups and partitions as the first
(committed offsets only)."""
from __future__ import annotations

import base64
import json
import logging
from typing import Any, Callable, Iterable

from confluent_kafka import OFFSET_BEGINNING, Consumer, ConsumerGroupTopicPartitions, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from audit.collectors.base import CollectionReport, RawSink
from audit.errors import PayloadError
from audit.systems.kafka.formats.mm2 import decode_checkpoint, decode_offset_sync

log = logging.getLogger(__name__)

READER_GROUP = "replaudit-mm2-reader"       # assign() only: never joins, never commits


def client_config(cluster: Any, resolve: Callable[[Any], str]) -> dict:
    """librdkafka settings of an estate entry; SASL secrets resolved (never logged: only `redact`ed text is)."""
    config = {"bootstrap.servers": cluster.bootstrap_servers, "client.id": "replaudit",
              "socket.timeout.ms": max(10, int(cluster.timeouts.request_s * 1000)),
              "security.protocol": (getattr(cluster, "security_protocol", None) or "PLAINTEXT").lower()}
    sasl = getattr(cluster, "sasl", None)
    if sasl is not None:
        config.update({"sasl.mechanism": sasl.mechanism, "sasl.username": resolve(sasl.username),
                       "sasl.password": resolve(sasl.password)})
    return config


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class TopicReader:
    """Reads one topic from each partition's log start to its end offset at the start of the read."""

    def __init__(self, config: dict, timeout_s: float, now_ms: Callable[[], int]):
        self.config, self.timeout_s, self.now_ms = config, timeout_s, now_ms
        self.unreachable: str | None = None     # why the cluster did not answer at all

    def read(self, topic: str, report: CollectionReport, where: str) -> dict | None:
        started = self.now_ms()
        consumer = Consumer({**self.config, "group.id": READER_GROUP, "enable.auto.commit": False,
                             "enable.auto.offset.store": False, "enable.partition.eof": True,
                             "isolation.level": "read_uncommitted", "auto.offset.reset": "earliest"}, logger=log)
        try:
            try:
                md = consumer.list_topics(topic, timeout=self.timeout_s)
            except Exception as exc:
                self.unreachable = _describe(exc)
                raise
            meta = md.topics.get(topic)
            if meta is None or meta.error is not None or not meta.partitions:
                why = str(meta.error) if meta is not None and meta.error is not None else "no such topic"
                report.gap(f"{where} {topic}", "MirrorMaker 2 topic", why)
                return None
            ends, todo = {}, []
            for p in sorted(meta.partitions):
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=self.timeout_s)
                ends[p] = high
                if high > low:
                    todo.append(TopicPartition(topic, p, OFFSET_BEGINNING))
            records = self._consume(consumer, topic, todo, ends, report, where) if todo else []
        except Exception as exc:     # KafkaException: unreachable, authentication, timeouts
            report.gap(f"{where} {topic}", "MirrorMaker 2 topic", _describe(exc))
            return None
        finally:
            consumer.close()
        report.count("mm2_records_read", len(records))
        return {"topic": topic, "read_started_at_ms": started, "read_finished_at_ms": self.now_ms(),
                "end_offsets": {str(p): e for p, e in ends.items()}, "records": records}

    def _consume(self, consumer, topic, todo, ends, report, where) -> list[dict]:
        consumer.assign(todo)
        open_parts = {tp.partition for tp in todo}
        records = []
        while open_parts:
            msg = consumer.poll(self.timeout_s)      # returns as soon as a record or an end-of-partition is there
            if msg is None:
                report.gap(f"{where} {topic}", "MirrorMaker 2 topic",
                           f"no progress within {self.timeout_s}s on partitions {sorted(open_parts)}; "
                           f"{len(records)} records read")
                break
            p, err = msg.partition(), msg.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    report.gap(f"{where} {topic}-{p}", "MirrorMaker 2 topic", str(err))
                    open_parts.discard(p)
                elif msg.offset() >= ends.get(p, 0):
                    open_parts.discard(p)
                continue
            if p not in open_parts or msg.offset() >= ends[p]:
                open_parts.discard(p)     # appended after the read started: the next run's
                continue
            key, value = msg.key(), msg.value()
            records.append({"partition": p, "offset": msg.offset(), "timestamp": msg.timestamp()[1],
                            "key_b64": None if key is None else base64.b64encode(key).decode(),
                            "value_b64": None if value is None else base64.b64encode(value).decode()})
            if msg.offset() + 1 >= ends[p]:
                open_parts.discard(p)
        return records


def _decoded(doc: dict | None, decode, report: CollectionReport, where: str) -> list:
    out = []
    for r in (doc or {}).get("records", ()):
        source = f"{where} {doc['topic']}-{r['partition']}@{r['offset']}"
        try:
            if r["key_b64"] is None or r["value_b64"] is None:
                raise PayloadError(source, "key/value", "a record with a key and a value", None)
            out.append(decode(base64.b64decode(r["key_b64"]), base64.b64decode(r["value_b64"]), source))
        except PayloadError as exc:
            report.gap(source, "MirrorMaker 2 record (stored, not decodable)", str(exc))
    return out


class GroupReader:
    """Group listing, committed offsets and log start/end offsets of one cluster through an AdminClient."""

    def __init__(self, config: dict, timeout_s: float, where: str, report: CollectionReport):
        self.admin = AdminClient(config, logger=log)
        self.timeout_s, self.where, self.report = timeout_s, where, report

    def groups(self) -> list[str]:
        try:
            result = self.admin.list_consumer_groups(request_timeout=self.timeout_s).result()
        except Exception as exc:
            self.report.gap(self.where, "consumer group list", _describe(exc))
            return []
        if result.errors:
            self.report.gap(self.where, "consumer group list (ListGroups)",
                            "; ".join(sorted({str(e) for e in result.errors})))
        return [g.group_id for g in result.valid]

    def committed(self, groups: Iterable[str], partitions: list[tuple[str, int]]) -> dict:
        """{group: [{"topic","partition","offset"}]}: every committed partition, plus `partitions` asked for."""
        out = {}
        for group in sorted(set(groups)):
            found: dict[tuple[str, int], int] = {}
            asks = [None] + ([[TopicPartition(t, p) for t, p in partitions]] if partitions else [])
            for ask in asks:
                try:
                    futures = self.admin.list_consumer_group_offsets(
                        [ConsumerGroupTopicPartitions(group, ask)], request_timeout=self.timeout_s)
                    answer = futures[group].result()
                except Exception as exc:
                    self.report.gap(f"{self.where} group {group}", "committed offsets (OffsetFetch)", _describe(exc))
                    continue
                for tp in answer.topic_partitions:
                    if tp.error is not None:
                        self.report.gap(f"{self.where} group {group} {tp.topic}-{tp.partition}", "committed offset",
                                        str(tp.error))
                    elif tp.offset >= 0:
                        found[(tp.topic, tp.partition)] = tp.offset
            out[group] = [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(found.items())]
            self.report.count("mm2_group_offsets", len(found))
        return out

    def end_offsets(self, partitions: list[tuple[str, int]]) -> list[dict]:
        rows = {tp: {"topic": tp[0], "partition": tp[1], "log_start": None, "end": None} for tp in partitions}
        for field, spec in (("log_start", OffsetSpec.earliest()), ("end", OffsetSpec.latest())):
            if not partitions:
                break
            try:
                futures = self.admin.list_offsets({TopicPartition(t, p): spec for t, p in partitions},
                                                  request_timeout=self.timeout_s)
            except Exception as exc:
                self.report.gap(self.where, f"partition offsets ({field})", _describe(exc))
                continue
            for tp, fut in futures.items():
                try:
                    rows[(tp.topic, tp.partition)][field] = fut.result().offset
                except Exception as exc:
                    self.report.gap(f"{self.where} {tp.topic}-{tp.partition}", f"partition offsets ({field})",
                                    _describe(exc))
        return [rows[tp] for tp in sorted(rows)]


def collect_mirror(target: Any, mirror: Any, source: Any | None, sink: RawSink, report: CollectionReport,
                   secrets, *, now_ms: Callable[[], int]) -> None:
    """One flow `source` -> `target` (both estate entries, `mirror` an entry of target.mirrors)."""
    alias = mirror.source_alias
    prefix = f"mm2/{alias}/"
    if source is None:
        report.gap(f"mirror {alias}", "MirrorMaker 2 flow (nothing read)",
                   f"source cluster {mirror.source_cluster!r} is not known to this collection")
        return
    tgt_cfg, src_cfg = client_config(target, secrets.resolve), client_config(source, secrets.resolve)
    syncs_cluster = source if mirror.offset_syncs_location == "source" else target
    syncs_reader = TopicReader(src_cfg if syncs_cluster is source else tgt_cfg, syncs_cluster.timeouts.request_s,
                               now_ms)
    syncs = syncs_reader.read(mirror.offset_syncs_topic, report, f"cluster {syncs_cluster.name}")
    cps_reader = TopicReader(tgt_cfg, target.timeouts.request_s, now_ms)
    checkpoints = cps_reader.read(mirror.checkpoints_topic, report, f"cluster {target.name}")
    unreachable = {target.name: cps_reader.unreachable, syncs_cluster.name: syncs_reader.unreachable}
    for name, doc in (("offset-syncs.json", syncs), ("checkpoints.json", checkpoints)):
        if doc is not None:
            sink.put(prefix + name, json.dumps(doc, sort_keys=True, separators=(",", ":")).encode())
            report.count("keys_stored")
    decoded_syncs = _decoded(syncs, decode_offset_sync, report, f"cluster {syncs_cluster.name}")
    decoded_cps = _decoded(checkpoints, decode_checkpoint, report, f"cluster {target.name}")
    upstream = sorted({(s.topic, s.partition) for s in decoded_syncs})
    downstream = sorted({(mirror.remote_topic(t), p) for t, p in upstream} |
                        {(c.topic, c.partition) for c in decoded_cps})
    checkpointed = {c.group for c in decoded_cps}
    doc = {"read_started_at_ms": now_ms()}
    readers: dict[str, GroupReader] = {}
    selected: dict[str, list[str]] = {}
    # target, source, target again: the order that proves skips and redeliveries (module doc)
    for side, cluster, config, partitions in (("target", target, tgt_cfg, downstream),
                                              ("source", source, src_cfg, upstream),
                                              ("target_after", target, tgt_cfg, downstream)):
        again = side == "target_after"
        doc[side] = {}
        if not again:
            doc[f"{side}_end_offsets"] = []
        doc[f"{side}_read_started_at_ms"] = now_ms()
        if unreachable.get(cluster.name):     # one timeout per cluster is enough, and one gap
            if not again:
                report.gap(f"cluster {cluster.name}", f"{side} groups and offsets (not asked)",
                           f"the cluster did not answer earlier: {unreachable[cluster.name]}")
        else:
            if cluster.name not in readers:
                readers[cluster.name] = GroupReader(config, cluster.timeouts.request_s, f"cluster {cluster.name}",
                                                    report)
                selected[cluster.name] = [g for g in set(readers[cluster.name].groups()) | checkpointed
                                          if mirror.selects(g)]
            reader = readers[cluster.name]
            doc[side] = reader.committed(selected[cluster.name], partitions)
            if not again:
                doc[f"{side}_end_offsets"] = reader.end_offsets(partitions)
        doc[f"{side}_read_finished_at_ms"] = now_ms()
    readers.clear()                           # the AdminClients' threads end with them
    doc["read_finished_at_ms"] = now_ms()
    sink.put(prefix + "groups.json", json.dumps(doc, sort_keys=True, separators=(",", ":")).encode())
    report.count("keys_stored")
    report.count("mm2_flows")
