"""MirrorMaker 2 part of the audit: kafka_mm2_* tables -> metrics/kafka_mm2_failover rows, findings and coverage.

Spark joins, per flow (target `cluster`, `source_alias`), each consumer group's committed offset on the source
(upstream topic), its committed offset on the target (the remote topic `<alias><separator><topic>`, renamed back)
and its LAST checkpoint per partition in topic order (MirrorClient.remoteConsumerOffsets), into one row per group
and upstream partition; the sync records come in topic order. The driver evaluates each upstream partition's
groups at once (mm2_eval.py).

Read order. kafka_mm2_groups rows carry their own side's [read_started, read_finished] (groups.json: the reader
reads the target side, then the source side, audit/collectors/kafka/mm2.py; older documents have one pair for both
sides). A target group's offset D is synced from checkpoints of earlier source offsets U and both only grow, so:
- a skip (D past where U lands downstream) is proven only when the target read finished no later than the source
  read started: D(t1) <= position(U(t1)) <= position(U(t2)) would have to hold for t1 <= t2;
- a redelivery (D below it) only when the source read finished no later than the target read started (D may have
  advanced after an earlier target read: then the count is an upper bound, not a finding).
evaluate_group (audit/domain/kafka/mm2.py) takes one instant per side and judges a skip when target <= source, a
redelivery when source <= target; `judging_instants` gives it the outer ends of the two reads (the earlier side at
its start, the later at its end: equal only when both reads were one instant, as in the lab) and no instants when
the reads overlap or a side's are unknown, so neither is judged and both stay coverage. metrics/kafka_mm2_failover's
source_read_at_ms / target_read_at_ms are these instants (null: no read order known)."""
from __future__ import annotations

import os
from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from audit.domain.kafka.mm2 import GroupPartition, Mm2Settings, rule_for_version
from audit.transforms.common import has_table
from audit.transforms.kafka import audit_rows as rows
from audit.transforms.kafka.mm2_eval import NULL, Groups, evaluate, judged, needs_rules
from audit.transforms.kafka.state import table
from audit.transforms.kafka.tables import MM2_CHECKPOINTS, MM2_GROUPS, MM2_OFFSETS, MM2_SYNCS

LATEST = "3.7.1"        # no declared version: the current OffsetSyncStore (audit/config/kafka.py: "3.5+")
FLOW = ["cluster", "source_alias"]
KEY = FLOW + ["group", "topic", "partition"]


def flows(clusters: Iterable) -> dict[tuple[str, str], tuple[str, str]]:
    """(target cluster, source alias) -> (separator, version) as the estate declares them."""
    out = {}
    for c in clusters:
        for m in getattr(c, "mirrors", ()) or ():
            alias = m.source_alias or m.source_cluster
            out[(c.name, alias)] = (m.separator or ".", m.mm2_version or LATEST)
    return out


def group_partitions(spark: SparkSession, tables_dir: str, declared: dict) -> DataFrame:
    groups = table(spark, tables_dir, MM2_GROUPS).where(F.col("offset").isNotNull())
    prefixes = spark.createDataFrame([(c, a, a + sep) for (c, a), (sep, _) in declared.items()],
                                     "cluster string, source_alias string, prefix string")
    source = groups.where(F.col("side") == "source").select(
        *KEY, F.col("offset").alias("upstream_committed"),
        F.col("read_started_at_ms").alias("source_read_started_at_ms"),
        F.col("read_finished_at_ms").alias("source_read_finished_at_ms"))

    def renamed_back(df: DataFrame) -> DataFrame:
        # undeclared flows: DefaultReplicationPolicy's "." separator
        p = F.coalesce(F.col("prefix"), F.concat(F.col("source_alias"), F.lit(".")))
        return (df.join(F.broadcast(prefixes), FLOW, "left")
                .where(F.col("topic").startswith(p))
                .withColumn("topic", F.expr("substring(topic, length(coalesce(prefix, source_alias || '.')) + 1)"))
                .drop("prefix"))

    target = renamed_back(groups.where(F.col("side") == "target")).select(
        *KEY, F.col("offset").alias("target_committed"),
        F.col("read_started_at_ms").alias("target_read_started_at_ms"),
        F.col("read_finished_at_ms").alias("target_read_finished_at_ms"))
    cps = table(spark, tables_dir, MM2_CHECKPOINTS).where(F.col("group").isNotNull())
    last = (renamed_back(cps).groupBy(*KEY).agg(F.max_by(
        F.struct("upstream_offset", "downstream_offset"), F.struct("record_partition", "record_offset")).alias("cp"))
        .select(*KEY, F.col("cp.upstream_offset").alias("checkpoint_upstream"),
                F.col("cp.downstream_offset").alias("checkpoint_downstream")))
    return source.join(target, KEY, "full").join(last, KEY, "full")


