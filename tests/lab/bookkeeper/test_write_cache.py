"""A ledger closed seconds before the snapshot: a location-index bookie holds its tail in its write cache, not yet
in the index the collector reads, and the truth expects no finding (the index has not settled)."""
from __future__ import annotations

from audit.systems.bookkeeper.formats import availability
from lab.bookkeeper import build_lab, emit
from lab.bookkeeper.cluster import znode_path
from tests.lab.sinks import DictSink

AS_OF = 1_760_000_000_000


def test_recently_closed_ledger_index_lacks_the_tail_the_bookie_holds_and_no_finding():
    lab = build_lab({"seed": 3}, AS_OF)
    sink = DictSink()
    truth = emit(lab, sink)
    (fault,) = [f for f in truth["faults"] if f["kind"] == "recently_closed"]
    (lid,) = fault["ledgers"]
    assert AS_OF - lab.znode_stat(lid)["mtime"] == fault["params"]["closed_s_ago"] * 1000
    index = [b for b in lab.ensemble_bookies(lid) if lab.evidence(b) == "location_index"]
    assert index and lab.state.unflushed
    for b in index:
        key = f"location-index/{b}/{lid}.avail"
        emitted = set(availability.iter_entries(availability.decode(sink[key], key))) if key in sink else set()
        held = set(lab.entries_on(b, lid))
        tail = lab.state.unflushed[b][lid]
        assert tail and held - emitted == tail and emitted < held      # the index lacks exactly the tail
        assert all(lab.read_status(b, lid, e) == "EOK" for e in tail)  # the bookie itself serves it
    assert f"ledger-metadata/{znode_path(lid)}" in sink
    assert not [f for f in truth["findings"] if f["ledger_id"] == lid]
    assert {"cluster": lab.cluster, "ledger_id": lid, "bookies": index} in truth["unsettled_index"]
