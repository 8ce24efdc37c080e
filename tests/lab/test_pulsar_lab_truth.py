"""The Pulsar lab's ground truth: shape, per-cluster split, the scenarios' expected outcomes, and failover counts
that an audit can recompute from the emitted raw payloads alone."""
from __future__ import annotations

import pytest

from audit.config.model import PulsarCluster
from audit.domain.pulsar.positions import Position
from audit.formats.pulsar.entry import EntryRecord, decode_dump_chunk
from audit.formats.pulsar.stats_internal import CursorStats, decode_stats_internal
from audit.lab.pulsar_runner import collect_lab_pulsar_cluster
from tests.lab.payload_oracle import DictSink

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


def test_every_nonzero_count_is_a_finding_and_back(lab):
    _, truth = lab
    want = set()
    for key, r in rows(truth).items():
        for field, check in (("redelivered", "failover_redelivery"), ("skipped", "failover_skip"),
                             ("lost", "failover_loss")):
            if r[field]:
                want.add((f"pulsar.{check}", key[2], key[0], key[1], key[3], r[field]))
    got = {(f["check"], f["cluster"], f["topic"], f["subscription"], f["target_cluster"], f["entry_count"])
           for f in findings(truth) if f["check"].startswith("pulsar.failover_")}
    assert got == want


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
        ("pulsar.target_cursor_ahead", "east", "orders-both-sides", "west"),
        ("pulsar.replicator_disconnected", "east", "orders-disconnected", "west"),
        ("pulsar.snapshot_timeout", "east", "orders-backlog", None),
        ("pulsar.snapshot_timeout", "west", "orders-backlog", None),
        ("pulsar.snapshot_timeout", "west", "orders-disconnected", None),
    }


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
    folder = "topics/" + topic.removeprefix("persistent://")
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


def test_failover_counts_follow_from_the_raw_payloads(lab):
    raw, truth = lab
    checked = 0
    for (topic, sub, x, y), r in rows(truth).items():
        if topic.startswith(GEO):  # the two-cluster topics (old Pulsar ones matched by producer and sequence)
            assert raw_failover(raw, topic, x, y) == {k: r[k] for k in ("redelivered", "skipped", "lost")}, \
                (topic, x, y)
            checked += 1
    assert checked == 17
