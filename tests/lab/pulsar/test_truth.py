"""The Pulsar lab's ground truth: shape, per-cluster split, the scenarios' expected outcomes, and failover counts
that an audit can recompute from the emitted raw payloads alone."""
from __future__ import annotations

import pytest

from audit.config.pulsar import PulsarCluster
from audit.domain.pulsar.positions import Position
from audit.formats.pulsar.entry import EntryRecord, decode_dump_chunk
from audit.formats.pulsar.stats import decode_topic_stats
from audit.formats.pulsar.stats_internal import CursorStats, decode_stats_internal
from audit.lab.pulsar.runner import collect as collect_lab_pulsar_cluster
from audit.lab.pulsar.truth import _cursor_ahead, _told, world_truth
from audit.lab.pulsar.world import build_world
from tests.lab.pulsar.payload_oracle import DictSink

AS_OF = 1_760_000_000_000
GEO = "persistent://lab/geo/"
SUB = "orders-processor"
FAULTY = ("orders-ack-holes", "orders-delayed", "orders-backlog", "orders-one-way", "orders-disconnected",
          "orders-legacy-partition-0")


@pytest.fixture(scope="module")
def lab():
    raw, truth = {}, {}
    for c in ("east", "west", "south"):
        sink = DictSink()
        _, truth[c] = collect_lab_pulsar_cluster(PulsarCluster(name=c, source="lab", lab={"seed": 7}), sink, None,
                                                 AS_OF)
        raw[c] = dict(sink)
    return raw, truth


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
        assert list(t) == ["system", "cluster", "seed", "as_of_ms", "scenarios", "faults", "findings", "failover"]
        assert (t["system"], t["cluster"], t["seed"], t["as_of_ms"]) == ("pulsar", cluster, 7, AS_OF)
        assert all(f["cluster"] == cluster for f in t["findings"] + t["faults"])
        assert all(r["source_cluster"] == cluster for r in t["failover"])
        for f in t["findings"]:
            assert set(f) <= {"check", "cluster", "topic", "subscription", "target_cluster", "entry_count"}
    assert [s["name"] for s in truth["south"]["scenarios"]] == ["three-clusters"]
    assert len(truth["east"]["scenarios"]) == 9


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
    # Redeliveries are findings only where the target lags behind what PIP-33 told it (the lag, <= redelivered;
    # issue 9): no longer every nonzero redelivered count.
    redelivery = {g for g in got if g[0] == "pulsar.failover_redelivery"}
    assert got - redelivery == want
    assert all(consumed_here(raw, g[1], g[2], g[3]) and 0 < g[5] <= rows(truth)[(g[2], g[3], g[1], g[4])]["redelivered"]
               for g in redelivery)


def test_healthy_topics_are_clean_both_ways(lab):
    _, truth = lab
    clean = [GEO + "orders-healthy", "persistent://lab/geo3/payments"]
    table = rows(truth)
    pairs = [r for k, r in table.items() if k[0] in clean]
    assert len(pairs) == 2 + 6  # two clusters both ways, three clusters every way
    assert all((r["redelivered"], r["skipped"], r["lost"]) == (0, 0, 0) for r in pairs)
    assert not [f for f in findings(truth) if f["topic"] in clean]


def test_fault_scenarios_redeliver_on_failover_to_the_standby(lab):
    table = rows(lab[1])
    for local in FAULTY:
        r = table[(GEO + local, SUB, "east", "west")]
        assert r["redelivered"] >= 20 and r["skipped"] == 0, local
    ahead = table[(GEO + "orders-both-sides", SUB, "east", "west")]
    assert ahead["skipped"] > 0 and ahead["lost"] > 0
    assert (GEO + "orders-one-way", SUB, "west", "east") not in table  # west does not replicate back


