"""What the alert lifecycle remembers between runs, in the object store: one JSON object per run,
`<estate>/alerts/<run_id>.json` = {"format", "run_id", "at_ms", "tracked": [...], "notices": [...],
"deliveries": [...]}, written once and never replaced (a retried alert task of the same run finds it and sends
nothing again). The previous state is the newest other run's file by `at_ms`."""
from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any, Mapping

from audit.alerts.lifecycle import Notice, Signal, Tracked
from audit.store.base import ObjectStore
from audit.store.run import run_prefix

FORMAT = "replaudit.alert-state/1"


class AlertStateError(ValueError):
    def __init__(self, key: str, field: str, expected: str):
        super().__init__(f"{key}: {field}: expected {expected}")


def _prefix(estate: str) -> str:
    return run_prefix(estate, "x").split("/runs/")[0] + "/alerts/"


def state_key(estate: str, run_id: str) -> str:
    run_prefix(estate, run_id)           # the same name rules as the run's own keys
    return f"{_prefix(estate)}{run_id}.json"


def already_alerted(store: ObjectStore, estate: str, run_id: str) -> dict | None:
    """This run's stored state when its alerts were already sent (an Airflow retry of the task), else None."""
    key = state_key(estate, run_id)
    return json.loads(store.get(key)) if store.exists(key) else None


def previous_state(store: ObjectStore, estate: str, run_id: str) -> tuple[dict[str, Tracked], str | None]:
    """(firing signals by fingerprint after the newest other run, that run's id); empty when there is none. A file
    that does not parse raises AlertStateError naming its key and field."""
    best: tuple[int, str, dict] | None = None
    this = state_key(estate, run_id)
    for key in store.list(_prefix(estate)):
        if key == this or not key.endswith(".json"):
            continue
        doc = _load(key, store.get(key))
        if best is None or (doc["at_ms"], key) > best[:2]:
            best = (doc["at_ms"], key, doc)
    if best is None:
        return {}, None
    doc = best[2]
    return {t.signal.fingerprint: t for t in (_tracked(best[1], i, t) for i, t in enumerate(doc["tracked"]))}, \
        doc["run_id"]


def save_state(store: ObjectStore, estate: str, run_id: str, at_ms: int, state: Mapping[str, Tracked],
               notices: list[Notice], deliveries: list[dict]) -> str:
    key = state_key(estate, run_id)
    doc = {"format": FORMAT, "run_id": run_id, "at_ms": at_ms,
           "tracked": [asdict(t) for _, t in sorted(state.items())],
           "notices": [{"kind": n.kind, "fingerprint": n.tracked.signal.fingerprint} for n in notices],
           "deliveries": deliveries}
    store.put(key, json.dumps(doc, indent=1, sort_keys=True).encode())
    return key


def _load(key: str, data: bytes) -> dict:
    try:
        doc = json.loads(data)
    except ValueError:
        raise AlertStateError(key, "(document)", "JSON") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise AlertStateError(key, "format", repr(FORMAT))
    if not isinstance(doc.get("at_ms"), int) or not isinstance(doc.get("run_id"), str):
        raise AlertStateError(key, "at_ms / run_id", "an integer and a string")
    if not isinstance(doc.get("tracked"), list):
        raise AlertStateError(key, "tracked", "a list")
    return doc


def _tracked(key: str, i: int, raw: Any) -> Tracked:
    where = f"tracked[{i}]"
    try:
        sig = Signal(**raw["signal"])
        t = Tracked(sig, *(raw[k] for k in ("first_seen_ms", "last_seen_ms", "notified_ms", "notified_severity",
                                            "notified_count")))
    except (KeyError, TypeError):
        raise AlertStateError(key, where, "signal, first_seen_ms, last_seen_ms, notified_ms, notified_severity, "
                                          "notified_count") from None
    return t
