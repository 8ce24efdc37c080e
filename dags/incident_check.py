"""On-demand incident check: triggered by hand with Params, it runs the nightly's stages over only the systems,
clusters and subjects asked (docs/incident.md), as a run like any other (same store layout, same report), marked
as an incident run (run id `incident__<dag run id>`). Airflow validates the Params when the run is triggered: a
bad value fails with the Param's description before any task runs; a system or cluster the estate does not have
fails the first task, naming it."""
from __future__ import annotations

from airflow.sdk import Param, dag, get_current_context, task

from audit.config.home import default_estate
from audit.dag_stages import audit_stages

DEFAULT_ESTATE = default_estate()   # $REPLAUDIT_ESTATE; never the lab estate (audit/config/home.py)
NAME = r"^[a-z0-9][a-z0-9-]*$"
DURATION = r"^(|\d+|(\d+[smhdSMHD])+)$"


def _systems() -> list[str]:
    from audit import systems

    return list(systems.names())


@dag(
    dag_id="replaudit_incident_check",
    schedule=None,
    catchup=False,
    tags=["replaudit", "incident"],
    params={
        "estate_file": Param(DEFAULT_ESTATE, type="string", description="estate YAML (default: $REPLAUDIT_ESTATE)"),
        "systems": Param([], type="array", items={"type": "string", "enum": _systems()},
                         description="only these systems (empty: every system the estate declares)"),
        "clusters": Param([], type="array", items={"type": "string", "pattern": NAME},
                          description="only these clusters (empty: all of the systems asked)"),
        "subjects": Param([], type="array", items={"type": "string", "minLength": 1},
                          description="glob patterns: topics (persistent://tenant/ns/topic*), ledger ids, "
                                      "topic-partitions (empty: everything)"),
        "window": Param("", type="string", pattern=DURATION,
                        description="only the last duration (30m, 6h, 2d) where a system can tell time; empty: none"),
        "deep": Param(False, type="boolean", description="full dumps and segment headers"),
    },
    doc_md=__doc__,
)
def replaudit_incident_check():
    @task
    def start_run() -> dict:
        from audit import pipeline
        from audit.config.durations import parse_duration
        from audit.contracts import Scope

        ctx = get_current_context()
        p = ctx["params"]
        window = parse_duration(p["window"]) * 1000 if p["window"] else None
        scope = Scope(tuple(p["systems"]), tuple(p["clusters"]), tuple(p["subjects"]), window, bool(p["deep"]))
        return pipeline.start_run(p["estate_file"], pipeline.INCIDENT_PREFIX + ctx["dag_run"].run_id,
                                  scope=scope).to_xcom()

    audit_stages(start_run())


replaudit_incident_check()
