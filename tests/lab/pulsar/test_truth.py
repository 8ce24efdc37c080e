"""The Pulsar lab's ground truth: shape, per-cluster split, the scenarios' outcomes under continuous traffic with the
clusters collected a minute apart, failover counts an audit can recompute from the emitted payloads alone (the
collection's and the rereads', with their read instants), and the pinned quiet profile."""
from __future__ import annotations

from dataclasses import replace

import pytest

from audit.systems.pulsar.config import PulsarCluster
from audit.contracts import RereadRequest
from audit.systems.pulsar.formats.stats import decode_topic_stats
from lab.pulsar.reads import CursorState
from lab.pulsar.runner import collect as collect_lab_pulsar_cluster
from lab.pulsar.runner import lab_world, reread
from lab.pulsar.truth import world_truth
from lab.pulsar.world import build_world
from tests.lab.pulsar.failover_oracle import failover as oracle_failover
from tests.lab.pulsar.failover_oracle import load
from tests.lab.sinks import DictSink

AS_OF = 1_760_000_000_000
GEO = "persistent://lab/geo/"
SUB = "orders-processor"
LAB = {"seed": 7, "message_ttl_s": {"lab/geo-ttl": 20}}
NO_POSITION = ("orders-legacy", "orders-restarted")   # copies without the source-position property
# production stops at 41 s, the clusters are read back to back right before as_of: PIP-33 has settled
QUIET = {"seed": 7, "traffic": "quiet", "duration_s": 120, "collection_gap_s": 0}


def collect_all(lab, as_of=AS_OF):
    """Every cluster collected, then the reread stage, as the pipeline runs them: (raw per cluster, truth)."""
    raw, truth, clusters = {}, {}, []
    for c in lab_world(lab, as_of)[0].cluster_names:
        sink, cluster = DictSink(), PulsarCluster(name=c, source="lab", lab=lab)
        _, truth[c] = collect_lab_pulsar_cluster(cluster, sink, None, as_of)
        raw[c], clusters = sink, clusters + [cluster]
    reports = reread(RereadRequest(tuple(clusters), lambda name: raw[name], lambda name: sorted(raw[name]), None,
                                   as_of, None))
    assert all(r.gaps == [] and r.counts["rereads"] > 0 for r in reports.values())
    return {c: dict(v) for c, v in raw.items()}, truth


@pytest.fixture(scope="module")
def lab():
    return collect_all(LAB)


def rows(truth):
    return {(r["topic"], r["subscription"], r["source_cluster"], r["target_cluster"]): r
            for t in truth.values() for r in t["failover"]}


def findings(truth):
    return [f for t in truth.values() for f in t["findings"]]


def _folder(topic):
    return "topics/" + topic.removeprefix("persistent://")


def consumed_here(raw, cluster, topic, sub):
    """The contract's consumed_here, read from the emitted stats.json alone."""
    key = f"{_folder(topic)}/stats.json"
    return decode_topic_stats(raw[cluster][key], key).subscriptions[sub].consumed_here


def test_shape_and_split_per_cluster(lab):
    _, truth = lab
    for cluster, t in truth.items():
        assert list(t) == ["system", "cluster", "seed", "as_of_ms", "collected_at_ms", "scenarios", "faults",
                           "findings", "failover"]
        assert (t["system"], t["cluster"], t["seed"], t["as_of_ms"]) == ("pulsar", cluster, 7, AS_OF)
        assert all(f["cluster"] == cluster for f in t["findings"] + t["faults"])
        assert all(r["source_cluster"] == cluster for r in t["failover"])
        for f in t["findings"]:
            assert set(f) <= {"check", "cluster", "topic", "subscription", "target_cluster", "entry_count"}
    assert [s["name"] for s in truth["south"]["scenarios"]] == ["three-clusters"]
    assert len(truth["east"]["scenarios"]) == 14
    # collected a minute apart, in the order of lab.clusters, all before as_of
    at = [truth[c]["collected_at_ms"] for c in ("east", "west", "south")]
    assert at[1] - at[0] == at[2] - at[1] == 60_000 and at[2] < AS_OF


def test_every_read_happened_before_as_of_and_pairs_are_bracketed(lab):
    _, truth = lab
    for r in rows(truth).values():
        assert r["source_read_before_ms"] <= r["target_read_at_ms"] <= r["source_read_after_ms"] < AS_OF


