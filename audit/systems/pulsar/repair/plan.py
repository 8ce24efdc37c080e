"""Dry-run repair plan for Pulsar replicated subscriptions after a failover. Pure: no I/O, deterministic output.

Input: metrics/pulsar_failover rows (docs/pulsar/contracts.md). For each (topic, subscription, source, target)
whose target cursor does not match the exact answer (another MDP, or messages redelivered / skipped), the plan
puts the target subscription in the state the source had:
  1. cumulative reset of the target cursor AT `exact_target_mdp` (REST resetcursor with body key `excluded`, or
     `pulsar-admin topics reset-cursor ... -m L:E -e`): the broker seeks to the entry after L:E, so the
     markDeletePosition becomes L:E, and the reset clears the target's individually-deleted ranges. The body
     is the broker's ResetCursorData read by Jackson: its flag is the property `excluded` (Lombok's setter of
     `boolean isExcluded`), and the broker's ObjectMapper ignores unknown keys, so a body saying "isExcluded"
     resets one entry early without any error;
  2. individual acknowledgements of `to_acknowledge` (what the source had acked above its MDP) through a
     client consumer, in chunks.
`preconditions` hold the target cursor seen by the audit; whoever applies the plan re-reads it and refuses
if it moved. The reset step's `post_check` says what stats-internal must show afterwards; `reset_landed`
compares it the way the broker places the cursor (`L:-1` lands on the previous ledger's last entry).
Applying goes through the approval flow (not here). `plan_id` is the sha256 of the plan.

`plan_run(outputs)` (the System's plan_repairs) reads metrics/pulsar_failover and the estate's admin URLs."""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import quote

from audit.repair.common import RepairInputError, error_item, plan_id

ACK_CHUNK = 10_000            # positions per acknowledgement chunk (and the audit's to_acknowledge cap)
_POSITION = re.compile(r"(\d+):(-1|\d+)")     # broker position L:E; E = -1 means "before entry 0 of L"
_TOPIC = re.compile(r"persistent://([^/]+)/([^/]+)/(.+)")
_COUNTS = ("redelivered", "skipped", "lost", "to_acknowledge_count")


def plan_subscription_repairs(failover_rows: list[dict], *, cluster_admin_urls: Mapping[str, str] | None = None,
                              chunk_size: int = ACK_CHUNK) -> list[dict]:
    """One dry-run plan per row needing a repair (`status: "planned"`), one error item per bad row
    (`status: "error"`, naming the row and the field); rows already in step produce nothing. Sorted by
    (target cluster, topic, subscription, source cluster); errors last, in row order."""
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError("chunk_size: expected a positive integer")
    urls = dict(cluster_admin_urls or {})
    plans, errors = [], []
    for i, row in enumerate(failover_rows):
        try:
            plan = _plan_row(i, row, urls, chunk_size)
        except RepairInputError as exc:
            errors.append(_error_item(i, row, exc))
            continue
        if plan is not None:
            plans.append(plan)
    plans.sort(key=lambda p: (p["cluster"], p["topic"], p["subscription"], p["source_cluster"]))
    return plans + errors


def plan_run(outputs) -> tuple[list[dict], list[dict]]:
    """Plans and error items for the run's metrics/pulsar_failover rows (none when the run has no such
    metrics), the reset calls pointed at each target cluster's admin URL from the estate (when it has one)."""
    from audit.tables import read_rows

    path = Path(outputs.root) / "metrics" / "pulsar_failover"
    rows = read_rows(path) if path.exists() else []
    items = plan_subscription_repairs(rows, cluster_admin_urls=admin_urls(outputs.estate))
    return ([p for p in items if p["status"] == "planned"], [p for p in items if p["status"] != "planned"])


def admin_urls(estate: Any) -> dict[str, str]:
    """Pulsar cluster name -> admin URL, for the estate's clusters that have one ({} without an estate)."""
    if estate is None:
        return {}
    return {c.name: c.admin_url for c in estate.clusters("pulsar") if getattr(c, "admin_url", None)}


