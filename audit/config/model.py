"""The validated estate as frozen values. Built only by `audit.config.estate.load_estate`."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Mapping

SEVERITIES = ("critical", "major", "minor", "warning")  # most to least severe
SOURCES_BOOKKEEPER = ("lab", "zookeeper")
SOURCES_PULSAR = ("lab", "admin")
CONNECTION_FIELDS = ("password", "login", "host", "schema")  # parts of an Airflow connection a SecretRef may pick
EXTRA_PREFIX = "extra."


def is_connection_field(part: object) -> bool:
    """True for a part a SecretRef may pick: one of CONNECTION_FIELDS or `extra.<key>`."""
    return part in CONNECTION_FIELDS or (isinstance(part, str) and part.startswith(EXTRA_PREFIX)
                                         and len(part) > len(EXTRA_PREFIX))


@dataclass(frozen=True)
class SecretRef:
    """Where a secret lives -- never the secret itself. Exactly one of `env` / `airflow_conn` is set.

    `field` picks the part of an Airflow connection: password (default), login, host, schema,
    or `extra.<key>`. `where` is the estate field the reference came from (for error messages).
    """

    env: str | None = None
    airflow_conn: str | None = None
    field: str = "password"
    where: str = ""

    def describe(self) -> str:
        if self.env is not None:
            return f"environment variable {self.env}"
        return f"Airflow connection {self.airflow_conn!r} ({self.field})"


@dataclass(frozen=True)
class StoreCredentials:
    """Either explicit key references or one Airflow AWS connection (login/password/extra)."""

    access_key: SecretRef | None = None
    secret_key: SecretRef | None = None
    session_token: SecretRef | None = None
    airflow_conn: str | None = None


@dataclass(frozen=True)
class StoreConfig:
    """`uri` is normalized: `file:///absolute/path` or `s3://bucket[/prefix]` (no trailing slash)."""

    uri: str
    endpoint_url: str | None = None
    region: str | None = None
    credentials: StoreCredentials | None = None

    @property
    def scheme(self) -> str:
        return self.uri.split("://", 1)[0]


@dataclass(frozen=True)
class SparkConfig:
    master: str = "local[*]"
    conf: Mapping[str, str] = field(default_factory=dict)  # values already strings, as Spark wants


@dataclass(frozen=True)
class Thresholds:
    open_ledger_max_age_s: int = 6 * 3600
    min_racks_per_write_quorum: int = 2
    pulsar_replicator_backlog_max: int = 10_000  # entries waiting in a pulsar.repl.<remote> cursor
    pulsar_snapshot_max_age_s: int = 300  # newest complete PIP-33 snapshot, while data is published


@dataclass(frozen=True)
class AlertRoute:
    name: str
    kind: str  # "webhook"
    url: str
    headers_from: Mapping[str, SecretRef] = field(default_factory=dict)
    min_severity: str = "warning"
    timeout_s: float = 10.0

    def accepts(self, severity: str) -> bool:
        """True if a finding of `severity` is at least as severe as this route's minimum."""
        return SEVERITIES.index(severity) <= SEVERITIES.index(self.min_severity)


@dataclass(frozen=True)
class Alerts:
    routes: tuple[AlertRoute, ...] = ()


@dataclass(frozen=True)
class ZooKeeperConfig:
    """`hosts` is the kazoo/ZooKeeper connect string `h1:p1,h2:p2[/chroot]`."""

    hosts: str
    ledgers_root: str = "/ledgers"
    digest_auth: SecretRef | None = None  # resolves to "user:password"


@dataclass(frozen=True)
class Timeouts:
    connect_s: float = 5.0
    request_s: float = 30.0


@dataclass(frozen=True)
class BookKeeperCluster:
    """One BookKeeper cluster. `lab` is a plain dict for the simulator (only for source "lab")."""

    system: ClassVar[str] = "bookkeeper"

    name: str
    source: str  # "lab" | "zookeeper"
    zookeeper: ZooKeeperConfig | None = None
    bookie_addresses: Mapping[str, str] = field(default_factory=dict)  # bookieId -> host:port
    racks: Mapping[str, str] = field(default_factory=dict)  # bookieId -> /region/rack
    timeouts: Timeouts = field(default_factory=Timeouts)
    lab: dict[str, Any] | None = None


@dataclass(frozen=True)
class PulsarDump:
    """How the per-entry topic dump runs: parallel admin requests, entries per raw chunk, and a cap per topic
    (positions beyond the cap are reported as not covered, never silently dropped)."""

    concurrency: int = 8
    chunk_entries: int = 1000
    max_entries_per_topic: int = 1_000_000


@dataclass(frozen=True)
class PulsarCluster:
    """One Pulsar cluster. `name` is the cluster name its brokers use (replicated_from, pulsar.repl.<name>).
    `token` resolves to the admin bearer token. `lab` is a plain dict for the simulator (source "lab")."""

    system: ClassVar[str] = "pulsar"

    name: str
    source: str  # "lab" | "admin"
    admin_url: str | None = None
    token: SecretRef | None = None
    namespaces: tuple[str, ...] = ()  # "tenant/namespace"
    topics: tuple[str, ...] = ()  # "persistent://tenant/namespace/topic"
    dump: PulsarDump = field(default_factory=PulsarDump)
    timeouts: Timeouts = field(default_factory=Timeouts)
    tls_verify: bool = True
    lab: dict[str, Any] | None = None


ClusterConfig = BookKeeperCluster | PulsarCluster


@dataclass(frozen=True)
class Estate:
    name: str
    path: Path  # the estate file, as given to load_estate
    home: Path  # what relative paths resolved against (see audit.config.home)
    store: StoreConfig
    spark: SparkConfig = field(default_factory=SparkConfig)
    thresholds: Thresholds = field(default_factory=Thresholds)
    alerts: Alerts = field(default_factory=Alerts)
    bookkeeper: tuple[BookKeeperCluster, ...] = ()
    pulsar: tuple[PulsarCluster, ...] = ()

    def clusters(self, system: str) -> tuple[ClusterConfig, ...]:
        if system == "bookkeeper":
            return self.bookkeeper
        if system == "pulsar":
            return self.pulsar
        raise KeyError(f"estate {self.name!r} has no system {system!r} (known: bookkeeper, pulsar)")

    def cluster(self, system: str, name: str) -> ClusterConfig:
        for cluster in self.clusters(system):
            if cluster.name == name:
                return cluster
        known = ", ".join(c.name for c in self.clusters(system)) or "none"
        raise KeyError(f"estate {self.name!r} has no {system} cluster {name!r} (known: {known})")
