"""Ground truth of the Pulsar lab (docs/pulsar/contracts.md "Ground truth", docs/pulsar/lab.md).

Every cluster is judged at the instants its collection and the rereads read it (reads.py), never at as_of: the
failover rows come from failover_truth.py (a simulated failover on Y's cursor as read, against what X had acked
before and after that read), the other findings from each cluster's own collection (its window and cursors at
t_c, its stats.json right after).

Failover rows are listed for every pair, zeros included; the failover findings only for pairs whose source
subscription was consumed on the source (Subscription.consumed, which its stats.json shows). PIP-33 keeps Y one
snapshot behind by design, so a redelivery is a finding only for the lag (what an UPDATE had told Y and Y still
has not acked), past the estate's redelivery tolerance for the namespace: more than `messages`, and the oldest
older than `age` when Y's window was read. Findings are listed only where the native payloads show them: see
docs/pulsar/lab.md for each rule."""
from __future__ import annotations

from typing import Any, Iterator

from audit.systems.pulsar.formats.markers import SNAPSHOT, SNAPSHOT_REQUEST, UPDATE
from lab.pulsar.builder import ScenarioMeta, World
from lab.pulsar.failover_truth import PairTruth, Side, failover_counts, pair_truth
from lab.pulsar.model import Entry
from lab.pulsar.reads import Collection, Read
from lab.pulsar.topic import Topic

ROW_FIELDS = ("redelivered", "skipped", "lost", "unsettled", "after_source_window", "ambiguous", "redelivery_lag",
              "target_read_at_ms", "source_read_before_ms", "source_read_after_ms")


def _namespace(topic: str) -> str:
    return "/".join(topic.split("://", 1)[-1].split("/")[:2])


def side(world: World, topic: Topic) -> Side:
    """A cluster's topic with its reads; what its replicators may have dropped unsent is bounded as the audit
    bounds it: `replicate_to` without the remote, or, with a message TTL, older than the TTL when the cluster's
    collection read it (`now`: the answer's instant; a younger message cannot have expired before)."""
    ttl = world.config.ttl_ms(_namespace(topic.name))

    def may_be_unsent(e: Entry, remote: str, now: int) -> bool:
        return (e.replicate_to is not None and remote not in e.replicate_to) or (
            ttl > 0 and now - e.publish_ms > ttl)
    return Side(topic, world.reads.reads_of(topic.cluster_name, topic.name), may_be_unsent)


def redelivery_finding(world: World, topic: str, counts: dict) -> int:
    """The lag when it exceeds the namespace's tolerance on both counts (messages, and the age of its oldest
    message when the target's window was read), else 0."""
    messages, age_s = world.config.tolerance(_namespace(topic))
    lag = counts["lag"]
    if lag <= messages or counts["lag_now_ms"] - counts["lag_oldest_ms"] <= age_s * 1000:
        return 0
    return lag


def failover_pairs(world: World, meta: ScenarioMeta) -> Iterator[tuple[str, Topic, Topic, list[str]]]:
    """(topic name, source topic, target topic, replicated subscriptions on both) for every pair where the
    source replicates the topic to the target, as their collections saw them."""
    for name in meta.topics:
        for x in meta.clusters:
            src = world.topic(x, name)
            for _, rep in sorted(src.replicators.items()):
                dst = rep.remote
                on_x = world.reads.collections[(x, name)].read.cursors
                on_y = world.reads.collections[(dst.cluster_name, name)].read.cursors
                subs = [s for s in sorted(on_x) if s in src.subscriptions and src.subscriptions[s].replicated
                        and s in on_y]
                yield name, src, dst, subs


def _told(w: Side, there: str, subscription: str, own: bool) -> list:
    """Positions on cluster `there` named by the PIP-33 markers in w's window: its own UPDATEs for the
    subscription and SNAPSHOTs at or below its markDeletePosition (own), else the UPDATE copies it received."""
    entries, read = w.topic.ml.entries, w.primary
    mdp = w.topic.ml.positions[read.cursors[subscription].mdp_idx] if read.cursors[subscription].mdp_idx >= 0 \
        else None
    out = []
    for i in read.window:
        e = entries[i]
        if e.marker_type not in (UPDATE, SNAPSHOT) or (e.replicated_from is None) != own:
            continue
        told = dict(e.marker.clusters).get(there)
        if told is None:
            continue
        if e.marker_type == UPDATE and e.marker.subscription == subscription or (
                e.marker_type == SNAPSHOT and own and mdp is not None and e.marker.local <= mdp):
            out.append(told)
    return out


def cursor_ahead(x: Side, y: Side, subscription: str) -> int:
    """Messages of W_Y the target's cursor (at its collection) acked beyond anything PIP-33 justifies: the
    source's own UPDATEs and snapshots <= its markDeletePosition in W_X, and the UPDATE copies in W_Y. With no
    claim of the source in its window, PIP-33 predicts nothing: 0."""
    claims = _told(x, y.cluster, subscription, own=True)
    if not claims:
        return 0
    justified = y.topic.ml.floor_index(max(claims + _told(y, y.cluster, subscription, own=False)))
    mdp, entries = y.primary.cursors[subscription].mdp_idx, y.topic.ml.entries
    return sum(1 for i in y.primary.window if justified < i <= mdp and not entries[i].is_marker)


