"""The MirrorMaker 2 part of the Kafka audit job over hand-built kafka_mm2_* tables: a pre-3.5 flow whose latest
sync overshot (KAFKA-12468), a checkpoint no sync explains, a redelivery beyond the tolerance, a partition without
syncs, a checkpoints topic not read to its end, and a 3.5+ flow missing a checkpoint."""
from __future__ import annotations

from types import SimpleNamespace

from tests.transforms.kafka.test_audit import T0, Tables, audited, request

SYNCS = [(100, 100), (110, 105), (160, 125), (200, 165)]     # upstream 111..159 held 20 unreplicated markers


def flow_rows(t: Tables, cluster, alias, syncs, checkpoints, source, target, cp_end=None):
    flow = {"cluster": cluster, "source_alias": alias}
    for i, (topic, p, u, d) in enumerate(syncs):
        t.rows["kafka_mm2_syncs"].append({**flow, "topic": topic, "partition": p, "upstream_offset": u,
                                          "downstream_offset": d, "internal_topic": "mm2-offset-syncs.x.internal",
                                          "record_partition": 0, "record_offset": i})
    for i, (group, topic, p, u, d) in enumerate(checkpoints):
        t.rows["kafka_mm2_checkpoints"].append({**flow, "group": group, "topic": f"{alias}.{topic}", "partition": p,
                                                "upstream_offset": u, "downstream_offset": d, "metadata": "",
                                                "internal_topic": f"{alias}.checkpoints.internal",
                                                "record_partition": 0, "record_offset": i})
    for side, rows_ in (("source", source), ("target", target)):
        for group, topic, p, offset in rows_:
            t.rows["kafka_mm2_groups"].append({
                **flow, "side": side, "group": group, "topic": topic if side == "source" else f"{alias}.{topic}",
                "partition": p, "offset": offset, "read_started_at_ms": T0, "read_finished_at_ms": T0 + 900})
    for side, end in (("offset-syncs", len(syncs)), ("checkpoints", cp_end if cp_end is not None
                                                     else len(checkpoints))):
        t.rows["kafka_mm2_offsets"].append({**flow, "side": side, "topic": f"{side}-topic", "partition": 0,
                                            "end_offset": end})


def test_translation_failover_and_coverage(spark, tmp_path):
    t = Tables()
    flow_rows(t, "east", "west",
              [("orders", 0, u, d) for u, d in SYNCS],
              [("a", "orders", 0, 150, 145), ("b", "orders", 0, 250, 215), ("c", "orders", 0, 200, 170)],
              [("a", "orders", 0, 150), ("b", "orders", 0, 300), ("c", "orders", 0, 205), ("d", "orders", 0, 120),
               ("e", "orders", 1, 50)],
              [("a", "orders", 0, 145), ("b", "orders", 0, 215), ("c", "orders", 0, 100)], cp_end=5)
    flow_rows(t, "east", "north", [("logs", 0, 10, 10), ("logs", 0, 40, 38)], [],
              [("f", "logs", 0, 60)], [])
    flow_rows(t, "east", "south", [("m", 0, 5, 5)], [("g", "m", 0, 5, 5)], [("g", "m", 0, 5)], [("g", "m", 0, 5)])
    clusters = [SimpleNamespace(name="east", version="3.6", mirrors=(
        SimpleNamespace(source_cluster="west", source_alias="west", separator=".", mm2_version="3.4.0"),
        SimpleNamespace(source_cluster="north", source_alias="north", separator=".", mm2_version="3.7.1")))]
    counts, read = audited(spark, tmp_path, t, request(clusters=clusters, tolerance=10))
    got = sorted((v["check"], v["evidence"]["group"], v["evidence"]["offset_from"], v["evidence"]["offset_to"],
                  v["entry_count"], v["subject"]) for v in read["violations"])
    assert got == [("kafka.mm2_checkpoint_mismatch", "c", 170, 170, 5, "c orders-0 west->east"),
                   ("kafka.mm2_failover_redelivery", "c", 100, 165, 66, "c orders-0 west->east")]
    cov = sorted(((c["source"], c["group"], c["partition"], c["what"], c["offset_from"], c["offset_to"],
                   c["entry_count"]) for c in read["kafka_coverage"]), key=str)
    assert cov == sorted([
        ("west", "a", 0, "target group ahead of the syncs' bound, read order does not prove it", 125, 144, 20),
        ("west", None, 1, "no offset syncs for the partition: groups not translated", None, None, 1),
        ("west", None, 0, "checkpoints topic not read to its end: translation may miss records", None, None, 2),
        ("north", "f", 0, "no checkpoint for a translatable group offset", None, None, 0),
        ("south", None, None, "mirror flow not declared in the estate: the current translation rule (3.7.1) assumed",
         None, None, 0)], key=str)
    rows = {(r["source"], r["group"], r["partition"]): r for r in read["kafka_mm2_failover"]}
    assert len(rows) == 7 == counts["kafka_mm2_failover"]
    assert (rows[("south", "g", 0)]["rule"], rows[("south", "g", 0)]["translated"]) == ("3.5+", 5)
    a, b, c = rows[("west", "a", 0)], rows[("west", "b", 0)], rows[("west", "c", 0)]
    assert (a["rule"], a["translated"], a["bounds_low"], a["bounds_high"], a["skipped_min"], a["skipped_max"]) == (
        "pre-3.5", -1, 106, 125, 20, 39)
    assert (b["translated"], b["checkpoint_justified"], b["redelivered_min"], b["redelivered_max"],
            b["skipped_min"]) == (265, True, 0, 50, 0)
    assert (c["translated"], c["checkpoint_justified"], c["target_committed"], c["redelivered_min"]) == (
        170, False, 100, 66)
    assert rows[("west", "e", 1)]["syncs"] == 0 and rows[("west", "e", 1)]["translated"] is None
    f = rows[("north", "f", 0)]
    assert (f["rule"], f["translated"], f["checkpoint_upstream"], f["target_committed"]) == ("3.5+", 39, None, None)
    assert all(r["source_read_at_ms"] == T0 and r["target_read_at_ms"] in (T0 + 900, None)
               for r in rows.values())
