"""What every `replaudit` command shares: the exit codes (stable, for scripts) and JSON output."""
from __future__ import annotations

import json
import sys

EXIT_CLEAN, EXIT_VIOLATIONS, EXIT_USAGE, EXIT_INCOMPLETE, EXIT_FAILURE = 0, 1, 2, 3, 4


def print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")
