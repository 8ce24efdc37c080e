"""Run the GX checkpoints of the shared suite and of each system's suites over the run's Spark DataFrames.

The committed project (expectations/gx) is copied to a scratch folder and loaded from there: GX writes validation
results (and may rewrite its config) into the project it loads, and the repository -- possibly read-only,
possibly shared by concurrent runs -- must stay untouched. A suite the committed project does not have (a system
registered at run time) is added to that scratch copy from its SuiteSpec, with the generator's own code, so a
plug-in system gets GX without committed files. Data Docs go to a site added at run time in `docs_dir`.
One GX context per run: importing GX costs seconds."""
from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

from audit.contracts import System
from audit.validate.outcome import (ERROR, FAILED, PASSED, SKIPPED, ExpectationOutcome, SuiteOutcome,
                                    ValidationOutcome)
from audit.validate.spec import SuiteSpec

log = logging.getLogger("replaudit.validate")
DOCS_SITE = "replaudit_run"
SAMPLE_SIZE = 10


class ValidationSetupError(Exception):
    """The GX project cannot be used: `source` is the path, `field` what is wrong, `expected` what should be."""

    def __init__(self, source: str, field: str, expected: str):
        self.source, self.field, self.expected = source, field, expected
        super().__init__(f"{source}: {field}: expected {expected}")


def run_validations(spark, tables: Mapping[str, Any], project_dir: Path, docs_dir: Path,
                    systems: Iterable[System] | None = None) -> ValidationOutcome:
    """Validate each suite's table (`tables[suite.table]`, a Spark DataFrame) with the checkpoint of the
    same name in `project_dir/gx`, and write Data Docs to `docs_dir`. The suites are the shared one and those of
    `systems` (None: every registered system); a suite whose `applies_when` tables were not handed over is left
    out (applicable_suites), one whose table is absent is skipped, one GX cannot run is an error; neither stops
    the others. `spark` is the session the DataFrames belong to: GX reuses the active session rather than
    starting one."""
    started = time.monotonic()
    source = Path(project_dir) / "gx"
    if not (source / "great_expectations.yml").is_file():
        raise ValidationSetupError(str(source), "great_expectations.yml", "a committed GX file context")
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")  # no network calls from the audit
    spark.sparkContext  # noqa: B018 -- fail here, not inside GX, if the session is stopped
    docs_dir = Path(docs_dir)
    docs_dir.mkdir(parents=True, exist_ok=True)
    specs = applicable_suites(tables, systems)
    import great_expectations as gx

    with tempfile.TemporaryDirectory(prefix="replaudit-gx-") as scratch:
        shutil.copytree(source, Path(scratch) / "gx", ignore=shutil.ignore_patterns("uncommitted"))
        ctx = gx.get_context(mode="file", project_root_dir=scratch)
        ctx.enable_analytics(False)
        ctx.add_data_docs_site(site_name=DOCS_SITE, site_config={
            "class_name": "SiteBuilder",
            "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(docs_dir)},
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        })
        unbuilt = _add_missing_suites(ctx, [spec for spec in specs if tables.get(spec.table) is not None])
        suites = [SuiteOutcome(spec.name, spec.table, ERROR, error=unbuilt[spec.name]) if spec.name in unbuilt
                  else _run_suite(ctx, spec, tables.get(spec.table)) for spec in specs]
        docs_index = None
        if any(s.status in (PASSED, FAILED) for s in suites):
            ctx.build_data_docs(site_names=[DOCS_SITE])
            if (docs_dir / "index.html").is_file():
                docs_index = "index.html"
    return ValidationOutcome(suites=suites, docs_index=docs_index, duration_s=time.monotonic() - started)


def applicable_suites(tables: Mapping[str, Any], systems: Iterable[System] | None = None) -> list[SuiteSpec]:
    """The suites for this run (the shared one and those of `systems`, None: every registered system): one whose
    `applies_when` tables were not handed over belongs to a system the estate does not have and is left out, so
    it neither fails nor makes the run incomplete."""
    from audit.validate.suites import all_suites, suites_for

    out = []
    for spec in all_suites() if systems is None else suites_for(systems):
        if all(tables.get(t) is not None for t in spec.applies_when):
            out.append(spec)
        else:
            log.info("GX suite %s does not apply: no %s table", spec.name, ", ".join(spec.applies_when))
    return out


