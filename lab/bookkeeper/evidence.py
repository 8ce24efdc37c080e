"""What the collectors store about each lab bookie's entries, written without sockets (the lab's direct emission;
lab/bookkeeper/runner.py runs the real collectors instead when the lab is loaded into a ZooKeeper):

- a SortedLedgerStorage bookie answers GetListOfEntriesOfLedger: `entries-of-ledger/<bookie>/<ledger>.pb`;
- a DbLedgerStorage bookie never answers it. Either its host reads the `locations` index (the lab writes a real
  RocksDB in BookKeeper's encoding and reads it with the real reader: `location-index/<bookie>/...`), or the
  collector reads probes of the entries LedgerChecker would verify: `read-probes/<bookie>/...`.
Raw keys and shapes: docs/bookkeeper/contracts.md."""
from __future__ import annotations

import json
import tempfile

from audit.systems.bookkeeper.domain.model import CLOSED
from lab.bookkeeper.config import LOCATION_INDEX, READ_PROBE

UNREACHABLE = "unreachable"
# Loopback bookies answer at once: the collector knows a DbLedgerStorage bookie after this long without a list.
LIST_PROBE_TIMEOUT_S = 0.3


def emit_bookie_evidence(lab, sink) -> None:
    asked: dict[str, list[int]] = {}
    for lid in lab.ledger_ids:
        for bookie in lab.ensemble_bookies(lid):
            asked.setdefault(bookie, []).append(lid)
    for bookie in lab.bookies:
        ledgers = asked.get(bookie, [])
        if not lab.reachable(bookie):
            _unreachable(lab, bookie, ledgers, sink)
        elif lab.evidence(bookie) == LOCATION_INDEX:
            _location_index(lab, bookie, sink)
        elif lab.evidence(bookie) == READ_PROBE:
            _read_probes(lab, bookie, ledgers, sink)
        else:
            for txn, lid in enumerate(ledgers, start=1):
                sink.put(f"entries-of-ledger/{bookie}/{lid}.pb", lab.entries_of_ledger_answer(bookie, lid, txn))


def _unreachable(lab, bookie: str, ledgers: list[int], sink) -> None:
    why = "connection refused" if lab.state.cluster.registration(bookie, lab.as_of_ms) == "gone" else "no answer"
    for lid in ledgers:
        sink.put(f"entries-of-ledger/{bookie}/{lid}.error.json",
                 json.dumps({"error": UNREACHABLE, "message": f"{bookie}: {why}"}, sort_keys=True).encode())


def _location_index(lab, bookie: str, sink) -> None:
    """The bookie host's task: the whole index, every ledger the bookie holds (also ones no longer naming it)."""
    from audit.systems.bookkeeper.collect.location_index import read_location_index
    from lab.bookkeeper.location_db import write_location_index

    held = lab.index_holdings(bookie)   # the write cache's recent entries are not in the index yet
    with tempfile.TemporaryDirectory(prefix="lab-bookie-") as ledger_dir:
        write_location_index(ledger_dir, held)  # a bookie holding nothing still has its (empty) index
        report = read_location_index(bookie, [ledger_dir], _AsOnTheHost(sink, ledger_dir, lab.as_of_ms),
                                     cluster=lab.cluster)
    if report.gaps:
        raise RuntimeError(f"lab bookie {bookie}: location index unreadable: {report.gaps[0]}")


class _AsOnTheHost:
    """The inventory as the bookie's host writes it: its ledger directory and the snapshot time instead of the
    lab's temporary folder and the wall clock, so that a seed always gives the same bytes."""

    HOST_LEDGER_DIR = "/data/bookkeeper/ledgers"

    def __init__(self, sink, ledger_dir: str, as_of_ms: int):
        self.sink, self.ledger_dir, self.as_of_ms = sink, ledger_dir, as_of_ms

    def put(self, key: str, data: bytes) -> None:
        if key.endswith("/inventory.json"):
            doc = json.loads(data)
            doc["read_at_ms"] = self.as_of_ms
            doc = json.loads(json.dumps(doc).replace(self.ledger_dir, self.HOST_LEDGER_DIR))
            data = json.dumps(doc, indent=2, sort_keys=True).encode()
        self.sink.put(key, data)


def _read_probes(lab, bookie: str, ledgers: list[int], sink) -> None:
    from audit.systems.bookkeeper.collect.read_probe import bookie_file, probe_file
    from audit.systems.bookkeeper.domain.verification import iter_ledger_probes
    from audit.systems.bookkeeper.formats.raw_evidence import ABSENT_STATUSES

    share = lab.config.read_probe_percent
    if not ledgers:
        return  # never asked, so never found silent
    first = lab.read_status(bookie, min(ledgers), 0)   # the read that told the collector the bookie is alive
    sink.put(f"read-probes/{bookie}/bookie.json", bookie_file(
        bookie, share, f"GetListOfEntriesOfLedger unanswered within {LIST_PROBE_TIMEOUT_S} s while a ReadRequest "
                       f"was answered ({first}): DbLedgerStorage, apache/bookkeeper#2078"))
    for lid in ledgers:
        md = lab.metadata(lid)
        if md.state != CLOSED or md.last_entry_id < 0:
            continue  # the audit judges CLOSED ledgers; an OPEN one's end is not known to probe
        probed = list(iter_ledger_probes(md, bookie, share, lab.cluster))
        absent: dict[str, list[int]] = {s: [] for s in ABSENT_STATUSES}
        present = []
        for e in probed:
            status = lab.read_status(bookie, lid, e)
            (present if status == "EOK" else absent[status]).append(e)
        sink.put(f"read-probes/{bookie}/{lid}.json", probe_file(lid, share, len(probed), present, absent, {}))