def sync_records(spark: SparkSession, tables_dir: str) -> pa.Table:
    syncs = table(spark, tables_dir, MM2_SYNCS).where(
        F.col("upstream_offset").isNotNull() & F.col("downstream_offset").isNotNull())
    return syncs.select(*FLOW, "topic", "partition", "upstream_offset", "downstream_offset", "record_partition",
                        "record_offset").toArrow()


def unread_topics(spark: SparkSession, tables_dir: str) -> list[dict]:
    """Coverage: internal topics (offset-syncs, checkpoints) whose records end before the end offset read."""
    ends = table(spark, tables_dir, MM2_OFFSETS).where(F.col("side").isin("offset-syncs", "checkpoints"))
    got = []
    for name, side in ((MM2_SYNCS, "offset-syncs"), (MM2_CHECKPOINTS, "checkpoints")):
        got.append(table(spark, tables_dir, name).groupBy(*FLOW, F.col("record_partition").alias("partition"))
                   .agg(F.max("record_offset").alias("last")).withColumn("side", F.lit(side)))
    read = got[0].unionByName(got[1])
    short = (ends.join(read, FLOW + ["side", "partition"], "left")
             .where(F.col("end_offset") > F.coalesce(F.col("last") + 1, F.lit(0))).collect())
    return [{"cluster": r["cluster"], "source": r["source_alias"], "topic": r["topic"], "partition": r["partition"],
             "what": f"{r['side']} topic not read to its end: translation may miss records",
             "entry_count": r["end_offset"] - (0 if r["last"] is None else r["last"] + 1),
             "detail": {"end_offset": r["end_offset"], "last_record_offset": r["last"]}} for r in short]


