"""The stages of an audit run as Airflow tasks, shared by the nightly DAG (dags/nightly_audit.py) and the incident
check DAG (dags/incident_check.py): collect per cluster -> reread, normalize and audit per system (a mapped task
group, so a deployment runs the systems in parallel) -> validate -> report -> alert. validate and report run
whatever the systems' outcome (`all_done`: a failed system is reported as not covered and never hides the others'
findings); alert needs the published report. The tasks call audit/pipeline.py, as `replaudit run` does."""
from __future__ import annotations

from airflow.sdk import task, task_group

# task id -> audit.pipeline function, in order, after the per-system stages, and its trigger rule
STAGES = {"validate": "all_done", "report": "all_done", "alert": "all_success"}


def compact(result):
    """What a stage task returns through XCom (and Airflow logs): scalars as they are, containers as their
    size. The full result already lives in the run's folder of the object store."""
    if not isinstance(result, dict):
        return result
    return {k: (v if isinstance(v, (str, int, float, bool)) or v is None else len(v)) for k, v in result.items()}


def audit_stages(run) -> None:
    """Wire every stage after `run` (the XCom of a task returning pipeline.RunContext.to_xcom())."""

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

    collected = collect.partial(run=run).expand(cluster=list_clusters(run))
    previous = per_system.partial(run=run).expand(system=list_systems(run))
    collected >> previous
    for name in STAGES:
        task_ = stage(name)(run)
        previous >> task_
        previous = task_
