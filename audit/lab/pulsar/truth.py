"""Ground truth of the Pulsar lab (docs/pulsar/contracts.md "Ground truth", docs/pulsar/lab.md).

Failover counts come from actually failing over: for subscription S, source X and target Y, a consumer
connects to a copy of Y's cursor and receives every non-marker entry Y does not consider acked; messages are
matched by origin identity (the cluster and position they were first published at). Then
- redelivered: received on Y although X's consumer had acked it;
- skipped: present on both clusters, not acked on X, never received on Y;
- lost: skipped and at or beyond X's readPosition (never dispatched on X);
- lag: of the redelivered, those at or below the Y position PIP-33 told Y to acknowledge (the newest UPDATE
  for S naming Y that X's controller wrote, where the native payloads show it). PIP-33 keeps Y one snapshot
  behind by design, so only the lag is a finding (pulsar.failover_redelivery, entry_count = lag), and only
  past the estate's redelivery tolerance for the namespace: more than `messages` and the oldest older than
  `age` (audit/config/pulsar.py; the lab runs with the estate's default, 0/0).

Failover rows are listed for every pair, zeros included; the failover findings only for pairs whose source
subscription was consumed on the source (Subscription.consumed, which its stats.json shows). Findings are
listed only where the native payloads show them: see docs/pulsar/lab.md for each rule."""
from __future__ import annotations

from typing import Any

from audit.config.pulsar import PulsarThresholds
from audit.formats.pulsar.markers import SNAPSHOT, UPDATE
from audit.lab.pulsar.consumers import Subscription
from audit.lab.pulsar.topic import Topic
from audit.lab.pulsar.builder import ScenarioMeta, World


_TOLERANCE = PulsarThresholds().pulsar_redelivery_tolerance   # the estate default the lab's audit runs with


def _reached(source: Topic, target: Topic, subscription: str):
    """The Y position the newest UPDATE for `subscription` that X's controller wrote told Y (None: none that a
    dump shows: X's own in X's window, or its copy in Y's window). UPDATEs only move forward."""
    there, here = target.cluster_name, source.cluster_name
    told = [dict(e.marker.clusters)[there] for topic, origin in ((source, None), (target, here))
            for e in topic.ml.entries if e.marker_type == UPDATE and e.replicated_from == origin
            and e.marker.subscription == subscription and there in dict(e.marker.clusters)
            and _in_window(topic, e.position)]
    return max(told) if told else None


def failover_counts(source: Topic, target: Topic, subscription: str) -> dict[str, int]:
    """redelivered, skipped, lost (the failover row) and lag, lag_oldest_ms (what the redelivery finding reads)."""
    xs: Subscription = source.subscriptions[subscription]
    ys: Subscription = target.subscriptions[subscription]
    x_index = {e.ident: i for i, e in enumerate(source.ml.entries) if e.ident is not None}
    y_entries = target.ml.entries
    y_cursor = ys.cursor
    received_at = {i: y_entries[i].ident for i in range(y_cursor.mdp_idx + 1, len(y_entries))
                   if not y_entries[i].is_marker and i not in y_cursor.acked}
    received = set(received_at.values())
    x_cursor = xs.cursor
    redelivered = sum(1 for m in received if m in x_index and x_cursor.is_acked(x_index[m]))
    reach = _reached(source, target, subscription)
    last = target.ml.floor_index(reach) if reach is not None else -1
    lagging = [y_entries[i].publish_ms for i, m in received_at.items()
               if i <= last and m in x_index and x_cursor.is_acked(x_index[m])]
    skipped = lost = 0
    for e in y_entries:
        m = e.ident
        if m is None or m in received or m not in x_index:
            continue
        x_idx = x_index[m]
        if not x_cursor.is_acked(x_idx):
            skipped += 1
            lost += x_idx >= x_cursor.read_idx
    return {"redelivered": redelivered, "skipped": skipped, "lost": lost, "lag": len(lagging),
            "lag_oldest_ms": min(lagging) if lagging else None}


def redelivery_finding(world: World, topic: str, counts: dict) -> int:
    """The lag when it exceeds the namespace's tolerance on both counts (messages and age), else 0."""
    tolerance = _TOLERANCE.of("/".join(topic.split("://", 1)[-1].split("/")[:2]))
    lag = counts["lag"]
    if lag <= tolerance.messages or world.as_of_ms - counts["lag_oldest_ms"] <= tolerance.age_s * 1000:
        return 0
    return lag


def failover_pairs(world: World, meta: ScenarioMeta):
    """(topic name, subscription, source topic, target topic) for every replicated subscription present on
    both clusters of a pair where the source replicates the topic to the target."""
    for name in meta.topics:
        for x in meta.clusters:
            src = world.topic(x, name)
            for y, rep in sorted(src.replicators.items()):
                dst = rep.remote
                for sub_name, sub in sorted(src.subscriptions.items()):
                    if sub.replicated and sub_name in dst.subscriptions:
                        yield name, sub_name, src, dst


