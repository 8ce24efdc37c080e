"""The machine-readable summary of a run (reports/summary.json). Values in, dict out; the only reads are the
systems' own report sections (`ReportSection.summary` / `.scorecard`, given the run's outputs).

Exit status: "violations" when any finding exists, else "incomplete" when something could not be
audited (a coverage gap, a failed normalize/audit job, or a GX suite that was skipped or broke), else "clean".

Each declared system's section adds its own keys to the summary (`ReportSection.summary(outputs)` returns a dict
merged into the top level). Lab scorecard: each ground-truth file belongs to one system (its "system" key; an old
file without one belongs to the only system whose `truth_required` keys its findings carry). Its findings are
matched to that system's violations on the section's keys (`truth_key(finding)` against `claims(violation)`);
a match whose entry_count differs is "wrong_count" (for a check whose count is a proven lower bound,
`Check.at_least`: a count of 0 or above the true one). A section with a `scorecard` adds its own part under
`scorecard_key` (e.g. counts a lab simulated exactly), and that part's "perfect" joins the scorecard's."""
from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Mapping, Sequence

from audit.contracts import SEVERITIES, RunOutputs, System
from audit.validate.outcome import ValidationOutcome

CLEAN, VIOLATIONS, INCOMPLETE = "clean", "violations", "incomplete"
DETAIL_LIMIT = 200   # scorecard items listed per outcome kind
KINDS = ("injected", "detected", "wrong_count", "missed", "false_alarms")
_ClaimPool = dict[tuple, list[tuple[int, int, Any]]]   # (system, claim key) -> [(violation, claim, count)]


class SummaryInputError(ValueError):
    """A summary input is malformed: `source` names the input, `field` the key, `expected` what it should be."""

    def __init__(self, source: str, field: str, expected: str):
        self.source, self.field, self.expected = source, field, expected
        super().__init__(f"{source}: {field}: expected {expected}")


def build_summary(run_meta: Mapping[str, Any], violations: list[dict], coverage_gaps: list[dict],
                  validation: ValidationOutcome | Mapping[str, Any] | None, ground_truth: Any = None, *,
                  systems: Sequence[System] = (), outputs: RunOutputs | None = None,
                  parts: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`systems`: the run's declared systems, in order. `outputs`: the staged run, handed to the systems' report
    sections. `parts`: the systems' summary keys when already computed (else `system_parts(systems, outputs)`;
    nothing without outputs)."""
    for i, v in enumerate(violations):
        for key in ("system", "cluster", "check", "severity"):
            if not isinstance(v.get(key), str):
                raise SummaryInputError(f"violations[{i}]", key, "a string")
        if v["severity"] not in SEVERITIES:
            raise SummaryInputError(f"violations[{i}]", "severity", f"one of {SEVERITIES}")
    gx = _validation_json(validation)
    # A failing expectation marks a violation; findings no suite covers still count.
    # Only evaluated-and-failed expectations mark violations; skipped or broken suites make a run incomplete.
    failed = [e for s in gx.get("suites", []) if s.get("status") == "failed"
              for e in s.get("expectations", []) if not e.get("success") and not e.get("exception")]
    status = (VIOLATIONS if violations or failed else
              INCOMPLETE if coverage_gaps or not gx.get("complete", False) else CLEAN)
    summary: dict[str, Any] = {
        "estate": run_meta.get("estate"), "run_id": run_meta.get("run_id"), "run": dict(run_meta),
        "status": status,
        "complete": not coverage_gaps and bool(gx.get("complete", False)),
        "counts": count_violations(violations),
        "coverage_gaps": [dict(g) for g in coverage_gaps],
        "validation": {**gx, "failed_expectations": _failed_expectations(gx)},
    }
    if parts is None:
        parts = system_parts(systems, outputs) if outputs is not None else {}
    for key, value in parts.items():
        if key in summary:
            raise SummaryInputError("system summary", key, "a key the summary does not already hold")
        summary[key] = value
    truths = _truth_list(ground_truth, systems)
    if truths:
        summary["lab"] = scorecard(truths, violations, systems, outputs)
    return summary


def system_parts(systems: Sequence[System], outputs: RunOutputs) -> dict[str, Any]:
    """Every system's `report.summary(outputs)`, merged; two systems may not claim the same key."""
    out: dict[str, Any] = {}
    owner: dict[str, str] = {}
    for system in systems:
        for key, value in (system.report.summary(outputs) or {}).items():
            if key in out:
                raise SummaryInputError(f"system {system.name}", key, f"a key system {owner[key]} does not use")
            out[key], owner[key] = value, system.name
    return out


