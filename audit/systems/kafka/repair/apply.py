"""Approved Kafka repairs (docs/repair.md): the calls of a `group_reset` plan (audit/systems/kafka/repair/plan.py), made
with kafka-python 3.0.12's KafkaAdminClient built like the admin collector's
(audit/systems/kafka/collect/admin_client.py). Replica and data-loss plans are carried out by hand. Upstream facts:
docs/formats/kafka.md §13.

One action, `alter_group_offsets`:
- check(): DescribeGroups says the group is Empty or Dead -- what `kafka-consumer-groups.sh --reset-offsets`
  requires --, ListGroups does not show it active under another protocol, and OffsetFetch shows the committed
  offset the audit saw;
- run(): AlterConsumerGroupOffsets = OffsetCommit to the group coordinator, generation -1 and empty member id;
  the partition's error code is in the result;
- verify(): OffsetFetch shows `reset_to`.
Each call opens its own client and closes it (every read is live; nothing is left running between calls)."""
from __future__ import annotations

from typing import Any, Callable, Mapping

import kafka.errors as kerrors
from kafka.admin import KafkaAdminClient
from kafka.structs import OffsetAndMetadata, TopicPartition

from audit.systems.kafka.collect.admin_client import BootstrapFailed, bootstrapped, describe
from audit.contracts import Precheck, RepairAction
from audit.repair.common import RepairInputError
from audit.systems.kafka.repair.plan import reset_command

INACTIVE = ("Empty", "Dead")        # ConsumerGroupCommand.resetOffsets resets only these
MANUAL = "group_reset (replica and data-loss plans are carried out by hand: follow their steps)"


def _int(plan: Mapping, key: str, where: str) -> int:
    value = plan.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise RepairInputError(where, key, "a non-negative integer")
    return value


def _text(plan: Mapping, key: str, where: str) -> str:
    value = plan.get(key)
    if not isinstance(value, str) or not value:
        raise RepairInputError(where, key, "a non-empty string")
    return value


def _reset(plan: Mapping, cluster: Any) -> tuple[str, str, int, int, int]:
    """(group, topic, partition, target_committed, reset_to) of a group_reset plan for `cluster`."""
    where = f"plan {plan.get('plan_id')}"
    if plan.get("kind") != "group_reset":
        raise RepairInputError(where, "kind", MANUAL)
    if plan.get("system") != "kafka":
        raise RepairInputError(where, "system", "kafka")
    if getattr(cluster, "source", None) != "admin":
        raise RepairInputError(f"cluster {cluster.name}", "source", "a cluster with an admin endpoint: source admin "
                               "(lab and log-dirs clusters have none to call)")
    if plan.get("cluster") != cluster.name:
        raise RepairInputError(where, "cluster", f"{cluster.name} (the cluster it is applied to)")
    group, topic = _text(plan, "group", where), _text(plan, "topic", where)
    partition, current, offset = (_int(plan, k, where) for k in ("partition", "target_committed", "reset_to"))
    api = plan.get("admin_api")
    # the approver reads admin_api: it must say exactly what run() sends
    if not (isinstance(api, Mapping) and api.get("call") == "AlterConsumerGroupOffsets"
            and api.get("group_id") == group
            and api.get("offsets") == [{"topic": topic, "partition": partition, "offset": offset}]):
        raise RepairInputError(where, "admin_api", f"AlterConsumerGroupOffsets of group {group} with the single "
                               f"offset {topic}:{partition} -> {offset} (the plan's own fields)")
    return group, topic, partition, current, offset


def _error(exc: BaseException, secrets: Any) -> str:
    return secrets.redact(str(exc) if isinstance(exc, (ReadFailed, BootstrapFailed)) else describe(exc))


class ReadFailed(RuntimeError):
    """A read of check() or verify() that failed, named by its Kafka API."""


def _call(api: str, fn: Callable, *args):
    try:
        return fn(*args)
    except Exception as exc:
        raise ReadFailed(f"{api}: {describe(exc)}") from exc


def _committed(admin: KafkaAdminClient, group: str, tp: TopicPartition) -> int | None:
    """OffsetFetch: the committed offset, None without one (the broker answers -1, OffsetFetchResponse
    INVALID_OFFSET; the planner's target_committed is always a real commit)."""
    found = _call("OffsetFetch", admin.list_group_offsets, {group: [tp]}).get(group, {}).get(tp)
    return found.offset if found is not None and found.offset >= 0 else None