def test_failover_counts_follow_from_the_raw_payloads(lab):
    """Every pair of the topics whose copies carry their source position, recomputed from the collection, the
    rereads and their instants alone."""
    raw, truth = lab
    ttl = {GEO.replace("/geo/", "/geo-ttl/"): 20_000}

    def unsent_for(topic):
        limit = next((ms for prefix, ms in ttl.items() if topic.startswith(prefix)), 0)

        def unsent(r, remote, now):
            return (r.replicate_to is not None and remote not in r.replicate_to) or (
                limit > 0 and now - r.publish_time_ms > limit)
        return unsent
    checked = 0
    for (topic, sub, x, y), r in rows(truth).items():
        if any(n in topic for n in NO_POSITION):
            continue
        folder = _folder(topic)
        got = oracle_failover(load(raw[x], x, folder), load(raw[y], y, folder), sub, unsent_for(topic))
        want = {k: r[k] for k in ("redelivered", "skipped", "lost", "unsettled", "after_source_window", "ambiguous")}
        want["lag"] = r["redelivery_lag"]
        assert {k: got[k] for k in want} == want, (topic, x, y)
        checked += 1
    assert checked == 27


def test_failover_findings_are_the_nonzero_counts_of_consumed_sources(lab):
    raw, truth = lab
    want = set()
    for key, r in rows(truth).items():
        if not consumed_here(raw, key[2], key[0], key[1]):
            continue  # failing over from a standby that never served consumers: a row, not a finding
        for field, check in (("skipped", "failover_skip"), ("lost", "failover_loss")):
            if r[field]:
                want.add((f"pulsar.{check}", key[2], key[0], key[1], key[3], r[field]))
    got = {(f["check"], f["cluster"], f["topic"], f["subscription"], f["target_cluster"], f["entry_count"])
           for f in findings(truth) if f["check"].startswith("pulsar.failover_")}
    redelivery = {g for g in got if g[0] == "pulsar.failover_redelivery"}
    assert got - redelivery == want
    assert all(consumed_here(raw, g[1], g[2], g[3]) and 0 < g[5] <= rows(truth)[(g[2], g[3], g[1], g[4])]["redelivered"]
               for g in redelivery)


def test_findings_at_the_default_seed(lab):
    got = sorted((f["check"].removeprefix("pulsar."), f["cluster"], f["topic"].removeprefix(GEO),
                  f.get("target_cluster"), f.get("entry_count")) for f in findings(lab[1]))
    # PIP-33 keeps the standby one snapshot behind: the redeliveries of ack holes, a delayed message, a backlog, the
    # one-way and the disconnected replicators (east's UPDATEs never sent; west's never reading the copies it
    # received, so never applying them) are metrics. Only where west's subscription was reset behind what the
    # UPDATEs it had applied told it is the lag a finding.
    assert got == [
        ("failover_loss", "east", "orders-both-sides", "west", 22),
        ("failover_redelivery", "east", "orders-unapplied", "west", 12),
        ("failover_skip", "east", "orders-both-sides", "west", 22),
        ("replicated_subscription_one_way", "east", "orders-one-way", "west", None),
        ("replicator_disconnected", "east", "orders-disconnected", "west", None),
        ("replicator_disconnected", "west", "orders-unapplied", "east", None),
        ("snapshot_timeout", "east", "orders-backlog", None, None),
        ("snapshot_timeout", "west", "orders-backlog", None, None),
        ("snapshot_timeout", "west", "orders-disconnected", None, None)]


def test_clean_topics_under_traffic(lab):
    """Producers, replicators and consumers never stop, the clusters are read a minute apart: healthy topics,
    messages never sent (replicate_to, a message TTL) and a late standby subscription raise nothing and compare
    equal, and the standby holds copies the source published after its own collection."""
    _, truth = lab
    table = rows(truth)
    clean = [GEO + t for t in ("orders-healthy", "orders-regional", "orders-late-standby")]
    clean.append("persistent://lab/geo3/payments")
    pairs = [r for k, r in table.items() if k[0] in clean]
    assert len(pairs) == 3 * 2 + 6
    assert all((r["redelivered"], r["skipped"], r["lost"], r["ambiguous"]) == (0, 0, 0, 0) for r in pairs)
    assert not [f for f in findings(truth) if f["topic"] in clean]
    assert sum(r["after_source_window"] for r in pairs if r["source_cluster"] == "east") > 0


def test_messages_dropped_by_the_ttl_are_not_missing():
    world = lab_world(LAB, AS_OF)[0]
    east = world.topic("east", "persistent://lab/geo-ttl/orders-expiring")
    expired = east.replicators["west"].expired
    assert len(expired) > 20
    west = world.topic("west", east.name)
    copies = {e.ident for e in west.ml.entries}
    assert not any(east.ml.entries[i].ident in copies for i in expired)
    # the dump window of east holds them (an unacked message keeps it open), and nothing is reported missing
    read = world.reads.collections[("east", east.name)].read
    assert all(i in read.window for i in expired)