def _label(i: int, row: Any) -> str:
    if not isinstance(row, Mapping):
        return f"failover[{i}]"
    return (f"failover[{i}] {row.get('topic')} sub={row.get('subscription')} "
            f"{row.get('source_cluster')}->{row.get('target_cluster')}")


def _error_item(i: int, row: Any, exc: RepairInputError) -> dict[str, Any]:
    get = row.get if isinstance(row, Mapping) else (lambda _k: None)
    return error_item("pulsar", exc, row=i, topic=get("topic"), subscription=get("subscription"),
                      source_cluster=get("source_cluster"), target_cluster=get("target_cluster"))


def required_text(row: Mapping[str, Any], src: str, key: str) -> str:
    value = row.get(key)
    if not isinstance(value, str) or not value:
        raise RepairInputError(src, key, "a non-empty string")
    return value


def _position(row: Mapping[str, Any], src: str, key: str) -> tuple[int, int]:
    return position_field(row.get(key), src, key)


def position_field(value: Any, src: str, field: str) -> tuple[int, int]:
    """A broker position 'L:E' of a plan or a failover row; RepairInputError naming `field` otherwise."""
    pos = parse_position(value)
    if pos is None:
        raise RepairInputError(src, field, f"a position 'ledgerId:entryId', got {value!r}")
    return pos


def _count(row: Mapping[str, Any], src: str, key: str) -> int:
    value = row.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise RepairInputError(src, key, f"a non-negative integer, got {value!r}")
    return value


def _to_acknowledge(row: Mapping[str, Any], src: str, after: tuple[int, int], full_count: int) -> list[tuple]:
    raw = row.get("to_acknowledge")
    if raw is None:
        raw = "[]"
    try:
        items = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        raise RepairInputError(src, "to_acknowledge", "a JSON list of 'L:E' strings") from None
    if not isinstance(items, list):
        raise RepairInputError(src, "to_acknowledge", "a JSON list of 'L:E' strings")
    out = []
    for j, item in enumerate(items):
        pos = parse_position(item)
        if pos is None:
            raise RepairInputError(src, "to_acknowledge", f"'L:E' positions, item {j} is {item!r}")
        # An individual ack at or below the new MDP would be a no-op: the audit's answer is inconsistent.
        if pos <= after:
            raise RepairInputError(src, "to_acknowledge", f"positions after exact_target_mdp "
                                                          f"{format_position(after)}, item {j} is {item}")
        out.append(pos)
    if len(set(out)) != len(out):
        raise RepairInputError(src, "to_acknowledge", "distinct positions")
    if len(out) > full_count:
        raise RepairInputError(src, "to_acknowledge_count", f"at least the {len(out)} listed positions")
    return sorted(out)


