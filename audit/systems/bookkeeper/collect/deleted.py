"""Ledgers deleted while the cluster was being collected.

The metadata walk and the bookie reads are minutes apart on a large estate, and Pulsar deletes ledgers all the time
(retention, trimming of fully acknowledged ledgers). A ledger deleted in between was read from ZooKeeper but its
bookies, once their garbage collector ran, answer that they hold nothing: read as is, a healthy ledger would look
lost. So every ledger a bookie said it holds nothing of (ENOLEDGER to the list or to a read probe, or missing from a
complete location index) is looked up again in ZooKeeper after the bookies were asked; a znode that is gone gets
`ledger-metadata/<znode path>.deleted.json` beside its payload ({"ledger_id", "checked_at_ms", "reason"}) and the
audit leaves the ledger out. Nothing collected is removed: the metadata read stays as evidence."""
from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

from audit.collectors.base import CollectionReport, RawSink
from audit.systems.bookkeeper.formats import protocol
from audit.systems.bookkeeper.formats.raw_evidence import DELETED_SUFFIX
from audit.errors import PayloadError
from audit.timeutil import now_ms

REASON = "the ledger znode was gone when it was looked up again after the bookies were asked: deleted during " \
         "collection (retention), so its bookies' empty answers say nothing about its replicas"


class HoldsNothingWatch:
    """A sink that passes everything on and notes the ledgers some bookie said it holds nothing of, and the
    ledgers each location-index bookie has a file for."""

    def __init__(self, sink: RawSink):
        self.sink = sink
        self.holds_nothing: set[int] = set()
        self.indexed: dict[str, set[int]] = {}

    def put(self, key: str, data: bytes) -> None:
        self.sink.put(key, data)
        parts = key.split("/")
        if len(parts) != 3:
            return
        head, bookie, leaf = parts
        try:
            if head == "entries-of-ledger" and leaf.endswith(".pb"):
                if protocol.decode_response(data, key).status == "ENOLEDGER":
                    self.holds_nothing.add(int(leaf[:-len(".pb")]))
            elif head == "read-probes" and leaf != "bookie.json":
                if json.loads(data).get("absent", {}).get("ENOLEDGER"):
                    self.holds_nothing.add(int(leaf[:-len(".json")]))
            elif head == "location-index" and leaf.endswith(".avail"):
                self.indexed.setdefault(bookie, set()).add(int(leaf[:-len(".avail")]))
        except (PayloadError, ValueError, AttributeError):
            pass  # stored as received; the normalizer quarantines what does not decode

    def candidates(self, index_members: Mapping[str, Iterable[int]]) -> set[int]:
        """Ledgers to look up again: a bookie holds nothing of them, or a location-index bookie named in their
        ensembles has no file for them."""
        out = set(self.holds_nothing)
        for bookie, ledgers in index_members.items():
            out |= set(ledgers) - self.indexed.get(bookie, set())
        return out


def mark_deleted(client: Any, ledgers_root: str, paths: Mapping[int, str], candidates: Iterable[int],
                 sink: RawSink, report: CollectionReport, timeout_s: float) -> set[int]:
    """Look the candidates' znodes up again (pipelined `exists`); store a .deleted.json for each one that is gone.
    -> the deleted ledger ids. A lookup that fails is a gap: the ledger is then judged as read."""
    root = ledgers_root.rstrip("/")
    asked = {lid: client.exists_async(f"{root}/{paths[lid]}") for lid in sorted(candidates) if lid in paths}
    deleted = set()
    for lid, result in asked.items():
        try:
            stat = result.get(timeout=timeout_s)
        except Exception as e:  # kazoo raises its own error types; any of them means "not known"
            report.gap(f"{root}/{paths[lid]}", "whether the ledger still exists", f"{type(e).__name__}: {e}")
            continue
        if stat is None:
            deleted.add(lid)
            sink.put(f"ledger-metadata/{paths[lid]}{DELETED_SUFFIX}", json.dumps(
                {"ledger_id": lid, "checked_at_ms": now_ms(), "reason": REASON},
                sort_keys=True).encode())
    report.count("ledgers_rechecked", len(asked))
    report.count("ledgers_deleted_during_collection", len(deleted))
    return deleted
