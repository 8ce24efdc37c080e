"""The suites as data: one checks table per system (valid severity, one-line meaning, every check the audit raises
and every check a GX suite names is in a table), the shared suite, `suites_for`, the generator (regenerates the
committed project byte for byte), and nothing shared in audit/validate naming a system."""
from __future__ import annotations

import hashlib
import importlib
import json
import re
import shutil
import uuid
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from audit import systems
from audit.contracts import SEVERITIES, Check
from audit.validate.project import build_project, keep_ids
from audit.validate.spec import ANY_CHECK, ExpectationSpec, SuiteSpec
from audit.validate.suites import SHARED, VIOLATIONS, all_suites, suites_for

REPO = Path(__file__).resolve().parents[2]
PROJECT = REPO / "expectations" / "gx"
BUILTIN = list(systems.BUILTIN)


def _tables(name: str):
    """(findings checks, validation checks) of a built-in system."""
    module = importlib.import_module(f"audit.systems.{name}.domain.checks")
    return module.CHECKS, getattr(module, "VALIDATION_CHECKS", {})


def _suites(name: str) -> tuple[SuiteSpec, ...]:
    return importlib.import_module(f"audit.systems.{name}.suites").SUITES


def _prefix(name: str) -> str:
    (prefix,) = {c.split(".", 1)[0] for table in _tables(name) for c in table}
    return prefix


# -- the checks tables ----------------------------------------------------------------------------------------
CHECK_ROWS = [(name, kind, check) for name in BUILTIN
              for kind, table in zip(("finding", "validation"), _tables(name)) for check in table]


@pytest.mark.parametrize("system, kind, check_id", CHECK_ROWS, ids=[f"{r[0]}:{r[2]}" for r in CHECK_ROWS])
def test_every_check_has_a_severity_and_a_one_line_meaning(system, kind, check_id):
    findings, validation = _tables(system)
    check = (findings if kind == "finding" else validation)[check_id]
    assert isinstance(check, Check) and check.severity in SEVERITIES
    assert check.meaning.strip() == check.meaning and check.meaning and "\n" not in check.meaning
    assert re.fullmatch(r"[a-z]+\.[a-z0-9_]+", check_id) and check_id.startswith(_prefix(system) + ".")
    assert not (check_id in findings and check_id in validation)


@pytest.mark.parametrize("name", BUILTIN)
def test_the_system_record_carries_its_checks_table(name):
    assert dict(systems.get(name).checks) == dict(_tables(name)[0])


def _literals(name: str) -> dict[str, int]:
    """Check ids quoted in the code of a system's audit (domain rules and transforms), with their counts."""
    pattern = re.compile(r"""["'](%s\.[a-z0-9_]+)["']""" % re.escape(_prefix(name)))
    out: dict[str, int] = {}
    for folder in (REPO / "audit" / "systems" / name / "domain", REPO / "audit" / "systems" / name / "transforms"):
        for path in folder.rglob("*.py"):
            for check in pattern.findall(path.read_text()):
                out[check] = out.get(check, 0) + 1
    return out


@pytest.mark.parametrize("name", BUILTIN)
def test_every_check_the_audit_raises_is_in_the_table(name):
    findings, validation = _tables(name)
    raised = _literals(name)
    assert set(raised) <= set(findings) | set(validation), "add the check to audit/systems/<system>/domain/checks.py"
    # each finding check is quoted once in its table and at least once where it is raised
    assert {c for c in findings if raised.get(c, 0) < 2} == set(), "a check in the table nothing raises"


SUITE_ROWS = [(name, spec.name, i) for name in BUILTIN for spec in _suites(name)
              for i in range(len(spec.expectations))]


@pytest.mark.parametrize("system, suite, index", SUITE_ROWS, ids=[f"{r[1]}[{r[2]}]" for r in SUITE_ROWS])
def test_every_check_a_suite_names_is_in_the_tables_with_its_severity(system, suite, index):
    findings, validation = _tables(system)
    table = {**findings, **validation}
    (spec,) = [s for s in _suites(system) if s.name == suite]
    e = spec.expectations[index]
    assert e.check in table and e.severity == table[e.check].severity
    prefix = _prefix(system)
    quoted = set(re.findall(r"'(%s\.[a-z0-9_]+)'" % re.escape(prefix), json.dumps(e.kwargs)))  # ids in the SQL
    assert quoted <= set(findings), f"{suite}: {sorted(quoted - set(findings))} in the SQL of {e.description!r}"


def test_the_shared_suite_gates_on_every_severity_for_any_check():
    assert SHARED == (VIOLATIONS,) and VIOLATIONS.table == "violations" and not VIOLATIONS.applies_when
    assert [(e.check, e.severity) for e in VIOLATIONS.expectations] == [(ANY_CHECK, s) for s in SEVERITIES]
    assert all(f"severity = '{e.severity}'" in e.kwargs["unexpected_rows_query"] for e in VIOLATIONS.expectations)


