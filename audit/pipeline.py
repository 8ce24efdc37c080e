"""The stages of one audit run, shared by `replaudit run` and the Airflow DAG.

collect -> normalize -> audit -> validate -> report (publishes the manifest) -> alert.
Each stage is a function of a RunContext and reads only what earlier stages wrote into the run's
attempt folder in the object store, so the DAG can run each stage as its own task. collect runs per cluster,
normalize and audit per system (the systems the estate declares, from the registry in audit/systems): a system
whose job fails leaves a note in reports/stages/ that the report turns into a coverage gap, and the other systems'
findings still reach validate, the report and the alerts."""
from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from audit.timeutil import new_run_id, now_ms

log = logging.getLogger("replaudit.pipeline")
STAGE_NOTES = ("reports", "stages")   # <stage>-<system>.json: a system job that failed


@dataclass
class RunContext:
    estate_file: str
    run_id: str
    attempt_id: str
    as_of_ms: int
    extra: dict = field(default_factory=dict)
    scope: dict = field(default_factory=dict)   # an incident check's Scope (to_json); {}: the whole estate

    # -- reconstruction across Airflow tasks -------------------------------------------------
    def to_xcom(self) -> dict:
        return asdict(self)

    @classmethod
    def from_xcom(cls, data: dict) -> "RunContext":
        return cls(**data)

    @cached_property
    def estate(self):
        from audit.config.estate import load_estate

        return load_estate(self.estate_file)

    @cached_property
    def secrets(self):
        from audit.config.secrets import SecretResolver

        return SecretResolver()

    @cached_property
    def store(self):
        from audit.store import open_estate_store

        return open_estate_store(self.estate.store, self.secrets)

    @cached_property
    def writer(self):
        from audit.store.run import RunWriter

        return RunWriter(self.store, self.estate.name, self.run_id, self.attempt_id)

    def staging(self, label: str | None = None):
        """Local folders for one task; `label` keeps tasks that run in parallel (one per system) apart."""
        from audit.store.staging import LocalStaging

        return LocalStaging(self.writer, label=label)

    @property
    def scoped(self):
        from audit.contracts import Scope

        return Scope.from_json(self.scope)

    @property
    def incident(self) -> bool:
        return bool(self.scope)

    def systems(self) -> list:
        """The systems the estate declares (those the scope asks for), in registry order."""
        from audit import systems

        wanted = self.scoped.systems
        return [s for s in systems.declared(self.estate) if not wanted or s.name in wanted]

    def clusters(self, system: str) -> list:
        """The estate's clusters of `system` (those the scope asks for)."""
        wanted = self.scoped.clusters
        return [c for c in self.estate.clusters(system) if not wanted or c.name in wanted]

    def spark(self):
        from audit.sparkutil.session import get_spark

        return get_spark(master=self.estate.spark.master, conf=dict(self.estate.spark.conf))


INCIDENT_PREFIX = "incident__"


class ScopeError(ValueError):
    """An incident check asked for something the estate cannot give: `field` names what, `expected` what can be."""

    def __init__(self, field: str, got: str, expected: str):
        if field == "subjects":
            super().__init__(f"scope: subjects: {got!r}: expected {expected}")
        else:
            super().__init__(f"scope: {field}: {got!r} is not in the estate; expected one of {expected}")


def start_run(estate_file: str, run_id: str | None = None, as_of_ms: int | None = None,
              scope=None) -> RunContext:
    """`scope`: an audit.contracts.Scope for an incident check (its run id starts with "incident__")."""
    from audit import systems
    from audit.config.estate import load_estate
    from audit.store.run import new_attempt_id

    if not estate_file:
        from audit.config.home import NO_ESTATE

        raise ValueError(NO_ESTATE)
    estate = load_estate(estate_file)  # fail fast, naming the field, before anything is written
    doc = {}
    if scope is not None:
        declared = [s.name for s in systems.declared(estate)]
        for name in scope.systems:
            if name not in declared:
                raise ScopeError("systems", name, ", ".join(declared) or "(none declared)")
        names = [c.name for s in declared for c in estate.clusters(s)
                 if not scope.systems or s in scope.systems]
        for name in scope.clusters:
            if name not in names:
                raise ScopeError("clusters", name, ", ".join(names) or "(none)")
        if scope.subjects:
            asked = [s for s in systems.declared(estate) if not scope.systems or s.name in scope.systems]
            blind = [s.name for s in asked if s.incident is None]
            if blind:
                raise ScopeError("subjects", ", ".join(scope.subjects),
                                 f"a scope whose systems narrow to subjects: {', '.join(blind)} cannot yet (ask "
                                 f"for its clusters, or --system {' / '.join(s.name for s in asked if s.incident)})")
        doc = scope.to_json()
        run_id = run_id or INCIDENT_PREFIX + new_run_id()
    return RunContext(str(Path(estate_file).resolve()), run_id or new_run_id(), new_attempt_id(),
                      as_of_ms if as_of_ms is not None else now_ms(), scope=doc)


