"""`topics stats` (GET .../stats): TopicStats, of which the audit needs the `replication` section (one
ReplicatorStats per *remote* cluster, docs/formats/pulsar.md §2.4), each subscription's replication flags and its
consumption evidence (connected consumers, msgOutCounter, lastConsumedTimestamp).

Rates are doubles, counters longs; fields that newer brokers added are optional, unknown ones ignored
(the stats object grows every release)."""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from audit.errors import PayloadError
from audit.systems.pulsar.formats import jsonbody as jb


@dataclass(frozen=True)
class ReplicatorStats:
    remote_cluster: str
    connected: bool | None
    replication_backlog: int | None
    replication_delay_s: int | None
    msg_rate_in: float | None
    msg_rate_out: float | None
    msg_rate_expired: float | None
    inbound_connection: str | None
    inbound_connected_since: str | None
    outbound_connection: str | None
    outbound_connected_since: str | None


@dataclass(frozen=True)
class SubscriptionStats:
    name: str
    is_replicated: bool | None
    is_durable: bool | None
    msg_backlog: int | None
    type: str | None
    last_mark_delete_advanced_ms: int | None
    non_contiguous_deleted_ranges: int | None
    consumers: int | None  # connected consumers: the length of `consumers` (None: the key is absent)
    # msg_out_counter: messages dispatched; since 2.8 it survives consumers leaving (docs/formats/pulsar.md §2.4)
    msg_out_counter: int | None
    last_consumed_ms: int | None  # lastConsumedTimestamp: newest of the connected consumers', 0 when none

    @property
    def consumed_here(self) -> bool | None:
        """Consumed on this cluster: a consumer is connected or something was dispatched. False only when all
        three counts are known and 0; unknown (None) when some are missing and none is positive."""
        values = (self.consumers, self.msg_out_counter, self.last_consumed_ms)
        if any(v is not None and v > 0 for v in values):
            return True
        return None if None in values else False


@dataclass(frozen=True)
class TopicStats:
    msg_rate_in: float | None
    msg_rate_out: float | None
    storage_size: int | None
    publishers: int
    subscriptions: Mapping[str, SubscriptionStats]
    replication: Mapping[str, ReplicatorStats]
    deduplication_status: str | None


def _replicator(remote: str, doc: object, source: str) -> ReplicatorStats:
    p = f"replication.{remote}"
    if not isinstance(doc, dict):
        raise PayloadError(source, p, "a replicator stats object", doc)
    return ReplicatorStats(
        remote_cluster=remote, connected=jb.boolean(doc, "connected", source, p),
        replication_backlog=jb.integer(doc, "replicationBacklog", source, p),
        replication_delay_s=jb.integer(doc, "replicationDelayInSeconds", source, p),
        msg_rate_in=jb.number(doc, "msgRateIn", source, p), msg_rate_out=jb.number(doc, "msgRateOut", source, p),
        msg_rate_expired=jb.number(doc, "msgRateExpired", source, p),
        inbound_connection=jb.string(doc, "inboundConnection", source, p),
        inbound_connected_since=jb.string(doc, "inboundConnectedSince", source, p),
        outbound_connection=jb.string(doc, "outboundConnection", source, p),
        outbound_connected_since=jb.string(doc, "outboundConnectedSince", source, p))


def subscription_stats(name: str, doc: object, source: str) -> SubscriptionStats:
    p = f"subscriptions.{name}"
    if not isinstance(doc, dict):
        raise PayloadError(source, p, "a subscription stats object", doc)
    return SubscriptionStats(
        name=name, is_replicated=jb.boolean(doc, "isReplicated", source, p),
        is_durable=jb.boolean(doc, "isDurable", source, p), msg_backlog=jb.integer(doc, "msgBacklog", source, p),
        type=jb.string(doc, "type", source, p),
        last_mark_delete_advanced_ms=jb.integer(doc, "lastMarkDeleteAdvancedTimestamp", source, p),
        non_contiguous_deleted_ranges=jb.integer(doc, "nonContiguousDeletedMessagesRanges", source, p),
        consumers=_count(doc, "consumers", source, p, "a list of consumer stats"),
        msg_out_counter=jb.integer(doc, "msgOutCounter", source, p),
        last_consumed_ms=jb.integer(doc, "lastConsumedTimestamp", source, p))


def _count(doc: dict, key: str, source: str, path: str, expected: str) -> int | None:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, list):
        raise PayloadError(source, jb.join(path, key), expected, value)
    return len(value)


def topic_stats_from_dict(doc: dict, source: str) -> TopicStats:
    publishers = doc.get("publishers") or []
    if not isinstance(publishers, list):
        raise PayloadError(source, "publishers", "a list of publisher stats", publishers)
    subs = jb.obj(doc, "subscriptions", source, "", "an object of subscription -> stats", required=False) or {}
    repl = jb.obj(doc, "replication", source, "", "an object of remote cluster -> replicator stats",
                  required=False) or {}
    return TopicStats(
        msg_rate_in=jb.number(doc, "msgRateIn", source, ""), msg_rate_out=jb.number(doc, "msgRateOut", source, ""),
        storage_size=jb.integer(doc, "storageSize", source, ""), publishers=len(publishers),
        subscriptions=MappingProxyType({n: subscription_stats(n, s, source) for n, s in subs.items()}),
        replication=MappingProxyType({r: _replicator(r, s, source) for r, s in repl.items()}),
        deduplication_status=jb.string(doc, "deduplicationStatus", source, ""))


def decode_topic_stats(data: bytes, source: str) -> TopicStats:
    return topic_stats_from_dict(jb.load_object(data, source), source)


def topic_stats_to_json(ts: TopicStats) -> dict:
    return {"msg_rate_in": ts.msg_rate_in, "msg_rate_out": ts.msg_rate_out, "storage_size": ts.storage_size,
            "publishers": ts.publishers, "deduplication_status": ts.deduplication_status,
            "subscriptions": {n: {k: v for k, v in vars(s).items() if k != "name"}
                              for n, s in ts.subscriptions.items()},
            "replication": {r: {k: v for k, v in vars(s).items() if k != "remote_cluster"}
                            for r, s in ts.replication.items()}}
