"""Dry-run repair plans for Kafka findings (docs/kafka/contracts.md "Repairs"). Pure: no I/O, deterministic output;
nothing here is ever applied (applying goes through the approval flow, not here).

From the Kafka findings (their evidence JSON carries the subject keys and the rule's detail):
- replica plans, one per (cluster, topic, partition, broker): which replica must be REBUILT (its log keeps batches
  its truncation rule will not remove -- kafka.divergent_logs --, its leader-epoch cache is wrong -- lineage,
  batch epochs, an invalid checkpoint: every later truncation would be computed from it --, or it is in the ISR
  without the committed data) and which will TRUNCATE on its own (a high watermark above its log end: the broker
  cuts it back when it loads the log; nothing to do but to watch it catch up);
- data-loss plans, one per partition with kafka.committed_data_lost: the offsets the current leader lacks, the
  replicas that exposed them (they will truncate them at their next fetch), the producers and the time span
  concerned, and what to save from those replicas first;
- MirrorMaker 2 group resets, one per target group and partition a failover would skip
  (kafka.mm2_target_group_ahead: back to the highest offset the translation allows) or redeliver beyond the
  tolerance (kafka.mm2_failover_redelivery: forward to the lowest offset the source group's position proves
  consumed): the exact `kafka-consumer-groups.sh ... --reset-offsets ... --dry-run` command and the admin API
  call (AlterConsumerGroupOffsets).
`preconditions` hold what the audit saw; whoever applies a plan re-reads it first and refuses if it moved.
`plan_run(outputs)` (the System's plan_repairs) reads the run's Kafka findings, tables/kafka_replicas (the log dir
of each replica) and the estate (bootstrap servers, mirror separators)."""
from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, Iterable, Mapping

from audit.repair.common import RepairInputError, error_item, plan_id

SYSTEM = "kafka"
REBUILD, TRUNCATE = "rebuild", "truncate"
REPLICA_ACTIONS = {   # check -> (action, why)
    "kafka.divergent_logs": (REBUILD, "it keeps batches that differ from the leader's below its high watermark and "
                                      "its truncation rule will not remove them"),
    "kafka.epoch_lineage_mismatch": (REBUILD, "its leader-epoch cache disagrees with the leader's on committed "
                                              "offsets: later truncations would be computed from a wrong history"),
    "kafka.batch_epoch_outside_cache": (REBUILD, "batches carry epochs its leader-epoch cache does not give them"),
    "kafka.epoch_checkpoint_invalid": (REBUILD, "its leader-epoch-checkpoint is invalid (the broker refuses it or "
                                                "drops entries when it loads it)"),
    "kafka.isr_missing_committed": (REBUILD, "it is in the ISR but its log ends below the leader's high watermark"),
    "kafka.high_watermark_above_log_end": (TRUNCATE, "its checkpointed high watermark is above its log end: the "
                                                     "broker truncates it to the log end when it loads the log and "
                                                     "fetches the rest from the leader"),
}
LOST = "kafka.committed_data_lost"
# Both resets go to the LOW bound: the lowest downstream offset the translation allows for what the source group
# consumed. Anything above it may skip messages the group never read (the overshoot KAFKA-12468 fixed in 3.4.1);
# at the low bound a failover can only redeliver (at least once).
GROUP_RESETS = {"kafka.mm2_target_group_ahead": ("skip", 0), "kafka.mm2_failover_redelivery": ("redeliver", 0)}
# MirrorCheckpointTask.syncGroupOffset writes a translated offset whenever it is above the idle target group's
# (docs/formats/kafka.md §12): before 3.4.1 that translation overshoots, so a reset below it is undone
PUSHED_FORWARD = ("MirrorMaker 2 before 3.4.1 with sync.group.offsets.enabled=true writes its own translation "
                  "(which overshoots) over an idle target group whenever that is ahead of the group: the reset "
                  "will be pushed forward again unless MirrorMaker 2 is upgraded to 3.4.1+ or "
                  "sync.group.offsets.enabled is turned off for this flow first")
