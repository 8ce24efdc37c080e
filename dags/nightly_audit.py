"""Nightly audit: collect per cluster -> reread, normalize and audit per system -> validate -> report -> alert.

Importing this file has no side effects: all work (and heavy imports) happens inside the tasks. The stages are
audit/dag_stages.py's (shared with the incident check DAG): collection is mapped over the estate's clusters and
normalize -> audit over its systems (a mapped task group), so a real deployment runs the systems in parallel;
validate, report and alert run once every system is done, whether or not it succeeded (`all_done`): a failing
system is reported as not covered and never hides the others' findings."""
from __future__ import annotations

from datetime import datetime, timezone

from airflow.sdk import Param, dag, get_current_context, task

from audit.config.home import default_estate
from audit.dag_stages import audit_stages, compact  # noqa: F401  (compact: what the tasks return)

DEFAULT_ESTATE = default_estate()   # $REPLAUDIT_ESTATE; never the lab estate (audit/config/home.py)


@dag(
    dag_id="replaudit_nightly_audit",
    schedule="@daily",
    start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    max_active_runs=1,
    tags=["replaudit", "audit"],
    params={"estate_file": Param(DEFAULT_ESTATE, type="string",
                                 description="estate YAML to audit (default: $REPLAUDIT_ESTATE)")},
    doc_md=__doc__,
)
def replaudit_nightly_audit():
    @task
    def start_run() -> dict:
        from audit import pipeline

        ctx = get_current_context()
        # The Airflow run id names the audit run: retrying this DAG run replaces the same audit run.
        return pipeline.start_run(ctx["params"]["estate_file"], ctx["dag_run"].run_id).to_xcom()

    audit_stages(start_run())


replaudit_nightly_audit()