def _told(topic: Topic, there: str, subscription: str, own: bool) -> list:
    """Positions on cluster `there` named by the PIP-33 markers in `topic`'s dump window (what an audit sees).
    own: the topic's own UPDATEs for the subscription and SNAPSHOTs at or below its markDeletePosition;
    else: the UPDATE copies for the subscription it received (from any cluster)."""
    mdp = topic.subscriptions[subscription].cursor.mark_delete_position()
    out = []
    for e in topic.ml.entries:
        if e.marker_type not in (UPDATE, SNAPSHOT) or (e.replicated_from is None) != own:
            continue
        told = dict(e.marker.clusters).get(there)
        if told is None or not _in_window(topic, e.position):
            continue
        if e.marker.subscription == subscription if e.marker_type == UPDATE else own and e.marker.local <= mdp:
            out.append(told)
    return out


def _cursor_ahead(source: Topic, target: Topic, subscription: str) -> bool:
    """Acks made on the target moved its markDeletePosition past at least one message beyond anything PIP-33
    justifies: the source's own UPDATEs and snapshots <= its markDeletePosition, and the UPDATEs the target
    received. With none of the source's in its dump window, PIP-33 predicts nothing: no claim."""
    there = target.cluster_name
    claims = _told(source, there, subscription, own=True)
    ys = target.subscriptions[subscription]
    if not claims or not ys.local_acks_moved_mdp:
        return False
    justified = max(claims + _told(target, there, subscription, own=False))
    entries = target.ml.entries
    return any(not entries[i].is_marker
               for i in range(target.ml.floor_index(justified) + 1, ys.cursor.mdp_idx + 1))


def _in_window(topic: Topic, pos) -> bool:
    return topic.ml.floor_index(pos) > topic.replicated_cursor_floor()


def topic_findings(world: World, topic: Topic) -> list[dict[str, Any]]:
    """Findings about one topic on one cluster that do not depend on a failover pair."""
    cfg, out = world.config, []
    base = {"cluster": topic.cluster_name, "topic": topic.name}
    for remote, rep in sorted(topic.replicators.items()):
        if not rep.connected:
            out.append({"check": "pulsar.replicator_disconnected", **base, "target_cluster": remote})
        if rep.backlog() > cfg.replicator_backlog_max:
            out.append({"check": "pulsar.replicator_backlog", **base, "target_cluster": remote,
                        "entry_count": rep.backlog()})
        if topic.cluster_name not in rep.remote.replicators:  # the target does not replicate back
            for sub_name, sub in sorted(topic.subscriptions.items()):
                if sub.replicated:
                    out.append({"check": "pulsar.replicated_subscription_one_way", **base,
                                "subscription": sub_name, "target_cluster": remote})
    ctl = topic.controller
    if ctl is None:
        return out
    timeout_ms = topic.settings.snapshot_timeout_ms
    if any(r.completed_ms is None and world.as_of_ms - r.start_ms > timeout_ms
           and any(_in_window(topic, p) for p in r.request_positions) for r in ctl.records.values()):
        out.append({"check": "pulsar.snapshot_timeout", **base})
    done = [r for r in ctl.records.values() if r.completed_ms is not None]
    if done:
        newest = max(done, key=lambda r: r.completed_ms)
        snap = [e for e in topic.ml.entries if e.marker_type == SNAPSHOT and e.marker.snapshot_id == newest.snapshot_id]
        age_ms = world.as_of_ms - newest.completed_ms
        if snap and _in_window(topic, snap[0].position) and age_ms > cfg.snapshot_max_age_s * 1000 \
                and (topic.last_data_ms or 0) > newest.completed_ms:
            out.append({"check": "pulsar.snapshot_stale", **base})
    return out


_FAILOVER_CHECKS = (("lost", "pulsar.failover_loss"), ("skipped", "pulsar.failover_skip"),
                    ("redelivered", "pulsar.failover_redelivery"))


def world_truth(world: World) -> dict[str, Any]:
    """Every failover row and finding of the world (all clusters)."""
    failover, findings = [], []
    for meta in world.scenarios:
        for name, sub, src, dst in failover_pairs(world, meta):
            counts = failover_counts(src, dst, sub)
            key = {"topic": name, "subscription": sub, "source_cluster": src.cluster_name,
                   "target_cluster": dst.cluster_name}
            failover.append({**key, **{k: counts[k] for k in ("redelivered", "skipped", "lost")}})
            counts = {**counts, "redelivered": redelivery_finding(world, name, counts)}
            base = {"cluster": src.cluster_name, "topic": name, "subscription": sub,
                    "target_cluster": dst.cluster_name}
            for field, check in _FAILOVER_CHECKS:  # only failing over from where consumers were served
                if counts[field] and src.subscriptions[sub].consumed():
                    findings.append({"check": check, **base, "entry_count": counts[field]})
            if _cursor_ahead(src, dst, sub):
                findings.append({"check": "pulsar.target_cursor_ahead", **base})
        for name in meta.topics:
            for cluster in meta.clusters:
                findings.extend(topic_findings(world, world.topic(cluster, name)))
    return {"failover": failover, "findings": findings}


def cluster_truth(world: World, cluster: str, everything: dict[str, Any] | None = None) -> dict[str, Any]:
    everything = everything or world_truth(world)
    return {
        "system": "pulsar", "cluster": cluster, "seed": world.config.seed, "as_of_ms": world.as_of_ms,
        "scenarios": [{"name": m.name, "topic": m.topic, "description": m.description}
                      for m in world.scenarios if cluster in m.clusters],
        "faults": [f for m in world.scenarios for f in m.faults if f.get("cluster") == cluster],
        "findings": [f for f in everything["findings"] if f["cluster"] == cluster],
        "failover": [r for r in everything["failover"] if r["source_cluster"] == cluster],
    }
