"""The stages of one audit run, shared by `replaudit run` and the Airflow DAG.

collect -> normalize -> audit -> validate -> report (publishes the manifest) -> alert.
Each stage is a function of a RunContext and reads only what earlier stages wrote into the run's
attempt folder in the object store, so the DAG can run each stage as its own task."""
from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from audit.timeutil import new_run_id, now_ms

log = logging.getLogger("replaudit.pipeline")
SYSTEMS = ("bookkeeper", "pulsar")


@dataclass
class RunContext:
    estate_file: str
    run_id: str
    attempt_id: str
    as_of_ms: int
    extra: dict = field(default_factory=dict)

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

    def staging(self):
        from audit.store.staging import LocalStaging

        return LocalStaging(self.writer)

    def spark(self):
        from audit.sparkutil.session import get_spark

        return get_spark(master=self.estate.spark.master, conf=dict(self.estate.spark.conf))


def start_run(estate_file: str, run_id: str | None = None, as_of_ms: int | None = None) -> RunContext:
    from audit.config.estate import load_estate
    from audit.store.run import new_attempt_id

    load_estate(estate_file)  # fail fast, naming the field, before anything is written
    return RunContext(str(Path(estate_file).resolve()), run_id or new_run_id(), new_attempt_id(),
                      as_of_ms if as_of_ms is not None else now_ms())


def list_clusters(ctx: RunContext) -> list[dict]:
    return [{"system": s, "name": c.name} for s in SYSTEMS for c in ctx.estate.clusters(s)]


# -- collect --------------------------------------------------------------------------------
def collect_cluster(ctx: RunContext, system: str, name: str) -> dict:
    """Raw evidence of one cluster. Raw bytes are committed to the store even when the collector fails
    half-way: nothing collected is lost."""
    from audit.collectors.base import CollectionReport, CoverageGap, DirSink

    cluster = ctx.estate.cluster(system, name)
    st = ctx.staging()
    try:
        raw_dir = st.dir("raw", system, name)
        sink = DirSink(raw_dir)
        try:
            report, truth = _collect(ctx, system, cluster, sink)
            if truth is not None:
                (st.dir("raw", "_lab", name) / "ground_truth.json").write_text(
                    json.dumps(truth, indent=1, sort_keys=True))
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


def _collect(ctx: RunContext, system: str, cluster, sink):
    """(CollectionReport, lab ground truth or None) of one cluster."""
    if system == "pulsar":
        if cluster.source == "lab":
            from audit.lab.pulsar.runner import collect_lab_pulsar_cluster

            th = ctx.estate.thresholds
            return collect_lab_pulsar_cluster(cluster, sink, ctx.secrets, ctx.as_of_ms, {
                "replicator_backlog_max": th.pulsar_replicator_backlog_max,
                "snapshot_max_age_s": th.pulsar_snapshot_max_age_s})
        from audit.collectors.pulsar.collector import PulsarCollector

        return PulsarCollector().collect(cluster, sink, ctx.secrets), None
    if cluster.source == "lab":
        from audit.lab.bookkeeper.runner import collect_lab_cluster

        return collect_lab_cluster(cluster, sink, ctx.secrets, ctx.as_of_ms,
                                   ctx.estate.thresholds.open_ledger_max_age_s)
    from audit.collectors.bookkeeper.collector import BookKeeperCollector

    return BookKeeperCollector().collect(cluster, sink, ctx.secrets), None


# -- spark stages ---------------------------------------------------------------------------
def normalize(ctx: RunContext) -> dict:
    """Each system's normalizer over raw/; a system without raw evidence in this run is skipped."""
    from spark_jobs import bk_normalize

    with ctx.staging() as st:
        raw = st.fetch("raw")
        out = st.dir("tables")
        counts = bk_normalize.run(ctx.spark(), str(raw), str(out))
        if (raw / "pulsar").is_dir():
            from spark_jobs import pulsar_normalize

            counts.update(pulsar_normalize.run(ctx.spark(), str(raw), str(out)))
        return counts


def audit(ctx: RunContext) -> dict:
    from spark_jobs import bk_replicas_audit

    th = ctx.estate.thresholds
    with ctx.staging() as st:
        tables = st.fetch("tables")
        root = st.root
        result = bk_replicas_audit.run(
            ctx.spark(), str(tables), str(root), run_id=ctx.run_id, as_of_ms=ctx.as_of_ms,
            open_ledger_max_age_ms=th.open_ledger_max_age_s * 1000,
            min_racks_per_write_quorum=th.min_racks_per_write_quorum)
        if (tables / "pulsar_entries").is_dir():
            from spark_jobs import pulsar_audit

            result.update(pulsar_audit.run(
                ctx.spark(), str(tables), str(root), run_id=ctx.run_id, as_of_ms=ctx.as_of_ms,
                replicator_backlog_max=th.pulsar_replicator_backlog_max,
                snapshot_max_age_s=th.pulsar_snapshot_max_age_s))
        return result


def validate(ctx: RunContext) -> dict:
    from audit.validate.gx_runner import run_validations

    spark = ctx.spark()
    with ctx.staging() as st:
        metrics = st.fetch("metrics")
        tables = {"bk_ledger_replicas": metrics / "bk_ledger_replicas",
                  "violations": st.fetch("findings") / "violations"}
        if (metrics / "pulsar_failover").is_dir():  # the Pulsar suites apply only to runs with Pulsar evidence
            tables["pulsar_failover"] = metrics / "pulsar_failover"
        dfs = {name: spark.read.parquet(str(path)) for name, path in tables.items()}
        docs = st.dir("reports", "data_docs")
        outcome = run_validations(spark, dfs, project_dir=_expectations_dir(), docs_dir=docs)
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

    with ctx.staging() as st:
        # What build_run_report reads (a no-op for a local store; an S3 store is read through staging).
        for area in ("tables", "findings", "metrics", "reports"):
            st.fetch(area)
        st.fetch("raw", "_lab")
        for c in list_clusters(ctx):
            st.fetch_file("raw", c["system"], c["name"], "collection.json")
        # Where a person opens the report: the store URI plus the key (a local path for file:// stores).
        report_prefix = ctx.estate.store.uri.rstrip("/") + "/" + ctx.writer.key("reports") + "/"
        summary = build_run_report(st.root, estate=ctx.estate.name, run_id=ctx.run_id,
                                   attempt_id=ctx.attempt_id, report_prefix=report_prefix,
                                   pulsar_admin_urls={c.name: c.admin_url for c in ctx.estate.pulsar
                                                      if c.admin_url})
    ctx.writer.publish(summary)
    return summary


def alert(ctx: RunContext) -> dict:
    from audit.alerts.webhook import post_violations
    from audit.report.build import load_violations

    routes = ctx.estate.alerts.routes
    if not routes:
        return {"routes": []}
    summary = json.loads(ctx.store.get(ctx.writer.key("reports", "summary.json")))
    violations = load_violations(ctx.store, ctx.writer)
    results = [post_violations(route, summary, violations, ctx.secrets).to_json() for route in routes]
    return {"routes": results}


def run_all(estate_file: str, run_id: str | None = None, from_raw: str | None = None,
            as_of_ms: int | None = None) -> dict:
    """The whole pipeline in this process (what `replaudit run` does)."""
    ctx = start_run(estate_file, run_id, as_of_ms)
    if from_raw:
        copy_raw_from(ctx, from_raw)
    else:
        for c in list_clusters(ctx):
            collect_cluster(ctx, c["system"], c["name"])
    normalize(ctx)
    audit(ctx)
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