def _plan_row(i: int, row: Any, urls: Mapping[str, str], chunk_size: int) -> dict[str, Any] | None:
    src = _label(i, row)
    if not isinstance(row, Mapping):
        raise RepairInputError(src, "(row)", "a mapping of metrics/pulsar_failover columns")
    topic, sub = required_text(row, src, "topic"), required_text(row, src, "subscription")
    source, target = required_text(row, src, "source_cluster"), required_text(row, src, "target_cluster")
    m = _TOPIC.fullmatch(topic)
    if m is None:
        raise RepairInputError(src, "topic", "a persistent topic 'persistent://tenant/namespace/topic'")
    if row.get("pairing_ambiguous"):
        # (origin, producer, sequence id) repeats in a window (no source-position property, producers restarted
        # without deduplication): which target copy is which source message is not known, so neither is the
        # position to reset to.
        raise RepairInputError(src, "pairing_ambiguous", "false: no repair is planned from an ambiguous pairing "
                                                         "of source and target messages")
    current, exact = _position(row, src, "target_mdp"), _position(row, src, "exact_target_mdp")
    source_mdp = _position(row, src, "source_mdp")
    counts = {k: _count(row, src, k) for k in _COUNTS}
    acks = _to_acknowledge(row, src, exact, counts["to_acknowledge_count"])
    if current == exact and counts["redelivered"] == 0 and counts["skipped"] == 0:
        return None                  # the target already delivers exactly what the source would have
    admin = urls.get(target)
    plan: dict[str, Any] = {
        "status": "planned", "system": "pulsar", "dry_run": True,
        "cluster": target, "source_cluster": source, "topic": topic, "subscription": sub,
        "admin_url": admin,
        "preconditions": {
            "target_mark_delete_position": format_position(current),
            "to_acknowledge_count": counts["to_acknowledge_count"],
            "verify": f"bin/pulsar-admin{_admin_flag(admin)} topics stats-internal {shlex.quote(topic)}",
            "refuse_if": f"cursors[{sub!r}].markDeletePosition is not {format_position(current)} (the cursor moved "
                         f"after the audit: re-run the audit instead of applying this plan)"},
        "observed": {"source_mark_delete_position": format_position(source_mdp),
                     "target_mark_delete_position": format_position(current),
                     "exact_target_mark_delete_position": format_position(exact),
                     "expected_target_mark_delete_position": row.get("expected_target_mdp"),
                     "redelivered": counts["redelivered"], "skipped": counts["skipped"], "lost": counts["lost"],
                     "complete": row.get("complete")},
        "steps": [_reset_step(m.groups(), topic, sub, exact, current, admin, target),
                  _ack_step(topic, sub, acks, counts["to_acknowledge_count"], chunk_size)],
        "warnings": _warnings(current, exact, counts, row.get("complete")),
        "notes": ["dry run: nothing was changed. Applying needs the approval flow, which is not part of this "
                  "plan; stop the subscription's consumers on both clusters first (the reset disconnects "
                  "those on the target anyway)."],
    }
    plan["plan_id"] = plan_id(plan)
    return plan


def format_position(pos: tuple[int, int]) -> str:
    return f"{pos[0]}:{pos[1]}"


def _admin_flag(admin: str | None) -> str:
    return f" --admin-url {shlex.quote(admin)}" if admin else ""


def _reset_step(parts: tuple[str, ...], topic: str, sub: str, exact: tuple[int, int], current: tuple[int, int],
                admin: str | None, target: str) -> dict[str, Any]:
    tenant, ns, local = parts
    path = (f"/admin/v2/persistent/{quote(tenant, safe='')}/{quote(ns, safe='')}/{quote(local, safe='')}"
            f"/subscription/{quote(sub, safe='')}/resetcursor")
    direction = "none" if exact == current else "backward" if exact < current else "forward"
    return {
        "step": 1, "action": "reset_cursor", "from": format_position(current), "to": format_position(exact),
        "direction": direction,
        "http": {"method": "POST", "url": (admin or f"<admin url of {target}>") + path,
                 "body": reset_body(exact)},
        "command": f"bin/pulsar-admin{_admin_flag(admin)} topics reset-cursor {shlex.quote(topic)} "
                   f"-s {shlex.quote(sub)} -m {format_position(exact)} -e",
        "post_check": {
            "mark_delete_position": format_position(exact), "individually_deleted": [],
            "equivalent": (f"{format_position(exact)} or, when ledger {exact[0]} is not the first of the topic's "
                           f"ledgers in stats-internal, the last entry of the non-empty ledger before it (the "
                           f"broker stores the entry before the new readPosition)" if exact[1] < 0 else
                           f"exactly {format_position(exact)}: one entry earlier means the broker did not apply the "
                           f"exclude flag (stop there)")},
        # excluded: the broker seeks to the entry after L:E, so the markDeletePosition lands AT L:E.
        "why": f"after the reset the markDeletePosition is {format_position(exact)}, delivery resumes after it and the "
               f"target's individually-acknowledged ranges are cleared (step 2 puts back the right ones)",
    }


def reset_body(position: tuple[int, int]) -> dict[str, Any]:
    """The resetcursor body as the broker's ResetCursorData deserializes it: `excluded` (not "isExcluded",
    which Jackson would ignore) makes the broker seek to the entry after the position."""
    return {"ledgerId": position[0], "entryId": position[1], "partitionIndex": -1, "excluded": True,
            "batchIndex": -1}


