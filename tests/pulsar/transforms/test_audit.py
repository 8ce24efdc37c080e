"""The Pulsar audit job (spark_jobs/run.py --system pulsar --stage audit) over hand-made normalized tables (four
topics, one run): healthy bidirectional,
individual-ack holes, a target cursor ahead, one-way replication; plus the findings merge with BookKeeper's rows."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from audit.systems.pulsar.transforms.audit import INPUTS, VIOLATIONS
from spark_jobs import run

NS = "persistent://acme/geo/"
HEALTHY, HOLES, AHEAD, ONE_WAY, TRIMMED, RESTARTED = (NS + t for t in ("healthy", "holes", "ahead", "one-way",
                                                                      "trimmed", "restarted"))
T0 = 1_760_000_000_000
SUB = "orders"


def pos(text):
    lo, hi = text.split(":")
    return int(lo), int(hi)


def entry(cluster, topic, p, seq=None, origin=None, src=None, marker=None, **m):
    (l, e), s = pos(p), pos(src) if src else (None, None)
    return {"cluster": cluster, "topic": topic, "ledger_id": l, "entry_id": e,
            "producer_name": None if marker else "prod", "sequence_id": seq, "publish_time_ms": T0 + 1000 * e,
            "replicated_from": origin, "replicate_to": m.get("replicate_to"), "source_position_ledger": s[0],
            "source_position_entry": s[1], "marker_type": marker, "snapshot_id": m.get("snapshot_id"),
            "marker_source_cluster": None, "marker_local_ledger": pos(m["local"])[0] if "local" in m else None,
            "marker_local_entry": pos(m["local"])[1] if "local" in m else None,
            "marker_subscription": m.get("subscription"),
            "marker_clusters": [{"cluster": c, "ledger_id": pos(v)[0], "entry_id": pos(v)[1]}
                                for c, v in m.get("clusters", {}).items()] or None}


def cursor(cluster, topic, name, mdp, ranges=(), read=None, kind="subscription", remote=None, replicated=True):
    rs = [dict(zip(("from_ledger", "from_entry", "to_ledger", "to_entry"), (*pos(a), *pos(b))))
          for a, b in (r.split("..") for r in ranges)]
    r = pos(read) if read else (None, None)
    return {"cluster": cluster, "topic": topic, "cursor": name, "kind": kind, "remote_cluster": remote,
            "replicated": replicated if kind == "subscription" else False, "mark_delete_ledger": pos(mdp)[0],
            "mark_delete_entry": pos(mdp)[1], "read_ledger": r[0], "read_entry": r[1], "individually_deleted": rs}


def tables():
    return {name: [] for name in INPUTS}


def scenario(topic, east, west, east_cursors, west_cursors, west_replicates=True):
    """east publishes, west holds the copies; both dumped from L:-1 of their first ledger."""
    t = tables()
    for c, recs, curs, ledger, remote in (("east", east, east_cursors, 5, "west"),
                                          ("west", west, west_cursors, 9, "east")):
        t["pulsar_entries"] += recs
        last = max((pos(f"{r['ledger_id']}:{r['entry_id']}") for r in recs), default=(ledger, -1))
        t["pulsar_topics"].append({"cluster": c, "topic": topic, "dump_from_ledger": ledger, "dump_from_entry": -1,
                                   "dump_to_ledger": last[0], "dump_to_entry": last[1], "dump_complete": True})
        t["pulsar_ledgers"].append({"cluster": c, "topic": topic, "ledger_id": ledger, "entries": len(recs)})
        t["pulsar_cursors"] += curs
        if c == "east" or west_replicates:
            t["pulsar_cursors"].append(cursor(c, topic, f"pulsar.repl.{remote}", last and f"{last[0]}:{last[1]}",
                                              kind="replicator", remote=remote))
            t["pulsar_replication"].append({"cluster": c, "topic": topic, "remote_cluster": remote,
                                            "connected": True, "replication_backlog": 0})
        t["pulsar_subscriptions"] += [{"cluster": c, "topic": topic, "subscription": SUB, "is_replicated": True}]
    return t


def pip33_round(topic, east_at, west_at):
    """east: REQUEST, RESPONSE (copy from west), SNAPSHOT mapping east_at -> west_at, then an UPDATE."""
    l, e = pos(east_at)
    return [entry("east", topic, f"{l}:{e + 1}", marker=10, snapshot_id="s1"),
            entry("east", topic, f"{l}:{e + 2}", marker=11, origin="west", snapshot_id="s1",
                  clusters={"west": west_at}),
            entry("east", topic, f"{l}:{e + 3}", marker=12, snapshot_id="s1", local=f"{l}:{e + 2}",
                  clusters={"west": west_at}),
            entry("east", topic, f"{l}:{e + 4}", marker=13, subscription=SUB, clusters={"west": west_at})]


def trimmed():
    """One-way east -> west; west has no cursor at all, so ManagedLedgerImpl trimmed its closed ledger 9 (the copies
    of 5:0..5:5) and its dump window is the whole retained topic: ledger 11 with the copies of 5:6..5:9."""
    east = [entry("east", TRIMMED, f"5:{i}", seq=i) for i in range(10)]
    west = [entry("west", TRIMMED, f"11:{i}", seq=i + 6, origin="east", src=f"5:{i + 6}") for i in range(4)]
    t = tables()
    t["pulsar_entries"] = east + west
    for c, ledger, last in (("east", 5, 9), ("west", 11, 3)):
        t["pulsar_topics"].append({"cluster": c, "topic": TRIMMED, "dump_from_ledger": ledger, "dump_from_entry": -1,
                                   "dump_to_ledger": ledger, "dump_to_entry": last, "dump_complete": True})
        t["pulsar_ledgers"].append({"cluster": c, "topic": TRIMMED, "ledger_id": ledger, "entries": last + 1})
    t["pulsar_cursors"].append(cursor("east", TRIMMED, "pulsar.repl.west", "5:9", kind="replicator", remote="west"))
    t["pulsar_replication"].append({"cluster": "east", "topic": TRIMMED, "remote_cluster": "west", "connected": True,
                                    "replication_backlog": 0})
    return t


def build():
    t = tables()

    def add(part):
        for k, v in part.items():
            t[k] += v

    # east: 10 messages 5:0..5:9, then the PIP-33 round at 5:10..5:13; west: copies 9:0..9:9.
    def east_west(topic):
        east = [entry("east", topic, f"5:{i}", seq=i) for i in range(10)] + pip33_round(topic, "5:9", "9:9")
        west = [entry("west", topic, f"9:{i}", seq=i, origin="east", src=f"5:{i}") for i in range(10)]
        return east, west

    east, west = east_west(HEALTHY)
    add(scenario(HEALTHY, east, west, [cursor("east", HEALTHY, SUB, "5:13", read="5:14")],
                 [cursor("west", HEALTHY, SUB, "9:9")]))
    # holes: east's MDP stays at 5:3 (5:4 and 5:7 never acked), 5:5, 5:6, 5:8, 5:9 acked individually; the
    # snapshot maps 5:2 -> 9:2 and west was told 9:2... then west's MDP moved to 9:3 by a later UPDATE.
    east, west = east_west(HOLES)
    east = east[:10] + [entry("east", HOLES, "5:10", marker=13, subscription=SUB, clusters={"west": "9:3"})]
    add(scenario(HOLES, east, west, [cursor("east", HOLES, SUB, "5:3", ["5:4..5:6", "5:7..5:10"], read="5:11")],
                 [cursor("west", HOLES, SUB, "9:3")]))
    # ahead: east stopped at 5:3 (told west 9:3); west's own consumer acked through 9:7.
    east, west = east_west(AHEAD)
    east = east[:10] + [entry("east", AHEAD, "5:10", marker=13, subscription=SUB, clusters={"west": "9:3"})]
    add(scenario(AHEAD, east, west, [cursor("east", AHEAD, SUB, "5:3", read="5:6")],
                 [cursor("west", AHEAD, SUB, "9:7")]))
    east, west = east_west(ONE_WAY)
    add(scenario(ONE_WAY, east[:10], west, [cursor("east", ONE_WAY, SUB, "5:9", read="5:10")],
                 [cursor("west", ONE_WAY, SUB, "9:-1")], west_replicates=False))
    add(trimmed())
    # restarted: east's producer restarted without deduplication (sequence ids 0, 1, 2 twice) and west's copies
    # carry no source position (a broker before apache/pulsar#23697): nothing can be paired.
    east = [entry("east", RESTARTED, f"5:{i}", seq=i % 3) for i in range(6)]
    west = [entry("west", RESTARTED, f"9:{i}", seq=i % 3, origin="east") for i in range(6)]
    add(scenario(RESTARTED, east, west, [cursor("east", RESTARTED, SUB, "5:5", read="5:6")],
                 [cursor("west", RESTARTED, SUB, "9:2")]))
    return t


def _bookkeeper_rows(root):
    """The BookKeeper job's folder of findings/violations in the same run (Spark's layout: part files)."""
    bk = [{"run_id": "r1", "system": "bookkeeper", "cluster": "bk-a", "check": "bk.entries_lost",
           "severity": "critical", "subject": "ledger 3", "entry_count": 2, "message": "m", "evidence": "{}"}]
    folder = root / "findings" / "violations" / "system=bookkeeper"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(bk, schema=to_arrow_schema(VIOLATIONS)), str(folder / "part-00000-x.parquet"))
    (folder / "_SUCCESS").write_text("")


@pytest.fixture(scope="module")
def audited(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("attempt")
    tables = root / "tables"
    for name, rows in build().items():   # pyarrow writes: much faster than Spark for a few rows
        (tables / name).mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=to_arrow_schema(INPUTS[name])),
                       str(tables / name / "part-0.parquet"))
    _bookkeeper_rows(root)
    counts = run.main(["--system", "pulsar", "--stage", "audit", "--input", str(tables), "--output", str(root),
                       "--run-id", "r1", "--as-of-ms", str(T0 + 60_000)])
    failover = {(r["topic"], r["source_cluster"], r["target_cluster"]): r.asDict()
                for r in spark.read.parquet(str(root / "metrics" / "pulsar_failover")).collect()}
    violations = [r.asDict() for r in spark.read.parquet(str(root / "findings" / "violations")).collect()]
    snapshots = {(r["topic"], r["cluster"]): r.asDict()
                 for r in spark.read.parquet(str(root / "metrics" / "pulsar_snapshots")).collect()}
    return {**counts, "root": str(root)}, failover, violations, snapshots


def checks(violations, topic):
    return sorted((v["check"], v["cluster"], v["entry_count"]) for v in violations
                  if v["system"] == "pulsar" and json.loads(v["evidence"])["topic"] == topic)


def counts(row):
    return {k: row[k] for k in ("compared", "only_on_source", "only_on_target", "redelivered", "skipped", "lost")}


def test_healthy_bidirectional(audited):
    _, failover, violations, snapshots = audited
    for pair in (("east", "west"), ("west", "east")):
        assert counts(failover[(HEALTHY, *pair)]) == {"compared": 10, "only_on_source": 0, "only_on_target": 0,
                                                      "redelivered": 0, "skipped": 0, "lost": 0}, pair
    r = failover[(HEALTHY, "east", "west")]
    assert (r["expected_target_mdp"], r["exact_target_mdp"], r["target_mdp"], r["complete"]) == ("9:9", "9:9",
                                                                                                 "9:9", True)
    assert checks(violations, HEALTHY) == []
    s = snapshots[(HEALTHY, "east")]
    assert (s["requests"], s["responses"], s["snapshots"], s["updates"], s["unanswered_requests"],
            s["newest_snapshot_age_s"], s["replicated_subscriptions"]) == (1, 1, 1, 1, 0, 48, 1)


def test_individual_ack_holes(audited):
    _, failover, violations, _ = audited
    r = failover[(HOLES, "east", "west")]
    assert counts(r) == {"compared": 10, "only_on_source": 0, "only_on_target": 0, "redelivered": 4, "skipped": 0,
                         "lost": 0}
    assert json.loads(r["redelivered_ranges"]) == [["9:5", "9:6"], ["9:8", "9:9"]]
    assert (r["exact_target_mdp"], r["expected_target_mdp"], json.loads(r["to_acknowledge"]),
            r["to_acknowledge_count"]) == ("9:3", "9:3", ["9:5", "9:6", "9:8", "9:9"], 4)
    # All four lie past the 9:3 east's UPDATE told west: PIP-33's own lag, a metric (was a redelivery finding of 4).
    assert [c for c in checks(violations, HOLES) if c[0] == "pulsar.failover_redelivery"] == []
    assert r["redelivery_lag"] == 0


def test_target_ahead(audited):
    _, failover, violations, _ = audited
    r = failover[(AHEAD, "east", "west")]
    # west acked 9:4..9:7 itself: east never acked 5:4..5:7, and never dispatched 5:6, 5:7.
    assert (r["skipped"], r["lost"], json.loads(r["skipped_ranges"]), r["exact_target_mdp"]) == (
        4, 2, [["9:4", "9:7"]], "9:3")
    got = checks(violations, AHEAD)
    assert [c for c in got if c[1] == "east"] == [("pulsar.failover_loss", "east", 2),
                                                  ("pulsar.failover_skip", "east", 4),
                                                  ("pulsar.target_cursor_ahead", "east", 4)]


def test_one_way_replication(audited):
    _, failover, violations, _ = audited
    assert (ONE_WAY, "west", "east") not in failover
    assert failover[(ONE_WAY, "east", "west")]["redelivered"] == 10
    subjects = [v["subject"] for v in violations if v["check"] == "pulsar.replicated_subscription_one_way"]
    assert subjects == [f"{ONE_WAY} sub={SUB} east->west"]


def test_a_trimmed_target_is_missing_nothing(audited):
    """Was message_missing_on_target 6 (critical): west's window "held the whole topic" by its ledger list."""
    _, failover, violations, snapshots = audited
    assert checks(violations, TRIMMED) == []
    assert (TRIMMED, "east", "west") not in failover and (TRIMMED, "west") in snapshots


