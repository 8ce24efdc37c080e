"""Recorded response shapes the collector's and the repair's tests serve with the scripted admin server
(lab/pulsar/admin_server.py ScriptedAdmin): bodies of stats-internal and stats from the real outputs in
tests/fixtures/real (or shapes built the same way), and a replicated topic with the entries a PIP-33 exchange
leaves in it (per-entry answers with the headers a broker sends for GET .../ledger/{L}/entry/{E}:
X-Pulsar-Message-ID, -producer-name, -sequence-id, -publish-time, -replicated-from, one X-Pulsar-replicated-to
line per cluster, -marker-type and one X-Pulsar-PROPERTY-<key> per property)."""
from __future__ import annotations

import json
from pathlib import Path

from lab.pulsar.admin_server import Answer, ScriptedAdmin, ScriptedTopic, entry_answer, reason

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"


def real_body(name: str) -> bytes:
    """A fixture's bytes; for the .txt captures, the first JSON object in them exactly as printed."""
    data = (REAL / name).read_bytes()
    if name.endswith(".json"):
        return data
    text = data.decode()
    start = text.index("{")
    _, end = json.JSONDecoder().raw_decode(text, start)
    return text[start:end].encode()


# stats-internal of a geo-replicated topic on cluster "east" (replicating to and from "west"), printed the way
# the broker's Jackson pretty printer does (" : " separators, fields in the broker's order). Ledger 10 is closed
# with 5 entries; 12 is open (entries 0 in the list, currentLedgerEntries 4, lastConfirmedEntry 12:3).
# Window: replicated subscription orders-sub at 10:1 < replicator pulsar.repl.west at 10:2; local-sub (not
# replicated) at 10:0 does not bound it. So the dump covers 10:2..10:4 and 12:0..12:3.
ORDERS_STATS_INTERNAL = b'''{
  "entriesAddedCounter" : 9,
  "numberOfEntries" : 9,
  "totalSize" : 441,
  "currentLedgerEntries" : 4,
  "currentLedgerSize" : 196,
  "lastLedgerCreatedTimestamp" : "2025-01-31T09:37:46.472Z",
  "waitingCursorsCount" : 1,
  "pendingAddEntriesCount" : 0,
  "lastConfirmedEntry" : "12:3",
  "state" : "LedgerOpened",
  "ledgers" : [ {
    "ledgerId" : 10,
    "entries" : 5,
    "size" : 245,
    "offloaded" : false,
    "underReplicated" : false
  }, {
    "ledgerId" : 12,
    "entries" : 0,
    "size" : 0,
    "offloaded" : false,
    "underReplicated" : false
  } ],
  "cursors" : {
    "local-sub" : {
      "markDeletePosition" : "10:0",
      "readPosition" : "10:1",
      "waitingReadOp" : false,
      "pendingReadOps" : 0,
      "messagesConsumedCounter" : 1,
      "cursorLedger" : 14,
      "cursorLedgerLastEntry" : 2,
      "individuallyDeletedMessages" : "[]",
      "lastLedgerSwitchTimestamp" : "2025-01-31T09:37:46.34Z",
      "state" : "Open",
      "active" : true,
      "numberOfEntriesSinceFirstNotAckedMessage" : 1,
      "totalNonContiguousDeletedMessagesRange" : 0,
      "subscriptionHavePendingRead" : false,
      "subscriptionHavePendingReplayRead" : false,
      "properties" : { }
    },
    "orders-sub" : {
      "markDeletePosition" : "10:1",
      "readPosition" : "10:4",
      "waitingReadOp" : false,
      "pendingReadOps" : 0,
      "messagesConsumedCounter" : 4,
      "cursorLedger" : 15,
      "cursorLedgerLastEntry" : 3,
      "individuallyDeletedMessages" : "[(10:2..10:3]]",
      "lastLedgerSwitchTimestamp" : "2025-01-31T09:37:46.34Z",
      "state" : "Open",
      "active" : true,
      "numberOfEntriesSinceFirstNotAckedMessage" : 3,
      "totalNonContiguousDeletedMessagesRange" : 1,
      "subscriptionHavePendingRead" : false,
      "subscriptionHavePendingReplayRead" : false,
      "properties" : {
        "pulsar.replicated.subscription" : 1
      }
    },
    "pulsar.repl.west" : {
      "markDeletePosition" : "10:2",
      "readPosition" : "12:4",
      "waitingReadOp" : true,
      "pendingReadOps" : 0,
      "messagesConsumedCounter" : 7,
      "cursorLedger" : 16,
      "cursorLedgerLastEntry" : 5,
      "individuallyDeletedMessages" : "[]",
      "lastLedgerSwitchTimestamp" : "2025-01-31T09:37:46.34Z",
      "state" : "Open",
      "active" : true,
      "numberOfEntriesSinceFirstNotAckedMessage" : 1,
      "totalNonContiguousDeletedMessagesRange" : 0,
      "subscriptionHavePendingRead" : false,
      "subscriptionHavePendingReplayRead" : false,
      "properties" : { }
    }
  }
}'''
ORDERS_WINDOW = [(10, 2), (10, 3), (10, 4), (12, 0), (12, 1), (12, 2), (12, 3)]


