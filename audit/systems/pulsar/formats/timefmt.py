"""Broker timestamps in admin headers (`X-Pulsar-publish-time`, `-event-time`).

Current brokers format them with pulsar-common DateFormatter: ISO_OFFSET_DATE_TIME in the broker's zone,
fraction trimmed of trailing zeros and left out when zero (`2018-10-04T12:41:39.165Z`,
`2022-06-30T18:18:05.88+08:00`, `2024-03-01T10:00:00Z`). 2015-2017 outputs used `2015-07-13 17:40:28.451`
(no zone: read as UTC) and `2017-09-12 15:55:13.214+0000`."""
from __future__ import annotations

import calendar
import datetime as dt
import re

from audit.errors import PayloadError

_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?"
                   r"(Z|[+-]\d{2}(?::?\d{2}(?::?\d{2})?)?)?")
EXPECTED = "an ISO-8601 time (e.g. 2024-03-01T10:00:00.123Z, 2022-06-30T18:18:05.88+08:00) or epoch millis"


def _offset_seconds(zone: str | None) -> int:
    if zone is None or zone == "Z":
        return 0
    digits = zone[1:].replace(":", "")
    hours, minutes, seconds = int(digits[:2]), int(digits[2:4] or 0), int(digits[4:6] or 0)
    sign = -1 if zone[0] == "-" else 1
    return sign * (hours * 3600 + minutes * 60 + seconds)


def parse_time_ms(text: object, source: str, field: str) -> int:
    """Epoch milliseconds (sub-millisecond digits are dropped, as Pulsar's own parser does)."""
    if not isinstance(text, str):
        raise PayloadError(source, field, EXPECTED, text)
    value = text.strip()
    if value.isdigit():
        return int(value)
    m = _TIME.fullmatch(value)
    if m is None:
        raise PayloadError(source, field, EXPECTED, text)
    year, month, day, hour, minute = (int(g) for g in m.group(1, 2, 3, 4, 5))
    second = int(m.group(6) or 0)
    try:
        dt.datetime(year, month, day, hour, minute, second)  # calendar validation only
    except ValueError as e:
        raise PayloadError(source, field, f"{EXPECTED} ({e})", text) from None
    millis = int((m.group(7) or "0").ljust(3, "0")[:3])
    seconds = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0)) - _offset_seconds(m.group(8))
    return seconds * 1000 + millis


def format_time_ms(ms: int) -> str:
    """What a broker running in UTC writes for `ms`."""
    seconds, millis = divmod(ms, 1000)
    text = dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    if millis:
        text += "." + f"{millis:03d}".rstrip("0")
    return text + "Z"