def list_clusters(ctx: RunContext) -> list[dict]:
    return [{"system": s.name, "name": c.name} for s in ctx.systems() for c in ctx.clusters(s.name)]


def list_systems(ctx: RunContext) -> list[str]:
    return [s.name for s in ctx.systems()]


# -- collect --------------------------------------------------------------------------------
def collect_cluster(ctx: RunContext, system: str, name: str) -> dict:
    """Raw evidence of one cluster. Raw bytes are committed to the store even when the collector fails
    half-way: nothing collected is lost."""
    from audit import systems
    from audit.collectors import dispatch
    from audit.collectors.base import CollectionReport, CoverageGap, DirSink
    from audit.contracts import CollectRequest

    cluster = ctx.estate.cluster(system, name)
    st = ctx.staging(f"collect-{system}-{name}")
    try:
        raw_dir = st.dir("raw", system, name)
        sink = DirSink(raw_dir)
        try:
            report, truth = dispatch.collect(systems.get(system),
                CollectRequest(cluster, sink, ctx.secrets, ctx.as_of_ms, ctx.estate.thresholds, ctx.scoped))
            if truth is not None:
                (st.dir("raw", "_lab", name) / "ground_truth.json").write_text(
                    json.dumps({"system": system, **truth}, indent=1, sort_keys=True))
        except Exception as exc:  # the cluster is not covered; the run goes on for the others
            log.exception("collect %s/%s failed", system, name)
            report = CollectionReport(system=system, cluster=name, counts={},
                                      gaps=[CoverageGap(source=f"{system}/{name}", what="whole cluster",
                                                        error=f"{type(exc).__name__}: {exc}")])
        (raw_dir / "collection.json").write_text(report.to_json())
        return report.to_dict()
    finally:
        st.commit()
        st.cleanup()


REREAD_KEY = "reread.json"   # per cluster, beside collection.json: the reread's CollectionReport


def _stored_keys(ctx: RunContext, area: str, *parts: str) -> list[str]:
    prefix = ctx.writer.key(area, *parts) + "/"
    return [k[len(prefix):] for k in ctx.store.list(prefix)]


def reread(ctx: RunContext, system: str) -> dict:
    """A system's reread (contracts.System.reread) once all its clusters are collected. Done once per attempt: a
    cluster that already holds its reread.json is not read again (evidence is never replaced)."""
    from audit import systems
    from audit.collectors import dispatch
    from audit.collectors.base import CollectionReport, CoverageGap, DirSink
    from audit.contracts import RereadRequest

    s = systems.get(system)
    clusters = tuple(ctx.clusters(system))
    if not dispatch.rereads(s) or not clusters:
        return {}
    if all(ctx.store.exists(ctx.writer.key("raw", system, c.name, REREAD_KEY)) for c in clusters):
        return {"reread": "already done"}
    st = ctx.staging(f"reread-{system}")
    try:
        try:
            reports = dict(dispatch.reread(s, RereadRequest(
                clusters, lambda name: DirSink(st.dir("raw", system, name)),
                lambda name: _stored_keys(ctx, "raw", system, name), ctx.secrets, ctx.as_of_ms,
                ctx.estate.thresholds)))
        except Exception as exc:  # not reread: the audit judges by the collection alone and says so
            log.exception("reread %s failed", system)
            reports = {c.name: CollectionReport(system=system, cluster=c.name, counts={}, gaps=[CoverageGap(
                source=f"{system}/{c.name}", what="reread", error=f"{type(exc).__name__}: {exc}")])
                for c in clusters}
        for name, report in reports.items():
            (st.dir("raw", system, name) / REREAD_KEY).write_text(report.to_json())
        return {name: len(report.gaps) for name, report in reports.items()}
    finally:
        st.commit()
        st.cleanup()


