"""Run ids and clocks. A run id is the UTC time the run was asked for, so reruns of a schedule slot reuse it."""
from __future__ import annotations

import time
from datetime import datetime, timezone


def now_ms() -> int:
    return int(time.time() * 1000)


def new_run_id(at: datetime | None = None) -> str:
    at = at or datetime.now(timezone.utc)
    return at.strftime("%Y%m%dT%H%M%SZ")