REBUILD_STEPS = (
    "confirm the partition's leader and at least one other in-sync replica hold the committed data (the audit's "
    "reference replica); never rebuild the leader",
    "either reassign the partition without broker {broker} and then with it again (kafka-reassign-partitions.sh), "
    "or stop broker {broker} with a controlled shutdown, move {partition_dir} aside (keep it: it is evidence) and "
    "start the broker: it recreates the replica empty and fetches it from the leader",
    "re-run the audit: the replica must be back in the ISR with the leader's epochs and batches")


def _evidence(v: Mapping[str, Any]) -> dict:
    ev = v.get("evidence")
    if isinstance(ev, str):
        try:
            ev = json.loads(ev) if ev else {}
        except ValueError:
            ev = None
    return ev if isinstance(ev, dict) else {}


def _int(ev: Mapping[str, Any], key: str, where: str, required: bool = True) -> int | None:
    value = ev.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise RepairInputError(where, f"evidence.{key}", "an integer")
    return value


def _str(ev: Mapping[str, Any], key: str, where: str) -> str:
    value = ev.get(key)
    if not isinstance(value, str) or not value:
        raise RepairInputError(where, f"evidence.{key}", "a non-empty string")
    return value


def _finish(plan: dict) -> dict:
    plan["plan_id"] = plan_id(plan)
    return plan


def replica_plans(items: list[tuple[str, Mapping, dict]], log_dirs: Mapping[tuple, str]) -> list[dict]:
    """`items`: (where, violation, evidence) of replica findings; one plan per replica, every reason listed, the
    strongest action (rebuild over truncate)."""
    by_replica: dict[tuple, dict] = {}
    for where, v, ev in items:
        action, why = REPLICA_ACTIONS[v["check"]]
        key = (v["cluster"], _str(ev, "topic", where), _int(ev, "partition", where), _int(ev, "broker", where))
        p = by_replica.setdefault(key, {"action": TRUNCATE, "reasons": []})
        p["reasons"].append({"check": v["check"], "why": why, "offset_from": ev.get("offset_from"),
                             "offset_to": ev.get("offset_to"), "entry_count": v.get("entry_count")})
        if action == REBUILD:
            p["action"] = REBUILD
    plans = []
    for (cluster, topic, partition, broker), p in sorted(by_replica.items()):
        log_dir = log_dirs.get((cluster, broker, topic, partition))
        partition_dir = (f"{log_dir}/{topic}-{partition}" if log_dir
                         else f"<log dir of broker {broker}>/{topic}-{partition}")
        if p["action"] == REBUILD:
            steps = [s.format(broker=broker, partition_dir=partition_dir) for s in REBUILD_STEPS]
        else:
            steps = [f"nothing to run: broker {broker} truncates {topic}-{partition} to its log end when it loads "
                     "the log, then fetches from the leader", "re-run the audit to see it caught up"]
        plans.append(_finish({
            "system": SYSTEM, "cluster": cluster, "kind": "replica", "status": "planned", "dry_run": True,
            "topic": topic, "partition": partition, "broker": broker, "action": p["action"],
            "partition_dir": partition_dir, "reasons": sorted(p["reasons"], key=lambda r: r["check"]),
            "steps": steps,
            "preconditions": [f"broker {broker} is not the leader of {topic}-{partition}",
                              f"the leader's log still holds what the audit compared {topic}-{partition} with"]}))
    return plans


def _save_step(holder: dict, topic: str, partition: int) -> str:
    where = holder["partition_dir"] or f"{topic}-{partition} on broker {holder['broker']}"
    ranges = ", ".join(f"{r.get('from')}..{r.get('to')}" for r in holder["ranges"])
    return (f"before broker {holder['broker']} fetches from the leader again (it will truncate these offsets), "
            f"copy the segments of {where} holding offsets {ranges} and read them with kafka-dump-log.sh "
            "--print-data-log")


