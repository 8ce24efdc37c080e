"""One topic's Arrow tables (its pulsar_entries rows, its tagged state rows) -> domain objects, and the domain's
rows back to one tagged Arrow table. Columns are converted once per topic (numpy, dictionary encoding);
only marker rows and cursor rows become Python objects."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from audit.domain.pulsar.acked import CursorAcks
from audit.domain.pulsar.consumption import keep_consumed
from audit.domain.pulsar.positions import Position
from audit.domain.pulsar.topic import ClusterSide, Cursor, Settings, TopicAudit, audit_topic
from audit.domain.pulsar.window import NONE, Marker, Window, empty_window

# state rows: kind tags (audit/transforms/pulsar_audit.py builds them)
TOPIC, FIRST_LEDGER, GAPS, CURSOR, REPLICATION, SUBSCRIPTION = (
    "topic", "first_ledger", "gaps", "cursor", "replication", "subscription")
FAILOVER, SNAPSHOTS, VIOLATION = "failover", "snapshots", "violation"


def _ints(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return pc.fill_null(col, NONE).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def _codes(col, vocabulary: dict[str, int]) -> np.ndarray:
    """Codes of a string column in a vocabulary shared across the topic (null -> NONE)."""
    enc = pc.dictionary_encode(col).combine_chunks()
    mapping = np.array([vocabulary.setdefault(v, len(vocabulary)) for v in enc.dictionary.to_pylist()] + [NONE],
                       dtype=np.int64)
    idx = pc.fill_null(enc.indices, len(enc.dictionary)).to_numpy(zero_copy_only=False)
    return mapping[idx]


def _pos(ledger, entry) -> Position | None:
    return None if ledger is None or entry is None else Position(int(ledger), int(entry))


def _markers(t: pa.Table) -> list[Marker]:
    rows = np.flatnonzero(t.column("marker_type").is_valid().to_numpy(zero_copy_only=False))
    if not rows.size:
        return []
    sub = t.take(pa.array(rows)).to_pylist()
    return [Marker(r["marker_type"], Position(r["ledger_id"], r["entry_id"]), r["publish_time_ms"],
                   r["replicated_from"], r["snapshot_id"], r["marker_source_cluster"],
                   _pos(r["marker_local_ledger"], r["marker_local_entry"]), r["marker_subscription"],
                   {c["cluster"]: Position(c["ledger_id"], c["entry_id"]) for c in r["marker_clusters"] or ()})
            for r in sub]


def _window(cluster: str, t: pa.Table, clusters: dict[str, int], producers: dict[str, int]) -> Window:
    t = t.sort_by([("ledger_id", "ascending"), ("entry_id", "ascending")])
    origin = _codes(pc.coalesce(t.column("replicated_from"), pa.scalar(cluster)), clusters)
    restricted = np.flatnonzero(t.column("replicate_to").is_valid().to_numpy(zero_copy_only=False))
    replicate_to = {}
    if restricted.size:
        for i, to in zip(restricted.tolist(), t.column("replicate_to").take(pa.array(restricted)).to_pylist()):
            replicate_to[i] = tuple(to)
    return Window(
        cluster=cluster, cluster_code=clusters.setdefault(cluster, len(clusters)),
        ledger=_ints(t.column("ledger_id")), entry=_ints(t.column("entry_id")),
        marker=t.column("marker_type").is_valid().to_numpy(zero_copy_only=False),
        origin=origin, source_ledger=_ints(t.column("source_position_ledger")),
        source_entry=_ints(t.column("source_position_entry")), producer=_codes(t.column("producer_name"), producers),
        sequence=_ints(t.column("sequence_id")), publish_time=_ints(t.column("publish_time_ms")),
        markers=_markers(t), replicate_to=replicate_to)


def _cursors(rows: pa.Table) -> list[tuple[str, Cursor]]:
    """(cluster, Cursor) per cursor row; the individually-deleted ranges stay numpy columns."""
    ranges = rows.column("individually_deleted").combine_chunks()
    offsets = ranges.offsets.to_numpy()
    flat = ranges.values
    cols = [_ints(flat.field(f)) for f in ("from_ledger", "from_entry", "to_ledger", "to_entry")]
    out = []
    for i, r in enumerate(rows.drop_columns(["individually_deleted"]).to_pylist()):
        a, b = (int(offsets[i]), int(offsets[i + 1])) if ranges[i].is_valid else (0, 0)
        acks = CursorAcks(Position(r["mark_delete_ledger"], r["mark_delete_entry"]),
                          _pos(r["read_ledger"], r["read_entry"]), *(c[a:b] for c in cols))
        out.append((r["cluster"], Cursor(r["name"], r["cursor_kind"], acks, r["remote_cluster"],
                                         bool(r["replicated"]))))
    return out


def sides_of(entries: pa.Table, state: pa.Table) -> tuple[str, dict[str, ClusterSide]]:
    kinds = state.column("kind")
    topic = (state.column("topic")[0] if state.num_rows else entries.column("topic")[0]).as_py()
    names = sorted(set(state.column("cluster").to_pylist()) | set(pc.unique(entries.column("cluster")).to_pylist()))
    clusters: dict[str, int] = {c: i for i, c in enumerate(names)}
    producers: dict[str, int] = {}
    sides: dict[str, ClusterSide] = {}
    for c in names:
        rows = entries.filter(pc.equal(entries.column("cluster"), c))
        w = _window(c, rows, clusters, producers) if rows.num_rows else empty_window(c, clusters[c])
        sides[c] = ClusterSide(c, w, cursors={})
    def of_kind(kind: str) -> pa.Table:
        return state.filter(pc.equal(kinds, kind))

    for r in of_kind(TOPIC).to_pylist():
        s = sides[r["cluster"]]
        s.dump_from = _pos(r["dump_from_ledger"], r["dump_from_entry"])
        s.dump_to = _pos(r["dump_to_ledger"], r["dump_to_entry"])
        s.complete = bool(r["dump_complete"])
    for r in of_kind(GAPS).to_pylist():
        if r["gap_count"]:
            sides[r["cluster"]].complete = False
    for r in of_kind(FIRST_LEDGER).to_pylist():
        s = sides[r["cluster"]]
        s.from_start = s.dump_from is not None and s.dump_from < Position(r["first_ledger"], 0)
    for cluster, cursor in _cursors(of_kind(CURSOR)):
        sides[cluster].cursors[cursor.name] = cursor
    for r in of_kind(REPLICATION).to_pylist():
        sides[r["cluster"]].replication[r["remote_cluster"]] = (r["connected"], r["replication_backlog"])
    repl: dict[str, set[str]] = {}
    for r in of_kind(SUBSCRIPTION).to_pylist():
        if r["replicated"]:
            repl.setdefault(r["cluster"], set()).add(r["name"])
    for c, subs in repl.items():
        sides[c].replicated_subscriptions = frozenset(subs)
    return topic, sides


def audit_group(entries: pa.Table, state: pa.Table, settings: Settings, schema: pa.Schema) -> pa.Table:
    """The cogroup function's body: every output row of one topic, tagged by `kind`."""
    if state.num_rows == 0 and entries.num_rows == 0:
        return schema.empty_table()
    topic, sides = sides_of(entries, state)
    result: TopicAudit = audit_topic(topic, sides, settings)
    consumed = {(r["cluster"], topic, r["name"]): r["consumed_here"]
                for r in state.filter(pc.equal(state.column("kind"), SUBSCRIPTION)).to_pylist()}
    rows = ([{"kind": FAILOVER, **r} for r in result.failover] + [{"kind": SNAPSHOTS, **r} for r in result.snapshots]
            + [{"kind": VIOLATION, **r} for r in keep_consumed(result.findings, consumed)])
    return pa.Table.from_pylist(rows, schema=schema)
