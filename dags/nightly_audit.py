"""Nightly audit: collect per cluster -> reread, normalize and audit per system -> validate -> report -> alert.

Importing this file has no side effects: all work (and heavy imports) happens inside the tasks.
The tasks call the same stage functions as `replaudit run` (audit/pipeline.py). Collection is mapped over the
estate's clusters and normalize -> audit over its systems (a mapped task group), so a real deployment runs the
systems in parallel; validate, report and alert run once every system is done, whether or not it succeeded
(`all_done`): a failing system is reported as not covered and never hides the others' findings."""
from __future__ import annotations

import os
from datetime import datetime, timezone

from airflow.sdk import Param, dag, get_current_context, task, task_group

DEFAULT_ESTATE = os.environ.get(
    "REPLAUDIT_ESTATE",
    os.path.join(os.environ.get("REPLAUDIT_HOME", os.path.dirname(os.path.dirname(__file__))),
                 "audit", "lab", "estate.yaml"),
)


# task id -> audit.pipeline function, in order, after the per-system stages; the last task posts the run's
# violations to the alert routes
# and its trigger rule: validate and report run whatever the systems' outcome (a failed system is reported as not
# covered); alert needs the published report.
STAGES = {"validate": "all_done", "report": "all_done", "alert": "all_success"}


def compact(result):
    """What a stage task returns through XCom (and Airflow logs): scalars as they are, containers as their
    size. The full result already lives in the run's folder of the object store."""
    if not isinstance(result, dict):
        return result
    return {k: (v if isinstance(v, (str, int, float, bool)) or v is None else len(v)) for k, v in result.items()}


@dag(
    dag_id="replaudit_nightly_audit",
    schedule="@daily",
    start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    max_active_runs=1,
    tags=["replaudit", "audit"],
    params={"estate_file": Param(DEFAULT_ESTATE, type="string", description="estate YAML to audit")},
    doc_md=__doc__,
)
def replaudit_nightly_audit():
    @task
    def start_run() -> dict:
        from audit import pipeline

        ctx = get_current_context()
        # The Airflow run id names the audit run: retrying this DAG run replaces the same audit run.
        return pipeline.start_run(ctx["params"]["estate_file"], ctx["dag_run"].run_id).to_xcom()

    @task
    def list_clusters(run: dict) -> list[dict]:
        from audit import pipeline

        return pipeline.list_clusters(pipeline.RunContext.from_xcom(run))

    @task(map_index_template="{{ task.op_kwargs['cluster']['name'] }}")
    def collect(run: dict, cluster: dict) -> dict:
        from audit import pipeline

        return compact(pipeline.collect_cluster(pipeline.RunContext.from_xcom(run), cluster["system"],
                                                cluster["name"]))

    @task
    def list_systems(run: dict) -> list[str]:
        from audit import pipeline

        return pipeline.list_systems(pipeline.RunContext.from_xcom(run))

    @task
    def reread(run: dict, system: str) -> dict:
        from audit import pipeline

        return compact(pipeline.reread(pipeline.RunContext.from_xcom(run), system))

    @task
    def normalize(run: dict, system: str) -> dict:
        from audit import pipeline

        return compact(pipeline.normalize(pipeline.RunContext.from_xcom(run), system))

    @task
    def audit(run: dict, system: str) -> dict:
        from audit import pipeline

        return compact(pipeline.audit(pipeline.RunContext.from_xcom(run), system))

    @task_group(prefix_group_id=False)
    def per_system(run: dict, system: str):
        """One system's stages once every cluster is collected (reread: what moved while the clusters were collected
        one after another, read again close together), then Spark; each system is one mapped instance."""
        reread(run, system) >> normalize(run, system) >> audit(run, system)

    def stage(name: str):
        """validate, report (publishes the run), alert: once, after every system's group."""

        @task(task_id=name, trigger_rule=STAGES[name])
        def run_stage(run: dict) -> dict:
            from audit import pipeline

            return compact(getattr(pipeline, name)(pipeline.RunContext.from_xcom(run)))

        return run_stage

    run = start_run()
    collected = collect.partial(run=run).expand(cluster=list_clusters(run))
    systems = list_systems(run)
    previous = per_system.partial(run=run).expand(system=systems)
    collected >> previous
    for name in STAGES:
        task_ = stage(name)(run)
        previous >> task_
        previous = task_


replaudit_nightly_audit()