def test_fault_findings(lab):
    got = {(f["check"], f["cluster"], f["topic"].removeprefix(GEO), f.get("target_cluster"))
           for f in findings(lab[1]) if not f["check"].startswith("pulsar.failover_")}
    assert got == {
        ("pulsar.replicated_subscription_one_way", "east", "orders-one-way", "west"),
        ("pulsar.replicator_disconnected", "east", "orders-disconnected", "west"),
        ("pulsar.snapshot_timeout", "east", "orders-backlog", None),
        ("pulsar.snapshot_timeout", "west", "orders-backlog", None),
        ("pulsar.snapshot_timeout", "west", "orders-disconnected", None),
    }


def test_failover_findings_at_the_default_seed(lab):
    got = sorted((f["check"].removeprefix("pulsar.failover_"), f["cluster"], f["topic"].removeprefix(GEO),
                  f["target_cluster"], f["entry_count"]) for f in findings(lab[1]) if "failover_" in f["check"])
    # Only the disconnected scenario's redeliveries lie behind what PIP-33 told the target (east's UPDATEs never
    # reached west); the others (ack holes, delayed, backlog, one-way, legacy, both-sides west->east) follow PIP-33
    # one snapshot behind, by design: metrics, no longer findings (issue 9; they were 8 redelivery findings).
    assert got == [
        ("loss", "east", "orders-both-sides", "west", 24),
        ("redelivery", "east", "orders-disconnected", "west", 30),
        ("skip", "east", "orders-both-sides", "west", 24)]
    # the reverse rows of the one-sided scenarios stay as rows (zeros or not), without findings
    assert (rows(lab[1])[(GEO + "orders-ack-holes", SUB, "west", "east")]["skipped"],
            rows(lab[1])[(GEO + "orders-ack-holes", SUB, "west", "east")]["lost"]) == (55, 55)


def test_stats_show_where_consumers_were_served(lab):
    """(connected consumers, msgOutCounter, lastConsumedTimestamp) of every subscription, as a broker reports them:
    counters keep removed consumers' counts, lastConsumedTimestamp only the connected ones' (0 with none)."""
    raw, _ = lab
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
              ("east", "orders-legacy-partition-1", SUB): (1, 60, t + 40_205)}
    assert {k: v for k, v in got.items() if v != (0, 0, 0)} == served
    standby = [("west", local, SUB) for local in ("orders-ack-holes", "orders-backlog", "orders-delayed",
                                                  "orders-disconnected", "orders-healthy", "orders-one-way",
                                                  "orders-legacy-partition-0", "orders-legacy-partition-1")]
    standby += [("west", "payments", "payments:eu"), ("south", "payments", "payments:eu")]
    assert sorted(k for k, v in got.items() if v == (0, 0, 0)) == sorted(standby)  # moved by UPDATE markers only


def test_target_cursor_ahead_needs_a_claim_of_the_source_in_its_dump_window():
    world = build_world({"seed": 7}, AS_OF)  # a fresh world of its own: this test acks on it
    east, west = (world.topic(c, GEO + "orders-both-sides") for c in ("east", "west"))
    ws = west.subscriptions[SUB]
    from_east = [p for sub, frm, p in west.controller.updates_applied if sub == SUB and frm == "east"]
    # west's own consumer moved its cursor beyond every UPDATE east sent ...
    assert ws.local_acks_moved_mdp and ws.cursor.mark_delete_position() > max(from_east)
    # ... but east's UPDATEs all lie below east's dump window (west's UPDATEs moved east's cursor past them) and
    # its snapshots in the window start beyond its markDeletePosition: no PIP-33 claim, so nothing is listed
    assert _told(east, "west", SUB, own=True) == [] and not _cursor_ahead(east, west, SUB)
    # where the source's claim is in its window, acks made on the target beyond it are listed
    east, west = (world.topic(c, GEO + "orders-ack-holes") for c in ("east", "west"))
    claims, ws = _told(east, "west", SUB, own=True), west.subscriptions[SUB]
    assert claims == [ws.cursor.mark_delete_position()] and not _cursor_ahead(east, west, SUB)
    for idx in range(ws.cursor.mdp_idx + 1, ws.cursor.mdp_idx + 4):
        ws.ack(idx)  # a consumer on the standby acks three more entries
    assert _cursor_ahead(east, west, SUB)
    ahead = [f for f in world_truth(world)["findings"] if f["check"] == "pulsar.target_cursor_ahead"]
    assert ahead == [{"check": "pulsar.target_cursor_ahead", "cluster": "east", "topic": GEO + "orders-ack-holes",
                      "subscription": SUB, "target_cluster": "west"}]


