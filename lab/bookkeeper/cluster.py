"""The lab BookKeeper cluster: build it from the estate's `lab:` block, read its state, and emit the native
payloads the real collectors fetch (raw keys of docs/bookkeeper/contracts.md, relative to
raw/bookkeeper/<cluster>/).

    lab = build_lab({"seed": 7}, as_of_ms)
    truth = emit(lab, sink)          # sink.put(relative_key, bytes); truth -> raw/_lab/ground_truth.json
"""
from __future__ import annotations

import json
from typing import Any

from audit.collectors.base import RawSink
from audit.systems.bookkeeper.domain.model import LedgerMetadata
from audit.systems.bookkeeper.formats import availability, ledger_metadata, protocol
from lab.bookkeeper.config import LabConfig, parse_lab_config
from audit.systems.bookkeeper.collect.deleted import REASON as DELETED_REASON
from lab.bookkeeper.evidence import emit_bookie_evidence
from lab.bookkeeper.production import znode_stat
from lab.bookkeeper.scenario import LabState, run_scenario
from lab.bookkeeper.truth import bookie_lists, ensemble_bookies, ground_truth

DEFAULT_CLUSTER = "bk-lab"
INT32_MAX = 2**31 - 1


def znode_path(ledger_id: int) -> str:
    """Path under the ledgers root of the hybrid hierarchical manager (docs/formats/bookkeeper.md §1.3): 2-4-4 of %010d
    below Integer.MAX_VALUE, else 3-4-4-4-4 of %019d."""
    if ledger_id < INT32_MAX:
        s = f"{ledger_id:010d}"
        return f"{s[:2]}/{s[2:6]}/L{s[6:]}"
    s = f"{ledger_id:019d}"
    return f"{s[:3]}/{s[3:7]}/{s[7:11]}/{s[11:15]}/L{s[15:]}"


def _json(value: Any) -> bytes:
    return json.dumps(value, indent=2, sort_keys=True).encode()