def data_loss_plan(where: str, v: Mapping, ev: dict, log_dirs: Mapping[tuple, str]) -> dict:
    cluster, topic, partition = v["cluster"], _str(ev, "topic", where), _int(ev, "partition", where)
    first, last = _int(ev, "offset_from", where), _int(ev, "offset_to", where)
    exposed = ev.get("exposed_by")
    if not isinstance(exposed, list) or not all(isinstance(e, dict) and isinstance(e.get("broker"), int)
                                                for e in exposed):
        raise RepairInputError(where, "evidence.exposed_by", "a list of {broker, ranges, producer_ids, ...}")
    producers = sorted({p for e in exposed for p in e.get("producer_ids") or [] if isinstance(p, int)})
    starts = [e["first_timestamp_ms"] for e in exposed if isinstance(e.get("first_timestamp_ms"), int)]
    ends = [e["last_timestamp_ms"] for e in exposed if isinstance(e.get("last_timestamp_ms"), int)]
    holders = [{"broker": e["broker"], "ranges": e.get("ranges") or [],
                "partition_dir": (f"{log_dirs[(cluster, e['broker'], topic, partition)]}/{topic}-{partition}"
                                  if (cluster, e["broker"], topic, partition) in log_dirs else None)}
               for e in sorted(exposed, key=lambda e: e["broker"])]
    steps = [_save_step(h, topic, partition) for h in holders]
    steps.append("ask the producers concerned to resend what they wrote in the time span (their ids are below), "
                 "or replay the saved records into the partition")
    steps.append("the replicas listed then truncate to the leader's log on their own: no rebuild needed for them")
    return _finish({
        "system": SYSTEM, "cluster": cluster, "kind": "data_loss", "status": "planned", "dry_run": True,
        "topic": topic, "partition": partition, "leader": ev.get("leader"), "offset_from": first, "offset_to": last,
        "entry_count": v.get("entry_count"), "ranges": ev.get("ranges") or [{"from": first, "to": last}],
        "producer_ids": producers,
        "time_span_ms": [min(starts) if starts else None, max(ends) if ends else None],
        "replicas_holding_them": holders, "steps": steps,
        "preconditions": [f"the leader of {topic}-{partition} is still broker {ev.get('leader')}"]})


def reset_command(bootstrap: str, group: str, topic: str, partition: int, offset: int) -> str:
    """kafka-consumer-groups.sh (docs/formats/kafka.md §13): --topic takes
    `topic:partition`; --dry-run shows the result without committing it."""
    return " ".join(shlex.quote(a) for a in (
        "kafka-consumer-groups.sh", "--bootstrap-server", bootstrap, "--group", group, "--reset-offsets",
        "--topic", f"{topic}:{partition}", "--to-offset", str(offset), "--dry-run"))


def group_reset_plan(where: str, v: Mapping, ev: dict, bootstrap: str, separator: str) -> dict:
    cluster = v["cluster"]
    kind, side = GROUP_RESETS[v["check"]]
    group, source = _str(ev, "group", where), _str(ev, "source", where)
    topic, partition = _str(ev, "topic", where), _int(ev, "partition", where)
    bounds = ev.get("bounds")
    if not (isinstance(bounds, list) and len(bounds) == 2 and isinstance(bounds[side], int)
            and not isinstance(bounds[side], bool)):
        raise RepairInputError(where, "evidence.bounds", "[low, high] downstream offsets the translation allows "
                               f"(the {'high' if side else 'low'} one known)")
    offset = bounds[side]
    current = _int(ev, "target_committed", where)
    remote = f"{source}{separator}{topic}"   # DefaultReplicationPolicy.formatRemoteTopic
    return _finish({
        "system": SYSTEM, "cluster": cluster, "kind": "group_reset", "status": "planned", "dry_run": True,
        "check": v["check"], "source": source, "group": group, "upstream_topic": topic, "topic": remote,
        "partition": partition, "target_committed": current, "reset_to": offset, "translated": ev.get("translated"),
        "upstream_committed": ev.get("upstream_committed"), "rule": ev.get("rule"),
        "messages": v.get("entry_count"),
        "why": (f"a failover would {kind} at least {v.get('entry_count')} messages: the target group is at "
                f"{current}, the translation allows {bounds[0]}..{bounds[1]}"),
        "command": reset_command(bootstrap, group, remote, partition, offset),
        "admin_api": {"call": "AlterConsumerGroupOffsets", "group_id": group,
                      "offsets": [{"topic": remote, "partition": partition, "offset": offset}]},
        "preconditions": [f"group {group} has no active member on cluster {cluster} (reset-offsets refuses "
                          "otherwise)", f"its committed offset on {remote}:{partition} is still {current}"],
        "warnings": [PUSHED_FORWARD] if ev.get("rule") == "pre-3.4.1" else []})


