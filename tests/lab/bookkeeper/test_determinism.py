"""Same seed and snapshot time -> identical payload bytes and ground truth; the checks hold for other seeds
and sizes too; a lab without faults is clean."""
from __future__ import annotations

import json

import pytest

from audit.systems.bookkeeper.domain.model import CLOSED
from lab.bookkeeper import build_lab, emit
from tests.lab.bookkeeper.payload_oracle import replica_bands, read_snapshot, replica_counts
from tests.lab.sinks import DictSink

AS_OF = 1_760_000_000_000


def emitted(cfg, as_of=AS_OF):
    sink = DictSink()
    truth = emit(build_lab(cfg, as_of), sink)
    return dict(sink), json.dumps(truth, sort_keys=True)


def test_same_seed_same_bytes_and_truth():
    a_payloads, a_truth = emitted({"seed": 11})
    b_payloads, b_truth = emitted({"seed": 11})
    assert a_payloads == b_payloads
    assert a_truth == b_truth


def test_other_seed_or_time_changes_the_cluster():
    base, _ = emitted({"seed": 11})
    other_seed, _ = emitted({"seed": 12})
    assert base != other_seed
    later, _ = emitted({"seed": 11}, AS_OF + 3_600_000)
    assert base != later


def test_default_lab_emits_its_payloads():
    payloads, _ = emitted({"seed": 3})
    assert len(payloads) > 100


@pytest.mark.parametrize("cfg", [
    {"seed": 1}, {"seed": 2}, {"seed": 5, "bookies": 9}, {"seed": 6, "ledgers": 30, "entries_per_ledger": 40},
    {"seed": 9, "racks": 2, "bookies": 10},
    {"seed": 4, "faults": [{"kind": "disk_loss", "ledgers": 4}, {"kind": "replaced_ensemble_race", "in_flight": 5},
                           {"kind": "bookie_crash", "ledgers_before": 0, "ledgers_across": 1}]},
])
def test_ground_truth_counts_match_payloads_for_other_configs(cfg):
    sink = DictSink()
    truth = emit(build_lab(cfg, AS_OF), sink)
    snap = read_snapshot(sink)
    got = {(f["check"], f["ledger_id"], f["entry_count"]) for f in truth["findings"]
           if f["check"] in ("bk.entries_lost", "bk.entries_below_ack_quorum", "bk.entries_below_write_quorum")}
    want = set()
    for lid, md in snap.metadata.items():
        if md.state == CLOSED and md.last_entry_id >= 0:
            c = replica_counts(snap, lid)
            want |= {(check, lid, n) for check, n in replica_bands(c)}
    assert got == want and got
    assert truth["summary"]["healthy_ledgers"] > truth["summary"]["ledgers"] / 2


def test_lab_without_faults_is_clean():
    sink = DictSink()
    truth = emit(build_lab({"seed": 8, "faults": []}, AS_OF), sink)
    assert truth["findings"] == [] and truth["coverage_gaps"] == [] and truth["missing_fragments"] == []
    assert not any(k.endswith(".error.json") for k in sink)
    snap = read_snapshot(sink)
    for lid, md in snap.metadata.items():
        c = replica_counts(snap, lid)
        assert c["below_write"] == 0 and c["entries"] == md.last_entry_id + 1