def count_violations(violations: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    by_cluster: dict[str, Counter] = {}
    by_system, by_check, by_sev = Counter(), Counter(), Counter()
    entries = 0
    n = 0
    for v in violations:
        n += 1
        by_system[v["system"]] += 1
        by_check[v["check"]] += 1
        by_sev[v["severity"]] += 1
        by_cluster.setdefault(f'{v["system"]}/{v["cluster"]}', Counter())[v["severity"]] += 1
        entries += int(v.get("entry_count") or 0)
    return {"total": n, "entries": entries,
            "by_severity": {s: by_sev.get(s, 0) for s in SEVERITIES},
            "by_system": dict(sorted(by_system.items())),
            "by_check": dict(sorted(by_check.items())),
            "by_cluster": {c: {s: cnt.get(s, 0) for s in SEVERITIES} for c, cnt in sorted(by_cluster.items())}}


# -- lab scorecard ---------------------------------------------------------------------------
def _count_matches(got: Any, expected: int, at_least: bool) -> bool:
    """Exact, or for a check whose count is a proven lower bound (Check.at_least): from 1 up to the true count."""
    if not at_least:
        return got == expected
    return isinstance(got, int) and 0 < got <= expected


def scorecard(truths: Any, violations: list[Mapping[str, Any]], systems: Sequence[System],
              outputs: RunOutputs | None = None) -> dict[str, Any]:
    """`truths`: ground truth in any shape `build_summary` accepts. A violation's claims (its section's
    `claims(violation)`) are keyed by its system: the first claim is the violation as a whole and answers one
    truth, only while the violation answered nothing else; each further claim (a part of the violation, e.g.
    one replica of a finding about several) answers one truth of its own."""
    truths = _truth_list(truths, systems)
    sections = {s.name: s.report for s in systems}
    at_least = {c for s in systems for c, check in s.checks.items() if check.at_least}
    lab_clusters = {t.get("cluster") for t in truths}
    expected = [(f, t["system"]) for t in truths for f in t.get("findings", [])]
    scored = [v for v in violations if v.get("cluster") in lab_clusters]
    per_check: dict[str, Counter] = {}
    detected, wrong, missed, used_violations = _match_truths(expected, _claim_pool(scored, sections), sections,
                                                             at_least, per_check)
    false_alarms = _false_alarms(scored, used_violations, per_check)
    per_cluster = _per_cluster(lab_clusters, detected=detected, wrong_count=wrong, missed=missed,
                               false_alarms=false_alarms)
    seeds = {t.get("cluster"): t.get("seed") for t in truths}
    card = {
        "clusters": sorted(c for c in lab_clusters if c),
        "faults": sum(len(t.get("faults", [])) for t in truths),
        "injected": len(expected), "detected": len(detected), "wrong_count": len(wrong),
        "missed": len(missed), "false_alarms": len(false_alarms),
        "perfect": not (wrong or missed or false_alarms),
        "by_check": {c: {k: cnt.get(k, 0) for k in KINDS} for c, cnt in sorted(per_check.items())},
        # one line per lab cluster (a lab seed): what a many-seed estate prints seed by seed
        "by_cluster": {c: {"seed": seeds.get(c), "injected": cnt["detected"] + cnt["wrong_count"] + cnt["missed"],
                           **{k: cnt.get(k, 0) for k in ("detected", "wrong_count", "missed", "false_alarms")}}
                       for c, cnt in sorted(per_cluster.items())},
        "wrong_count_items": wrong[:DETAIL_LIMIT], "missed_items": missed[:DETAIL_LIMIT],
        "false_alarm_items": false_alarms[:DETAIL_LIMIT],
    }
    _add_section_scorecards(card, truths, systems, outputs)
    return card


def _claim_pool(scored: list[Mapping[str, Any]], sections: Mapping[str, Any]) -> _ClaimPool:
    """(system, claim key) -> [(violation index, claim index, claimed count)]: each claim answers one truth item."""
    pool: _ClaimPool = {}
    for vi, v in enumerate(scored):
        section = sections.get(v.get("system"))
        for ci, (key, count) in enumerate(section.claims(v) if section else ()):
            pool.setdefault((v["system"], key), []).append((vi, ci, count))
    return pool


def _match_truths(expected: list[tuple[Mapping[str, Any], str]], pool: _ClaimPool,
                  sections: Mapping[str, Any], at_least: set[str], per_check: dict[str, Counter]
                  ) -> tuple[list[dict], list[dict], list[dict], set[int]]:
    """Each expected finding takes the first unused claim of its key -> (detected, wrong_count, missed items, the
    violations that answered one); counts them in `per_check`."""
    used_claims: set[tuple[int, int]] = set()
    used_violations: set[int] = set()
    detected, wrong, missed = [], [], []
    for f, system in expected:
        section = sections[system]
        # a violation's first claim (the whole violation) only while the violation answered nothing else
        match = next((c for c in pool.get((system, section.truth_key(f)), []) if (c[0], c[1]) not in used_claims
                      and (c[1] > 0 or c[0] not in used_violations)), None)
        pc = per_check.setdefault(f["check"], Counter())
        pc["injected"] += 1
        item = {"check": f["check"], "cluster": f["cluster"], **section.truth_item(f),
                "expected_entry_count": f.get("entry_count")}
        if match is None:
            missed.append(item)
            pc["missed"] += 1
            continue
        vi, ci, got = match
        used_claims.add((vi, ci))
        used_violations.add(vi)
        if f.get("entry_count") is not None and not _count_matches(got, f["entry_count"], f["check"] in at_least):
            wrong.append({**item, "entry_count": got})
            pc["wrong_count"] += 1
        else:
            detected.append(item)
            pc["detected"] += 1
    return detected, wrong, missed, used_violations


def _false_alarms(scored: list[Mapping[str, Any]], used_violations: set[int], per_check: dict[str, Counter]
                  ) -> list[dict[str, Any]]:
    """The violations none of whose claims answered a truth item; counted in `per_check`."""
    false_alarms = []
    for vi, v in enumerate(scored):
        if vi not in used_violations:
            false_alarms.append({"check": v["check"], "cluster": v["cluster"], "subject": v.get("subject"),
                                 "entry_count": v.get("entry_count")})
            per_check.setdefault(v["check"], Counter())["false_alarms"] += 1
    return false_alarms


def _per_cluster(lab_clusters: set[Any], **items_by_kind: list[dict[str, Any]]) -> dict[str, Counter]:
    """{lab cluster: Counter of its items per outcome kind}; every named lab cluster, even one without items."""
    per_cluster: dict[str, Counter] = {c: Counter() for c in lab_clusters if c}
    for kind, items in items_by_kind.items():
        for item in items:
            per_cluster.setdefault(item["cluster"], Counter())[kind] += 1
    return per_cluster


def _add_section_scorecards(card: dict[str, Any], truths: list[dict[str, Any]], systems: Sequence[System],
                            outputs: RunOutputs | None) -> None:
    """Each section with a `scorecard` adds its part under `scorecard_key`; its "perfect" joins the card's."""
    for system in systems:
        section = system.report
        if section.scorecard is None or not section.scorecard_key:
            continue
        # each section scores its own system's ground truth (truth keys of one system mean nothing to another)
        part = section.scorecard([t for t in truths if t.get("system") == system.name], outputs)
        if part is not None:
            card[section.scorecard_key] = part
            card["perfect"] = card["perfect"] and bool(part.get("perfect", True))


def _truth_list(ground_truth: Any, systems: Sequence[System]) -> list[dict[str, Any]]:
    """None, one cluster's ground truth, a list of them, or {cluster: ground truth}; each returned as a copy
    carrying its "system"."""
    if not ground_truth:
        return []
    if isinstance(ground_truth, Mapping) and "findings" in ground_truth:
        items = [ground_truth]
    elif isinstance(ground_truth, Mapping):
        items = list(ground_truth.values())
    elif isinstance(ground_truth, list):
        items = ground_truth
    else:
        raise SummaryInputError("ground_truth", "(root)", "a mapping or a list of mappings")
    sections = {s.name: s.report for s in systems}
    out = []
    for i, t in enumerate(items):
        if not isinstance(t, Mapping) or not isinstance(t.get("findings"), list):
            raise SummaryInputError(f"ground_truth[{i}]", "findings", "a list")
        system = _truth_system(i, t, systems)
        for j, f in enumerate(t["findings"]):
            for k in sections[system].truth_required:
                if not isinstance(f, Mapping) or f.get(k) is None:
                    raise SummaryInputError(f"ground_truth[{i}].findings[{j}]", k, "a value")
        out.append({**t, "system": system})
    return out


def _truth_system(i: int, truth: Mapping[str, Any], systems: Sequence[System]) -> str:
    """The truth's "system"; for a file without one, the only system whose `truth_required` keys every finding
    carries, else (none or several) the system missing the fewest of them, first in `systems` on a tie -- so an
    old file is checked against the keys it most likely meant, and its first missing key is named."""
    names = [s.name for s in systems]
    if not names:
        raise SummaryInputError(f"ground_truth[{i}]", "system", "a system of the run (no system was given)")
    system = truth.get("system")
    if system is not None:
        if system not in names:
            raise SummaryInputError(f"ground_truth[{i}]", "system", f"one of {', '.join(names)}")
        return system
    findings = [f if isinstance(f, Mapping) else {} for f in truth["findings"]]

    def missing(s: System) -> int:
        return sum(f.get(k) is None for f in findings for k in s.report.truth_required)

    fits = [s.name for s in systems if missing(s) == 0]
    if len(fits) == 1:
        return fits[0]
    return min(systems, key=missing).name


def _validation_json(validation: Any) -> dict[str, Any]:
    if validation is None:
        return {"success": False, "complete": False, "suites": [], "docs_index": None}
    if isinstance(validation, ValidationOutcome):
        return validation.to_json()
    if isinstance(validation, Mapping) and isinstance(validation.get("suites"), list):
        return dict(validation)
    raise SummaryInputError("validation", "suites", "a ValidationOutcome or its to_json() dict")


def _failed_expectations(gx: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"suite": s["name"], "check": e.get("check"), "severity": e.get("severity"),
             "expectation_type": e.get("expectation_type"), "unexpected_count": e.get("unexpected_count"),
             "exception": e.get("exception")}
            for s in gx.get("suites", []) for e in s.get("expectations", []) if not e.get("success")]
