"""Nightly audit: collect per cluster (BookKeeper and Pulsar) -> normalize -> audit -> validate -> report -> alert.

Importing this file has no side effects: all work (and heavy imports) happens inside the tasks.
The tasks call the same stage functions as `replaudit run` (audit/pipeline.py)."""
from __future__ import annotations

import os
from datetime import datetime, timezone

from airflow.sdk import Param, dag, get_current_context, task

DEFAULT_ESTATE = os.environ.get(
    "REPLAUDIT_ESTATE",
    os.path.join(os.environ.get("REPLAUDIT_HOME", os.path.dirname(os.path.dirname(__file__))),
                 "audit", "lab", "estate.yaml"),
)


# task id -> audit.pipeline function, in order; the last task posts the run's violations to the alert routes
STAGES = {"normalize": "normalize", "audit": "audit", "validate": "validate", "report": "report",
          "alert": "alert"}


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

    def stage(name: str):
        """One pipeline stage as a task: normalize, audit, validate, report (publishes the run), alert.
        `previous` only orders the tasks; every stage reads the run's evidence from the store."""

        @task(task_id=name)
        def run_stage(run: dict, previous) -> dict:
            from audit import pipeline

            return compact(getattr(pipeline, STAGES[name])(pipeline.RunContext.from_xcom(run)))

        return run_stage

    run = start_run()
    collected = collect.partial(run=run).expand(cluster=list_clusters(run))
    previous = collected
    for name in STAGES:
        previous = stage(name)(run, previous)


replaudit_nightly_audit()
