"""`replaudit` command line. Exit codes (stable, for scripts):
  0  clean: everything audited, no violation
  1  violations found
  2  usage or configuration error (bad flag, bad estate file)
  3  could not audit: some source was not covered (the run still audited everything else)
  4  internal failure (a stage crashed)
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from audit.cli import commands
from audit.cli.output import (EXIT_CLEAN, EXIT_FAILURE, EXIT_INCOMPLETE, EXIT_USAGE,  # noqa: F401
                               EXIT_VIOLATIONS, print_json)

LAB_ESTATE = Path(__file__).resolve().parents[2] / "lab" / "estate.yaml"


def _estate_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--estate", default=os.environ.get("REPLAUDIT_ESTATE", str(LAB_ESTATE)),
                   help="estate YAML (default: $REPLAUDIT_ESTATE or the built-in lab estate)")


def _import_parser(sub) -> None:
    """`import`: --system, --kind and the extra flags come from the registered systems' import kinds."""
    from audit import systems

    known = systems.all_systems()
    p = sub.add_parser("import", help="import hand-taken dumps (znodes, entry lists, admin JSON) into a run's raw/")
    _estate_arg(p)
    p.add_argument("--run-id", help="run id (default: now, UTC)")
    p.add_argument("--system", required=True, choices=[s.name for s in known])
    p.add_argument("--cluster", required=True)
    kinds = {k: None for s in known for k in s.pipeline.import_kinds}
    p.add_argument("--kind", required=True, choices=list(kinds),
                   help="raw payload kind: "
                   + "; ".join(f"{s.name} " + ", ".join(s.pipeline.import_kinds) for s in known)
                   + " (docs/layout.md and each system's contracts)")
    options = {o.name: o for s in known for k in s.pipeline.import_kinds.values() for o in k.options}
    for o in options.values():
        p.add_argument(f"--{o.name}", help=o.help)
    p.set_defaults(import_options=tuple(options))
    p.add_argument("paths", nargs="+", type=Path, help="files, or folders (walked; relative paths are kept)")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="replaudit", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("collect", help="collect raw evidence from every cluster of the estate into a new run")
    _estate_arg(p)
    p.add_argument("--run-id", help="run id (default: now, UTC)")
    p.add_argument("--cluster", action="append", help="only these clusters (repeatable)")

    _import_parser(sub)

    p = sub.add_parser("run", help="run the whole pipeline locally, without Airflow")
    _estate_arg(p)
    p.add_argument("--run-id", help="run id (default: now, UTC); rerunning an id replaces that run")
    p.add_argument("--from-raw", metavar="RUN_ID",
                   help="do not collect: audit the raw evidence of this published run (e.g. after `import`)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")

    p = sub.add_parser("check", help="an on-demand incident check: only the systems, clusters and subjects asked "
                                     "(docs/incident.md)")
    _estate_arg(p)
    p.add_argument("--system", action="append", default=[], help="only this system (repeatable)")
    p.add_argument("--cluster", action="append", default=[], help="only this cluster (repeatable)")
    p.add_argument("--subject", action="append", default=[], metavar="PATTERN",
                   help="only subjects matching this glob: a ledger id, a topic, a topic-partition (repeatable)")
    p.add_argument("--window", help="only the last DURATION where a system can tell time (e.g. 6h)")
    p.add_argument("--deep", action="store_true", help="full dumps and segment headers")
    p.add_argument("--run-id", help="run id (default: incident__<now, UTC>)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")

    p = sub.add_parser("inspect", help="decode one native payload file to JSON on stdout")
    p.add_argument("file", type=Path)

    p = sub.add_parser("report", help="print the summary of a published run and where its report is")
    _estate_arg(p)
    p.add_argument("--run-id", default="latest")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("demo", help="audit the built-in lab estate and score detection against its ground truth")
    p.add_argument("--estate", default=str(LAB_ESTATE))
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("nightly", help="run the nightly audit DAG through Airflow (`airflow dags test`)")
    _estate_arg(p)

    p = sub.add_parser("estate", help="estate files: print their JSON Schema, or check one (docs/estate.md)")
    estate_sub = p.add_subparsers(dest="estate_command", required=True)
    estate_sub.add_parser("schema", help="print the JSON Schema of estate files (every registered system's section)")
    q = estate_sub.add_parser("check", help="validate one estate file: its clusters (exit 0) or the error (exit 2)")
    q.add_argument("file", type=Path)

    from audit.cli.repair import add_parser as add_repair_parser

    add_repair_parser(sub, _estate_arg)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return getattr(commands, "cmd_" + args.command)(args)
    except commands.UsageError as exc:
        print(f"replaudit: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # never exit 1 ("violations found") because of a crash
        import traceback

        traceback.print_exc()
        print(f"replaudit {args.command}: internal failure: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