def judging_instants(target_started: np.ndarray, target_finished: np.ndarray, source_started: np.ndarray,
                     source_finished: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(source_at, target_at) per row for evaluate_group (module doc "Read order"); NULL where no order is known.
    Target wholly first: (source finished, target started), so `target <= source` holds and `source <= target`
    only if both reads were one instant; source wholly first: (source started, target finished)."""
    known = ((target_started != NULL) & (target_finished != NULL) & (source_started != NULL)
             & (source_finished != NULL))
    target_first = known & (target_finished <= source_started)
    source_first = known & (source_finished <= target_started) & ~target_first
    source_at = np.where(target_first, source_finished, np.where(source_first, source_started, NULL))
    target_at = np.where(target_first, target_started, np.where(source_first, target_finished, NULL))
    return source_at, target_at


def _ints(t: pa.Table, name: str) -> np.ndarray:
    return pc.fill_null(t.column(name).cast(pa.int64()), NULL).to_numpy()


def _syncs_by_partition(syncs: pa.Table) -> dict[tuple, list[tuple[int, int]]]:
    if not syncs.num_rows:
        return {}
    t = syncs.sort_by([(c, "ascending") for c in (*FLOW, "topic", "partition", "record_partition",
                                                  "record_offset")])
    keys = zip(*(t.column(c).to_pylist() for c in (*FLOW, "topic", "partition")))
    out: dict[tuple, list] = {}
    for k, u, d in zip(keys, t.column("upstream_offset").to_pylist(), t.column("downstream_offset").to_pylist()):
        out.setdefault(k, []).append((u, d))
    return out


def evaluate_all(gp: pa.Table, syncs: dict, declared: dict, run_id: str, tolerance: int) -> dict:
    """{"failover": Arrow table (MM2_FAILOVER), "violations": rows, "coverage": rows}."""
    gp = gp.sort_by([(c, "ascending") for c in (*FLOW, "topic", "partition", "group")])
    n = gp.num_rows
    cols = {c: _ints(gp, c) for c in ("upstream_committed", "target_committed", "checkpoint_upstream",
                                      "checkpoint_downstream")}
    cols["source_read_at_ms"], cols["target_read_at_ms"] = judging_instants(*(_ints(gp, c) for c in (
        "target_read_started_at_ms", "target_read_finished_at_ms", "source_read_started_at_ms",
        "source_read_finished_at_ms")))
    keys = list(zip(*(gp.column(c).to_pylist() for c in (*FLOW, "topic", "partition"))))
    groups = gp.column("group").to_pylist()
    result = {name: np.full(n, NULL, dtype=np.int64) for name in (
        "translated", "bounds_low", "bounds_high", "redelivered_min", "redelivered_max", "skipped_min",
        "skipped_max")}
    result.update({"exact": np.zeros(n, dtype=bool), "checkpoint_justified": np.ones(n, dtype=bool)})
    rule_col, sync_count = [None] * n, np.zeros(n, dtype=np.int64)
    settings = Mm2Settings(tolerance)
    found, coverage = [], []
    starts = [0] + [i for i in range(1, n) if keys[i] != keys[i - 1]] + [n]
    for cluster, alias in sorted({k[:2] for k in keys} - set(declared)):
        coverage.append({"cluster": cluster, "source": alias, "what": "mirror flow not declared in the estate: "
                         f"the current translation rule ({LATEST}) assumed", "entry_count": 0, "detail": {}})
    for a, b in zip(starts, starts[1:]):
        if a == b:
            continue
        cluster, alias, topic, partition = keys[a]
        version = declared.get((cluster, alias), (".", LATEST))[1]
        mine = syncs.get(keys[a], [])
        g = Groups(*(cols[c][a:b] for c in ("upstream_committed", "target_committed", "checkpoint_upstream",
                                            "checkpoint_downstream")))
        res = evaluate(mine, version, g)
        for name, values in res.items():
            result[name][a:b] = values
        rule_col[a:b] = [rule_for_version(version)] * (b - a)
        sync_count[a:b] = len(mine)
        if not mine and (g.upstream != NULL).any():
            coverage.append({"cluster": cluster, "source": alias, "topic": topic, "partition": partition,
                             "what": "no offset syncs for the partition: groups not translated",
                             "entry_count": int((g.upstream != NULL).sum()), "detail": {}})
        flagged = np.flatnonzero(needs_rules(res, tolerance))
        if flagged.size:
            base = GroupPartition(cluster, alias, "", topic, partition, version, tuple(mine))
            for f in judged(base, g, flagged, cols["source_read_at_ms"][a:b], cols["target_read_at_ms"][a:b],
                            settings):
                f["group"] = groups[a + f.pop("_row")]
                found.append(f)
        missing = np.flatnonzero((g.cp_upstream == NULL) & (res["translated"] >= 0))
        for i in missing.tolist():
            coverage.append({"cluster": cluster, "source": alias, "group": groups[a + i], "topic": topic,
                             "partition": partition, "what": "no checkpoint for a translatable group offset",
                             "entry_count": 0, "detail": {"upstream_committed": int(g.upstream[i]),
                                                          "translated": int(res["translated"][i])}})
    violations, covered = rows.split(run_id, found)
    failover = _failover_table(gp, cols, result, rule_col, sync_count, run_id)
    return {"failover": failover, "violations": violations,
            "coverage": covered + [rows.coverage(run_id, c) for c in coverage]}


def _failover_table(gp: pa.Table, cols: dict, result: dict, rule_col: list, sync_count: np.ndarray,
                    run_id: str) -> pa.Table:
    schema = rows.arrow_schema(rows.MM2_FAILOVER)

    def ints(a: np.ndarray, t=pa.int64()) -> pa.Array:
        return pa.array(a, mask=a == NULL).cast(t)

    data = {"run_id": pa.array([run_id] * gp.num_rows, pa.string()), "cluster": gp.column("cluster"),
            "source": gp.column("source_alias"), "group": gp.column("group"), "topic": gp.column("topic"),
            "partition": gp.column("partition"), "rule": pa.array(rule_col, pa.string()),
            "syncs": pa.array(sync_count).cast(pa.int32()),
            "upstream_committed": ints(cols["upstream_committed"]), "translated": ints(result["translated"]),
            "checkpoint_upstream": ints(cols["checkpoint_upstream"]),
            "checkpoint_downstream": ints(cols["checkpoint_downstream"]),
            "checkpoint_justified": pa.array(result["checkpoint_justified"]),
            "target_committed": ints(cols["target_committed"]), "bounds_low": ints(result["bounds_low"]),
            "bounds_high": ints(result["bounds_high"]), "exact": pa.array(result["exact"]),
            **{k: ints(result[k]) for k in ("redelivered_min", "redelivered_max", "skipped_min", "skipped_max")},
            "source_read_at_ms": ints(cols["source_read_at_ms"]), "target_read_at_ms": ints(cols["target_read_at_ms"])}
    return pa.Table.from_arrays([data[f.name].cast(f.type) for f in schema], schema=schema)


def audit(spark: SparkSession, tables_dir: str, run_id: str, clusters: Iterable, tolerance: int) -> dict:
    """{"failover": Arrow table, "violations": rows, "coverage": rows}; nothing to do without MirrorMaker 2 tables."""
    if not any(has_table(os.path.join(tables_dir, name)) for name in (MM2_SYNCS, MM2_CHECKPOINTS, MM2_GROUPS)):
        return {"failover": rows.arrow_schema(rows.MM2_FAILOVER).empty_table(), "violations": [], "coverage": []}
    declared = flows(clusters)
    gp = group_partitions(spark, tables_dir, declared).toArrow()
    syncs = _syncs_by_partition(sync_records(spark, tables_dir))
    out = evaluate_all(gp, syncs, declared, run_id, tolerance)
    out["coverage"] += [rows.coverage(run_id, c) for c in unread_topics(spark, tables_dir)]
    return out
