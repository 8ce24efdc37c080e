"""What the alert lifecycle remembers between runs, in the object store: one JSON object per run,
`<estate>/alerts/<at_ms, 13 digits>__<run_id>.json` = {"format", "run_id", "at_ms", "tracked": [...],
"notices": [...], "deliveries": [...]}, written once and never replaced (a retried alert task of the same run finds
it and sends nothing again). The previous state is the newest other run's file by `at_ms`, which its key names:
one listing and one read, however long the history."""
from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any, Mapping

from audit.alerts.lifecycle import Notice, Signal, Tracked
from audit.store.base import ObjectStore
from audit.store.run import estate_prefix, run_prefix

FORMAT = "replaudit.alert-state/1"


class AlertStateError(ValueError):
    def __init__(self, key: str, field: str, expected: str):
        super().__init__(f"{key}: {field}: expected {expected}")


def _prefix(estate: str) -> str:
    return estate_prefix(estate) + "alerts/"


def state_key(estate: str, run_id: str, at_ms: int) -> str:
    run_prefix(estate, run_id)           # the same name rules as the run's own keys
    return f"{_prefix(estate)}{at_ms:013d}__{run_id}.json"


def _stored(store: ObjectStore, estate: str) -> list[tuple[int, str, str]]:
    """(at_ms, run_id, key) of every stored state, from the keys alone."""
    out = []
    for key in store.list(_prefix(estate)):
        at, sep, run_id = key.rsplit("/", 1)[-1].removesuffix(".json").partition("__")
        if sep and at.isdigit() and key.endswith(".json"):
            out.append((int(at), run_id, key))
    return out


def already_alerted(store: ObjectStore, estate: str, run_id: str) -> bool:
    """True when this run's alerts were already sent (an Airflow retry of the task)."""
    return any(r == run_id for _, r, _ in _stored(store, estate))


def previous_state(store: ObjectStore, estate: str, run_id: str) -> tuple[dict[str, Tracked], str | None]:
    """(firing signals by fingerprint after the newest other run, that run's id); empty when there is none. A file
    that does not parse raises AlertStateError naming its key and field."""
    others = [(at, key) for at, r, key in _stored(store, estate) if r != run_id]
    if not others:
        return {}, None
    key = max(others)[1]
    doc = _load(key, store.get(key))
    return {t.signal.fingerprint: t for t in (_tracked(key, i, t) for i, t in enumerate(doc["tracked"]))}, \
        doc["run_id"]


def save_state(store: ObjectStore, estate: str, run_id: str, at_ms: int, state: Mapping[str, Tracked],
               notices: list[Notice], deliveries: list[dict]) -> str:
    key = state_key(estate, run_id, at_ms)
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