# -- the counts follow from the raw evidence alone ----------------------------------------------------
def _load(payloads, folder):
    si = decode_stats_internal(payloads[f"{folder}/stats-internal.json"], folder)
    records = [r for k in sorted(k for k in payloads if k.startswith(f"{folder}/dump/"))
               for r in decode_dump_chunk(payloads[k], k) if isinstance(r, EntryRecord) and r.marker_type is None]
    return si, records


def _acked(cursor: CursorStats, pos: Position) -> bool:
    return pos <= cursor.mark_delete or cursor.individually_deleted.contains(pos)


def _identities(records, cluster, recent):
    """Origin identity: (cluster, position) on recent Pulsar, else (cluster, producer, sequence id)."""
    def ident(r):
        origin = r.replicated_from or cluster
        if recent:
            return origin, r.source_position if r.replicated_from else r.position
        return origin, r.producer_name, r.sequence_id
    return {ident(r): r.position for r in records}


def _acked_on(cluster, data, sub, other_repl, m, origin_pos):
    """Is message m acked on `cluster`? None when m is not there. A message of this cluster missing from its
    dump window, or one the other side's replicator has sent here, lies below the window: every replicated
    cursor acked it."""
    if m in data:
        return _acked(sub, data[m])
    if m[0] == cluster:
        return True
    return True if other_repl is not None and origin_pos is not None and _acked(other_repl, origin_pos) else None


def raw_failover(raw, topic, x, y):
    folder = _folder(topic)
    (sx, rx), (sy, ry) = _load(raw[x], folder), _load(raw[y], folder)
    recent = any(r.source_position for r in rx + ry)
    cx, cy = sx.cursors[SUB], sy.cursors[SUB]
    dx, dy = _identities(rx, x, recent), _identities(ry, y, recent)
    y_to_x, x_to_y = sy.cursors.get(f"pulsar.repl.{x}"), sx.cursors.get(f"pulsar.repl.{y}")

    def origin_pos(m):
        return m[1] if recent else {x: dx, y: dy}[m[0]].get(m)

    received = [m for m, p in dy.items() if not _acked(cy, p)]
    redelivered = sum(1 for m in received if _acked_on(x, dx, cx, y_to_x, m, origin_pos(m)))
    skipped = lost = 0
    for m, p in dx.items():
        if not _acked(cx, p) and _acked_on(y, dy, cy, x_to_y, m, origin_pos(m)):
            skipped += 1
            lost += p >= cx.read_position
    return {"redelivered": redelivered, "skipped": skipped, "lost": lost}


def test_failover_counts_and_findings_follow_from_the_raw_payloads(lab):
    raw, truth = lab
    checked, want = 0, set()
    for (topic, sub, x, y), r in rows(truth).items():
        if topic.startswith(GEO):  # the two-cluster topics (old Pulsar ones matched by producer and sequence)
            counts = raw_failover(raw, topic, x, y)
            assert counts == {k: r[k] for k in ("redelivered", "skipped", "lost")}, (topic, x, y)
            checked += 1
            if consumed_here(raw, x, topic, sub):  # stats.json: x's consumers were served there
                want |= {(f"pulsar.failover_{check}", x, topic, y, n) for check, n in
                         (("skip", counts["skipped"]), ("loss", counts["lost"])) if n}
    assert checked == 17
    got = {(f["check"], f["cluster"], f["topic"], f["target_cluster"], f["entry_count"]) for f in findings(truth)
           if "failover_" in f["check"] and f["topic"].startswith(GEO) and "redelivery" not in f["check"]}
    assert got == want and len(want) == 2   # redeliveries: test_failover_findings_at_the_default_seed
