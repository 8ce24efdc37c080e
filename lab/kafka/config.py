"""The `lab:` mapping of a Kafka lab estate (docs/kafka/lab.md): one simulated world of Kafka clusters (each with
its truncation policy and scenarios) and MirrorMaker 2 flows between them, shared by every estate cluster that
carries the same mapping.

Every key is optional; `{seed: 7}` is the default world. Errors name the key, what was expected and what was
given (KafkaLabConfigError)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

SCENARIOS = ("kip101-scenario-1", "kip101-scenario-2", "unclean-election", "power-loss", "broker-restart",
             "healthy-under-load")
MM2_SCENARIOS = ("mm2-sparse-syncs", "mm2-restart", "mm2-pre-3.4.1-overshoot")
HIGH_WATERMARK, LEADER_EPOCH = "high-watermark", "leader-epoch"   # pre-KIP-101 / KIP-101+KIP-279 truncation
POLICIES = (HIGH_WATERMARK, LEADER_EPOCH)
ZOOKEEPER, KRAFT = "zookeeper", "kraft"
MODES = (ZOOKEEPER, KRAFT)
# The brokers' release each policy stands for (what the admin server's ApiVersions and the docs name).
POLICY_VERSION = {HIGH_WATERMARK: "0.10.2.1", LEADER_EPOCH: "3.6.2"}

DEFAULT_CLUSTERS: tuple[dict[str, Any], ...] = (
    {"name": "legacy-s1", "policy": HIGH_WATERMARK, "mode": ZOOKEEPER, "scenarios": ["kip101-scenario-1"]},
    {"name": "legacy-s2", "policy": HIGH_WATERMARK, "mode": ZOOKEEPER, "scenarios": ["kip101-scenario-2"]},
    {"name": "epoch-s1", "policy": LEADER_EPOCH, "mode": ZOOKEEPER, "scenarios": ["kip101-scenario-1"]},
    {"name": "epoch-s2", "policy": LEADER_EPOCH, "mode": ZOOKEEPER, "scenarios": ["kip101-scenario-2"]},
    {"name": "unclean", "policy": LEADER_EPOCH, "mode": KRAFT, "scenarios": ["unclean-election"]},
    {"name": "power", "policy": LEADER_EPOCH, "mode": KRAFT, "scenarios": ["power-loss"]},
    {"name": "rolling", "policy": LEADER_EPOCH, "mode": KRAFT, "scenarios": ["broker-restart"]},
    {"name": "primary", "policy": LEADER_EPOCH, "mode": KRAFT, "scenarios": ["healthy-under-load"],
     "log_dirs": {2: 2}},
    {"name": "dr", "policy": LEADER_EPOCH, "mode": KRAFT, "scenarios": []},
    {"name": "dr-legacy", "policy": LEADER_EPOCH, "mode": ZOOKEEPER, "scenarios": []},
)
DEFAULT_MIRRORS: tuple[dict[str, Any], ...] = (
    {"source": "primary", "target": "dr", "mm2_version": "3.6.0", "scenarios": ["mm2-sparse-syncs", "mm2-restart"]},
    {"source": "primary", "target": "dr-legacy", "mm2_version": "3.4.0", "scenarios": ["mm2-pre-3.4.1-overshoot"]},
)

_INTS = {  # key: (default, minimum, maximum)
    "seed": (7, 0, 2**63 - 1),
    "duration_s": (300, 120, 7200),           # virtual time simulated; the world ends at as_of
    "collection_gap_s": (20, 0, 600),         # between two brokers' scans of one cluster (traffic goes on)
    "batches_per_s": (2, 1, 200),             # produce batches per second and partition, per producer
    "records_per_batch": (3, 1, 100),         # each batch holds 1..this many records
    "record_bytes": (120, 8, 10_000),         # value size of a record
    "segment_bytes": (16_384, 1_024, 1 << 30),   # segment.bytes
    "retention_s": (180, 30, 10**7),          # retention.ms / 1000
    "retention_check_s": (30, 1, 3600),       # log.retention.check.interval.ms / 1000
    "fetch_min_ms": (50, 1, 10_000),          # a follower's fetch interval is drawn in [fetch_min_ms, fetch_max_ms]
    "fetch_max_ms": (400, 1, 10_000),
    "replica_lag_time_max_ms": (30_000, 1_000, 600_000),   # replica.lag.time.max.ms
    "session_timeout_ms": (9_000, 1_000, 120_000),        # broker death noticed by the controller after this
    "hw_checkpoint_ms": (5_000, 100, 600_000),  # replica.high.watermark.checkpoint.interval.ms
    "offset_checkpoint_ms": (60_000, 1_000, 3_600_000),   # log.flush.{offset,start.offset}.checkpoint.interval.ms
    "writeback_s": (30, 1, 3600),             # page cache age the OS has written back (vm.dirty_expire)
    "emit_checkpoints_s": (15, 1, 3600),      # MM2 emit.checkpoints.interval.seconds
    "sync_group_offsets_s": (15, 1, 3600),    # MM2 sync.group.offsets.interval.seconds
    "offset_flush_s": (10, 1, 3600),          # Connect offset.flush.interval.ms / 1000 (MM2 source task commits)
}
KNOWN_KEYS = tuple(_INTS) + ("clusters", "mirrors")
CLUSTER_KEYS = ("name", "policy", "mode", "scenarios", "brokers", "log_dirs", "partitions")
MIRROR_KEYS = ("source", "target", "mm2_version", "scenarios", "offset_lag_max")
NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
VERSION_RE = re.compile(r"^\d+\.\d+(\.\d+){0,2}$")
WARM_UP_S = 60          # traffic before the first scenario fault, at least
SETTLE_S = 40           # after the last fault, before the first scan


class KafkaLabConfigError(ValueError):
    """A `lab:` value of a Kafka lab cluster is wrong: `key` names it (dotted for nested keys)."""

    def __init__(self, key: str, expected: str, got: Any):
        self.key, self.expected, self.got = key, expected, got
        super().__init__(f"kafka lab: {key}: expected {expected}, got {got!r}")


@dataclass(frozen=True)
class ClusterSpec:
    name: str
    policy: str
    mode: str
    scenarios: tuple[str, ...]
    brokers: int = 3
    log_dirs: tuple[tuple[int, int], ...] = ()   # (broker, number of log dirs) for brokers with more than one
    partitions: int = 3                          # partitions of the background topic

    @property
    def broker_ids(self) -> tuple[int, ...]:
        return tuple(range(1, self.brokers + 1))

    def dirs_of(self, broker: int) -> int:
        return dict(self.log_dirs).get(broker, 1)

    @property
    def version(self) -> str:
        return POLICY_VERSION[self.policy]


@dataclass(frozen=True)
class MirrorSpec:
    source: str
    target: str
    mm2_version: str
    scenarios: tuple[str, ...]
    offset_lag_max: int = 100

    @property
    def version_tuple(self) -> tuple[int, ...]:
        return tuple(int(p) for p in self.mm2_version.split("."))


@dataclass(frozen=True)
class KafkaLabConfig:
    seed: int
    duration_s: int
    collection_gap_s: int
    batches_per_s: int
    records_per_batch: int
    record_bytes: int
    segment_bytes: int
    retention_s: int
    retention_check_s: int
    fetch_min_ms: int
    fetch_max_ms: int
    replica_lag_time_max_ms: int
    session_timeout_ms: int
    hw_checkpoint_ms: int
    offset_checkpoint_ms: int
    writeback_s: int
    emit_checkpoints_s: int
    sync_group_offsets_s: int
    offset_flush_s: int
    clusters: tuple[ClusterSpec, ...]
    mirrors: tuple[MirrorSpec, ...]

    @property
    def cluster_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.clusters)

    def cluster(self, name: str) -> ClusterSpec:
        return next(c for c in self.clusters if c.name == name)

    def component(self, name: str) -> tuple[str, ...]:
        """The clusters simulated together with `name`: those linked to it by mirror flows, in mapping order."""
        linked, todo = {name}, [name]
        while todo:
            n = todo.pop()
            for m in self.mirrors:
                for a, b in ((m.source, m.target), (m.target, m.source)):
                    if a == n and b not in linked:
                        linked.add(b)
                        todo.append(b)
        return tuple(c for c in self.cluster_names if c in linked)

    def scan_span_s(self) -> int:
        """From the first scan of a cluster to the end of its collection (the widest cluster)."""
        return max(c.brokers for c in self.clusters) * self.collection_gap_s + 5


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _names(key: str, value: Any, allowed: tuple[str, ...]) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value) \
            or len(set(value)) != len(value):
        raise KafkaLabConfigError(key, f"a list of distinct names among {', '.join(allowed)}", value)
    unknown = [v for v in value if v not in allowed]
    if unknown:
        raise KafkaLabConfigError(key, f"names among {', '.join(allowed)}", unknown)
    return tuple(value)


def _cluster(i: int, raw: Any) -> ClusterSpec:
    at = f"clusters[{i}]"
    if not isinstance(raw, Mapping):
        raise KafkaLabConfigError(at, "a mapping {name, policy, scenarios, ...}", raw)
    unknown = sorted(k for k in raw if k not in CLUSTER_KEYS)
    if unknown:
        raise KafkaLabConfigError(f"{at}.{unknown[0]}", f"one of {', '.join(CLUSTER_KEYS)}", raw[unknown[0]])
    name = raw.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise KafkaLabConfigError(f"{at}.name", "a cluster name (lowercase letters, digits, '-')", name)
    policy = raw.get("policy", LEADER_EPOCH)
    if policy not in POLICIES:
        raise KafkaLabConfigError(f"{at}.policy", f"{HIGH_WATERMARK!r} or {LEADER_EPOCH!r}", policy)
    mode = raw.get("mode", ZOOKEEPER if policy == HIGH_WATERMARK else KRAFT)
    if mode not in MODES:
        raise KafkaLabConfigError(f"{at}.mode", f"{ZOOKEEPER!r} or {KRAFT!r}", mode)
    if policy == HIGH_WATERMARK and mode == KRAFT:
        raise KafkaLabConfigError(f"{at}.mode", "zookeeper with the high-watermark policy (KRaft brokers all "
                                  "truncate by leader epoch)", mode)
    scenarios = _names(f"{at}.scenarios", raw.get("scenarios", []), SCENARIOS)
    brokers = raw.get("brokers", 3)
    if not _int(brokers) or not 3 <= brokers <= 9:
        raise KafkaLabConfigError(f"{at}.brokers", "an integer from 3 to 9", brokers)
    partitions = raw.get("partitions", 3)
    if not _int(partitions) or not 1 <= partitions <= 64:
        raise KafkaLabConfigError(f"{at}.partitions", "an integer from 1 to 64", partitions)
    dirs = raw.get("log_dirs", {})
    if not isinstance(dirs, Mapping) or not all(
            _int(b) and 1 <= b <= brokers and _int(n) and 1 <= n <= 4 for b, n in dirs.items()):
        raise KafkaLabConfigError(f"{at}.log_dirs", f"a mapping broker (1..{brokers}) -> log dirs (1..4)", dirs)
    return ClusterSpec(name, policy, mode, scenarios, brokers, tuple(sorted(dirs.items())), partitions)


def _mirror(i: int, raw: Any, names: tuple[str, ...]) -> MirrorSpec:
    at = f"mirrors[{i}]"
    if not isinstance(raw, Mapping):
        raise KafkaLabConfigError(at, "a mapping {source, target, mm2_version, scenarios}", raw)
    unknown = sorted(k for k in raw if k not in MIRROR_KEYS)
    if unknown:
        raise KafkaLabConfigError(f"{at}.{unknown[0]}", f"one of {', '.join(MIRROR_KEYS)}", raw[unknown[0]])
    for key in ("source", "target"):
        if raw.get(key) not in names:
            raise KafkaLabConfigError(f"{at}.{key}", f"a lab cluster ({', '.join(names)})", raw.get(key))
    if raw["source"] == raw["target"]:
        raise KafkaLabConfigError(f"{at}.target", "another cluster than the source", raw["target"])
    version = raw.get("mm2_version", "3.6.0")
    if not isinstance(version, str) or not VERSION_RE.match(version):
        raise KafkaLabConfigError(f"{at}.mm2_version", "a release like 3.6.0", version)
    lag = raw.get("offset_lag_max", 100)
    if not _int(lag) or not 1 <= lag <= 10**9:
        raise KafkaLabConfigError(f"{at}.offset_lag_max", "an integer from 1 (offset.lag.max)", lag)
    return MirrorSpec(raw["source"], raw["target"], version,
                      _names(f"{at}.scenarios", raw.get("scenarios", []), MM2_SCENARIOS), lag)


def parse_kafka_lab(lab: Mapping[str, Any] | None) -> KafkaLabConfig:
    lab = dict(lab or {})
    unknown = sorted(k for k in lab if k not in KNOWN_KEYS)
    if unknown:
        raise KafkaLabConfigError(unknown[0], f"one of {', '.join(KNOWN_KEYS)}", lab[unknown[0]])
    values: dict[str, Any] = {}
    for key, (default, lo, hi) in _INTS.items():
        v = lab.get(key, default)
        if not _int(v) or not lo <= v <= hi:
            raise KafkaLabConfigError(key, f"an integer from {lo} to {hi}", v)
        values[key] = v
    if values["fetch_min_ms"] > values["fetch_max_ms"]:
        raise KafkaLabConfigError("fetch_min_ms", f"at most fetch_max_ms ({values['fetch_max_ms']})",
                                  values["fetch_min_ms"])
    raw_clusters = lab.get("clusters", DEFAULT_CLUSTERS)
    if not isinstance(raw_clusters, (list, tuple)) or not raw_clusters:
        raise KafkaLabConfigError("clusters", "a non-empty list of {name, policy, scenarios, ...}", raw_clusters)
    clusters = tuple(_cluster(i, c) for i, c in enumerate(raw_clusters))
    names = tuple(c.name for c in clusters)
    if len(set(names)) != len(names):
        raise KafkaLabConfigError("clusters", "distinct cluster names", list(names))
    raw_mirrors = lab.get("mirrors", DEFAULT_MIRRORS if "clusters" not in lab else ())
    if not isinstance(raw_mirrors, (list, tuple)):
        raise KafkaLabConfigError("mirrors", "a list of {source, target, mm2_version, scenarios}", raw_mirrors)
    mirrors = tuple(_mirror(i, m, names) for i, m in enumerate(raw_mirrors))
    pairs = [(m.source, m.target) for m in mirrors]
    if len(set(pairs)) != len(pairs):
        raise KafkaLabConfigError("mirrors", "one flow per (source, target) pair", pairs)
    config = KafkaLabConfig(**values, clusters=clusters, mirrors=mirrors)
    faults = sum(1 for c in clusters for s in c.scenarios if s != "healthy-under-load")
    need = WARM_UP_S + _fault_span_s(clusters) + SETTLE_S + config.scan_span_s()
    if values["duration_s"] < need:
        raise KafkaLabConfigError("duration_s", f"at least {need} s for these scenarios ({faults} with faults) "
                                  f"and brokers scanned {values['collection_gap_s']} s apart",
                                  values["duration_s"])
    return config


SCENARIO_SPAN_S = {"kip101-scenario-1": 40, "kip101-scenario-2": 60, "unclean-election": 70, "power-loss": 60,
                   "broker-restart": 90, "healthy-under-load": 0}


def _fault_span_s(clusters: tuple[ClusterSpec, ...]) -> int:
    """Scenarios of one cluster run one after another: the longest cluster's sum."""
    return max((sum(SCENARIO_SPAN_S[s] for s in c.scenarios) for c in clusters), default=0)
