"""MirrorMaker 2 part of the audit: kafka_mm2_* tables -> metrics/kafka_mm2_failover rows, findings and coverage.

Spark joins, per flow (target `cluster`, `source_alias`), each consumer group's committed offset on the source
(upstream topic), its committed offset on the target (the remote topic `<alias><separator><topic>`, renamed back)
and its LAST checkpoint per partition in topic order (MirrorClient.remoteConsumerOffsets), into one row per group
and upstream partition; the sync records come in topic order. The driver evaluates each upstream partition's
groups at once (mm2_eval.py).

Read order. groups.json holds three reads, each with its own [read_started, read_finished]: the target groups (t1),
the source groups (t2), the target groups again (t3) (audit/systems/kafka/collect/mm2.py; kafka_mm2_groups rows with
side "target", "source", "target_after"; older documents have no "target_after" and may have one pair of instants
for every read). A target group's offset D is synced from checkpoints of EARLIER source offsets U and both only
grow, so:
- a skip (D past where U lands downstream) is proven from D(t1) and U(t2) when the target read finished no later
  than the source read started: D(t1) <= position(U(t1)) <= position(U(t2)) would have to hold;
- a redelivery (D below it) from U(t2) and D(t3) when the source read finished no later than the second target
  read started: U(t3) >= U(t2), so position(U(t2)) - D(t3) is a lower bound of what a failover at t3 redelivers.
  D from an earlier read gives only an upper bound (it may have advanced since).
evaluate_group (audit/systems/kafka/domain/mm2.py) takes one target offset and one instant per side and judges a skip
when target <= source, a redelivery when source <= target. So each group-partition is judged twice: for skips (and the
checkpoint check) with D(t1) and the first read's instants, never judging a redelivery there; for redeliveries
with D(t3) and the second read's instants (D(t1) and its instants when a group has no second read, as in older
documents). `judging_instants` gives each pair of reads the outer ends (the earlier read at its start, the later at
its end: equal only when both reads were one instant, as in the lab) and no instants when the reads overlap or one
has none, so nothing is judged and the counts stay coverage. metrics/kafka_mm2_failover is "what a failover after
the reads sees": target_committed = D(t3) (else D(t1)), redelivered_* from it, source_read_at_ms /
target_read_at_ms the redelivery judgement's instants (null: no read order known); skipped_* come from D(t1), the
only read that can prove one (the skip finding's evidence carries D(t1) and its instants)."""
from __future__ import annotations

import os
import sys
from dataclasses import fields, replace
from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from audit.systems.kafka.domain.mm2 import GroupPartition, Mm2Settings, rule_for_version
from audit.systems.kafka.domain.subjects import flow_wanted
from audit.transforms.common import has_table
from audit.systems.kafka.transforms import audit_rows as rows
from audit.systems.kafka.transforms.mm2_eval import NULL, Groups, evaluate, judged, needs_rules
from audit.systems.kafka.transforms.state import table
from audit.systems.kafka.transforms.tables import MM2_CHECKPOINTS, MM2_GROUPS, MM2_OFFSETS, MM2_SYNCS

LATEST = "3.7.1"        # no declared version: the current OffsetSyncStore (audit/systems/kafka/config.py: "3.4.1+")
FLOW = ["cluster", "source_alias"]
KEY = FLOW + ["group", "topic", "partition"]
READS = {"source": "upstream_committed", "target": "target_committed", "target_after": "target_after_committed"}
REDELIVERED = ("redelivered_min", "redelivered_max")
NO_REDELIVERY = Mm2Settings(redelivery_tolerance=sys.maxsize)     # the skip judgement leaves redeliveries alone


def flows(clusters: Iterable) -> dict[tuple[str, str], tuple[str, str]]:
    """(target cluster, source alias) -> (separator, version) as the estate declares them."""
    out = {}
    for c in clusters:
        for m in getattr(c, "mirrors", ()) or ():
            alias = m.source_alias or m.source_cluster
            out[(c.name, alias)] = (m.separator or ".", m.mm2_version or LATEST)
    return out