def reset_landed(expected: str, observed: str, ledgers: list[tuple[int, int]]) -> bool:
    """Whether a markDeletePosition read back from stats-internal (`observed`) is the plan's `expected` one.
    `ledgers`: the topic's (ledgerId, entries) in stats-internal order. A reset AT `L:-1` seeks to `L:0`, and
    the broker stores the entry before that readPosition (ManagedLedgerImpl.getPreviousPosition): the last
    entry of the nearest earlier non-empty ledger, or `L:-1` when no earlier ledger is listed."""
    want, got = parse_position(expected), parse_position(observed)
    if want is None or got is None:
        raise ValueError(f"positions 'L:E' expected, got {expected!r} and {observed!r}")
    return got == want or (want[1] == -1 and got == _previous_entry(want[0], ledgers))


def parse_position(text: Any) -> tuple[int, int] | None:
    m = _POSITION.fullmatch(text) if isinstance(text, str) else None
    return (int(m.group(1)), int(m.group(2))) if m else None


def _previous_entry(ledger_id: int, ledgers: list[tuple[int, int]]) -> tuple[int, int]:
    earlier = [(lid, n) for lid, n in ledgers if lid < ledger_id]
    for lid, n in reversed(earlier):
        if n > 0:
            return (lid, n - 1)
    return (earlier[0][0], -1) if earlier else (ledger_id, -1)


def _ack_step(topic: str, sub: str, acks: list[tuple[int, int]], full_count: int, chunk_size: int) -> dict:
    chunks = [acks[k:k + chunk_size] for k in range(0, len(acks), chunk_size)]
    step: dict[str, Any] = {
        "step": 2, "action": "acknowledge_individually", "positions_total": full_count,
        "positions_listed": len(acks), "remaining": full_count - len(acks),
        "chunks": [{"index": n, "first": format_position(c[0]), "last": format_position(c[-1]), "count": len(c),
                    "positions": [format_position(p) for p in c]} for n, c in enumerate(chunks)],
        # Each partition is its own topic in the plan: the consumer subscribes to it directly, so the
        # MessageId partition is -1; entries are acked whole (batch index -1).
        "client": "pulsar-client (Python)",
        "script": "\n".join([
            "import pulsar",
            "client = pulsar.Client(SERVICE_URL, authentication=pulsar.AuthenticationToken(TOKEN))",
            f"consumer = client.subscribe({topic!r}, {sub!r}, consumer_type=pulsar.ConsumerType.Shared)",
            "for position in CHUNK_POSITIONS:   # one chunk of this step, 'L:E' strings",
            "    ledger_id, entry_id = map(int, position.split(':'))",
            "    consumer.acknowledge(pulsar.MessageId(-1, ledger_id, entry_id, -1))",
            "consumer.close()",
            "client.close()"]),
        "notes": [],
    }
    if not acks:
        step["notes"].append("nothing to acknowledge individually: the reset alone gives the exact state")
    if step["remaining"]:
        step["notes"].append(f"to_acknowledge was truncated: {len(acks)} of {full_count} positions are listed, "
                             f"{full_count - len(acks)} remain; apply this plan, then re-run the audit to plan "
                             f"the rest")
    return step


def _warnings(current: tuple[int, int], exact: tuple[int, int], counts: Mapping[str, int],
              complete: Any) -> list[str]:
    out = []
    if exact < current:
        out.append(f"the reset moves the cursor BACKWARD from {format_position(current)} to "
                   f"{format_position(exact)}: it un-acks everything after {format_position(exact)}, so every message "
                   f"after it that step 2 does not acknowledge is delivered (again) to the subscription's consumers")
    if counts["skipped"]:
        out.append(f"{counts['skipped']} message(s) the target had skipped will be delivered "
                   f"({counts['lost']} of them never reached a consumer on the source)")
    if complete is False:
        out.append("the audit's window had unread entries: the exact answer may miss positions; re-run the "
                   "audit once the dump is complete before applying")
    return out
