"""The state a broker builds from KRaft metadata records: partitions (leader, replicas, ISR, ELR, leader and
partition epochs), topics, broker registrations and the metadata partition's raft leader.

Replayed as a broker's metadata image is built (docs/formats/kafka.md §6.4): what each record does and which
records the broker refuses; a PartitionChangeRecord carries no epochs: naming a leader, even the same one, bumps
the leader epoch by one and every change bumps the partition epoch by one (the controller names the current leader
to force a bump); an aborted metadata transaction is reverted. Records are the dicts of
kraft.decode_metadata_batch."""
from __future__ import annotations

from typing import Iterable

NO_LEADER_CHANGE = -2  # PartitionChangeRecord.Leader default
NO_RECOVERY_STATE_CHANGE = -1  # PartitionChangeRecord.LeaderRecoveryState default


class _Image:
    """Topics, partitions and brokers as the records leave them (TopicsDelta / ClusterDelta semantics)."""

    def __init__(self) -> None:
        self.topics: dict[str, str] = {}
        self.partitions: dict[tuple[str, int], dict] = {}
        self.brokers: dict[int, dict] = {}
        self.quorum_leader: dict | None = None
        self.problems: list[str] = []

    def apply(self, r: dict) -> None:
        handler = _HANDLERS.get(r["type"])
        if handler is not None:  # records that touch nothing kept here (configs, features, ...) pass by
            handler(self, r, r["fields"])

    def problem(self, r: dict, text: str) -> None:
        self.problems.append(f"record@{r['offset']} {r['type']}: {text}")

    def topic(self, r: dict, f: dict) -> None:
        self.topics[f["topic_id"]] = f["name"]

    def partition(self, r: dict, f: dict) -> None:
        if f["topic_id"] not in self.topics:
            self.problem(r, f"topic {f['topic_id']} has no TopicRecord")
        self.partitions[(f["topic_id"], f["partition_id"])] = {
            "topic": self.topics.get(f["topic_id"]), "topic_id": f["topic_id"], "partition": f["partition_id"],
            "replicas": list(f["replicas"]), "isr": list(f["isr"]),
            "elr": list(f.get("eligible_leader_replicas") or []),
            "last_known_elr": list(f.get("last_known_elr") or []),
            "adding_replicas": list(f["adding_replicas"]), "removing_replicas": list(f["removing_replicas"]),
            "leader": f["leader"], "leader_epoch": f["leader_epoch"], "partition_epoch": f["partition_epoch"],
            "leader_recovery_state": f["leader_recovery_state"], "removed": False, "offset": r["offset"],
            "replicas_at_ms": r.get("timestamp")}

    def partition_change(self, r: dict, f: dict) -> None:
        state = self.partitions.get((f["topic_id"], f["partition_id"]))
        if state is None or state["removed"]:
            self.problem(r, f"no partition {f['topic_id']}:{f['partition_id']} to change")
            return
        # PartitionRegistration.merge: absent (null) fields are unchanged; naming a leader, even the same one,
        # is a new leader epoch; every change is a new partition epoch.
        for name, key in (("replicas", "replicas"), ("isr", "isr"), ("adding_replicas", "adding_replicas"),
                          ("removing_replicas", "removing_replicas"), ("eligible_leader_replicas", "elr"),
                          ("last_known_elr", "last_known_elr")):
            if f.get(name) is not None:
                state[key] = list(f[name])
        if f.get("replicas") is not None:   # the replica list stands from this record's batch timestamp on
            state["replicas_at_ms"] = r.get("timestamp")
        if f["leader"] != NO_LEADER_CHANGE:
            state["leader"], state["leader_epoch"] = f["leader"], state["leader_epoch"] + 1
        if f["leader_recovery_state"] != NO_RECOVERY_STATE_CHANGE:
            state["leader_recovery_state"] = f["leader_recovery_state"]
        state["partition_epoch"] += 1
        state["offset"] = r["offset"]

    def remove_topic(self, r: dict, f: dict) -> None:
        if self.topics.pop(f["topic_id"], None) is None:
            self.problem(r, f"no topic {f['topic_id']} to remove")
            return
        for (topic_id, _), state in self.partitions.items():
            if topic_id == f["topic_id"] and not state["removed"]:
                state["removed"], state["offset"] = True, r["offset"]

    def register_broker(self, r: dict, f: dict) -> None:
        self.brokers[f["broker_id"]] = {
            "broker": f["broker_id"], "epoch": f["broker_epoch"], "incarnation_id": f["incarnation_id"],
            "rack": f["rack"], "fenced": f["fenced"],
            "in_controlled_shutdown": f.get("in_controlled_shutdown", False), "registered": True,
            "endpoints": [{k: e[k] for k in ("name", "host", "port", "security_protocol")} for e in f["end_points"]],
            "offset": r["offset"]}

    def unregister_broker(self, r: dict, f: dict) -> None:
        broker = self.brokers.get(f["broker_id"])
        if broker is None:
            self.problem(r, f"broker {f['broker_id']} was not registered")
            return
        broker["registered"], broker["offset"] = False, r["offset"]

    def _registered(self, r: dict, broker_id: int, epoch: int) -> dict | None:
        # ClusterDelta.getBrokerOrThrow: the broker must be registered with exactly this epoch
        broker = self.brokers.get(broker_id)
        if broker is None or not broker["registered"] or broker["epoch"] != epoch:
            self.problem(r, f"broker {broker_id} epoch {epoch} is not registered"
                             + ("" if broker is None else f" (registered epoch {broker['epoch']})"))
            return None
        broker["offset"] = r["offset"]
        return broker

    def fence_broker(self, r: dict, f: dict) -> None:
        broker = self._registered(r, f["id"], f["epoch"])
        if broker is not None:
            broker["fenced"] = True

    def unfence_broker(self, r: dict, f: dict) -> None:
        broker = self._registered(r, f["id"], f["epoch"])
        if broker is not None:
            broker["fenced"] = False

    def broker_registration_change(self, r: dict, f: dict) -> None:
        fenced, shutdown = f["fenced"], f.get("in_controlled_shutdown", 0)
        if fenced not in (-1, 0, 1) or shutdown not in (0, 1):  # BrokerRegistration*Change.fromValue
            self.problem(r, f"unknown fenced {fenced} / in_controlled_shutdown {shutdown} value")
            return
        broker = self._registered(r, f["broker_id"], f["broker_epoch"])
        if broker is not None:
            broker["fenced"] = {1: True, -1: False}.get(fenced, broker["fenced"])
            broker["in_controlled_shutdown"] = shutdown == 1 or broker["in_controlled_shutdown"]

    def leader_change(self, r: dict, f: dict) -> None:
        # the raft leader of the metadata partition; the epoch is the batch's, the message does not carry it
        self.quorum_leader = {"leader_id": f["leader_id"], "epoch": r["partition_leader_epoch"],
                              "voters": [v["voter_id"] for v in f["voters"]], "offset": r["offset"]}