def group_partitions(spark: SparkSession, tables_dir: str, declared: dict) -> DataFrame:
    """One row per (flow, group, upstream topic, partition): per read of READS its committed offset and
    `<read>_read_started_at_ms` / `_finished_at_ms`, and the last checkpoint."""
    groups = table(spark, tables_dir, MM2_GROUPS).where(F.col("offset").isNotNull())
    prefixes = spark.createDataFrame([(c, a, a + sep) for (c, a), (sep, _) in declared.items()],
                                     "cluster string, source_alias string, prefix string")

    def renamed_back(df: DataFrame) -> DataFrame:
        # undeclared flows: DefaultReplicationPolicy's "." separator
        p = F.coalesce(F.col("prefix"), F.concat(F.col("source_alias"), F.lit(".")))
        return (df.join(F.broadcast(prefixes), FLOW, "left")
                .where(F.col("topic").startswith(p))
                .withColumn("topic", F.expr("substring(topic, length(coalesce(prefix, source_alias || '.')) + 1)"))
                .drop("prefix"))

    reads = groups.where(F.col("side") == "source").unionByName(
        renamed_back(groups.where(F.col("side").isin("target", "target_after"))))
    # one aggregation rather than a join per read (cheaper); each read has one row per group-partition
    read = F.struct("offset", "read_started_at_ms", "read_finished_at_ms")
    committed = reads.groupBy(*KEY).agg(*(F.max(F.when(F.col("side") == side, read)).alias(side) for side in READS))
    committed = committed.select(*KEY, *(c for side, name in READS.items() for c in (
        F.col(f"{side}.offset").alias(name), F.col(f"{side}.read_started_at_ms").alias(f"{side}_read_started_at_ms"),
        F.col(f"{side}.read_finished_at_ms").alias(f"{side}_read_finished_at_ms"))))
    cps = table(spark, tables_dir, MM2_CHECKPOINTS).where(F.col("group").isNotNull())
    last = (renamed_back(cps).groupBy(*KEY).agg(F.max_by(
        F.struct("upstream_offset", "downstream_offset"), F.struct("record_partition", "record_offset")).alias("cp"))
        .select(*KEY, F.col("cp.upstream_offset").alias("checkpoint_upstream"),
                F.col("cp.downstream_offset").alias("checkpoint_downstream")))
    # the remote partition's log start: a failover cannot resume below it (offsets retention deleted)
    offs = table(spark, tables_dir, MM2_OFFSETS).where(F.col("side") == "target")
    offs = (renamed_back(offs).groupBy(*FLOW, "topic", "partition")
            .agg(F.max("log_start_offset").alias("target_log_start")))
    return committed.join(last, KEY, "full").join(offs, FLOW + ["topic", "partition"], "left")


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
    """(source_at, target_at) per row for evaluate_group from one target read and the source read (module doc
    "Read order"); NULL where no order is known. Target wholly first: (source finished, target started), so
    `target <= source` holds and `source <= target` only if both reads were one instant; source wholly first:
    (source started, target finished)."""
    known = ((target_started != NULL) & (target_finished != NULL) & (source_started != NULL)
             & (source_finished != NULL))
    target_first = known & (target_finished <= source_started)
    source_first = known & (source_finished <= target_started) & ~target_first
    source_at = np.where(target_first, source_finished, np.where(source_first, source_started, NULL))
    target_at = np.where(target_first, target_started, np.where(source_first, target_finished, NULL))
    return source_at, target_at


def _ints(t: pa.Table, name: str) -> np.ndarray:
    return pc.fill_null(t.column(name).cast(pa.int64()), NULL).to_numpy()


def first_sync_offsets(syncs: pa.Table) -> dict[tuple[str, str], int]:
    """(cluster, source alias) -> the lowest offset-syncs record offset read. Above 0, compaction or retention
    removed earlier syncs (MirrorMaker creates the topic compacted), which a checkpoint may have come from."""
    if not syncs.num_rows:
        return {}
    t = syncs.group_by(list(FLOW)).aggregate([("record_offset", "min")])
    return dict(zip(zip(*(t.column(c).to_pylist() for c in FLOW)), t.column("record_offset_min").to_pylist()))


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