class BookKeeperLab:
    """A simulated cluster after its run. Read-only views for emitters and for protocol test servers."""

    def __init__(self, state: LabState, cluster: str):
        self.state, self.cluster = state, cluster
        self._truth: dict[str, Any] | None = None

    @property
    def config(self) -> LabConfig:
        return self.state.config

    @property
    def as_of_ms(self) -> int:
        return self.state.as_of_ms

    @property
    def bookies(self) -> list[str]:
        return list(self.state.cluster.bookies)

    @property
    def racks(self) -> dict[str, str]:
        return dict(self.state.cluster.racks)

    @property
    def ledger_ids(self) -> list[int]:
        return sorted(self.state.metadata)

    def metadata(self, ledger_id: int) -> LedgerMetadata:
        return self.state.metadata[ledger_id]

    def ensemble_bookies(self, ledger_id: int) -> list[str]:
        return ensemble_bookies(self.state.metadata[ledger_id])

    def znode_path(self, ledger_id: int) -> str:
        return znode_path(ledger_id)

    def znode(self, ledger_id: int, with_password: bool = False) -> bytes:
        """The znode value; with the ledger password as ZooKeeper holds it, or redacted (empty) as stored."""
        md = self.state.metadata[ledger_id]
        password = self.state.passwords.get(ledger_id, b"") if with_password else b""
        return ledger_metadata.encode_znode(md, version=md.format_version, password=password)

    def entries_on(self, bookie: str, ledger_id: int) -> list[int] | None:
        """Entry ids the bookie stores for the ledger, ascending; None when it has nothing (ENOLEDGER)."""
        if bookie not in self.state.cluster.store:
            raise KeyError(f"unknown lab bookie {bookie!r}")
        held = self.state.cluster.entries(bookie, ledger_id)
        return sorted(held) if held else None

    def storage(self, bookie: str) -> str:
        """The bookie's ledger storage: "DbLedgerStorage" (never answers GetListOfEntriesOfLedger) or
        "SortedLedgerStorage"."""
        if bookie not in self.state.cluster.store:
            raise KeyError(f"unknown lab bookie {bookie!r}")
        return self.state.cluster.storage[bookie]

    def evidence(self, bookie: str) -> str:
        """How a collector learns the bookie's entries: "entries_of_ledger", "location_index" or "read_probe"."""
        if bookie not in self.state.cluster.store:
            raise KeyError(f"unknown lab bookie {bookie!r}")
        return self.state.cluster.evidence[bookie]

    def read_status(self, bookie: str, ledger_id: int, entry_id: int) -> str:
        """What the bookie answers a ReadRequest with (ReadEntryProcessorV3): EOK, ENOENTRY when it knows the
        ledger but not the entry, ENOLEDGER when it holds nothing of the ledger."""
        held = self.state.cluster.entries(bookie, ledger_id)   # the simulation's set: no copy per read
        return "ENOLEDGER" if not held else "EOK" if entry_id in held else "ENOENTRY"

    def holdings(self, bookie: str) -> dict[int, list[int]]:
        """{ledger id: entry ids ascending} of every ledger the bookie stores something of."""
        return {lid: sorted(held) for lid, held in sorted(self.state.cluster.store[bookie].items()) if held}

    def index_holdings(self, bookie: str) -> dict[int, list[int]]:
        """holdings() as the bookie's location index has them: without what its write cache has not flushed."""
        unflushed = self.state.unflushed.get(bookie, {})
        return {lid: kept for lid, held in self.holdings(bookie).items()
                if (kept := [e for e in held if e not in unflushed.get(lid, ())])}

    def reachable(self, bookie: str) -> bool:
        """Whether the bookie answers at the snapshot (crashed or unreachable ones do not)."""
        if bookie not in self.state.cluster.store:
            raise KeyError(f"unknown lab bookie {bookie!r}")
        return self.state.cluster.answers(bookie, self.state.as_of_ms)

    def bookie_lists(self) -> dict[str, list[str]]:
        return bookie_lists(self.state)

    def ground_truth(self, znode_ctimes: dict[int, int] | None = None, znode_mtimes: dict[int, int] | None = None,
                     index_reads: dict[str, int] | None = None) -> dict[str, Any]:
        """`znode_ctimes`/`znode_mtimes`: the znodes' times as a real ZooKeeper stamped them when the lab was loaded
        into it; `index_reads`: {bookie: read_at_ms} of the location indexes the collector read then."""
        if znode_ctimes is not None or znode_mtimes is not None or index_reads is not None:
            return ground_truth(self.state, self.cluster, znode_ctimes, znode_mtimes, index_reads)
        if self._truth is None:
            self._truth = ground_truth(self.state, self.cluster)
        return self._truth

    def znode_stat(self, ledger_id: int) -> dict[str, int]:
        """The ZooKeeper Stat of the ledger's znode (created with the ledger, one version per metadata write)."""
        ctime, mtime, version = self.state.znode_times[ledger_id]
        return znode_stat(ledger_id, ctime, mtime, version, len(self.znode(ledger_id, with_password=True)))

    def entries_of_ledger_answer(self, bookie: str, ledger_id: int, txn_id: int) -> bytes:
        """The bookie's v3 Response body to GetListOfEntriesOfLedger (EOK with availability, or ENOLEDGER)."""
        held = self.entries_on(bookie, ledger_id)
        if held is None:
            return protocol.encode_response(txn_id, ledger_id, "ENOLEDGER", None)
        return protocol.encode_response(txn_id, ledger_id, "EOK", availability.encode_entries(held))


def build_lab(cfg: dict | None, as_of_ms: int, *, cluster: str = DEFAULT_CLUSTER) -> BookKeeperLab:
    """Run the simulation described by the estate's `lab:` block (LabConfigError names a bad field)."""
    return BookKeeperLab(run_scenario(parse_lab_config(cfg), as_of_ms), cluster)


def emit(lab: BookKeeperLab, sink: RawSink) -> dict[str, Any]:
    """Write what a collector would store for this cluster; -> the ground truth dict."""
    for lid in lab.ledger_ids:
        sink.put(f"ledger-metadata/{znode_path(lid)}", lab.znode(lid, with_password=False))
        sink.put(f"ledger-metadata/{znode_path(lid)}.stat.json", _json(lab.znode_stat(lid)))
    emit_bookie_evidence(lab, sink)
    for lid in sorted(lab.state.deleted_during_collection):
        # what the collector stores when it looks the ledger up again after the bookies answered ENOLEDGER
        sink.put(f"ledger-metadata/{znode_path(lid)}.deleted.json", json.dumps(
            {"checked_at_ms": lab.as_of_ms, "ledger_id": lid, "reason": DELETED_REASON}, sort_keys=True).encode())
    sink.put("bookies/available.json", _json(lab.bookie_lists()))
    sink.put("bookies/racks.json", _json(lab.racks))
    return lab.ground_truth()
