"""Implementations of the `replaudit` subcommands (argument parsing is in main.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from audit.cli.output import EXIT_CLEAN, EXIT_FAILURE, EXIT_INCOMPLETE, EXIT_USAGE, EXIT_VIOLATIONS, print_json


class UsageError(Exception):
    """Bad flags or a bad estate file: exit code 2 with one clear line."""


def _load(estate_file: str):
    from audit.config.errors import EstateError
    from audit.config.estate import load_estate

    try:
        return load_estate(estate_file)
    except (EstateError, OSError) as exc:
        raise UsageError(str(exc)) from None


def exit_code(summary: dict) -> int:
    status = summary.get("status")
    return {"clean": EXIT_CLEAN, "violations": EXIT_VIOLATIONS, "incomplete": EXIT_INCOMPLETE}.get(
        status, EXIT_FAILURE)


def _print_summary(summary: dict, as_json: bool) -> None:
    if as_json:
        print_json(summary)
        return
    from audit.report.text import render_text

    print(render_text(summary))


# -- commands ------------------------------------------------------------------------------
def cmd_inspect(args) -> int:
    from audit.errors import PayloadError
    from audit.formats.inspect import inspect_file

    try:
        print_json(inspect_file(args.file))
    except PayloadError as exc:
        print(f"replaudit inspect: {exc}", file=sys.stderr)
        return EXIT_INCOMPLETE
    except OSError as exc:
        raise UsageError(f"{args.file}: {exc.strerror}") from None
    return EXIT_CLEAN


def cmd_run(args) -> int:
    from audit import pipeline

    _load(args.estate)
    try:
        summary = pipeline.run_all(args.estate, run_id=args.run_id, from_raw=args.from_raw)
    except LookupError as exc:
        raise UsageError(str(exc)) from None
    _print_summary(summary, args.json)
    return exit_code(summary)


def cmd_check(args) -> int:
    """An incident check: a run like any other, scoped and marked as an incident run."""
    from audit import pipeline
    from audit.config.durations import parse_duration
    from audit.contracts import Scope

    _load(args.estate)
    try:
        window_ms = None if not args.window else parse_duration(args.window) * 1000
    except ValueError as exc:
        raise UsageError(f"--window {args.window!r}: {exc}") from None
    scope = Scope(tuple(args.system), tuple(args.cluster), tuple(args.subject), window_ms, args.deep)
    try:
        summary = pipeline.run_all(args.estate, run_id=args.run_id, scope=scope)
    except pipeline.ScopeError as exc:
        raise UsageError(str(exc)) from None
    _print_summary(summary, args.json)
    return exit_code(summary)


def cmd_demo(args) -> int:
    """The lab estate end to end; exit 0 when detection equals the lab's ground truth exactly."""
    from audit import pipeline

    _load(args.estate)
    summary = pipeline.run_all(args.estate)
    _print_summary(summary, args.json)
    lab = summary.get("lab") or {}
    perfect = lab.get("missed", 1) == 0 and lab.get("false_alarms", 1) == 0 and lab.get("wrong_count", 1) == 0
    return EXIT_CLEAN if perfect else EXIT_VIOLATIONS


def cmd_collect(args) -> int:
    from audit import pipeline

    _load(args.estate)
    ctx = pipeline.start_run(args.estate, args.run_id)
    reports = [pipeline.collect_cluster(ctx, c["system"], c["name"]) for c in pipeline.list_clusters(ctx)
               if not args.cluster or c["name"] in args.cluster]
    if not args.cluster:   # a partial collection leaves the reread to a later full one
        for system in pipeline.list_systems(ctx):
            pipeline.reread(ctx, system)
    gaps = [g for r in reports for g in r.get("gaps", [])]
    ctx.writer.publish({"status": "collected", "collection": reports})
    print_json({"run_id": ctx.run_id, "collection": reports})
    return EXIT_INCOMPLETE if gaps else EXIT_CLEAN


