"""The BookKeeper checks table: the contract severities (docs/bookkeeper/contracts.md), and every finding of the
per-ledger audit takes its severity from the table."""
from __future__ import annotations

import pytest

from audit.systems.bookkeeper.domain import checks
from audit.systems.bookkeeper.domain.checks import CHECKS
from audit.systems.bookkeeper.domain.model import OPEN
from audit.systems.bookkeeper.transforms.audit_rows import Settings, audit_parsed
from tests.bookkeeper.domain.cases import expected_entries, healthy, ledger, ok

CONTRACT = {
    "bk.entries_lost": "critical", "bk.entries_below_ack_quorum": "major", "bk.entries_below_write_quorum": "minor",
    "bk.entries_outside_ensemble": "major", "bk.metadata_invariant": "major", "bk.ensemble_unknown_bookie": "major",
    "bk.ensemble_dead_bookie": "major", "bk.placement_violation": "minor", "bk.ledger_open_too_long": "warning"}


def _findings() -> list[dict]:
    """Two ledgers that between them raise every BookKeeper check."""
    settings = Settings("r1", bookies={"c": {"b1": ("available", "/r1"), "b3": ("registered", "/r1"),
                                                  "bx": ("available", "/r1")}},
                             as_of_ms=10**9, open_ledger_max_age_ms=1000)
    closed = ledger({0: ["b1", "b2", "b3"]}, 29, Qw=3, Qa=2, ledger_id=1)
    answers = healthy(closed)
    answers["b1"] = ok([e for e in expected_entries(closed, "b1") if e not in (0, 1, 2)])   # 0: lost
    answers["b2"] = ok([e for e in expected_entries(closed, "b2") if e not in (0, 1)])      # 1: below Qa
    answers["b3"] = ok([e for e in expected_entries(closed, "b3") if e != 0])               # 2: below Qw
    answers["bx"] = ok([0, 5, 6])     # outside the ensemble; entry 0, which its write set lacks: #4651's shape
    # OPEN for too long, Qa > Qw, one rack only, b2 never registered, b3 dead
    stuck = ledger({0: ["b1", "b2", "b3"]}, -1, Qw=2, Qa=3, ledger_id=2, state=OPEN, ctime=1)
    return (audit_parsed("c", closed, answers, settings)["violations"]
            + audit_parsed("c", stuck, {}, settings)["violations"])


def test_severities_are_the_contract_ones():
    assert {c: k.severity for c, k in CHECKS.items()} == CONTRACT


def test_every_check_is_raised_with_the_table_severity():
    found = _findings()
    assert {f["check"] for f in found} == set(CHECKS)
    assert all(f["severity"] == CHECKS[f["check"]].severity and f["system"] == "bookkeeper" for f in found)


def test_the_severity_comes_from_the_table(monkeypatch):
    monkeypatch.setitem(checks.CHECKS, "bk.placement_violation", checks.Check("critical", "moved for this test"))
    (placement,) = [f for f in _findings() if f["check"] == "bk.placement_violation"]
    assert placement["severity"] == "critical"


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_not_a_validation_check(check):
    assert check not in checks.VALIDATION_CHECKS