def test_a_repeating_sequence_pairs_nothing_and_is_a_coverage_gap(audited, spark):
    job, failover, violations, _ = audited
    for pair in (("east", "west"), ("west", "east")):
        r = failover[(RESTARTED, *pair)]
        assert (r["pairing_ambiguous"], r["ambiguous"], r["complete"]) == (True, 12, False), pair
        assert counts(r) == {"compared": 0, "only_on_source": 0, "only_on_target": 0, "redelivered": 0,
                             "skipped": 0, "lost": 0}, pair
    assert checks(violations, RESTARTED) == []
    assert not failover[(HEALTHY, "east", "west")]["pairing_ambiguous"]
    gaps = [r.asDict() for r in spark.read.parquet(str(Path(job["root"]) / "metrics" / "pulsar_coverage")).collect()]
    ambiguous = [g for g in gaps if g["what"] == "pairing_ambiguous"]
    assert sorted((g["cluster"], g["target_cluster"], g["entry_count"]) for g in ambiguous) == [
        ("east", "west", 12), ("west", "east", 12)] and all(g["topic"] == RESTARTED for g in ambiguous)
    # these hand-made tables carry no read instants: the pairs whose skips rest on that say so
    assert {g["what"] for g in gaps} - {"pairing_ambiguous"} <= {"read_instants_unknown"}
    assert job["pulsar_coverage"] == len(gaps)


