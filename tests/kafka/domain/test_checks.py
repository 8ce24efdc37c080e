"""The checks table: ids, severities, and that every check is raised by some case of the rule tables and
nothing outside the table is ever raised."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from audit.contracts import SEVERITIES
from audit.systems.kafka.domain import assignment, mm2, partition
from audit.systems.kafka.domain.checks import CHECKS, COVERAGE
from tests.kafka.domain import test_assignment, test_mm2, test_partition


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_check_entry(check):
    assert re.fullmatch(r"kafka\.[a-z0-9_]+", check)
    assert CHECKS[check].severity in SEVERITIES
    assert len(CHECKS[check].meaning) > 20


def test_coverage_is_not_a_check():
    assert COVERAGE not in CHECKS


def test_the_rules_name_only_listed_checks():
    named = set()
    for module in (partition, mm2, assignment):
        named |= set(re.findall(r'"(kafka\.[a-z0-9_]+)"', Path(module.__file__).read_text(encoding="utf-8")))
    assert named == set(CHECKS)


def test_every_check_is_raised_by_a_case():
    raised = {c for _, _, _, expected in test_partition.CASES for c, *_ in expected}
    raised |= {c for _, _, _, expected in test_partition.KIP101 for c, *_ in expected}
    raised |= {c for _, _, _, expected in test_mm2.GROUPS for c, *_ in expected}
    raised |= {c for case in test_assignment.CASES for c, _ in case[-1]}
    raised |= {assignment.STRAY} if any(stray for *_, stray in test_assignment.STRAY_CASES) else set()
    assert raised - {COVERAGE} == set(CHECKS)
