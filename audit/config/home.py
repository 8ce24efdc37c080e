"""Where relative paths in an estate resolve: the project home, so the CLI and Airflow tasks agree."""
from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "REPLAUDIT_HOME"


def project_home() -> Path:
    """$REPLAUDIT_HOME (the Makefile sets it to the repo) if set, else the current directory."""
    home = os.environ.get(HOME_ENV)
    return Path(home).resolve() if home else Path.cwd().resolve()