def cmd_import(args) -> int:
    """Hand-taken dumps into raw/<system>/<cluster>/<kind>/..., as a published run to audit with --from-raw."""
    from audit import pipeline, systems
    from audit.cli.import_dumps import import_paths

    estate = _load(args.estate)
    try:
        estate.cluster(args.system, args.cluster)
    except KeyError:
        raise UsageError(f"{args.estate}: systems.{args.system}: no cluster named {args.cluster!r}") from None
    ctx = pipeline.start_run(args.estate, args.run_id)
    if args.run_id and pipeline.published_manifest(ctx.store, estate.name, args.run_id) is not None:
        pipeline.copy_raw_from(ctx, args.run_id)   # importing into an existing run adds to its evidence
    try:
        result = import_paths(ctx.writer, systems.get(args.system), args.cluster, args.kind, args.paths,
                              {name: getattr(args, name) for name in args.import_options})
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    ctx.writer.publish({"status": "imported", "import": result})
    print_json({"run_id": ctx.run_id, **result})
    print(f"audit it with: replaudit run --estate {args.estate} --from-raw {ctx.run_id}", file=sys.stderr)
    return EXIT_INCOMPLETE if result["rejected"] else EXIT_CLEAN


def _published_summary(estate, run_id: str) -> dict:
    """The summary in a published run's manifest (run_id may be "latest")."""
    from audit import pipeline
    from audit.config.secrets import SecretResolver
    from audit.store import open_estate_store

    manifest = pipeline.published_manifest(open_estate_store(estate.store, SecretResolver()), estate.name, run_id)
    if manifest is None:
        raise UsageError(f"estate {estate.name!r}: no published run {run_id!r}")
    return manifest["summary"]


def cmd_report(args) -> int:
    summary = _published_summary(_load(args.estate), args.run_id)
    _print_summary(summary, args.json)
    return exit_code(summary)


def cmd_estate(args) -> int:
    """`estate schema`: the JSON Schema of estate files. `estate check FILE`: one line, exit 0 or 2."""
    from audit.config.errors import EstateError
    from audit.config.estate import estate_schema, load_estate

    if args.estate_command == "schema":
        print(json.dumps(estate_schema(), indent=2))
        return EXIT_CLEAN
    try:
        estate = load_estate(args.file)
    except EstateError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    listed = {system: clusters for system, clusters in estate.systems.items() if clusters}
    count = sum(len(clusters) for clusters in listed.values())
    names = "; ".join(f"{system}: {', '.join(c.name for c in clusters)}" for system, clusters in listed.items())
    print(f"ok: {estate.name}: {count} cluster{'' if count == 1 else 's'}" + (f" ({names})" if names else ""))
    return EXIT_CLEAN


def cmd_nightly(args) -> int:
    """`airflow dags test` of the nightly DAG, with AIRFLOW_HOME under the project (never ~/airflow)."""
    from audit.config.home import project_home

    estate = _load(args.estate)
    home = project_home()
    env = dict(os.environ)
    env.setdefault("AIRFLOW_HOME", str(home / ".airflow"))
    env["AIRFLOW__CORE__DAGS_FOLDER"] = str(home / "dags")
    env.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    env.setdefault("REPLAUDIT_HOME", str(home))
    airflow = str(Path(sys.executable).with_name("airflow"))
    Path(env["AIRFLOW_HOME"]).mkdir(parents=True, exist_ok=True)
    if not (Path(env["AIRFLOW_HOME"]) / "airflow.db").exists():
        subprocess.run([airflow, "db", "migrate"], env=env, check=True, stdout=subprocess.DEVNULL)
    conf = json.dumps({"estate_file": str(Path(args.estate).resolve())})
    proc = subprocess.run([airflow, "dags", "test", "replaudit_nightly_audit", "-c", conf], env=env)
    if proc.returncode != 0:
        print("replaudit nightly: the DAG run failed (see the task logs above)", file=sys.stderr)
        return EXIT_FAILURE
    summary = _published_summary(estate, "latest")
    _print_summary(summary, False)
    return exit_code(summary)


def cmd_repair(args) -> int:
    from audit.cli.repair import cmd_repair as repair

    return repair(args, _load, UsageError)