def _judged_twice(base: GroupPartition, g: Groups, latest: np.ndarray, res: dict, tolerance: int,
                  settings: Mm2Settings, skip_at: list, redelivery_at: list) -> list[dict]:
    """The rules' findings and coverage for one partition's groups (module doc "Read order"): skips and the
    checkpoint check with D(t1) (g.target) and the first read's instants, no redelivery judged there; then
    redeliveries with the latest D, the checkpoint left out (judged already) and no skip possible (a redelivery
    above the tolerance puts D below the bounds)."""
    none = np.full(latest.size, NULL, dtype=np.int64)
    first = np.flatnonzero(needs_rules({**res, "redelivered_min": none}, tolerance))
    second = np.flatnonzero(needs_rules({"checkpoint_justified": np.ones(latest.size, dtype=bool),
                                         "skipped_min": none, "redelivered_min": res["redelivered_min"]}, tolerance))
    out = judged(base, g, first, *skip_at, NO_REDELIVERY) if first.size else []
    if second.size:
        out += judged(base, replace(g, target=latest, cp_upstream=none, cp_downstream=none), second, *redelivery_at,
                      settings)
    return out


def _mirrored(gp: pa.Table, syncs: dict) -> pa.Table:
    """The rows of upstream topics the flow mirrors: with sync records, a target group offset or a checkpoint on
    some partition. The source groups are read whole (every partition they committed, collectors/kafka/mm2.py),
    so a group also reading a topic the flow does not mirror brings partitions nothing on the target speaks for:
    neither a finding nor a gap. A partition of a mirrored topic without syncs stays (a gap: not translated)."""
    on_target = pc.fill_null(pc.or_(pc.or_(pc.is_valid(gp.column("target_committed")),
                                           pc.is_valid(gp.column("target_after_committed"))),
                                    pc.is_valid(gp.column("checkpoint_upstream"))), False).to_pylist()
    topics = list(zip(*(gp.column(c).to_pylist() for c in (*FLOW, "topic"))))
    mirrored = {k[:3] for k in syncs} | {k for k, seen in zip(topics, on_target) if seen}
    return gp.filter(pa.array([k in mirrored for k in topics], pa.bool_()))


def _subset(g: Groups, rows: np.ndarray, **changes) -> Groups:
    return replace(Groups(**{f.name: getattr(g, f.name)[rows] for f in fields(g)}), **changes)