def test_a_system_suite_names_its_own_checks_never_any_check():
    for name in BUILTIN:
        assert all(e.check != ANY_CHECK for spec in _suites(name) for e in spec.expectations)


def test_an_unknown_severity_is_refused():
    with pytest.raises(ValueError, match="severity"):
        ExpectationSpec("ExpectColumnValuesToNotBeNull", {"column": "x"}, "x.y", "fatal", "x is set")


# -- suites_for ---------------------------------------------------------------------------------------------
def _system(*specs):
    return SimpleNamespace(validation=SimpleNamespace(suites=lambda: specs))


A = SuiteSpec("a_rows", "a_rows")
B_ALWAYS = SuiteSpec("b_rows", "b_rows")
B_SOMETIMES = SuiteSpec("b_extra", "b_extra", applies_when=("b_extra",))
A_SOMETIMES = SuiteSpec("a_extra", "violations", applies_when=("a_extra",))


def test_suites_for_orders_unconditional_suites_first_then_by_system_then_the_shared_suite():
    got = [s.name for s in suites_for([_system(A, A_SOMETIMES), _system(B_SOMETIMES, B_ALWAYS)])]
    assert got == ["a_rows", "b_rows", "violations", "a_extra", "b_extra"]
    assert suites_for([]) == SHARED


def test_suites_for_refuses_two_suites_of_one_name():
    with pytest.raises(ValueError, match="'a_rows'"):
        suites_for([_system(A), _system(replace(A, table="other"))])
    with pytest.raises(ValueError, match="'violations'"):
        suites_for([_system(replace(A, name="violations"))])
    with pytest.raises(TypeError):
        suites_for([_system("not a suite")])


def test_all_suites_are_those_of_every_registered_system():
    names = [s.name for s in all_suites()]
    assert names == [s.name for s in suites_for(systems.all_systems())]
    assert names == ["bk_ledger_replicas", "violations", "pulsar_failover", "pulsar_violations",
                     "kafka_partition_metrics", "kafka_replica_metrics", "kafka_mm2_failover", "kafka_violations"]


# -- nothing shared names a system --------------------------------------------------------------------------
def test_nothing_in_validate_outside_a_system_suite_file_names_a_system():
    words = {name: {name, _prefix(name) + ".", _prefix(name) + "_"} for name in BUILTIN}
    for name in BUILTIN:
        for spec in _suites(name):
            words[name] |= {spec.name, spec.table, *spec.applies_when} - {"violations"}
    own: set = set()   # a system's suites live in its package (audit/systems/<name>/suites.py)
    offending = []
    for path in sorted((REPO / "audit" / "validate").rglob("*.py")):
        if path in own:
            continue
        text = path.read_text().lower()
        offending += [(str(path.relative_to(REPO)), w) for ws in words.values() for w in sorted(ws)
                      if w.lower() in text]
    assert offending == []


# -- the generator ------------------------------------------------------------------------------------------
def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "uncommitted" not in p.parts}


def test_regenerating_gives_the_committed_project_byte_for_byte(spark, tmp_path):
    shutil.copytree(PROJECT, tmp_path / "gx")
    build_project(tmp_path, spark, all_suites())
    assert _digest(tmp_path / "gx") == _digest(PROJECT), \
        "expectations/gx is stale: regenerate with python -m audit.validate.suites expectations"


def test_keep_ids_keeps_every_unchanged_object_and_renews_a_changed_one(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    shutil.copytree(PROJECT, old)
    shutil.copytree(PROJECT, new)
    fresh: dict[str, str] = {}
    uuid_re = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
    for path in (p for p in new.rglob("*") if p.is_file()):   # what a regeneration does: new ids everywhere
        path.write_text(uuid_re.sub(lambda m: fresh.setdefault(m.group(0), str(uuid.uuid4())), path.read_text()))
    changed = new / "expectations" / "violations.json"
    changed.write_text(changed.read_text().replace("no major finding (data at risk)", "no major finding"))

    mapping = keep_ids(old, new)
    assert _digest(new) == {**_digest(old), "expectations/violations.json": _digest(new)[
        "expectations/violations.json"]}
    before = {e["description"]: e["id"] for e in json.loads((old / changed.relative_to(new)).read_text())[
        "expectations"]}
    after = json.loads(changed.read_text())
    ids = {e["description"]: e["id"] for e in after["expectations"]}
    assert ids.pop("no major finding") == fresh[before.pop("no major finding (data at risk)")]
    assert ids == before and after["id"] == json.loads((old / "expectations" / "violations.json").read_text())["id"]
    assert len(mapping) == len(fresh) - 1