def test_findings_merge_with_bookkeeper_rows(audited, spark):
    job, _, violations, _ = audited
    assert [v["check"] for v in violations if v["system"] == "bookkeeper"] == ["bk.entries_lost"]
    pulsar = [v for v in violations if v["system"] == "pulsar"]
    assert len(pulsar) == job["pulsar_violations"] == sum(job["pulsar_violations_by_check"].values())
    assert job["pulsar_failover"] == 9 and job["pulsar_snapshots"] == 12
    # Readable together by pyarrow too (the report stage reads findings/violations that way).
    import pyarrow.dataset as ds

    assert ds.dataset(str(Path(job["root"]) / "findings" / "violations")).count_rows() == len(violations)


def test_a_retry_replaces_only_its_own_rows(audited, spark):
    job, _, violations, _ = audited
    again = run.main(["--system", "pulsar", "--stage", "audit", "--input", str(Path(job["root"]) / "tables"),
                      "--output", job["root"], "--run-id", "r1", "--as-of-ms", str(T0 + 60_000)])
    got = [r["system"] for r in spark.read.parquet(str(Path(job["root"]) / "findings" / "violations")).collect()]
    assert again["pulsar_violations"] == job["pulsar_violations"]
    assert sorted(got) == sorted(v["system"] for v in violations)   # BookKeeper's row kept, Pulsar's not doubled


def test_missing_tables_give_empty_outputs(spark, tmp_path):
    (tmp_path / "tables").mkdir()
    out = run.run_stage(spark, "pulsar", "audit", str(tmp_path / "tables"), str(tmp_path), run_id="r",
                        thresholds=run.thresholds(None, []))
    assert out == {"pulsar_failover": 0, "pulsar_snapshots": 0, "pulsar_coverage": 0, "pulsar_violations": 0,
                   "pulsar_violations_by_check": {}}
    assert spark.read.parquet(str(tmp_path / "findings" / "violations")).count() == 0
