"""Which findings to tell people about tonight: pure functions, no I/O (audit/alerts/notify.py sends, state.py keeps
what was sent).

Every finding has a stable fingerprint: (system, cluster, check, subject). "Audit incomplete" is a signal of its own,
one per (system, cluster, source that could not be covered), check `audit_incomplete`, never folded into "healthy".
Both follow one lifecycle, Alertmanager's model for a nightly job:
- new: not firing after the previous run -> a notice;
- worse: firing, and its severity rose above the one last notified, or its count grew past `worse_factor` times the
  count last notified -> a notice;
- persisting: nothing, until `repeat_interval` has passed since the last notice (Alertmanager's repeat_interval)
  -> a reminder;
- gone: a notice "resolved", once; but only when its cluster was covered tonight: a finding on a cluster the run
  could not fully cover (an incomplete signal for that system and cluster, or for the system's cluster "*": a
  failed job) is not resolved, it keeps firing unchanged.
Two identical nights therefore send nothing on the second."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Mapping, NamedTuple

from audit.findings import fingerprint
from audit.contracts import SEVERITIES

INCOMPLETE = "audit_incomplete"
NEW, WORSE, REMINDER, RESOLVED = "new", "worse", "reminder", "resolved"
INCOMPLETE_SEVERITY = "major"     # an audit that cannot see is never quieter than the findings it may hide


@dataclass(frozen=True)
class Signal:
    """One finding (or one "audit incomplete") of tonight's run."""

    system: str
    cluster: str
    check: str
    subject: str
    severity: str
    count: int
    message: str = ""

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.system, self.cluster, self.check, self.subject)

    @property
    def incomplete(self) -> bool:
        return self.check == INCOMPLETE


@dataclass(frozen=True)
class Tracked:
    """A firing signal as the state remembers it between runs (times in ms since the epoch)."""

    signal: Signal
    first_seen_ms: int
    last_seen_ms: int
    notified_ms: int
    notified_severity: str
    notified_count: int


class Notice(NamedTuple):
    kind: str              # new | worse | reminder | resolved
    tracked: Tracked


class Policy(NamedTuple):
    repeat_interval_ms: int = 7 * 24 * 3600 * 1000
    worse_factor: float = 2.0


def from_violations(violations: Iterable[Mapping]) -> list[Signal]:
    return [Signal(v["system"], v["cluster"], v["check"], str(v.get("subject") or ""), v["severity"],
                   int(v.get("entry_count") or 0), str(v.get("message") or "")) for v in violations]


def from_gaps(gaps: Iterable[Mapping]) -> list[Signal]:
    """One signal per (system, cluster, source) not covered; its count is how many things it left unjudged."""
    grouped: dict[tuple[str, str, str], list[Mapping]] = {}
    for g in gaps:
        key = (str(g.get("system") or ""), str(g.get("cluster") or ""), str(g.get("source") or g.get("what") or ""))
        grouped.setdefault(key, []).append(g)
    out = []
    for (system, cluster, source), items in sorted(grouped.items()):
        first = items[0]
        what = f"{first.get('what')}: {first.get('error')}" if first.get("error") else str(first.get("what"))
        more = f" (and {len(items) - 1} more)" if len(items) > 1 else ""
        out.append(Signal(system, cluster, INCOMPLETE, source, INCOMPLETE_SEVERITY, len(items),
                          f"not covered: {what}{more}"))
    return out


def _rank(severity: str) -> int:
    return len(SEVERITIES) - SEVERITIES.index(severity)     # higher is more severe


def transition(previous: Mapping[str, Tracked], tonight: Iterable[Signal], at_ms: int,
               policy: Policy = Policy()) -> tuple[list[Notice], dict[str, Tracked]]:
    """(notices to send, the state to keep) from the state after the previous run and tonight's signals."""
    notices: list[Notice] = []
    state: dict[str, Tracked] = {}
    current = {s.fingerprint: s for s in tonight}
    # (system, cluster) not fully looked at tonight; a failed job of a system leaves all its clusters ("*")
    blind = {(s.system, s.cluster) for s in current.values() if s.incomplete}
    for fp, s in current.items():
        before = previous.get(fp)
        if before is None:
            t = Tracked(s, at_ms, at_ms, at_ms, s.severity, s.count)
            notices.append(Notice(NEW, t))
        elif _rank(s.severity) > _rank(before.notified_severity) or \
                s.count > before.notified_count * policy.worse_factor:
            t = replace(before, signal=s, last_seen_ms=at_ms, notified_ms=at_ms, notified_severity=s.severity,
                        notified_count=s.count)
            notices.append(Notice(WORSE, t))
        elif at_ms - before.notified_ms >= policy.repeat_interval_ms:
            t = replace(before, signal=s, last_seen_ms=at_ms, notified_ms=at_ms)
            notices.append(Notice(REMINDER, t))
        else:
            t = replace(before, signal=s, last_seen_ms=at_ms)
        state[fp] = t
    for fp, before in previous.items():
        if fp in current:
            continue
        s = before.signal
        if not s.incomplete and ((s.system, s.cluster) in blind or (s.system, "*") in blind):
            state[fp] = before          # not seen because not looked at: still firing, as it was
        else:
            notices.append(Notice(RESOLVED, replace(before, notified_ms=at_ms)))
    return notices, state
