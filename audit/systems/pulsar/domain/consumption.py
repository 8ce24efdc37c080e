"""Which failover findings matter: only those from a source where the subscription is consumed.

Failing over *from* a standby that never served consumers is not a failover anyone performs, and on that
reverse pair the primary's own acks would count as "skipped" (docs/pulsar/contracts.md, "Which pairs raise
findings"). Unknown consumption (no stats, or an old broker's partial stats) keeps the finding: better a
finding to dismiss than a loss nobody hears about."""
from __future__ import annotations

import json
from typing import Iterable, Mapping

FAILOVER_CHECKS = frozenset({"pulsar.failover_redelivery", "pulsar.failover_skip", "pulsar.failover_loss"})

# (cluster, topic, subscription) -> consumed_here (True, False, or None = unknown)
Consumption = Mapping[tuple[str, str, str], "bool | None"]


def from_consumed_source(finding: Mapping, consumed: Consumption) -> bool:
    """True if `finding` (a findings/violations row) should be raised given where subscriptions are consumed."""
    if finding.get("check") not in FAILOVER_CHECKS:
        return True
    evidence = finding.get("evidence") or "{}"
    ev = json.loads(evidence) if isinstance(evidence, str) else evidence
    return consumed.get((finding.get("cluster"), ev.get("topic"), ev.get("subscription"))) is not False


def keep_consumed(findings: Iterable[Mapping], consumed: Consumption) -> list:
    return [f for f in findings if from_consumed_source(f, consumed)]
