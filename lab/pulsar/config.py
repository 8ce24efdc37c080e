"""The `lab:` mapping of a Pulsar lab estate (docs/pulsar/lab.md): one simulated world shared by every lab cluster
that carries the same mapping.

Every key is optional. Sizes are kept small by default so that building the world and emitting all of its
clusters takes well under five seconds."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from audit.systems.pulsar.config import PulsarThresholds
from audit.systems.pulsar.domain.snapshot_cache import CacheModel, broker_cache_model

_ESTATE = PulsarThresholds()   # the ground truth assumes the estate's thresholds (their defaults, unless told)

DEFAULT_CLUSTERS = ("east", "west", "south")
SCENARIO_NAMES = ("healthy", "ack-holes", "delayed-message", "backlog-starves-snapshots", "one-way",
                  "target-cursor-ahead", "replicator-disconnected", "three-clusters", "old-pulsar",
                  "replicate-to", "message-ttl", "producer-restart", "missing-subscription", "standby-replicator-down")
CONTINUOUS, QUIET = "continuous", "quiet"
ANY_NAMESPACE = "*"   # the estate's default in message_ttl_s / redelivery_tolerance
_INTS = {  # key: (default, minimum, maximum)
    "seed": (7, 0, 2**63 - 1),
    "messages": (120, 10, 5000),  # per producer and scenario topic, per 40 s of production
    "ledger_max_entries": (80, 5, 100_000),  # a ledger rolls over once it holds this many entries
    "duration_s": (240, 70, 3600),  # virtual time simulated; the world ends at as_of
    "collection_gap_s": (60, 0, 600),  # between the collections of two clusters (estate order)
    "snapshot_frequency_ms": (1000, 100, 60_000),  # replicatedSubscriptionsSnapshotFrequencyMillis
    "snapshot_timeout_s": (30, 1, 3600),  # replicatedSubscriptionsSnapshotTimeoutSeconds
    "snapshot_cache_size": (10, 1, 1000),  # replicatedSubscriptionsSnapshotMaxCachedPerSubscription
    "replicator_backlog_max": (_ESTATE.pulsar_replicator_backlog_max, 0, 2**62),
    "snapshot_max_age_s": (_ESTATE.pulsar_snapshot_max_age_s, 1, 10**7),
}
WARM_UP_S = 60   # traffic before the first collection, at least
KNOWN_KEYS = tuple(_INTS) + ("clusters", "scenarios", "tenant", "broker_versions", "traffic", "message_ttl_s",
                             "redelivery_tolerance")
# The lab's clusters run a 3.0 LTS release by default: the TreeMap snapshot cache, which every seed's ground
# truth and the pinned lab tests were built with. `broker_versions: {east: "4.2.0"}` gives a cluster brokers
# with the apache/pulsar#25044 cache, which the simulation then runs (snapshots.py).
DEFAULT_BROKER_VERSION = "3.0.12"


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
    traffic: str = CONTINUOUS
    messages: int = _INTS["messages"][0]
    ledger_max_entries: int = _INTS["ledger_max_entries"][0]
    duration_s: int = _INTS["duration_s"][0]
    collection_gap_s: int = _INTS["collection_gap_s"][0]
    snapshot_frequency_ms: int = _INTS["snapshot_frequency_ms"][0]
    snapshot_timeout_s: int = _INTS["snapshot_timeout_s"][0]
    snapshot_cache_size: int = _INTS["snapshot_cache_size"][0]
    replicator_backlog_max: int = _INTS["replicator_backlog_max"][0]
    snapshot_max_age_s: int = _INTS["snapshot_max_age_s"][0]
    broker_versions: tuple[tuple[str, str], ...] = ()   # (cluster, version); the rest run the default
    message_ttl_s: tuple[tuple[str, int], ...] = ()     # (namespace or "*", messageTTLInSeconds): the estate's
    redelivery_tolerance: tuple[tuple[str, int, int], ...] = ()   # (namespace or "*", messages, age_s)

    @property
    def duration_ms(self) -> int:
        return self.duration_s * 1000

    def broker_version_of(self, cluster: str) -> str:
        return dict(self.broker_versions).get(cluster, DEFAULT_BROKER_VERSION)

    def cache_model(self, cluster: str) -> CacheModel:
        """The snapshot cache rule the cluster's brokers run (validated in parse_pulsar_lab)."""
        return broker_cache_model(self.broker_version_of(cluster), self.snapshot_cache_size)

    def ttl_ms(self, namespace: str) -> int:
        """The namespace's message TTL (0: none), as the estate declares it to the audit."""
        ttl = dict(self.message_ttl_s)
        return ttl.get(namespace, ttl.get(ANY_NAMESPACE, 0)) * 1000

    def tolerance(self, namespace: str) -> tuple[int, int]:
        """(messages, age_s) a redelivery lag may reach before it is a finding (the estate's; default 0, 0)."""
        tol = {ns: (m, a) for ns, m, a in self.redelivery_tolerance}
        return tol.get(namespace, tol.get(ANY_NAMESPACE, (0, 0)))


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


def _int(v: Any, lo: int = 0) -> bool:
    return not isinstance(v, bool) and isinstance(v, int) and v >= lo


