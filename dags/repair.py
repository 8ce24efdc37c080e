"""Approved repair of one saved plan (docs/repair.md), triggered by hand with its plan id.

review: the plan is found among the estate's published runs and refused when it is stale (older than the
estate's repairs.max_plan_age), changed (it no longer hashes to its id, or its file is not what the run
published) or already applied; then a dry run reads every precondition from the cluster and makes no call.
With `apply` false (the default) the run ends there. With `apply` true a person decides through Airflow's
human-in-the-loop approval (the standard provider's ApprovalOperator), whose text shows every call and the plan's
hash; "Reject" or no answer within the response timeout skips the apply task. apply: the same checks again, then
each call after its precondition is read once more; the first that does not hold stops the plan. Every step is in
the store's audit log (`<estate>/repairs/<plan_id>/audit-log/`)."""
from __future__ import annotations

from datetime import timedelta

from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk import Param, dag, get_current_context, task

from audit.config.home import default_estate

DEFAULT_ESTATE = default_estate()   # $REPLAUDIT_ESTATE; never the lab estate (audit/config/home.py)
RESPONSE_TIMEOUT = timedelta(hours=12)     # an unanswered approval is a refusal, not a pending change


def _run(params: dict, approved_by: str | None) -> dict:
    """run_plan with the run's Params; a refused or stopped plan fails the task without retries."""
    from airflow.sdk.exceptions import AirflowFailException

    from audit.config.estate import load_estate
    from audit.config.secrets import SecretResolver
    from audit.repair import runner
    from audit.store import open_estate_store

    if not params.get("estate_file"):
        from audit.config.home import NO_ESTATE

        raise ValueError(NO_ESTATE)
    estate = load_estate(params["estate_file"])
    secrets = SecretResolver()
    text: list[str] = []
    try:
        outcome = runner.run_plan(open_estate_store(estate.store, secrets), estate, params["plan_id"],
                                  secrets=secrets, dry_run=approved_by is None, approved_by=approved_by,
                                  on_describe=text.append)
    except runner.RepairRefused as exc:
        raise AirflowFailException(str(exc)) from None
    if outcome.status not in (runner.APPLIED, runner.DRY_RUN_OK):
        raise AirflowFailException(f"repair plan {outcome.plan_id}: {outcome.status}: {outcome.reason}")
    return {"text": "\n".join(text), **outcome.to_json()}


@dag(
    dag_id="replaudit_repair",
    schedule=None,
    catchup=False,
    tags=["replaudit", "repair"],
    params={
        "estate_file": Param(DEFAULT_ESTATE, type="string", description="estate YAML (default: $REPLAUDIT_ESTATE)"),
        "plan_id": Param("", type="string", pattern=r"^[0-9a-f]{64}$",
                         description="the plan's id: its sha256, as listed by `replaudit repair plan`"),
        "apply": Param(False, type="boolean",
                       description="false: dry run only; true: apply after a person approves"),
    },
    doc_md=__doc__,
)
def replaudit_repair():
    @task
    def review() -> dict:
        return _run(dict(get_current_context()["params"]), approved_by=None)

    @task.short_circuit
    def wants_apply() -> bool:
        return bool(get_current_context()["params"]["apply"])

    approve = ApprovalOperator(
        task_id="approve",
        subject="Apply replaudit repair plan {{ params.plan_id }}?",
        body="```\n{{ ti.xcom_pull(task_ids='review')['text'] }}\n```\n\nDry run: every precondition holds now; "
             "each is read again right before its call.",
        response_timeout=RESPONSE_TIMEOUT,
    )

    @task
    def apply(approval: dict) -> dict:
        who = approval.get("responded_by_user") or {}
        return _run(dict(get_current_context()["params"]), approved_by=who.get("name") or who.get("id") or "?")

    reviewed = review()
    gate = wants_apply()
    reviewed >> gate >> approve
    apply(approve.output)


replaudit_repair()
