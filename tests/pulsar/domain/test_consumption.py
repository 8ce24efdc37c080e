"""Failover findings are raised only from a source where the subscription is consumed (one table of cases)."""
import json

import pytest

from audit.systems.pulsar.domain.consumption import from_consumed_source, keep_consumed

T, S = "persistent://t/ns/orders", "billing"


def _finding(check: str, cluster: str = "east", subscription: str | None = S) -> dict:
    ev = {"topic": T, **({"subscription": subscription, "target_cluster": "west"} if subscription else {})}
    return {"check": check, "cluster": cluster, "evidence": json.dumps(ev)}


@pytest.mark.parametrize("check, consumed_here, raised", [
    ("pulsar.failover_redelivery", True, True),
    ("pulsar.failover_skip", True, True),
    ("pulsar.failover_loss", True, True),
    ("pulsar.failover_redelivery", False, False),   # a standby never served consumers: nobody fails over from it
    ("pulsar.failover_skip", False, False),
    ("pulsar.failover_loss", False, False),
    ("pulsar.failover_loss", None, True),           # unknown (old broker, no stats): keep it, say it
    ("pulsar.target_cursor_ahead", False, True),    # not a failover count: always raised
    ("pulsar.replicated_subscription_one_way", False, True),
])
def test_failover_findings_need_a_consumed_source(check, consumed_here, raised):
    consumed = {("east", T, S): consumed_here}
    assert from_consumed_source(_finding(check), consumed) is raised


def test_a_subscription_without_stats_is_unknown_and_the_rest_are_filtered():
    consumed = {("west", T, S): False}
    kept = keep_consumed([_finding("pulsar.failover_skip", "west"), _finding("pulsar.failover_skip", "east"),
                          _finding("pulsar.snapshot_timeout", "west", subscription=None)], consumed)
    assert [(f["check"], f["cluster"]) for f in kept] == [("pulsar.failover_skip", "east"),
                                                          ("pulsar.snapshot_timeout", "west")]
