"""An independent reading of emitted lab payloads: decode the stored bytes with the format decoders and count
replicas entry by entry, the way ReplicasCheck defines it. Shares no code with lab's ground truth."""
from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field

from audit.systems.bookkeeper.domain.model import CLOSED, LedgerMetadata
from audit.systems.bookkeeper.formats import availability, ledger_metadata, protocol


@dataclass
class Snapshot:
    metadata: dict[int, LedgerMetadata] = field(default_factory=dict)
    answers: dict[tuple[str, int], tuple[str, set[int] | None]] = field(default_factory=dict)  # status, held
    errors: dict[tuple[str, int], dict] = field(default_factory=dict)
    bookies: dict[str, list[str]] = field(default_factory=dict)
    racks: dict[str, str] = field(default_factory=dict)
    stats: dict[int, dict] = field(default_factory=dict)                 # ledger -> znode Stat
    inventories: dict[str, dict] = field(default_factory=dict)           # location-index bookie -> inventory
    probes: dict[tuple[str, int], dict] = field(default_factory=dict)    # read probes of (bookie, ledger)
    probe_bookies: dict[str, dict] = field(default_factory=dict)
    deleted: dict[int, LedgerMetadata] = field(default_factory=dict)     # deleted during collection: not judged
    unsettled: set[tuple[str, int]] = field(default_factory=set)        # (index bookie, ledger) read too soon


def read_snapshot(sink: dict[str, bytes]) -> Snapshot:
    snap = Snapshot()
    for key, data in sink.items():
        _read_key(snap, key, data)
    for lid in snap.deleted:
        snap.deleted[lid] = snap.metadata.pop(lid)
    _unsettled_as_unavailable(snap)
    _answers_without_a_payload(snap)
    return snap


def _read_key(snap: Snapshot, key: str, data: bytes) -> None:
    if key.startswith("ledger-metadata/"):
        _read_ledger_metadata(snap, key, data)
    elif key.startswith("location-index/"):
        _read_location_index(snap, key, data)
    elif key.startswith("read-probes/"):
        _read_read_probes(snap, key, data)
    elif key.startswith("entries-of-ledger/"):
        _read_entries_of_ledger(snap, key, data)
    elif key == "bookies/available.json":
        snap.bookies = json.loads(data)
    elif key == "bookies/racks.json":
        snap.racks = json.loads(data)
    else:
        raise AssertionError(f"unexpected key {key}")


def _read_ledger_metadata(snap: Snapshot, key: str, data: bytes) -> None:
    """A znode, its Stat, or the note that retention deleted the ledger during collection."""
    path = key[len("ledger-metadata/"):]
    if key.endswith(".deleted.json"):
        snap.deleted[json.loads(data)["ledger_id"]] = None
    elif key.endswith(".stat.json"):
        lid = ledger_metadata.ledger_id_from_znode_path(path[:-len(".stat.json")])
        snap.stats[lid] = json.loads(data)
    else:
        lid = ledger_metadata.ledger_id_from_znode_path(path)
        snap.metadata[lid] = ledger_metadata.decode_znode(data, key, lid)


def _read_location_index(snap: Snapshot, key: str, data: bytes) -> None:
    _, bookie, leaf = key.split("/")
    if leaf == "inventory.json":
        snap.inventories[bookie] = json.loads(data)
    else:
        held = set(availability.iter_entries(availability.decode(data, key)))
        snap.answers[(bookie, int(leaf[: -len(".avail")]))] = ("EOK", held)


def _read_read_probes(snap: Snapshot, key: str, data: bytes) -> None:
    _, bookie, leaf = key.split("/")
    if leaf == "bookie.json":
        snap.probe_bookies[bookie] = json.loads(data)
    else:
        snap.probes[(bookie, int(leaf[: -len(".json")]))] = json.loads(data)