def evaluate_all(gp: pa.Table, syncs: dict, declared: dict, run_id: str, tolerance: int,
                 first_sync: dict | None = None) -> dict:
    """{"failover": Arrow table (MM2_FAILOVER), "violations": rows, "coverage": rows}. `first_sync`: per flow the
    lowest offset-syncs record offset read (first_sync_offsets); a flow missing from it counts as read from 0."""
    first_sync = first_sync or {}
    gp = _mirrored(gp, syncs).sort_by([(c, "ascending") for c in (*FLOW, "topic", "partition", "group")])
    n = gp.num_rows
    cols = {c: _ints(gp, c) for c in (*READS.values(), "checkpoint_upstream", "checkpoint_downstream")}
    cols["target_log_start"] = (_ints(gp, "target_log_start") if "target_log_start" in gp.column_names
                                else np.full(n, NULL, dtype=np.int64))
    read = {side: [_ints(gp, f"{side}_read_{end}_at_ms") for end in ("started", "finished")] for side in READS}
    # the redelivery judgement's target read: the second, else the first (a group without a second read)
    read_again = cols["target_after_committed"] != NULL
    cols["latest_committed"] = np.where(read_again, cols["target_after_committed"], cols["target_committed"])
    latest_read = [np.where(read_again, a, b) for a, b in zip(read["target_after"], read["target"])]
    skip_at = judging_instants(*read["target"], *read["source"])
    cols["source_read_at_ms"], cols["target_read_at_ms"] = judging_instants(*latest_read, *read["source"])
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
                                            "checkpoint_downstream", "target_log_start")))
        res = evaluate(mine, version, g)
        latest = cols["latest_committed"][a:b]
        moved = np.flatnonzero(latest != g.target)
        if moved.size:        # redeliveries from the latest target read where it differs from the first
            redone = evaluate(mine, version, _subset(g, moved, target=latest[moved]))
            for k in REDELIVERED:
                res[k][moved] = redone[k]
        for name, values in res.items():
            result[name][a:b] = values
        rule_col[a:b] = [rule_for_version(version)] * (b - a)
        sync_count[a:b] = len(mine)
        if not mine and (g.upstream != NULL).any():
            coverage.append({"cluster": cluster, "source": alias, "topic": topic, "partition": partition,
                             "what": "no offset syncs for the partition: groups not translated",
                             "entry_count": int((g.upstream != NULL).sum()), "detail": {}})
        base = GroupPartition(cluster, alias, "", topic, partition, version, tuple(mine),
                              syncs_complete=first_sync.get((cluster, alias), 0) == 0)
        for f in _judged_twice(base, g, latest, res, tolerance, settings,
                               [x[a:b] for x in skip_at], [cols["source_read_at_ms"][a:b],
                                                           cols["target_read_at_ms"][a:b]]):
            f["group"] = groups[a + f.pop("_row")]
            found.append(f)
        missing = np.flatnonzero((g.cp_upstream == NULL) & (res["translated"] >= 0))
        for i in missing.tolist():
            coverage.append({"cluster": cluster, "source": alias, "group": groups[a + i], "topic": topic,
                             "partition": partition, "what": "no checkpoint for a translatable group offset",
                             "entry_count": 0, "detail": {"upstream_committed": int(g.upstream[i]),
                                                          "translated": int(res["translated"][i])}})
    violations, covered = rows.split(run_id, found)
    failover = _failover_table(gp, {**cols, "target_committed": cols["latest_committed"]}, result, rule_col,
                               sync_count, run_id)
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


def in_scope(gp: pa.Table, declared: dict, scope) -> pa.Table:
    """The group-partitions an incident check's `scope` wants: by the upstream topic-partition or the remote one on
    the target (`<alias><separator><topic>`, the flow's declared separator)."""
    keys = zip(*(gp.column(c).to_pylist() for c in (*FLOW, "topic", "partition")))
    keep = [topic is not None and partition is not None and
            flow_wanted(scope, topic, partition, alias, declared.get((cluster, alias), (".",))[0])
            for cluster, alias, topic, partition in keys]
    return gp.filter(pa.array(keep, pa.bool_()))


def audit(spark: SparkSession, tables_dir: str, run_id: str, clusters: Iterable, tolerance: int,
          scope=None) -> dict:
    """{"failover": Arrow table, "violations": rows, "coverage": rows}; nothing to do without MirrorMaker 2 tables.
    `scope`: an incident check's audit.contracts.Scope; with subject patterns the groups and syncs are read whole
    and only the wanted group-partitions (in_scope) are judged; an internal topic not read to its end is a gap of
    the flows that still have one."""
    if not any(has_table(os.path.join(tables_dir, name)) for name in (MM2_SYNCS, MM2_CHECKPOINTS, MM2_GROUPS)):
        return {"failover": rows.arrow_schema(rows.MM2_FAILOVER).empty_table(), "violations": [], "coverage": []}
    declared = flows(clusters)
    gp = group_partitions(spark, tables_dir, declared).toArrow()
    scoped = scope is not None and bool(scope.subjects)
    if scoped:
        gp = in_scope(gp, declared, scope)
    records = sync_records(spark, tables_dir)
    out = evaluate_all(gp, _syncs_by_partition(records), declared, run_id, tolerance, first_sync_offsets(records))
    unread = unread_topics(spark, tables_dir)
    if scoped:
        judged_flows = set(zip(*(gp.column(c).to_pylist() for c in FLOW)))
        unread = [c for c in unread if (c["cluster"], c["source"]) in judged_flows]
    out["coverage"] += [rows.coverage(run_id, c) for c in unread]
    return out
