"""One topic's Arrow tables -> domain objects, and the domain's rows back to one tagged Arrow table.

The entries side carries only numeric columns (what crosses from the JVM to Python row by row is the cost of the
whole job): names arrive as 64-bit hashes computed in Spark (xxhash64 of cluster, of the origin cluster, of the
producer), which serve as the identity codes (equal hash = equal name; a collision between two names of one
topic is ~n^2/2^64 and, for cluster names, checked). Marker payloads and replicate_to lists, rare, arrive on
the state side as EXTRA rows. Columns are converted once per topic; only marker, cursor and state rows
become Python objects."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from audit.systems.pulsar.domain.acked import CursorAcks
from audit.systems.pulsar.domain.consumption import keep_consumed
from audit.systems.pulsar.domain.positions import Position
from audit.systems.pulsar.domain.reads import PRIMARY, CursorRead
from audit.systems.pulsar.domain.topic import ClusterSide, Cursor, Settings, TopicAudit, audit_topic
from audit.systems.pulsar.domain.window import NONE, Marker, Window, empty_window

# state rows: kind tags (audit/systems/pulsar/transforms/audit.py builds them)
TOPIC, GAPS, CURSOR, REPLICATION, SUBSCRIPTION, EXTRA = (
    "topic", "gaps", "cursor", "replication", "subscription", "extra")
FAILOVER, SNAPSHOTS, VIOLATION, COVERAGE = "failover", "snapshots", "violation", "coverage"


def _ints(col) -> np.ndarray:
    return pc.fill_null(col, NONE).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def _pos(ledger, entry) -> Position | None:
    return None if ledger is None or entry is None else Position(int(ledger), int(entry))


def _marker(r: dict) -> Marker:
    return Marker(r["marker_type"], Position(r["ledger_id"], r["entry_id"]), r["publish_time_ms"],
                  r["replicated_from"], r["snapshot_id"], r["marker_source_cluster"],
                  _pos(r["marker_local_ledger"], r["marker_local_entry"]), r["marker_subscription"],
                  {c["cluster"]: Position(c["ledger_id"], c["entry_id"]) for c in r["marker_clusters"] or ()})


def _windows(entries: pa.Table, keys: dict[str, int], extras: list[dict]) -> dict[str, Window]:
    """Every cluster's window: rows sorted by (cluster, ledger, entry) once, then sliced."""
    cols = {n: _ints(entries.column(n)) for n in ("cluster_key", "ledger_id", "entry_id", "producer_key",
                                                  "sequence_id", "publish_time_ms", "origin_key",
                                                  "source_position_ledger", "source_position_entry")}
    marker = entries.column("marker_type").is_valid().to_numpy(zero_copy_only=False)
    order = np.lexsort((cols["entry_id"], cols["ledger_id"], cols["cluster_key"]))
    cols = {n: c[order] for n, c in cols.items()}
    marker = marker[order]
    out = {}
    for name, key in keys.items():
        a = int(np.searchsorted(cols["cluster_key"], key, side="left"))
        b = int(np.searchsorted(cols["cluster_key"], key, side="right"))
        if a == b:
            out[name] = empty_window(name, key)
            continue
        sl = {n: c[a:b] for n, c in cols.items()}
        mine = [r for r in extras if r["cluster"] == name]
        w = Window(name, key, sl["ledger_id"], sl["entry_id"], marker[a:b], sl["origin_key"],
                   sl["source_position_ledger"], sl["source_position_entry"], sl["producer_key"],
                   sl["sequence_id"], sl["publish_time_ms"],
                   markers=[_marker(r) for r in mine if r["marker_type"] is not None])
        for r in mine:
            if r["replicate_to"] is not None:
                row = w.index.count_below(Position(r["ledger_id"], r["entry_id"]))
                if row < len(w) and (w.ledger[row], w.entry[row]) == (r["ledger_id"], r["entry_id"]):
                    w.replicate_to[row] = tuple(r["replicate_to"])
        out[name] = w
    return out


def _cursors(rows: pa.Table) -> list[tuple[str, dict, Cursor]]:
    """(cluster, the row's read columns, Cursor) per cursor row; the individually-deleted ranges stay numpy
    columns."""
    ranges = rows.column("individually_deleted").combine_chunks()
    offsets = ranges.offsets.to_numpy()
    flat = ranges.values
    cols = [_ints(flat.field(f)) for f in ("from_ledger", "from_entry", "to_ledger", "to_entry")]
    out = []
    for i, r in enumerate(rows.drop_columns(["individually_deleted"]).to_pylist()):
        a, b = (int(offsets[i]), int(offsets[i + 1])) if ranges[i].is_valid else (0, 0)
        acks = CursorAcks(Position(r["mark_delete_ledger"], r["mark_delete_entry"]),
                          _pos(r["read_ledger"], r["read_entry"]), *(c[a:b] for c in cols))
        out.append((r["cluster"], r, Cursor(r["name"], r["cursor_kind"], acks, r["remote_cluster"],
                                            bool(r["replicated"]))))
    return out


