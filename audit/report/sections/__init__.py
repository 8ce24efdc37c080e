"""Each system's part of the summary, the HTML report and the lab scorecard (one module per system, each exporting
SECTION: audit.contracts.ReportSection), and what those modules share."""
from __future__ import annotations

import json
from typing import Any, Mapping


def evidence(v: Mapping[str, Any]) -> dict[str, Any]:
    """The evidence JSON of a findings row as a dict ({} when absent or unreadable)."""
    ev = v.get("evidence")
    if isinstance(ev, str):
        try:
            ev = json.loads(ev) if ev else {}
        except ValueError:
            ev = {}
    return ev if isinstance(ev, dict) else {}