def _snapshot_findings(world: World, topic: Topic, read: Read) -> list[str]:
    """snapshot_timeout / snapshot_stale on the cluster's own window at its collection instant t_c (the answer's)."""
    entries, now, out = topic.ml.entries, read.answered_ms, []
    own = [entries[i] for i in read.window if entries[i].is_marker and entries[i].replicated_from is None]
    done = {e.marker.snapshot_id for e in own if e.marker_type == SNAPSHOT}
    first_asked: dict[str, int] = {}
    for e in own:
        if e.marker_type == SNAPSHOT_REQUEST and e.marker.snapshot_id not in done:
            first_asked.setdefault(e.marker.snapshot_id, e.publish_ms)
    if any(now - t > topic.settings.snapshot_timeout_ms for t in first_asked.values()):
        out.append("pulsar.snapshot_timeout")
    replicated = any(s.replicated for n, s in topic.subscriptions.items() if n in read.cursors)
    last_snap = max((e.publish_ms for e in own if e.marker_type == SNAPSHOT), default=None)
    data = [entries[i].publish_ms for i in read.window if not entries[i].is_marker
            and (last_snap is None or entries[i].publish_ms > last_snap)]
    if replicated and topic.replicators and data and (now - min(data)) // 1000 > world.config.snapshot_max_age_s:
        out.append("pulsar.snapshot_stale")
    return out


def topic_findings(world: World, topic: Topic) -> list[dict[str, Any]]:
    """Findings about one topic on one cluster that do not depend on a failover pair, at its collection."""
    col: Collection = world.reads.collections[(topic.cluster_name, topic.name)]
    out, base = [], {"cluster": topic.cluster_name, "topic": topic.name}
    for remote, (connected, backlog) in sorted(col.replication.items()):
        if not connected:
            out.append({"check": "pulsar.replicator_disconnected", **base, "target_cluster": remote})
        if backlog > world.config.replicator_backlog_max:
            out.append({"check": "pulsar.replicator_backlog", **base, "target_cluster": remote,
                        "entry_count": backlog})
        if topic.cluster_name not in topic.replicators[remote].remote.replicators:  # the target does not replicate back
            for sub_name, sub in sorted(topic.subscriptions.items()):
                if sub.replicated and sub_name in col.read.cursors:
                    out.append({"check": "pulsar.replicated_subscription_one_way", **base,
                                "subscription": sub_name, "target_cluster": remote})
    out += [{"check": check, **base} for check in _snapshot_findings(world, topic, col.read)]
    return out


_FAILOVER_CHECKS = (("lost", "pulsar.failover_loss"), ("skipped", "pulsar.failover_skip"),
                    ("redelivered", "pulsar.failover_redelivery"))


def world_truth(world: World) -> dict[str, Any]:
    """Every failover row and finding of the world (all clusters)."""
    failover, findings = [], []
    for meta in world.scenarios:
        for name, src, dst, subs in failover_pairs(world, meta):
            x, y = side(world, src), side(world, dst)
            pair: PairTruth = pair_truth(x, y)
            for sub in subs:
                counts = failover_counts(pair, sub)
                key = {"topic": name, "subscription": sub, "source_cluster": x.cluster, "target_cluster": y.cluster}
                counts["redelivery_lag"] = counts["lag"]
                failover.append({**key, **{k: counts[k] for k in ROW_FIELDS}})
                counts = {**counts, "redelivered": redelivery_finding(world, name, counts)}
                base = {"cluster": x.cluster, "topic": name, "subscription": sub, "target_cluster": y.cluster}
                consumed = world.reads.collections[(x.cluster, name)].consumed.get(sub, False)
                for field, check in _FAILOVER_CHECKS:  # only failing over from where consumers were served
                    if counts[field] and consumed:
                        findings.append({"check": check, **base, "entry_count": counts[field]})
                ahead = cursor_ahead(x, y, sub)
                if ahead:
                    findings.append({"check": "pulsar.target_cursor_ahead", **base, "entry_count": ahead})
        for name in meta.topics:
            for cluster in meta.clusters:
                findings.extend(topic_findings(world, world.topic(cluster, name)))
    return {"failover": failover, "findings": findings}


def cluster_truth(world: World, cluster: str, everything: dict[str, Any] | None = None) -> dict[str, Any]:
    everything = everything or world_truth(world)
    return {
        "system": "pulsar", "cluster": cluster, "seed": world.config.seed, "as_of_ms": world.as_of_ms,
        "collected_at_ms": world.reads.collected_at[cluster],
        "scenarios": [{"name": m.name, "topic": m.topic, "description": m.description}
                      for m in world.scenarios if cluster in m.clusters],
        "faults": [f for m in world.scenarios for f in m.faults if f.get("cluster") == cluster],
        "findings": [f for f in everything["findings"] if f["cluster"] == cluster],
        "failover": [r for r in everything["failover"] if r["source_cluster"] == cluster],
    }
