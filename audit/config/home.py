"""Where relative paths in an estate resolve: the project home, so the CLI and Airflow tasks agree."""
from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "REPLAUDIT_HOME"


def project_home() -> Path:
    """$REPLAUDIT_HOME (the Makefile sets it to the repo) if set, else the current directory."""
    home = os.environ.get(HOME_ENV)
    return Path(home).resolve() if home else Path.cwd().resolve()


ESTATE_ENV = "REPLAUDIT_ESTATE"
NO_ESTATE = (f"no estate file: trigger the DAG with the estate_file param, or set {ESTATE_ENV} for the scheduler "
             "(make audit names the lab estate, lab/estate.yaml, explicitly)")


def default_estate() -> str:
    """The estate a DAG audits when its run names none: ${ESTATE_ENV}, else "" (the run then fails with NO_ESTATE).
    Never the lab's: a deployment that forgot its estate must not quietly audit the simulated one."""
    return os.environ.get(ESTATE_ENV, "")
