"""Run ids and clocks. A run id is the UTC time the run was asked for, so reruns of a schedule slot reuse it."""
from __future__ import annotations

import re
import time
from datetime import datetime, timezone

RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}$")


def now_ms() -> int:
    return int(time.time() * 1000)


def new_run_id(at: datetime | None = None) -> str:
    at = at or datetime.now(timezone.utc)
    return at.strftime("%Y%m%dT%H%M%SZ")


def check_run_id(run_id: str) -> str:
    if not RUN_ID_RE.match(run_id):
        raise ValueError(f"run id {run_id!r}: expected letters, digits and ._:+- (at most 128)")
    return run_id.replace(":", "-").replace("+", "-")
