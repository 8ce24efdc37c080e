"""The MirrorMaker 2 part of the Kafka audit job over hand-built kafka_mm2_* tables: a pre-3.4.1 flow whose latest
sync overshot (KAFKA-12468), a checkpoint no sync explains, a redelivery beyond the tolerance, a partition without
syncs, a checkpoints topic not read to its end, and a 3.4.1+ flow missing a checkpoint; and what each read order of
the groups proves: a skip only from a target read before the source read, a redelivery only from a target read
after it (the reader's order target, source, target again proves both, each from its own target read)."""
from __future__ import annotations

from types import SimpleNamespace

from tests.kafka.transforms.test_audit import T0, Tables, audited, request

SYNCS = [(100, 100), (110, 105), (160, 125), (200, 165)]     # upstream 111..159 held 20 unreplicated markers


SOURCE_FIRST = {"source": (T0, T0 + 400), "target": (T0 + 500, T0 + 900)}


def flow_rows(t: Tables, cluster, alias, syncs, checkpoints, source, target, cp_end=None, read=None,
              target_after=()):
    """`read`: {read: (started, finished)} of the groups' rows (default: the source read first); `target_after`:
    the target groups read again."""
    read = read or SOURCE_FIRST
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
    for side, rows_ in (("source", source), ("target", target), ("target_after", target_after)):
        for group, topic, p, offset in rows_:
            t.rows["kafka_mm2_groups"].append({
                **flow, "side": side, "group": group, "topic": topic if side == "source" else f"{alias}.{topic}",
                "partition": p, "offset": offset, "read_started_at_ms": read[side][0],
                "read_finished_at_ms": read[side][1]})
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
    flow_rows(t, "east", "south", [("m", 0, 5, 5)], [("g", "m", 0, 5, 5)], [("g", "m", 0, 5), ("g", "n", 0, 9)],
              [("g", "m", 0, 5)])      # topic n is not mirrored: nothing on the target speaks for it, no row
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
    assert (rows[("south", "g", 0)]["rule"], rows[("south", "g", 0)]["translated"]) == ("3.4.1+", 5)
    a, b, c = rows[("west", "a", 0)], rows[("west", "b", 0)], rows[("west", "c", 0)]
    assert (a["rule"], a["translated"], a["bounds_low"], a["bounds_high"], a["skipped_min"], a["skipped_max"]) == (
        "pre-3.4.1", -1, 106, 125, 20, 39)
    assert (b["translated"], b["checkpoint_justified"], b["redelivered_min"], b["redelivered_max"],
            b["skipped_min"]) == (265, True, 0, 50, 0)
    assert (c["translated"], c["checkpoint_justified"], c["target_committed"], c["redelivered_min"]) == (
        170, False, 100, 66)
    assert rows[("west", "e", 1)]["syncs"] == 0 and rows[("west", "e", 1)]["translated"] is None
    f = rows[("north", "f", 0)]
    assert (f["rule"], f["translated"], f["checkpoint_upstream"], f["target_committed"]) == ("3.4.1+", 39, None, None)
    # the instants the rules judged by: the earlier side at its read's start, the later at its end; none for a
    # group on one side only (nothing to order)
    assert {(r["group"], r["source_read_at_ms"], r["target_read_at_ms"]) for r in rows.values()} == {
        ("a", T0, T0 + 900), ("b", T0, T0 + 900), ("c", T0, T0 + 900), ("d", None, None), ("e", None, None),
        ("f", None, None), ("g", T0, T0 + 900)}


ORDERS = {"tf": {"target": (T0, T0 + 400), "source": (T0 + 400, T0 + 900)},     # target first, no second read
          "sf": {"source": (T0, T0 + 400), "target": (T0 + 400, T0 + 900)},     # source first
          "one": {"source": (T0, T0), "target": (T0, T0)},                      # one instant
          "shared": {"source": (T0, T0 + 900), "target": (T0, T0 + 900)},       # one pair for both (older raw)
          "overlap": {"target": (T0, T0 + 500), "source": (T0 + 400, T0 + 900)},
          # the reader's: target, source, target again
          "real": {"target": (T0, T0 + 300), "source": (T0 + 300, T0 + 600), "target_after": (T0 + 600, T0 + 900)},
          "lab": {"target": (T0, T0), "source": (T0, T0), "target_after": (T0, T0)},
          "late": {"target": (T0, T0 + 300), "source": (T0 + 300, T0 + 700), "target_after": (T0 + 600, T0 + 900)}}


