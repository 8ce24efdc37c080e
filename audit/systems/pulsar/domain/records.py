"""Windows and cursors from plain records, for small inputs (tests, oracles, hand-made cases). The Spark path
builds the same Window from Arrow columns (audit/systems/pulsar/transforms/audit_rows.py).

Entry record keys (all optional but the position): `pos` "L:E", producer, sequence, publish_time,
replicated_from, source_position "L:E", replicate_to [clusters], marker_type, snapshot_id, source_cluster,
local "L:E", subscription, clusters {cluster: "L:E"}."""
from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np

from audit.systems.pulsar.domain.acked import CursorAcks
from audit.systems.pulsar.domain.positions import Position, parse_position
from audit.systems.pulsar.domain.window import NONE, Marker, Window


def P(text: str) -> Position:
    return parse_position(text, "record")


class Codes(dict):
    """Name -> small int, shared by every window of a topic (clusters and producers alike)."""

    def code(self, name: str) -> int:
        return self.setdefault(name, len(self))


def window_of(cluster: str, records: Iterable[Mapping], codes: Codes) -> Window:
    recs = sorted(records, key=lambda r: P(r["pos"]))
    pos = [P(r["pos"]) for r in recs]
    src = [P(r["source_position"]) if r.get("source_position") else None for r in recs]

    def ints(values) -> np.ndarray:
        return np.array([NONE if v is None else v for v in values], dtype=np.int64)

    markers = [Marker(r["marker_type"], p, r.get("publish_time"), r.get("replicated_from"), r.get("snapshot_id"),
                      r.get("source_cluster"), P(r["local"]) if r.get("local") else None, r.get("subscription"),
                      {c: P(v) for c, v in (r.get("clusters") or {}).items()})
               for r, p in zip(recs, pos) if r.get("marker_type") is not None]
    return Window(
        cluster=cluster, cluster_code=codes.code(cluster),
        ledger=ints(p.ledger_id for p in pos), entry=ints(p.entry_id for p in pos),
        marker=np.array([r.get("marker_type") is not None for r in recs], dtype=bool),
        origin=ints(codes.code(r.get("replicated_from") or cluster) for r in recs),
        source_ledger=ints(s and s.ledger_id for s in src), source_entry=ints(s and s.entry_id for s in src),
        producer=ints(codes.code("producer:" + r["producer"]) if r.get("producer") else None for r in recs),
        sequence=ints(r.get("sequence") for r in recs), publish_time=ints(r.get("publish_time") for r in recs),
        markers=markers,
        replicate_to={i: tuple(r["replicate_to"]) for i, r in enumerate(recs) if r.get("replicate_to") is not None})


def cursor_of(mark_delete: str, ranges: Iterable[str] = (), read: str | None = None) -> CursorAcks:
    """ranges as "(L:E..L:E]" texts or "L:E..L:E"."""
    pairs = []
    for text in ranges:
        lo, hi = text.strip("(]").split("..")
        pairs.append((P(lo), P(hi)))
    return CursorAcks.of(P(mark_delete), pairs, P(read) if read else None)
