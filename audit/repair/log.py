"""The audit log of a repair plan in the object store: one object per record,
`<estate>/repairs/<plan_id>/audit-log/<at_ms, 13 digits>-<attempt>-<seq, 4 digits>.json`.

One object per record because object stores cannot append: a record, once written, is never replaced, and two
attempts (a retried Airflow task, the CLI at the same time) never write the same key. Reading the log lists the
prefix, whose keys sort in the order the records were written. A record is {"format", "plan_id", "attempt",
"seq", "at", "event", ...}; its text is scrubbed of every secret the run resolved before it is stored."""
from __future__ import annotations

import json
import time
import uuid
from datetime import datetime, timezone
from typing import Any

from audit.store.base import ObjectStore
from audit.store.run import estate_prefix

FORMAT = "replaudit.repair-log/1"


def log_prefix(estate: str, plan_id: str) -> str:
    return f"{estate_prefix(estate)}repairs/{plan_id}/audit-log/"


class AuditLog:
    """The records of one attempt at one plan."""

    def __init__(self, store: ObjectStore, estate: str, plan_id: str, secrets: Any = None):
        self.store, self.plan_id, self.secrets = store, plan_id, secrets
        self.prefix = log_prefix(estate, plan_id)
        self.attempt = uuid.uuid4().hex[:12]
        self.seq = 0

    def write(self, event: str, **fields: Any) -> dict:
        at_ms = time.time_ns() // 1_000_000
        record = {"format": FORMAT, "plan_id": self.plan_id, "attempt": self.attempt, "seq": self.seq,
                  "at": datetime.fromtimestamp(at_ms / 1000, timezone.utc).isoformat(), "event": event, **fields}
        text = json.dumps(record, sort_keys=True, default=str)
        if self.secrets is not None:
            text = self.secrets.redact(text)
        self.store.put(f"{self.prefix}{at_ms:013d}-{self.attempt}-{self.seq:04d}.json", text.encode())
        self.seq += 1
        return json.loads(text)


def records(store: ObjectStore, estate: str, plan_id: str) -> list[dict]:
    """Every record of the plan's log, oldest first."""
    return [json.loads(store.get(key)) for key in sorted(store.list(log_prefix(estate, plan_id)))
            if key.endswith(".json")]