def _add_missing_suites(ctx, specs: list[SuiteSpec]) -> dict[str, str]:
    """Add to the (scratch) context every suite of `specs` it has no checkpoint for; returns {suite: why not}
    for those GX refused."""
    from great_expectations.exceptions import DataContextError

    from audit.validate.project import add_suite

    failed = {}
    for spec in specs:
        try:
            ctx.checkpoints.get(spec.name)
            continue
        except DataContextError:
            pass
        log.info("GX suite %s is not in the committed project: added to this run's copy", spec.name)
        try:
            add_suite(ctx, spec)
        except Exception as exc:  # GX raises many types; the other suites must still run
            log.exception("GX suite %s could not be added", spec.name)
            failed[spec.name] = f"could not add the suite to the GX project: {type(exc).__name__}: {exc}"
    return failed


def _run_suite(ctx, spec: SuiteSpec, df) -> SuiteOutcome:
    if df is None:
        return SuiteOutcome(spec.name, spec.table, SKIPPED, error=f"table {spec.table!r} was not produced")
    try:
        result = ctx.checkpoints.get(spec.name).run(batch_parameters={"dataframe": df})
    except Exception as exc:  # GX raises many types; the run must go on and say what broke
        log.exception("GX checkpoint %s failed", spec.name)
        return SuiteOutcome(spec.name, spec.table, ERROR, error=f"{type(exc).__name__}: {exc}")
    exps: list[ExpectationOutcome] = []
    for suite_result in result.run_results.values():
        exps.extend(_expectation_outcome(r) for r in suite_result.results)
    broken = [e for e in exps if e.exception]
    if broken:
        return SuiteOutcome(spec.name, spec.table, ERROR, error=f"{len(broken)} expectation(s) could not be "
                            f"evaluated: {broken[0].exception}", expectations=exps)
    return SuiteOutcome(spec.name, spec.table, PASSED if result.success else FAILED, expectations=exps)


def _expectation_outcome(r) -> ExpectationOutcome:
    cfg = r.expectation_config
    meta = cfg.meta or {}
    res = dict(r.result or {})
    exception = _exception_message(r.exception_info)
    raised = exception is not None
    count, sample = _unexpected(cfg.type, res)
    return ExpectationOutcome(expectation_type=cfg.type, check=meta.get("check", "?"),
                              severity=meta.get("severity", "?"), description=cfg.description or "",
                              success=bool(r.success) and not raised, unexpected_count=count,
                              sample=_json_safe(sample[:SAMPLE_SIZE]), exception=exception)


def _exception_message(info) -> str | None:
    """GX reports either one {raised_exception, exception_message} or, when a metric could not be
    computed, a mapping metric id -> ExceptionInfo."""
    if not info:
        return None
    candidates = [info] if isinstance(info, dict) and "raised_exception" in info else (
        info.values() if isinstance(info, dict) else [info])
    for c in candidates:
        get = c.get if isinstance(c, dict) else (lambda k, c=c: getattr(c, k, None))
        if get("raised_exception"):
            return str(get("exception_message") or "exception").strip().splitlines()[0][:500]
    return None


def _unexpected(gx_type: str, res: dict) -> tuple[int | None, list[Any]]:
    if gx_type == "unexpected_rows_expectation":
        rows = (res.get("details") or {}).get("unexpected_rows") or []
        return res.get("observed_value"), list(rows)
    if gx_type == "expect_table_columns_to_match_set":
        missing = ((res.get("details") or {}).get("mismatched") or {}).get("missing") or []
        return len(missing), list(missing)
    if "unexpected_count" in res:
        return res["unexpected_count"], list(res.get("partial_unexpected_list") or [])
    return None, []


def _json_safe(values: list[Any]) -> list[Any]:
    out = []
    for v in values:
        if hasattr(v, "asDict"):   # a Spark Row
            v = v.asDict(recursive=True)
        out.append(json.loads(json.dumps(v, default=str)))
    return out