def _group_state(admin: KafkaAdminClient, group: str) -> dict:
    """DescribeGroups at the coordinator. It describes classic groups only: a consumer-protocol group is answered
    Dead (docs/formats/kafka.md §13), so a Dead answer is checked against ListGroups, which lists every group type
    with its state (brokers >= 2.6)."""
    d = _call("DescribeGroups", admin.describe_groups, [group]).get(group)
    if d is None or d.get("error"):
        raise ReadFailed(f"DescribeGroups: {'no answer for the group' if d is None else d['error']}")
    out = {"state": d.get("group_state"), "members": len(d.get("members") or ()), "described_by": "DescribeGroups"}
    if out["state"] == "Dead":
        listed = [g for g in _call("ListGroups", admin.list_groups) if g.get("group_id") == group]
        if listed and listed[0].get("group_state"):
            out.update(state=listed[0]["group_state"], group_type=listed[0].get("group_type"),
                       described_by="ListGroups")
    return out


def may_reset(observed: Mapping[str, Any], current: int) -> bool:
    """check()'s verdict on what it read: the group inactive and its commit still the audit's. Anything unread
    (an error in place of a value) does not hold."""
    state = (observed.get("group") or {}).get("state")
    return state in INACTIVE and "committed_offset" in observed and observed["committed_offset"] == current


def actions(plan: Mapping[str, Any], cluster: Any, secrets: Any, *,
            client_factory: Callable[..., KafkaAdminClient] = KafkaAdminClient) -> list[RepairAction]:
    """The calls of an approved `group_reset` plan on `cluster` (the estate's KafkaCluster)."""
    group, topic, partition, current, offset = _reset(plan, cluster)
    tp = TopicPartition(topic, partition)
    where = f"{topic}:{partition}"

    def read(*parts: tuple[str, Callable[[KafkaAdminClient], Any]]) -> dict[str, Any]:
        """Each (key, read) into one dict, live; a read that fails gives `<key>_error` instead (it does not hold)."""
        observed: dict[str, Any] = {}
        try:
            with bootstrapped(cluster, secrets, client_factory) as (admin, _):
                for key, fn in parts:
                    try:
                        observed[key] = fn(admin)
                    except Exception as exc:
                        observed[f"{key}_error"] = _error(exc, secrets)
        except Exception as exc:        # no bootstrap: nothing read
            observed["connect_error"] = _error(exc, secrets)
        return observed

    def check() -> Precheck:
        observed = read(("group", lambda a: _group_state(a, group)),
                        ("committed_offset", lambda a: _committed(a, group, tp)))
        return Precheck(may_reset(observed, current), observed,
                        {"group_state": list(INACTIVE), "committed_offset": current})

    def run() -> dict:
        with bootstrapped(cluster, secrets, client_factory) as (admin, _):
            # leader_epoch None -> -1 and metadata "": what the Java admin sends for OffsetAndMetadata(offset)
            answer = admin.alter_group_offsets(group, {tp: OffsetAndMetadata(offset, "", None)})
        err = answer.get(tp)
        name = "no answer for the partition" if err is None else (
            None if err is kerrors.NoError else getattr(err, "message", err.__name__))
        return {"call": "AlterConsumerGroupOffsets", "group_id": group, "ok": name is None,
                "partitions": [{"topic": topic, "partition": partition, "offset": offset, "error": name}]}

    def verify() -> Precheck:
        observed = read(("committed_offset", lambda a: _committed(a, group, tp)))
        return Precheck("committed_offset" in observed and observed["committed_offset"] == offset, observed,
                        {"committed_offset": offset})

    request = {
        "call": "AlterConsumerGroupOffsets", "protocol": "OffsetCommit to the group coordinator",
        "cluster": cluster.name, "bootstrap_servers": cluster.bootstrap_servers,
        "security_protocol": cluster.security_protocol,
        "group_id": group, "generation_id": -1, "member_id": "",
        "offsets": [{"topic": topic, "partition": partition, "offset": offset, "leader_epoch": -1, "metadata": ""}],
        # the same reset with Kafka's own tool (ConsumerGroupCommand: --execute commits, --dry-run only shows)
        "command": reset_command(cluster.bootstrap_servers, group, topic, partition, offset)
        .removesuffix("--dry-run") + "--execute"}
    return [RepairAction(name="alter_group_offsets", target=f"group {group} on {where}", request=request,
                         check=check, run=run, verify=verify)]
