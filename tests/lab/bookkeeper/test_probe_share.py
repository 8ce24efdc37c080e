"""Read probes below 100 %: the ground truth counts exactly the lost entries the probes read (the collector's own
selection, from the lab's true holdings), lists the others as not probed, and records what each fault hit."""
from __future__ import annotations

import pytest

from audit.systems.bookkeeper.domain.model import CLOSED
from audit.systems.bookkeeper.domain.verification import iter_ledger_probes
from lab.bookkeeper import build_lab, emit
from lab.bookkeeper.truth import ground_truth
from tests.lab.bookkeeper.payload_oracle import expected_on, read_snapshot, replica_bands, replica_counts
from tests.lab.sinks import DictSink

AS_OF = 1_760_000_000_000
COUNT_CHECKS = ("bk.entries_lost", "bk.entries_below_ack_quorum", "bk.entries_below_write_quorum")
PROBE_BOOKIE = "bookie-02.lab:3181"   # the first DbLedgerStorage bookie without host access (config.evidence_of)


def _run(cfg):
    lab = build_lab(cfg, AS_OF)
    sink = DictSink()
    truth = emit(lab, sink)
    return lab, read_snapshot(sink), truth


def _probe_hits(truth):
    return [h for f in truth["faults"] for h in f["hits"] if h["evidence"] == "read_probe"]


@pytest.mark.parametrize("share", [0, 10, 50])
def test_counts_are_what_the_probes_read_of_the_true_losses(share):
    lab, snap, truth = _run({"seed": 1, "read_probe_percent": share})
    assert truth["read_probe_percent"] == share
    # the payload reading takes unprobed entries as held, as the audit does: the counts agree
    want = {(check, lid, n) for lid, md in snap.metadata.items() if md.state == CLOSED and md.last_entry_id >= 0
            for check, n in replica_bands(replica_counts(snap, lid))}
    got = {(f["check"], f["ledger_id"], f["entry_count"]) for f in truth["findings"] if f["check"] in COUNT_CHECKS}
    assert got == want and got
    hits = _probe_hits(truth)
    assert hits and any(h["seen"] < h["lost"] for h in hits)   # sampling leaves lost entries unread
    for h in hits:
        doc = snap.probes[(h["bookie"], h["ledger_id"])]
        absent = {e for ids in doc["absent"].values() for e in ids}
        # the truth's seen entries (true losses ∩ selection) are exactly those the emitted probes found absent
        assert h["seen"] == len(absent) > 0 and h["share_percent"] == share
        md = lab.metadata(h["ledger_id"])
        assert h["lost"] == len(expected_on(md, h["bookie"]) - set(lab.entries_on(h["bookie"], h["ledger_id"]) or ()))
    unread = {(n["ledger_id"], n["bookie"]): 0 for n in truth["not_probed"]}
    for n in truth["not_probed"]:
        unread[(n["ledger_id"], n["bookie"])] += n["missing_count"]
    assert unread == {(h["ledger_id"], h["bookie"]): h["lost"] - h["seen"] for h in hits if h["lost"] > h["seen"]}


def test_at_the_full_share_every_lost_entry_is_seen():
    lab, snap, truth = _run({"seed": 1})
    assert truth["read_probe_percent"] == 100 and truth["not_probed"] == []
    hits = [h for f in truth["faults"] for h in f["hits"]]
    assert _probe_hits(truth) and all(h["seen"] == h["lost"] > 0 for h in hits)
    by_kind = {f["kind"]: f["outcome"] for f in truth["faults"]}
    assert by_kind["disk_loss"] == by_kind["closed_without_data"] == by_kind["replaced_ensemble_race"] == "expected"
    assert by_kind["bookie_readonly"] == by_kind["unreachable_bookie"] == "no_entries_lost"
    # each bookie fault names how the audit reads its bookie
    assert all(f["bookie_evidence"] == truth["bookie_evidence"][f["params"]["bookie"]]
               for f in truth["faults"] if "bookie" in f["params"])


def test_a_lost_entry_no_probe_reads_gives_no_finding_and_is_reported_not_probed():
    lab = build_lab({"seed": 3, "read_probe_percent": 10,
                     "faults": [{"kind": "disk_loss", "bookie": PROBE_BOOKIE, "ledgers": 1}]}, AS_OF)
    assert lab.evidence(PROBE_BOOKIE) == "read_probe"
    (fault,) = lab.state.faults
    (lid,) = fault["ledgers"]
    md = lab.metadata(lid)
    # the bookie lost a single entry, one the 10 % selection does not read
    stored = expected_on(md, PROBE_BOOKIE)
    unread = sorted(stored - set(iter_ledger_probes(md, PROBE_BOOKIE, 10, lab.cluster)))
    lost = unread[len(unread) // 2]
    lab.state.cluster.store[PROBE_BOOKIE][lid] = stored - {lost}
    truth = ground_truth(lab.state, lab.cluster)
    (f,) = truth["faults"]
    assert f["outcome"] == "not_probed" and f["bookie_evidence"] == "read_probe"
    assert f["hits"] == [{"ledger_id": lid, "bookie": PROBE_BOOKIE, "evidence": "read_probe", "lost": 1, "seen": 0,
                          "share_percent": 10}]
    assert [(n["ledger_id"], n["bookie"], n["missing_count"]) for n in truth["not_probed"]] == [(lid, PROBE_BOOKIE, 1)]
    assert [x for x in truth["findings"] if x["ledger_id"] == lid] == [] and truth["missing_fragments"] == []
    # what the collector stores agrees: its probes found every entry they read
    sink = DictSink()
    emit(lab, sink)
    snap = read_snapshot(sink)
    assert not any(snap.probes[(PROBE_BOOKIE, lid)]["absent"].values())
    assert replica_counts(snap, lid)["below_write"] == 0