def _reads(cursors: list[tuple[str, dict, Cursor]]) -> dict[str, list[CursorRead]]:
    """cluster -> every read of its cursors (the collection's and the rereads), with their instants."""
    found: dict[tuple[str, int], tuple[dict, dict]] = {}
    for cluster, r, cursor in cursors:
        instants, named = found.setdefault((cluster, r["read"] or PRIMARY), ({}, {}))
        instants.setdefault("at", (r["read_requested_ms"], r["read_answered_ms"]))
        named[cursor.name] = cursor
    out: dict[str, list[CursorRead]] = {}
    for (cluster, number), (instants, named) in sorted(found.items()):
        out.setdefault(cluster, []).append(CursorRead(number, *instants["at"], named))
    return out


def sides_of(entries: pa.Table, state: pa.Table) -> tuple[str, dict[str, ClusterSide]]:
    kinds = state.column("kind")
    topic = _one_topic(state)
    keys = _cluster_keys(state, topic)

    def of_kind(kind: str) -> pa.Table:
        return state.filter(pc.equal(kinds, kind))

    windows = _windows(entries, keys, of_kind(EXTRA).to_pylist())
    sides = {c: ClusterSide(c, windows[c], cursors={}, replication={}) for c in sorted(keys)}
    _set_dump_windows(sides, of_kind(TOPIC).to_pylist())
    for r in of_kind(GAPS).to_pylist():
        if r["gap_count"]:
            sides[r["cluster"]].complete = False
    _set_cursors(sides, _cursors(of_kind(CURSOR)))
    for r in of_kind(REPLICATION).to_pylist():
        sides[r["cluster"]].replication[r["remote_cluster"]] = (r["connected"], r["replication_backlog"])
    _set_replicated_subscriptions(sides, of_kind(SUBSCRIPTION).to_pylist())
    return topic, sides


def _one_topic(state: pa.Table) -> str:
    topics = set(pc.unique(state.column("topic")).to_pylist())
    if len(topics) != 1:
        raise ValueError(f"one topic per group expected (topic hash collision?): {sorted(map(str, topics))}")
    return topics.pop()


def _cluster_keys(state: pa.Table, topic: str) -> dict:
    """cluster name -> its key in the group, each key naming one cluster."""
    keys = dict(zip(*(state.select(["cluster", "cluster_key"]).group_by(["cluster", "cluster_key"])
                      .aggregate([]).column(c).to_pylist() for c in ("cluster", "cluster_key"))))
    if len(set(keys.values())) != len(keys):
        raise ValueError(f"cluster name hash collision in {topic}: {sorted(keys)}")
    return keys


def _set_dump_windows(sides: dict[str, ClusterSide], topic_rows: list[dict]) -> None:
    """Each cluster's dump window, whether it was read whole, and the message TTLs."""
    for r in topic_rows:
        s = sides[r["cluster"]]
        s.dump_from = _pos(r["dump_from_ledger"], r["dump_from_entry"])
        s.dump_to = _pos(r["dump_to_ledger"], r["dump_to_entry"])
        s.complete = bool(r["dump_complete"])
        s.message_ttl_s, s.namespace_message_ttl_s = r["message_ttl_s"], r["namespace_message_ttl_s"]


def _set_cursors(sides: dict[str, ClusterSide], cursors: list[tuple[str, dict, Cursor]]) -> None:
    """The cursors of the collection's own read, and every read (rereads included) with its instants."""
    for cluster, r, cursor in cursors:
        if (r["read"] or PRIMARY) == PRIMARY:
            sides[cluster].cursors[cursor.name] = cursor
    for cluster, reads in _reads(cursors).items():
        sides[cluster].reads = tuple(reads)


def _set_replicated_subscriptions(sides: dict[str, ClusterSide], subscription_rows: list[dict]) -> None:
    repl: dict[str, set[str]] = {}
    for r in subscription_rows:
        if r["replicated"]:
            repl.setdefault(r["cluster"], set()).add(r["name"])
    for c, subs in repl.items():
        sides[c].replicated_subscriptions = frozenset(subs)


def audit_group(entries: pa.Table, state: pa.Table, settings: Settings, schema: pa.Schema) -> pa.Table:
    """The cogroup function's body: every output row of one topic, tagged by `kind`."""
    if state.num_rows == 0:   # entries of a topic no stats or dump.json describe: nothing to judge them by
        return schema.empty_table()
    topic, sides = sides_of(entries, state)
    result: TopicAudit = audit_topic(topic, sides, settings)
    consumed = {(r["cluster"], topic, r["name"]): r["consumed_here"]
                for r in state.filter(pc.equal(state.column("kind"), SUBSCRIPTION)).to_pylist()}
    rows = ([{"kind": FAILOVER, **r} for r in result.failover] + [{"kind": SNAPSHOTS, **r} for r in result.snapshots]
            + [{"kind": VIOLATION, **r} for r in keep_consumed(result.findings, consumed)]
            + [{"kind": COVERAGE, **r} for r in result.coverage])
    return pa.Table.from_pylist(rows, schema=schema)
