"""Admin REST bodies of the lab's topics, as a broker sends them: compact Jackson JSON (no spaces, null fields
left out) with the key order of the real PersistentTopicInternalStats / TopicStats / ReplicatorStats objects
(tests/fixtures/real/pulsar-stats-internal-*.json, pulsar-stats-replication-07.json), and the per-entry
answer of GET .../ledger/{l}/entry/{e} (body + X-Pulsar-* headers in PersistentTopicsBase's order).

The emitter and the loopback admin server both use these, so the raw evidence the lab writes directly is
byte-identical to what the real collector stores when it reads the lab over HTTP."""
from __future__ import annotations

import json
from typing import Any

from audit.systems.pulsar.domain.positions import Position
from audit.systems.pulsar.domain.rangeset import AckRanges
from audit.systems.pulsar.formats.timefmt import format_time_ms
from lab.pulsar.model import Cursor, Entry
from lab.pulsar.topic import Topic

OCTET_STREAM = "application/octet-stream"
CLIENT_VERSION = "Pulsar-Java-v3.0.7"


def jackson(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def _pos(p: tuple[int, int]) -> str:
    return f"{p[0]}:{p[1]}"


def ranges_text(cursor: Cursor, guava: bool) -> str:
    ranges = AckRanges((Position(*lo), Position(*hi)) for lo, hi in cursor.ranges())
    if not guava:
        return ranges.to_string()
    return "[" + ", ".join(f"({lo}..{hi}]" for lo, hi in ranges) + "]"  # Guava TreeRangeSet.toString


def _cursor_active(topic: Topic, name: str) -> bool:
    if name in topic.subscriptions:
        return bool(topic.subscriptions[name].connected())
    rep = topic.replicators.get(name[len("pulsar.repl."):])
    return rep is not None and rep.connected


def cursor_stats(topic: Topic, cursor: Cursor) -> dict[str, Any]:
    ranges = cursor.ranges()
    active = _cursor_active(topic, cursor.name)
    caught_up = cursor.read_idx >= len(topic.ml.entries)
    is_sub = cursor.name in topic.subscriptions
    return {
        "markDeletePosition": _pos(cursor.mark_delete_position()),
        "readPosition": _pos(cursor.read_position()),
        "waitingReadOp": active and caught_up,
        "pendingReadOps": 0,
        "messagesConsumedCounter": cursor.consumed,
        "cursorLedger": cursor.cursor_ledger,
        "cursorLedgerLastEntry": cursor.mark_deletes,
        "individuallyDeletedMessages": ranges_text(cursor, topic.settings.guava_ranges),
        "lastLedgerSwitchTimestamp": format_time_ms(cursor.created_ms),
        "state": "Open",
        "active": active,
        "numberOfEntriesSinceFirstNotAckedMessage": cursor.read_idx - cursor.mdp_idx,
        "totalNonContiguousDeletedMessagesRange": len(ranges),
        "subscriptionHavePendingRead": is_sub and active and caught_up,
        "subscriptionHavePendingReplayRead": False,
        "properties": dict(cursor.properties),
    }


def stats_internal(topic: Topic) -> dict[str, Any]:
    ml = topic.ml
    live = ml.live_ledgers()
    waiting = sum(1 for c in ml.cursors.values() if _cursor_active(topic, c.name) and c.read_idx >= len(ml.entries))
    ledgers = [{"ledgerId": led.ledger_id, "entries": 0 if led is ml.current else led.count,
                "size": 0 if led is ml.current else led.size, "offloaded": False, "underReplicated": False}
               for led in live]
    return {
        "entriesAddedCounter": len(ml.entries),
        "numberOfEntries": sum(led.count for led in live),
        "totalSize": ml.total_size,
        "currentLedgerEntries": ml.current.count,
        "currentLedgerSize": ml.current.size,
        "lastLedgerCreatedTimestamp": format_time_ms(ml.current.created_ms),
        "waitingCursorsCount": waiting,
        "pendingAddEntriesCount": 0,
        "lastConfirmedEntry": _pos(ml.last_position()),
        "state": "LedgerOpened",
        "ledgers": ledgers,
        "cursors": {name: cursor_stats(topic, ml.cursors[name]) for name in sorted(ml.cursors)},
        "schemaLedgers": [],
        "compactedLedger": {"ledgerId": -1, "entries": -1, "size": -1, "offloaded": False, "underReplicated": False},
    }


def _rate(times: list[int], now: int, window_ms: int = 10_000) -> float:
    return sum(1 for t in times[-5000:] if now - t <= window_ms) * 1000.0 / window_ms


def _subscription_stats(topic: Topic, name: str, now: int) -> dict[str, Any]:
    """As PersistentSubscription.getStats: msgOutCounter/bytesOutCounter keep removed consumers' counts,
    lastConsumed/lastAckedTimestamp are the newest of the connected consumers' (0 with none connected). A standby
    whose cursor only moved by UPDATE markers shows 0, 0 and no consumers."""
    sub = topic.subscriptions[name]
    c = sub.cursor
    ranges = c.ranges()
    live = sub.connected()
    consumers = [{"msgRateOut": 0.0, "msgThroughputOut": 0.0, "bytesOutCounter": k.bytes_out,
                  "msgOutCounter": k.received, "msgRateRedeliver": 0.0, "chunkedMessageRate": 0.0,
                  "consumerName": k.name, "availablePermits": 1000, "unackedMessages": len(k.unacked),
                  "avgMessagesPerEntry": 1, "blockedConsumerOnUnackedMsgs": False,
                  "lastAckedTimestamp": k.last_acked_ms, "lastConsumedTimestamp": k.last_consumed_ms,
                  "address": k.address, "connectedSince": format_time_ms(k.connected_since),
                  "clientVersion": CLIENT_VERSION} for k in live]
    return {
        "msgRateOut": 0.0, "msgThroughputOut": 0.0, "bytesOutCounter": sub.bytes_out, "msgOutCounter": sub.msg_out,
        "msgRateRedeliver": 0.0, "chunkedMessageRate": 0.0, "msgBacklog": c.backlog(), "backlogSize": 0,
        "earliestMsgPublishTimeInBacklog": 0, "msgBacklogNoDelayed": c.backlog() - len(sub.delayed),
        "blockedSubscriptionOnUnackedMsgs": False, "msgDelayed": len(sub.delayed),
        "unackedMessages": sum(len(k.unacked) for k in live), "type": "Shared",
        "msgRateExpired": 0.0, "totalMsgExpired": 0, "lastExpireTimestamp": 0,
        "lastConsumedFlowTimestamp": sub.last_flow_ms,
        "lastConsumedTimestamp": max((k.last_consumed_ms for k in live), default=0),
        "lastAckedTimestamp": max((k.last_acked_ms for k in live), default=0),
        "lastMarkDeleteAdvancedTimestamp": c.last_advance_ms,
        "consumers": consumers, "isDurable": True, "isReplicated": sub.replicated,
        "allowOutOfOrderDelivery": False, "consumersAfterMarkDeletePosition": {},
        "nonContiguousDeletedMessagesRanges": len(ranges),
        "nonContiguousDeletedMessagesRangesSerializedSize": sum(len(f"{lo}{hi}") + 8 for lo, hi in ranges),
        "subscriptionProperties": {},
    }


def _replication_stats(topic: Topic, remote: str, now: int) -> dict[str, Any]:
    rep = topic.replicators[remote]
    back = rep.remote.replicators.get(topic.cluster_name)  # the remote's replicator writing to us
    rate_in = _rate(back.sent_times, now) if back else 0.0
    rate_out = rep.rate_out(now)
    doc: dict[str, Any] = {
        "msgRateIn": rate_in, "msgThroughputIn": rate_in * 90, "msgRateOut": rate_out,
        "msgThroughputOut": rate_out * 90, "msgRateExpired": 0.0, "replicationBacklog": rep.backlog(),
        "connected": rep.connected, "replicationDelayInSeconds": rep.delay_s(now),
    }
    if back is not None and back.connected:
        doc["inboundConnection"] = f"/{rep.remote.cluster.broker_ip}:{back.port}"
        doc["inboundConnectedSince"] = format_time_ms(back.connected_since)
    if rep.connected:
        doc["outboundConnection"] = f"/{topic.cluster.broker_ip}:{rep.port}"
        doc["outboundConnectedSince"] = format_time_ms(rep.connected_since)
    return doc


def topic_stats(topic: Topic, now: int) -> dict[str, Any]:
    subs = {name: _subscription_stats(topic, name, now) for name in sorted(topic.subscriptions)}
    rate_in = _rate(topic.in_times, now)
    avg = topic.bytes_in / topic.msg_in if topic.msg_in else 0.0
    ranges = sum(s["nonContiguousDeletedMessagesRanges"] for s in subs.values())
    return {
        "msgRateIn": rate_in, "msgThroughputIn": rate_in * avg, "msgRateOut": 0.0, "msgThroughputOut": 0.0,
        "bytesInCounter": topic.bytes_in, "msgInCounter": topic.msg_in,
        "bytesOutCounter": sum(s.bytes_out for s in topic.subscriptions.values()),
        "msgOutCounter": sum(s.msg_out for s in topic.subscriptions.values()),
        "averageMsgSize": avg, "msgChunkPublished": False, "storageSize": topic.ml.total_size,
        "backlogSize": 0, "offloadedStorageSize": 0, "waitingPublishers": 0, "publishers": [],
        "subscriptions": subs,
        "replication": {remote: _replication_stats(topic, remote, now) for remote in sorted(topic.replicators)},
        "deduplicationStatus": "Disabled", "nonContiguousDeletedMessagesRanges": ranges,
        "nonContiguousDeletedMessagesRangesSerializedSize": sum(
            s["nonContiguousDeletedMessagesRangesSerializedSize"] for s in subs.values()),
    }


def replicated_status(topic: Topic, subscription: str) -> dict[str, bool]:
    return {topic.name: topic.subscriptions[subscription].replicated}


def entry_headers(entry: Entry) -> list[tuple[str, str]]:
    """The response headers of GET .../ledger/{l}/entry/{e} in the order the broker adds them."""
    h = [("X-Pulsar-Message-ID", f"{entry.ledger_id}:{entry.entry_id}")]
    h += [("X-Pulsar-PROPERTY-" + k, v) for k, v in entry.properties]
    h.append(("X-Pulsar-publish-time", format_time_ms(entry.publish_ms)))
    if entry.deliver_at_ms is not None:
        h.append(("X-Pulsar-deliver-at-time", format_time_ms(entry.deliver_at_ms)))
    h.append(("X-Pulsar-Is-Encrypted", "false"))
    h.append(("X-Pulsar-producer-name", entry.producer_name))
    h.append(("X-Pulsar-sequence-id", str(entry.sequence_id)))
    if entry.replicated_from is not None:
        h.append(("X-Pulsar-replicated-from", entry.replicated_from))
    h += [("X-Pulsar-replicated-to", c) for c in entry.replicate_to or ()]
    if entry.marker_type is None:
        h.append(("X-Pulsar-uncompressed-size", str(len(entry.payload))))
    else:
        h.append(("X-Pulsar-marker-type", str(entry.marker_type)))
    return h


# Message TTL answers (docs/formats/pulsar.md §2.14). The lab's TTL is the namespace's (`message_ttl_s`); it
# sets none per topic, and its brokers' ttlDurationDefaultInSeconds is 0.
TOPIC_TTL_SINCE = (2, 7, 0)        # GET .../{topic}/messageTTL (apache/pulsar#7738)
TOPIC_POLICIES_ON = (2, 11, 0)     # topicLevelPoliciesEnabled true by default (PIP-162, apache/pulsar#15619)
NULL_TTL_SINCE = (2, 8, 0)         # an unset namespace TTL is null, answered 204 (apache/pulsar#9225)
TOPIC_POLICIES_OFF = "Topic level policies is disabled, to enable the topic level policy and retry."


TTL_MISSING, TTL_DISABLED, TTL_ON = "missing", "disabled", "on"


def topic_ttl_resource(version: tuple[int, int, int]) -> str:
    """GET .../{topic}/messageTTL on this broker version: TTL_MISSING (no such resource: Jetty's 404),
    TTL_DISABLED (405: topic level policies off) or TTL_ON."""
    if version < TOPIC_TTL_SINCE:
        return TTL_MISSING
    return TTL_DISABLED if version < TOPIC_POLICIES_ON else TTL_ON


def topic_ttl_value(ttl_s: int, applied: bool) -> tuple[int, bytes]:
    """(status, body) of GET .../{topic}/messageTTL[?applied=true] where topic policies are on."""
    if not applied:
        return 204, b""   # no topic-level TTL: null
    return 200, jackson(ttl_s)   # topic, else namespace, else the broker's default (0)


def topic_ttl_answer(version: tuple[int, int, int], ttl_s: int, applied: bool) -> tuple[int, bytes] | None:
    """(status, body) of GET .../{topic}/messageTTL[?applied=true]; None: no such resource (Jetty's 404)."""
    resource = topic_ttl_resource(version)
    if resource == TTL_MISSING:
        return None
    if resource == TTL_DISABLED:
        return 405, jackson({"reason": TOPIC_POLICIES_OFF})   # AdminResource.checkTopicLevelPolicyEnable
    return topic_ttl_value(ttl_s, applied)


def namespace_ttl_answer(version: tuple[int, int, int], ttl_s: int) -> tuple[int, bytes]:
    """(status, body) of GET /admin/v2/namespaces/{t}/{ns}/messageTTL: policies.message_ttl_in_seconds."""
    if ttl_s == 0 and version >= NULL_TTL_SINCE:
        return 204, b""
    return 200, jackson(ttl_s)