def test_the_read_order_decides_what_is_proven(spark, tmp_path):
    t = Tables()
    for alias, read in ORDERS.items():
        # a: 20 messages past the latest sync's bound (a skip); c: 66 behind where 205 lands (a redelivery); where
        # the target is read again, a and c moved on by then (a: 150, c: 110) and e was not read again
        again = alias in ("real", "lab", "late")
        flow_rows(t, "east", alias, [("orders", 0, u, d) for u, d in SYNCS],
                  [("a", "orders", 0, 150, 145), ("c", "orders", 0, 205, 170)] + ([("e", "orders", 0, 205, 170)]
                                                                                  if again else []),
                  [("a", "orders", 0, 150), ("c", "orders", 0, 205)] + ([("e", "orders", 0, 205)] if again else []),
                  [("a", "orders", 0, 145), ("c", "orders", 0, 100)] + ([("e", "orders", 0, 100)] if again else []),
                  read=read, target_after=[("a", "orders", 0, 150), ("c", "orders", 0, 110)] if again else ())
    clusters = [SimpleNamespace(name="east", version="3.6", mirrors=tuple(
        SimpleNamespace(source_cluster=a, source_alias=a, separator=".", mm2_version="3.4.0") for a in ORDERS))]
    _, read = audited(spark, tmp_path, t, request(clusters=clusters, tolerance=10))
    found = sorted((v["evidence"]["source"], v["check"], v["evidence"]["group"], v["evidence"]["offset_from"],
                    v["evidence"]["offset_to"], v["entry_count"]) for v in read["violations"])
    # a skip from the first target read (145, not 150), a redelivery from the second (110, not 100)
    assert found == [("lab", "kafka.mm2_failover_redelivery", "c", 110, 165, 56),
                     ("lab", "kafka.mm2_failover_redelivery", "e", 100, 165, 66),
                     ("lab", "kafka.mm2_target_group_ahead", "a", 125, 144, 20),
                     ("late", "kafka.mm2_target_group_ahead", "a", 125, 144, 20),
                     ("one", "kafka.mm2_failover_redelivery", "c", 100, 165, 66),
                     ("one", "kafka.mm2_target_group_ahead", "a", 125, 144, 20),
                     ("real", "kafka.mm2_failover_redelivery", "c", 110, 165, 56),
                     ("real", "kafka.mm2_target_group_ahead", "a", 125, 144, 20),
                     ("sf", "kafka.mm2_failover_redelivery", "c", 100, 165, 66),
                     ("tf", "kafka.mm2_target_group_ahead", "a", 125, 144, 20)]
    # overlapping reads prove nothing; e, not read again, has only its first target read (before the source)
    unproven = sorted((c["source"], c["group"], c["entry_count"]) for c in read["kafka_coverage"])
    assert unproven == [("late", "c", 56), ("late", "e", 66), ("overlap", "a", 20), ("overlap", "c", 66),
                        ("real", "e", 66), ("sf", "a", 20), ("shared", "a", 20), ("shared", "c", 66), ("tf", "c", 66)]
    evidence = {(v["evidence"]["source"], v["check"]): v["evidence"] for v in read["violations"]}
    skip, redelivery = (evidence[("real", f"kafka.mm2_{c}")] for c in ("target_group_ahead", "failover_redelivery"))
    assert (skip["target_committed"], skip["target_read_at_ms"], skip["source_read_at_ms"]) == (145, T0, T0 + 600)
    assert (redelivery["target_committed"], redelivery["source_read_at_ms"], redelivery["target_read_at_ms"]) == (
        110, T0 + 300, T0 + 900)
    rows = {(r["source"], r["group"]): r for r in read["kafka_mm2_failover"]}
    assert (rows[("tf", "a")]["target_read_at_ms"], rows[("tf", "a")]["source_read_at_ms"]) == (T0, T0 + 900)
    assert rows[("overlap", "a")]["source_read_at_ms"] is None and rows[("overlap", "a")]["skipped_min"] == 20
    # the failover row: the latest target read and its redelivery, the skip the first read proves
    a, c, e = (rows[("real", g)] for g in "ace")
    assert (a["target_committed"], a["skipped_min"], c["target_committed"], c["redelivered_min"]) == (150, 20, 110, 56)
    assert (c["source_read_at_ms"], c["target_read_at_ms"]) == (T0 + 300, T0 + 900)
    assert (e["target_committed"], e["target_read_at_ms"], e["source_read_at_ms"]) == (100, T0, T0 + 600)