def orders_stats() -> bytes:
    """The real stats of sample -07 with the subscriptions a replicated topic shows (isReplicated)."""
    doc = json.loads(real_body("pulsar-stats-replication-07.json"))
    doc["subscriptions"] = {
        "local-sub": {"msgBacklog": 3, "type": "Shared", "isReplicated": False, "isDurable": True},
        "orders-sub": {"msgBacklog": 5, "type": "Failover", "isReplicated": True, "isDurable": True},
        "audit/sub 1": {"msgBacklog": 0, "type": "Exclusive", "isReplicated": True, "isDurable": True}}
    return json.dumps(doc, indent=2).encode()


def orders_topic(local: str = "orders") -> ScriptedTopic:
    """The replicated topic above, with the entries a PIP-33 exchange leaves in it."""
    from audit.systems.pulsar.formats.markers import encode_snapshot_request, encode_snapshot_response

    topic = ScriptedTopic(Answer(200, ORDERS_STATS_INTERNAL), Answer(200, orders_stats()))
    topic.replicated_status = {"orders-sub": Answer(200, f'{{"persistent://acme/orders/{local}":true}}'.encode()),
                               "audit/sub 1": Answer(200, f'{{"persistent://acme/orders/{local}":false}}'.encode())}
    topic.entries = {
        (10, 2): entry_answer(10, 2, b"\x00\xffreplicated", producer="west-producer", sequence_id=41,
                              replicated_from="west", properties={"__MSG_PROP_REPL_SOURCE_POSITION": "5:7"}),
        (10, 3): entry_answer(10, 3, encode_snapshot_request("snap-1", "east"), producer="pulsar.marker",
                              marker_type=10),
        (10, 4): entry_answer(10, 4, b"local order 4", sequence_id=4, replicate_to=("west", "north")),
        (12, 0): entry_answer(12, 0, encode_snapshot_response("snap-9", "east", 12, 0), producer="pulsar.marker",
                              marker_type=11, replicate_to=("west",)),
    }
    return topic


def standard_estate(fake: ScriptedAdmin) -> None:
    """acme/orders: `orders` (replicated, above), `payments` (partitioned in 2, sample -08 stats-internal per
    partition, only partition 0 in the namespace list), and `audit-log` listed by name only in the estate."""
    fake.namespaces["acme/orders"] = ["persistent://acme/orders/orders",
                                      "persistent://acme/orders/payments-partition-0"]
    fake.partitioned["acme/orders"] = ["persistent://acme/orders/payments"]
    fake.add_topic("acme/orders/orders", orders_topic())
    fake.add_topic("acme/orders/payments", ScriptedTopic(reason(404, "Topic not found"),
                                                         reason(404, "Topic not found"), partitions=2))
    for i in range(2):
        fake.add_topic(f"acme/orders/payments-partition-{i}",
                       ScriptedTopic(Answer(200, real_body("pulsar-stats-internal-08.txt")),
                                     Answer(200, real_body("pulsar-stats-replication-07.json"))))
