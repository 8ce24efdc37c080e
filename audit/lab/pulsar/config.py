"""The `lab:` mapping of a Pulsar lab estate (docs/pulsar/lab.md): one simulated world shared by every lab cluster.

Every key is optional. Sizes are kept small by default so that building the world and emitting all of its
clusters takes well under five seconds."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from audit.config.pulsar import PulsarThresholds

_ESTATE = PulsarThresholds()   # the ground truth assumes the estate's thresholds (their defaults, unless told)

DEFAULT_CLUSTERS = ("east", "west", "south")
SCENARIO_NAMES = ("healthy", "ack-holes", "delayed-message", "backlog-starves-snapshots", "one-way",
                  "target-cursor-ahead", "replicator-disconnected", "three-clusters", "old-pulsar")
_INTS = {  # key: (default, minimum, maximum)
    "seed": (7, 0, 2**63 - 1),
    "messages": (120, 10, 5000),  # per producer and scenario topic
    "ledger_max_entries": (80, 5, 100_000),  # a ledger rolls over once it holds this many entries
    "duration_s": (120, 70, 3600),  # virtual time simulated; the world ends at as_of
    "snapshot_frequency_ms": (1000, 100, 60_000),  # replicatedSubscriptionsSnapshotFrequencyMillis
    "snapshot_timeout_s": (30, 1, 3600),  # replicatedSubscriptionsSnapshotTimeoutSeconds
    "snapshot_cache_size": (10, 1, 1000),  # replicatedSubscriptionsSnapshotMaxCachedPerSubscription
    "replicator_backlog_max": (_ESTATE.pulsar_replicator_backlog_max, 0, 2**62),
    "snapshot_max_age_s": (_ESTATE.pulsar_snapshot_max_age_s, 1, 10**7),
}
KNOWN_KEYS = tuple(_INTS) + ("clusters", "scenarios", "tenant")


class PulsarLabConfigError(ValueError):
    """A `lab:` value of a Pulsar lab cluster is wrong: `key` names it."""

    def __init__(self, key: str, expected: str, got: Any):
        self.key, self.expected, self.got = key, expected, got
        super().__init__(f"pulsar lab: {key}: expected {expected}, got {got!r}")


@dataclass(frozen=True)
class PulsarLabConfig:
    seed: int = _INTS["seed"][0]
    clusters: tuple[str, ...] = DEFAULT_CLUSTERS
    scenarios: tuple[str, ...] = SCENARIO_NAMES
    tenant: str = "lab"
    messages: int = _INTS["messages"][0]
    ledger_max_entries: int = _INTS["ledger_max_entries"][0]
    duration_s: int = _INTS["duration_s"][0]
    snapshot_frequency_ms: int = _INTS["snapshot_frequency_ms"][0]
    snapshot_timeout_s: int = _INTS["snapshot_timeout_s"][0]
    snapshot_cache_size: int = _INTS["snapshot_cache_size"][0]
    replicator_backlog_max: int = _INTS["replicator_backlog_max"][0]
    snapshot_max_age_s: int = _INTS["snapshot_max_age_s"][0]

    @property
    def duration_ms(self) -> int:
        return self.duration_s * 1000


def _name_list(key: str, value: Any, allowed: tuple[str, ...] | None, lo: int, hi: int) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise PulsarLabConfigError(key, "a list of names", value)
    if len(set(value)) != len(value) or not lo <= len(value) <= hi:
        raise PulsarLabConfigError(key, f"{lo} to {hi} distinct names", value)
    if allowed is not None:
        unknown = [v for v in value if v not in allowed]
        if unknown:
            raise PulsarLabConfigError(key, f"names among {', '.join(allowed)}", unknown)
    return tuple(value)


def parse_pulsar_lab(lab: Mapping[str, Any] | None) -> PulsarLabConfig:
    lab = dict(lab or {})
    unknown = sorted(k for k in lab if k not in KNOWN_KEYS)
    if unknown:
        raise PulsarLabConfigError(unknown[0], f"one of {', '.join(KNOWN_KEYS)}", lab[unknown[0]])
    values: dict[str, Any] = {}
    for key, (default, lo, hi) in _INTS.items():
        v = lab.get(key, default)
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise PulsarLabConfigError(key, f"an integer from {lo} to {hi}", v)
        values[key] = v
    if "clusters" in lab:
        values["clusters"] = _name_list("clusters", lab["clusters"], None, 2, 3)
    if "scenarios" in lab:
        values["scenarios"] = _name_list("scenarios", lab["scenarios"], SCENARIO_NAMES, 1, len(SCENARIO_NAMES))
    tenant = lab.get("tenant", "lab")
    if not isinstance(tenant, str) or not tenant.replace("-", "").replace("_", "").isalnum():
        raise PulsarLabConfigError("tenant", "a tenant name (letters, digits, '-', '_')", tenant)
    values["tenant"] = tenant
    return PulsarLabConfig(**values)