def test_a_restarted_producer_without_source_positions_leaves_pairs_ambiguous(lab):
    table = rows(lab[1])
    for pair in (("east", "west"), ("west", "east")):
        r = table[(GEO + "orders-restarted", SUB, *pair)]
        assert r["ambiguous"] > 50
    assert table[(GEO + "orders-restarted", SUB, "east", "west")]["redelivered"] > 0   # the rest is compared


def test_target_cursor_ahead_needs_a_claim_of_the_source_in_its_dump_window():
    world = build_world(QUIET, AS_OF)   # a fresh world of its own: this test changes what a read saw
    assert not [f for f in world_truth(world)["findings"] if f["check"] == "pulsar.target_cursor_ahead"]
    # acks made on the standby of orders-ack-holes (east's UPDATE is in east's window) move its cursor beyond it
    read = world.reads.collections[("west", GEO + "orders-ack-holes")].read
    c = read.cursors[SUB]
    entries = world.topic("west", GEO + "orders-ack-holes").ml.entries
    ahead = [i for i in range(c.mdp_idx + 1, read.entries) if not entries[i].is_marker][:3]
    read.cursors[SUB] = replace(c, mdp_idx=ahead[-1], acked=frozenset(i for i in c.acked if i > ahead[-1]))
    got = [f for f in world_truth(world)["findings"] if f["check"] == "pulsar.target_cursor_ahead"]
    assert got == [{"check": "pulsar.target_cursor_ahead", "cluster": "east", "topic": GEO + "orders-ack-holes",
                    "subscription": SUB, "target_cluster": "west", "entry_count": 3}]


def test_pairing_by_key_never_pairs_two_messages(lab):
    from lab.pulsar.failover_truth import pair_truth
    from lab.pulsar.truth import failover_pairs, side

    world = lab_world(LAB, AS_OF)[0]
    for meta in world.scenarios:
        for _, src, dst, _ in failover_pairs(world, meta):
            assert pair_truth(side(world, src), side(world, dst)).mispaired == 0, (src.name, src.cluster_name)


def test_cursor_states_are_kept_per_read():
    world = lab_world(LAB, AS_OF)[0]
    reads = world.reads.reads_of("east", GEO + "orders-healthy")
    assert [r.number for r in reads] == [0, 1, 2]
    assert reads[0].requested_ms < reads[1].requested_ms < reads[2].requested_ms
    first, last = (r.cursors[SUB] for r in (reads[0], reads[2]))
    assert isinstance(first, CursorState) and first.mdp_idx < last.mdp_idx   # the consumer kept going


# -- the quiet profile ------------------------------------------------------------------------------------------


def test_quiet_profile_keeps_the_settled_counts():
    _, truth = collect_all(QUIET)
    table = rows(truth)
    got = {(t.removeprefix(GEO), x, y): (r["redelivered"], r["skipped"], r["lost"])
           for (t, s, x, y), r in table.items() if t.startswith(GEO) and r["redelivered"] + r["skipped"]}
    assert got == {
        ("orders-ack-holes", "east", "west"): (55, 0, 0), ("orders-ack-holes", "west", "east"): (0, 55, 55),
        ("orders-delayed", "east", "west"): (106, 0, 0), ("orders-delayed", "west", "east"): (0, 106, 106),
        ("orders-backlog", "east", "west"): (117, 0, 0), ("orders-backlog", "west", "east"): (0, 117, 117),
        ("orders-one-way", "east", "west"): (120, 0, 0),
        ("orders-both-sides", "east", "west"): (0, 24, 24), ("orders-both-sides", "west", "east"): (24, 0, 0),
        ("orders-disconnected", "east", "west"): (30, 0, 0), ("orders-disconnected", "west", "east"): (0, 30, 30),
        ("orders-legacy-partition-0", "east", "west"): (42, 0, 0),
        ("orders-legacy-partition-0", "west", "east"): (0, 42, 42),
        ("orders-legacy-partition-1", "east", "west"): (37, 0, 0),
        ("orders-legacy-partition-1", "west", "east"): (0, 37, 37),
        ("orders-restarted", "east", "west"): (50, 0, 0), ("orders-restarted", "west", "east"): (0, 50, 50),
        ("orders-unapplied", "east", "west"): (16, 0, 0), ("orders-unapplied", "west", "east"): (0, 16, 16)}
    assert all(r["after_source_window"] == r["unsettled"] == 0 for r in table.values())


