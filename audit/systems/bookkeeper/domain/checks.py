"""The BookKeeper checks: every finding the BookKeeper audit raises (audit/systems/bookkeeper/transforms/audit_rows.py),
with its severity and what it means in one line. The findings, the GX suites, the report and the alerts all read
this table (docs/bookkeeper/contracts.md lists the same ids).

The replica bands are disjoint, so one entry raises one finding: bk.entries_lost = 0 replicas,
bk.entries_below_ack_quorum = 1..Qa-1, bk.entries_below_write_quorum = Qa..Qw-1."""
from __future__ import annotations

from typing import Mapping

from audit.contracts import Check

CHECKS: Mapping[str, Check] = {
    "bk.entries_lost": Check(
        "critical", "entries of a closed ledger with no replica left on any bookie its metadata names"),
    "bk.entries_below_ack_quorum": Check(
        "major", "entries with at least one replica but fewer than the ledger's ack quorum (Qa)"),
    "bk.entries_below_write_quorum": Check(
        "minor", "entries with at least Qa but fewer than Qw replicas: under-replicated"),
    "bk.entries_outside_ensemble": Check(
        "major", "entries a write-set bookie the metadata lists lacks while a bookie not listed for them holds them: "
                 "the metadata may name the wrong ensemble (apache/bookkeeper#4651); other entries held outside the "
                 "ensemble are information (findings/bk_outside_ensemble)"),
    "bk.metadata_invariant": Check(
        "major", "ledger metadata BookKeeper itself would refuse to load (state and lastEntryId, Qa <= Qw <= E, "
                 "ensemble keys and sizes, duplicate bookies)"),
    "bk.ensemble_unknown_bookie": Check(
        "major", "an ensemble names a bookie that was never registered (no cookie, not available)"),
    "bk.ensemble_dead_bookie": Check(
        "major", "an ensemble names a registered bookie that is neither available nor read-only"),
    "bk.placement_violation": Check(
        "minor", "a write set spans fewer racks than min_racks_per_write_quorum"),
    "bk.ledger_open_too_long": Check(
        "warning", "a ledger has been OPEN or IN_RECOVERY for longer than open_ledger_max_age (by its effective "
                   "creation time; unknown: not judged)"),
}

# What the GX suites check of the audit's own output tables. Never a finding: a failure means the audit wrote
# something wrong, not that a cluster is broken.
VALIDATION_CHECKS: Mapping[str, Check] = {
    "bk.metrics_schema": Check(
        "major", "metrics/bk_ledger_replicas has every column the replica expectations read"),
}