_HANDLERS = {
    "TopicRecord": _Image.topic,
    "PartitionRecord": _Image.partition,
    "PartitionChangeRecord": _Image.partition_change,
    "RemoveTopicRecord": _Image.remove_topic,
    "RegisterBrokerRecord": _Image.register_broker,
    "UnregisterBrokerRecord": _Image.unregister_broker,
    "FenceBrokerRecord": _Image.fence_broker,
    "UnfenceBrokerRecord": _Image.unfence_broker,
    "BrokerRegistrationChangeRecord": _Image.broker_registration_change,
    "LeaderChangeMessage": _Image.leader_change,
}


def replay(records: Iterable[dict]) -> dict:
    """Replay decoded records in the order given (a snapshot's, then the log's: since_snapshot) into
    {"partitions", "brokers", "quorum_leader", "problems", "open_transaction"}. A SnapshotHeader starts the
    image afresh (a loaded snapshot replaces everything); records between BeginTransactionRecord and
    AbortTransactionRecord are dropped (OffsetControlManager reverts them), and those of a transaction not yet
    ended are not applied (MetadataBatchLoader does not publish them). Records the broker would refuse are
    skipped and named in problems."""
    image, pending, began = _Image(), None, None
    for r in records:
        kind = r["type"]
        if r["error"] is not None:
            image.problems.append(f"record@{r['offset']}: not applied ({r['error']})")
        elif kind == "SnapshotHeaderRecord":
            image, pending = _Image(), None
        elif kind == "BeginTransactionRecord":
            if pending is not None:  # refused (a fault), the open transaction goes on
                image.problem(r, f"a transaction begun at offset {began} is still open")
            else:
                pending, began = [], r["offset"]
        elif kind in ("EndTransactionRecord", "AbortTransactionRecord"):
            if pending is None:
                image.problem(r, "no transaction to end")
            elif kind == "EndTransactionRecord":
                for held in pending:
                    image.apply(held)
            pending = None
        elif pending is not None and not r["control"]:
            pending.append(r)
        else:
            image.apply(r)
    if pending is not None:
        image.problems.append(f"transaction begun at offset {began} not ended: {len(pending)} records not applied")
    partitions = sorted(image.partitions.values(), key=lambda p: (p["topic"] or "", p["topic_id"], p["partition"]))
    return {"partitions": partitions, "brokers": [image.brokers[b] for b in sorted(image.brokers)],
            "quorum_leader": image.quorum_leader, "problems": image.problems, "open_transaction": pending is not None}


def partition_states(records: Iterable[dict]) -> list[dict]:
    """Current state per partition: topic, topic_id, partition, replicas, isr, elr, last_known_elr,
    adding_replicas, removing_replicas, leader, leader_epoch, partition_epoch, leader_recovery_state, removed,
    offset (of the last record that changed it)."""
    return replay(records)["partitions"]


def brokers(records: Iterable[dict]) -> list[dict]:
    """Broker registrations: broker, epoch, incarnation_id, rack, fenced, in_controlled_shutdown, registered,
    endpoints, offset."""
    return replay(records)["brokers"]