def _label(i: int, v: Any) -> str:
    if not isinstance(v, Mapping):
        return f"violations[{i}]"
    return f"violations[{i}] {v.get('check')} {v.get('subject')}"


def plan_findings(violations: Iterable[Mapping[str, Any]], *, log_dirs: Mapping[tuple, str] | None = None,
                  bootstrap: Mapping[str, str] | None = None, separators: Mapping[tuple, str] | None = None
                  ) -> tuple[list[dict], list[dict]]:
    """(plans, error items) for Kafka findings. `log_dirs`: (cluster, broker, topic, partition) -> log dir;
    `bootstrap`: cluster -> bootstrap servers; `separators`: (target cluster, source alias) -> separator."""
    log_dirs, bootstrap, separators = dict(log_dirs or {}), dict(bootstrap or {}), dict(separators or {})
    replica_items, plans, errors = [], [], []
    for i, v in enumerate(violations):
        if not isinstance(v, Mapping) or v.get("system") != SYSTEM:
            continue
        where, ev, check = _label(i, v), _evidence(v), v.get("check")
        try:
            if check in REPLICA_ACTIONS:
                _str(ev, "topic", where)    # checked here, so a bad one is this finding's error item
                _int(ev, "partition", where)
                _int(ev, "broker", where)
                replica_items.append((where, v, ev))
            elif check == LOST:
                plans.append(data_loss_plan(where, v, ev, log_dirs))
            elif check in GROUP_RESETS:
                cluster = v.get("cluster")
                alias = ev.get("source")
                plans.append(group_reset_plan(where, v, ev, bootstrap.get(cluster) or
                                              f"<bootstrap servers of {cluster}>",
                                              separators.get((cluster, alias), ".")))
        except RepairInputError as exc:
            errors.append(error_item(SYSTEM, exc, cluster=v.get("cluster"), check=check))
    plans += replica_plans(replica_items, log_dirs)
    order = {"data_loss": 0, "replica": 1, "group_reset": 2}
    plans.sort(key=lambda p: (p["cluster"], order[p["kind"]], str(p.get("topic")), p.get("partition") or 0,
                              p.get("broker") or -1, str(p.get("group"))))
    return plans, errors


def estate_settings(estate: Any) -> tuple[dict[str, str], dict[tuple, str]]:
    """(cluster -> bootstrap servers, (target, source alias) -> separator) from the estate ({} without one)."""
    if estate is None:
        return {}, {}
    clusters = estate.clusters(SYSTEM)
    bootstrap = {c.name: c.bootstrap_servers for c in clusters if getattr(c, "bootstrap_servers", None)}
    separators = {(c.name, m.source_alias or m.source_cluster): m.separator for c in clusters for m in c.mirrors}
    return bootstrap, separators


def plan_run(outputs) -> tuple[list[dict], list[dict]]:
    """Plans and error items for the run's Kafka findings, each replica's log dir from tables/kafka_replicas."""
    from audit.tables import read_rows

    path = Path(outputs.root) / "tables" / "kafka_replicas"
    rows = read_rows(path, columns=("cluster", "broker", "topic", "partition", "log_dir")) if path.exists() else []
    log_dirs = {(r["cluster"], r["broker"], r["topic"], r["partition"]): r["log_dir"] for r in rows if r.get("log_dir")}
    bootstrap, separators = estate_settings(outputs.estate)
    return plan_findings(outputs.violations, log_dirs=log_dirs, bootstrap=bootstrap, separators=separators)
