"""What identifies a finding across runs: the alert lifecycle, the report and the history all use it."""
from __future__ import annotations

import hashlib


def fingerprint(system: str, cluster: str, check: str, subject: str) -> str:
    """Stable across runs and hosts: the same finding tomorrow has the same fingerprint."""
    return hashlib.sha256("\x1f".join((system, cluster, check, subject)).encode()).hexdigest()[:16]