# -- spark stages, per system ---------------------------------------------------------------
def _systems(ctx: RunContext, system: str | None) -> list:
    from audit import systems

    return ctx.systems() if system is None else [systems.get(system)]


def _job(ctx: RunContext, stage: str, system, work) -> dict:
    """Run one system's job in its own staging; on failure leave reports/stages/<stage>-<system>.json (the report
    lists it as not covered) and re-raise. A retry that succeeds removes an earlier try's note."""
    note = f"{stage}-{system.name}.json"
    ctx.store.delete([ctx.writer.key(*STAGE_NOTES, note)])
    try:
        with ctx.staging(f"{stage}-{system.name}") as st:
            return work(st)
    except Exception as exc:
        ctx.writer.put(STAGE_NOTES[0], f"{STAGE_NOTES[1]}/{note}", json.dumps(
            {"system": system.name, "stage": stage, "error": f"{type(exc).__name__}: {exc}"}, sort_keys=True).encode())
        raise


def normalize(ctx: RunContext, system: str | None = None) -> dict:
    """A system's normalizer (every declared system when `system` is None) over its folder of raw/."""
    from spark_jobs.run import run_stage

    counts = {}
    for s in _systems(ctx, system):
        counts.update(_job(ctx, "normalize", s, lambda st, s=s: run_stage(
            ctx.spark(), s.name, "normalize", str(st.fetch("raw", s.name).parent), str(st.dir("tables")))))
    return counts


def audit(ctx: RunContext, system: str | None = None) -> dict:
    """A system's audit job (every declared system when `system` is None) over its normalized tables."""
    from spark_jobs.run import run_stage

    result = {}
    for s in _systems(ctx, system):
        result.update(_job(ctx, "audit", s, lambda st, s=s: run_stage(
            ctx.spark(), s.name, "audit", str(st.fetch("tables")), str(st.root), run_id=ctx.run_id,
            as_of_ms=ctx.as_of_ms, thresholds=ctx.estate.thresholds, clusters=ctx.clusters(s.name),
            scope=ctx.scoped)))
    return result


def validate(ctx: RunContext) -> dict:
    """GX over the findings of every system and each declared system's own tables (a system whose tables the run
    did not write is left out, as its suites are)."""
    from audit.transforms.common import has_table
    from audit.validate.gx_runner import run_validations

    spark = ctx.spark()
    with ctx.staging("validate") as st:
        areas = {"findings": st.fetch("findings")}   # each area fetched once, and only when a table lives there
        paths = {"violations": areas["findings"] / "violations"}
        for s in ctx.systems():
            for table, (area, folder) in s.validation.tables.items():
                if area not in areas:
                    areas[area] = st.fetch(area)
                paths[table] = areas[area] / folder
        dfs = {name: spark.read.parquet(str(path)) for name, path in paths.items() if has_table(str(path))}
        docs = st.dir("reports", "data_docs")
        outcome = run_validations(spark, dfs, project_dir=_expectations_dir(), docs_dir=docs, systems=ctx.systems())
        result = outcome.to_json()
        (st.dir("reports") / "validation.json").write_text(json.dumps(result, indent=1, sort_keys=True))
        return result


def _expectations_dir() -> Path:
    from audit.config.home import project_home

    return project_home() / "expectations"


# -- report, publish, alert -----------------------------------------------------------------
def report(ctx: RunContext) -> dict:
    """Summary, HTML report and repair plan; then the manifest (the run becomes visible)."""
    from audit.report.build import build_run_report

    with ctx.staging("report") as st:
        # What build_run_report reads (a no-op for a local store; an S3 store is read through staging).
        for area in ("tables", "findings", "metrics", "reports"):
            st.fetch(area)
        st.fetch("raw", "_lab")
        for c in list_clusters(ctx):
            st.fetch_file("raw", c["system"], c["name"], "collection.json")
            st.fetch_file("raw", c["system"], c["name"], REREAD_KEY)
        # Where a person opens the report: the store URI plus the key (a local path for file:// stores).
        report_prefix = ctx.estate.store.uri.rstrip("/") + "/" + ctx.writer.key("reports") + "/"
        summary = build_run_report(st.root, estate=ctx.estate.name, run_id=ctx.run_id,
                                   attempt_id=ctx.attempt_id, report_prefix=report_prefix,
                                   systems=ctx.systems(), estate_config=ctx.estate, history=_history(ctx),
                                   at_ms=ctx.as_of_ms, first_seen=_first_seen(ctx), incident=_incident(ctx))
    ctx.writer.publish(summary)
    return summary