def test_stats_show_where_consumers_were_served():
    """(connected consumers, msgOutCounter, lastConsumedTimestamp) of every subscription, as a broker reports them:
    counters keep removed consumers' counts, lastConsumedTimestamp only the connected ones' (0 with none)."""
    raw, _ = collect_all(QUIET)
    got = {}
    for cluster, payloads in raw.items():
        for key, data in payloads.items():
            if key.endswith("/stats.json"):
                for name, s in decode_topic_stats(data, key).subscriptions.items():
                    got[(cluster, key.split("/")[3], name)] = (s.consumers, s.msg_out_counter, s.last_consumed_ms)
    t = AS_OF - 120_000  # the world's start
    served = {("east", "orders-healthy", SUB): (1, 180, t + 40_970),
              ("east", "orders-healthy", "local-metrics"): (1, 180, t + 40_970),
              ("east", "orders-ack-holes", SUB): (1, 120, t + 40_930),
              ("east", "orders-delayed", SUB): (1, 119, t + 40_925),
              ("east", "orders-backlog", SUB): (0, 136, 0),  # its consumer left at 30 s
              ("east", "orders-one-way", SUB): (1, 120, t + 40_779),
              ("east", "orders-both-sides", SUB): (0, 53, 0), ("west", "orders-both-sides", SUB): (0, 55, 0),
              ("east", "orders-disconnected", SUB): (1, 120, t + 40_902),
              ("east", "payments", "payments:eu"): (1, 160, t + 40_980),
              ("east", "orders-legacy-partition-0", SUB): (1, 60, t + 40_235),
              ("east", "orders-legacy-partition-1", SUB): (1, 60, t + 40_205),
              ("east", "orders-regional", SUB): (1, 175, t + 40_999),   # west's local-only messages stay there
              ("east", "orders-expiring", SUB): (1, 120, t + 40_363),
              ("east", "orders-restarted", SUB): (1, 120, t + 40_499),
              ("east", "orders-late-standby", SUB): (1, 120, t + 40_938),
              ("east", "orders-unapplied", SUB): (1, 120, t + 40_771)}
    assert {k: v for k, v in got.items() if v != (0, 0, 0)} == served
    assert all(k[0] != "east" for k, v in got.items() if v == (0, 0, 0))   # standbys: moved by UPDATE markers only


def test_what_the_source_acked_between_its_two_reads_is_unsettled():
    """X acks between the read before Y's and the read after it: neither redelivered nor skipped, unsettled."""
    from lab.pulsar.failover_truth import bracket, failover_counts, pair_truth
    from lab.pulsar.truth import side

    world = build_world(QUIET, AS_OF)   # its own world: this test changes what a read saw
    x, y = (side(world, world.topic(c, GEO + "orders-ack-holes")) for c in ("east", "west"))
    pair = pair_truth(x, y)
    before_change = failover_counts(pair, SUB)
    assert before_change["redelivered"] == 55 and before_change["unsettled"] == 0
    y_read, xb, _ = bracket(x.reads, y.reads)
    c = xb.cursors[SUB]
    xb.cursors[SUB] = replace(c, mdp_idx=pair.x.primary.floor, acked=frozenset())   # earlier: nothing acked
    got = failover_counts(pair, SUB)
    # what lies below east's window stays acked at every read of east; the rest east acked since is unsettled
    assert got["redelivered"] == len(set(pair.y_below_x) & {i for i in y.window()
                                                           if not y_read.cursors[SUB].is_acked(i)}) < 55
    assert got["skipped"] == 0 and got["unsettled"] >= 55 - got["redelivered"]


def test_the_end_state_truth_is_what_a_collector_reading_the_ended_world_can_know():
    """read_now: every cluster read at as_of, once the simulation has ended (what the loopback admin server answers):
    the truth of that state follows from the payloads emit_cluster writes, as the collection's does."""
    from lab.pulsar.emit import emit_cluster, emit_rereads

    world = build_world(LAB, AS_OF)
    world.reads.read_now()
    truth = world_truth(world)
    raw = {}
    for c in world.cluster_names:
        sink = DictSink()
        emit_cluster(world, c, sink)
        emit_rereads(world, c, sink)
        raw[c] = dict(sink)
    for r in truth["failover"]:
        if any(n in r["topic"] for n in NO_POSITION) or "geo-ttl" in r["topic"]:
            continue
        folder = _folder(r["topic"])
        x, y = r["source_cluster"], r["target_cluster"]
        got = oracle_failover(load(raw[x], x, folder), load(raw[y], y, folder), r["subscription"],
                              lambda rec, remote, now: rec.replicate_to is not None and remote not in rec.replicate_to)
        assert {k: got[k] for k in ("redelivered", "skipped", "lost")} == {k: r[k] for k in
                                                                          ("redelivered", "skipped", "lost")}
        assert r["after_source_window"] == 0    # every cluster read at one instant
