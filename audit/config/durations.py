"""Durations in estate files: "30s", "15m", "6h", "2d", "1h30m", or a plain integer of seconds."""
from __future__ import annotations

import re

_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_WHOLE = re.compile(r"^(?:\d+[smhd])+$")
_PART = re.compile(r"(\d+)([smhd])")


def parse_duration(value: object) -> int:
    """Seconds as an int; raises ValueError (with the accepted forms) on anything else."""
    if isinstance(value, bool):  # bool is an int subclass; `true` is never a duration
        raise ValueError("a duration like 30s, 15m, 6h, 2d or an integer number of seconds")
    if isinstance(value, int):
        if value < 0:
            raise ValueError("a non-negative duration")
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text.isdigit():
            return int(text)
        if _WHOLE.match(text):
            return sum(int(n) * _UNIT_SECONDS[u] for n, u in _PART.findall(text))
    raise ValueError("a duration like 30s, 15m, 6h, 2d or an integer number of seconds")