def _per_namespace(key: str, value: Any, width: int) -> tuple:
    """{namespace or "*": seconds} (width 1) or {namespace or "*": [messages, age_s]} (width 2), sorted."""
    shape = "seconds" if width == 1 else "[messages, age_s]"
    if not isinstance(value, Mapping):
        raise PulsarLabConfigError(key, f"a mapping of tenant/namespace (or '*') to {shape}", value)
    out = []
    for ns, v in value.items():
        parts = [v] if width == 1 else v
        if not isinstance(ns, str) or not (ns == ANY_NAMESPACE or ns.count("/") == 1) or not isinstance(
                parts, (list, tuple)) or len(parts) != width or not all(_int(p) for p in parts):
            raise PulsarLabConfigError(key, f"a mapping of tenant/namespace (or '*') to {shape}", {ns: v})
        out.append((ns, *parts))
    return tuple(sorted(out))


def parse_pulsar_lab(lab: Mapping[str, Any] | None) -> PulsarLabConfig:
    lab = dict(lab or {})
    unknown = sorted(k for k in lab if k not in KNOWN_KEYS)
    if unknown:
        raise PulsarLabConfigError(unknown[0], f"one of {', '.join(KNOWN_KEYS)}", lab[unknown[0]])
    values: dict[str, Any] = {}
    for key, (default, lo, hi) in _INTS.items():
        v = lab.get(key, default)
        if not _int(v, lo) or v > hi:
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
    traffic = lab.get("traffic", CONTINUOUS)
    if traffic not in (CONTINUOUS, QUIET):
        raise PulsarLabConfigError("traffic", f"{CONTINUOUS!r} or {QUIET!r}", traffic)
    values["traffic"] = traffic
    n = len(values.get("clusters", DEFAULT_CLUSTERS))
    need = WARM_UP_S + (n - 1) * values["collection_gap_s"] + 10
    if values["duration_s"] < need:
        raise PulsarLabConfigError("duration_s", f"at least {need} for {n} clusters collected "
                                   f"{values['collection_gap_s']} s apart after {WARM_UP_S} s of traffic",
                                   values["duration_s"])
    values["message_ttl_s"] = _per_namespace("message_ttl_s", lab.get("message_ttl_s", {}), 1)
    values["redelivery_tolerance"] = _per_namespace("redelivery_tolerance", lab.get("redelivery_tolerance", {}), 2)
    values["broker_versions"] = _broker_versions(lab.get("broker_versions", {}), values)
    return PulsarLabConfig(**values)


def estate_inputs(thresholds: Any) -> dict[str, Any]:
    """What the lab takes from the estate's thresholds (a PulsarThresholds, or lab keys already): the values the
    audit judges by, so that the ground truth and the simulated brokers (message TTL) use the same ones."""
    if thresholds is None:
        return {}
    if isinstance(thresholds, Mapping):
        return dict(thresholds)
    tol, ttl = thresholds.pulsar_redelivery_tolerance, thresholds.pulsar_message_ttl
    ttls = {ns: int(v) for ns, v in [(ANY_NAMESPACE, ttl.default), *ttl.namespaces.items()]}
    tols = {ns: [t.messages, int(t.age_s)] for ns, t in [(ANY_NAMESPACE, tol.default), *tol.namespaces.items()]}
    return {"replicator_backlog_max": thresholds.pulsar_replicator_backlog_max,
            "snapshot_max_age_s": int(thresholds.pulsar_snapshot_max_age_s),
            # the broker's defaults (no TTL, no tolerance) are left out, as a mapping without them says the same
            "message_ttl_s": {ns: v for ns, v in ttls.items() if ns != ANY_NAMESPACE or v},
            "redelivery_tolerance": {ns: v for ns, v in tols.items() if ns != ANY_NAMESPACE or any(v)}}


def _broker_versions(value: Any, values: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    clusters = values.get("clusters", DEFAULT_CLUSTERS)
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise PulsarLabConfigError("broker_versions", "a mapping of lab cluster -> broker version", value)
    for cluster, version in value.items():
        if cluster not in clusters:
            raise PulsarLabConfigError("broker_versions", f"lab clusters among {', '.join(clusters)}", cluster)
        try:
            model = broker_cache_model(version, values["snapshot_cache_size"])
        except ValueError as e:   # the #25044 cache needs at least 3 entries
            raise PulsarLabConfigError("broker_versions", f"a version whose cache takes this size ({e})",
                                       version) from None
        if model is None:
            raise PulsarLabConfigError("broker_versions", "a release 'MAJOR.MINOR.PATCH' (4.0.x and 4.1.x changed "
                                       "the snapshot cache at a patch release)", version)
    try:
        broker_cache_model(DEFAULT_BROKER_VERSION, values["snapshot_cache_size"])
    except ValueError:
        if set(clusters) - set(value):
            raise PulsarLabConfigError("snapshot_cache_size", "at least 3 for clusters running the default broker "
                                       "version (the apache/pulsar#25044 cache)",
                                       values["snapshot_cache_size"]) from None
    return tuple(sorted(value.items()))