def _history(ctx: RunContext) -> list:
    """The earlier runs' metrics for the report's plots; none (and a log line) when the history cannot be read."""
    from audit.history.store import recent
    from audit.history.trend import RUNS

    try:
        return recent(ctx.store, ctx.estate.name, RUNS, exclude=ctx.run_id)
    except ValueError:
        log.exception("metrics history unreadable: the report plots tonight only")
        return []


def _incident(ctx: RunContext) -> dict | None:
    """An incident check's scope for the report: what was asked and the estate's clusters left out."""
    if not ctx.incident:
        return None
    from audit import systems

    asked = {(s.name, c.name) for s in ctx.systems() for c in ctx.clusters(s.name)}
    every = [(s.name, c.name) for s in systems.declared(ctx.estate) for c in ctx.estate.clusters(s.name)]
    return {**ctx.scope, "not_asked": [f"{s}/{c}" for s, c in every if (s, c) not in asked]}


def _first_seen(ctx: RunContext) -> dict:
    """fingerprint -> first seen of what was firing after the previous run (its alert state); {} when unreadable."""
    from audit.alerts.state import AlertStateError, previous_state

    try:
        state, _ = previous_state(ctx.store, ctx.estate.name, ctx.run_id)
    except AlertStateError:
        log.exception("alert state unreadable: every finding shows as first seen tonight")
        return {}
    return {fp: t.first_seen_ms for fp, t in state.items()}


def alert(ctx: RunContext) -> dict:
    """The lifecycle's notices (new, worse, reminder, resolved; audit incomplete) to every route, the state kept
    in the store for the next run (audit/alerts/notify.py)."""
    from audit.alerts.notify import alert_run
    from audit.report.build import load_violations

    summary = json.loads(ctx.store.get(ctx.writer.key("reports", "summary.json")))
    violations = load_violations(ctx.store, ctx.writer)
    return alert_run(ctx.store, ctx.estate, ctx.run_id, ctx.as_of_ms, summary, violations, ctx.secrets)


def run_all(estate_file: str, run_id: str | None = None, from_raw: str | None = None,
            as_of_ms: int | None = None, scope=None) -> dict:
    """The whole pipeline in this process (what `replaudit run` does; with `scope`, `replaudit check`)."""
    ctx = start_run(estate_file, run_id, as_of_ms, scope)
    if from_raw:
        copy_raw_from(ctx, from_raw)
    else:
        for c in list_clusters(ctx):
            collect_cluster(ctx, c["system"], c["name"])
        for s in list_systems(ctx):
            reread(ctx, s)
    for stage in (normalize, audit):
        for s in list_systems(ctx):
            try:
                stage(ctx, s)
            except Exception:  # noted in reports/stages/; the other systems go on
                log.exception("%s of %s failed", stage.__name__, s)
    validate(ctx)
    summary = report(ctx)
    summary["alerts"] = alert(ctx)
    return summary


def copy_raw_from(ctx: RunContext, source_run_id: str) -> int:
    """Audit evidence already in the store (an `import`, or a previous collection) under a new run."""
    from audit.store.run import read_manifest

    manifest = read_manifest(ctx.store, ctx.estate.name, source_run_id)
    if manifest is None:
        raise LookupError(f"run {source_run_id!r} of estate {ctx.estate.name!r} is not published")
    prefix = manifest["prefix"] + "raw/"
    n = 0
    for obj in manifest["objects"]:
        if obj["key"].startswith(prefix):
            ctx.writer.put("raw", obj["key"][len(prefix):], ctx.store.get(obj["key"]))
            n += 1
    return n


def published_manifest(store, estate: Any, run_id: str) -> dict[str, Any] | None:
    """The manifest of a published run ("latest" = the newest), or None."""
    from audit.store.run import latest_run, read_manifest

    if run_id == "latest":
        info = latest_run(store, estate)
        return None if info is None else info.manifest
    return read_manifest(store, estate, run_id)