def _read_entries_of_ledger(snap: Snapshot, key: str, data: bytes) -> None:
    """A bookie's GetListOfEntriesOfLedger response, or the error asking it gave."""
    _, bookie, leaf = key.split("/")
    if leaf.endswith(".error.json"):
        snap.errors[(bookie, int(leaf[: -len(".error.json")]))] = json.loads(data)
        return
    lid = int(leaf[: -len(".pb")])
    answer = protocol.decode_response(data, key)
    assert answer.ledger_id == lid, key
    held = None
    if answer.status == "EOK":
        held = set(availability.iter_entries(availability.decode(answer.availability, key)))
    snap.answers[(bookie, lid)] = (answer.status, held)


def _answers_without_a_payload(snap: Snapshot) -> None:
    """Answers of ensemble bookies no per-ledger payload gives: from a location index or from read probes."""
    for lid, md in snap.metadata.items():
        for bookie in {b for seg in md.segments for b in seg.ensemble}:
            if bookie in snap.inventories and (bookie, lid) not in snap.answers:
                snap.answers[(bookie, lid)] = ("ENOLEDGER", None)   # a complete index without the ledger
            elif (bookie, lid) in snap.probes:
                # probes judge only what they read: every other entry placed on the bookie counts as held
                doc = snap.probes[(bookie, lid)]
                absent = {e for ids in doc["absent"].values() for e in ids}
                snap.answers[(bookie, lid)] = ("PROBED", expected_on(md, bookie) - absent)


SETTLE_MS = 60_000   # thresholds.location_index_settle as shipped


def _unsettled_as_unavailable(snap: Snapshot) -> None:
    """An index read less than a minute after the ledger's znode was last written (or its stored ctime) may lack
    entries still in the bookie's write cache: that bookie is unavailable for the ledger, not missing entries."""
    for lid, md in snap.metadata.items():
        written = max(snap.stats[lid]["mtime"], md.ctime or 0)
        for bookie in {b for seg in md.segments for b in seg.ensemble} & set(snap.inventories):
            if written > snap.inventories[bookie]["read_at_ms"] - SETTLE_MS:
                snap.errors[(bookie, lid)] = {"error": "unsettled"}
                snap.unsettled.add((bookie, lid))


def replica_counts(snap: Snapshot, lid: int) -> dict[str, int]:
    """For a CLOSED ledger: entries, lost, below Qa, below Qw, and missing per bookie."""
    md = snap.metadata[lid]
    assert md.state == CLOSED and md.last_entry_id >= 0
    keys = [s.first_entry_id for s in md.segments]
    out = {"entries": 0, "lost": 0, "below_ack": 0, "below_write": 0}
    for e in range(md.last_entry_id + 1):
        seg = md.segments[bisect.bisect_right(keys, e) - 1]     # greatest firstEntryId <= e
        missing = 0
        for w in range(md.write_quorum_size):
            bookie = seg.ensemble[(e + w) % md.ensemble_size]
            if (bookie, lid) in snap.errors:
                continue                                          # unavailable: not counted
            status, held = snap.answers[(bookie, lid)]
            if status == "ENOLEDGER" or e not in held:
                missing += 1
        copies = md.write_quorum_size - missing
        out["entries"] += 1
        out["lost"] += copies == 0
        out["below_ack"] += copies < md.ack_quorum_size
        out["below_write"] += copies < md.write_quorum_size
    return out


def expected_on(md: LedgerMetadata, bookie: str) -> set[int]:
    """Entries the metadata places on `bookie` (CLOSED ledger), by brute force."""
    keys = [s.first_entry_id for s in md.segments]
    out = set()
    for e in range(md.last_entry_id + 1):
        seg = md.segments[bisect.bisect_right(keys, e) - 1]
        if bookie in {seg.ensemble[(e + w) % md.ensemble_size] for w in range(md.write_quorum_size)}:
            out.add(e)
    return out


def replica_bands(counts: dict) -> list[tuple[str, int]]:
    """One finding per entry: the nested counts split into disjoint bands, (check, entries) where > 0."""
    bands = [("bk.entries_lost", counts["lost"]),
             ("bk.entries_below_ack_quorum", counts["below_ack"] - counts["lost"]),
             ("bk.entries_below_write_quorum", counts["below_write"] - counts["below_ack"])]
    return [(check, n) for check, n in bands if n > 0]
