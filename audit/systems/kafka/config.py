"""Kafka's part of the estate: one entry of `systems.kafka[]` and its `thresholds:` keys (docs/estate.md
"systems.kafka[]", docs/kafka/contracts.md). audit/systems/kafka/system.py names these as the system's `cluster_model` /
`thresholds_model`; the collectors (audit/systems/kafka/collect/), the lab (lab/kafka/) and the audit read the
attributes below as they are."""
from __future__ import annotations

import fnmatch
import re
from types import MappingProxyType
from typing import Annotated, Any, ClassVar, Sequence

from pydantic import AfterValidator, BeforeValidator, Field, WithJsonSchema, model_validator

from audit.config.model import Secret, Timeouts
from audit.systems.kafka.domain.mm2 import RULES, rule_for_version
from audit.config.values import (SECRET_HINT, Flag, Name, Record, choice, integer, lab_block, listing, record,
                                 rule_error, set_field, show, text)

SOURCES = ("lab", "admin", "log-dirs")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SYNCS_LOCATIONS = ("source", "target")    # MirrorMaker 2 offset-syncs.topic.location
# MirrorMaker 2 changed its translation at 3.4.1 (its offset sync store): older versions use the latest sync only,
# newer keep up to 64 syncs per partition (docs/formats/kafka.md §12).
RULE_OLD, RULE_NEW = RULES

HOST_PORT = r"[A-Za-z0-9_.\-]+:\d{1,5}|\[[0-9A-Fa-f:.]+\]:\d{1,5}"
BOOTSTRAP_RE = re.compile(rf"^({HOST_PORT})(,({HOST_PORT}))*$")
VERSION_RE = re.compile(r"^\d+(\.\d+){1,3}$")
# A MirrorMaker 2 cluster alias goes into topic names (<alias><separator><topic>): Kafka's topic characters only.
ALIAS_RE = re.compile(r"^[A-Za-z0-9._-]{1,200}$")
SEPARATOR_RE = re.compile(r"^[A-Za-z0-9._-]{1,10}$")
LOG_DIR_RE = re.compile(r"^/[^\x00\n]*$")


def parse_version(value: str) -> tuple[int, ...]:
    """'3.6.2' -> (3, 6, 2); the caller has validated the text."""
    return tuple(int(part) for part in value.split("."))


def _bootstrap(value: Any) -> str:
    what = "a bootstrap list host:port[,host:port...]"
    if not isinstance(value, str) or not BOOTSTRAP_RE.match(value.replace(" ", "")):
        if isinstance(value, str) and "@" in value:  # user:password@ pasted in: never echoed
            raise rule_error(f"{what} without credentials in it ({SECRET_HINT})", "a value with '@' (not shown)")
        raise rule_error(what, show(value))
    servers = value.replace(" ", "")
    for server in servers.split(","):
        if not 0 < int(server.rsplit(":", 1)[1]) < 65536:
            raise rule_error("ports between 1 and 65535", show(value))
    return servers


BootstrapServers = Annotated[str, BeforeValidator(_bootstrap), WithJsonSchema(
    {"type": "string", "pattern": r"^[^,@\s]+:\d{1,5}(,[^,@\s]+:\d{1,5})*$",
     "description": "host:port[,host:port...]"})]
Version = text(VERSION_RE, "a release as dotted numbers like 3.6.2")
Source = choice(*SOURCES)
BrokerId = integer(0)
NonNegative = integer(0)
Alias = text(ALIAS_RE, "a MirrorMaker 2 cluster alias (letters, digits, '.', '_', '-')")
Separator = text(SEPARATOR_RE, "a replication.policy.separator (letters, digits, '.', '_', '-')")
GroupPattern = text(r"^\S+$", "a consumer group glob pattern like * or orders-*")
LogDirPath = text(LOG_DIR_RE, "an absolute directory path")
KafkaLab = lab_block(schema={"type": "object", "description": "the simulated clusters "
                                                              "(lab/kafka/config.py, docs/kafka/lab.md)"})


@record
class Sasl(Record):
    """SASL credentials for the admin and MirrorMaker 2 clients; username and password are references only."""

    mechanism: choice(*SASL_MECHANISMS)
    username: Secret
    password: Secret


@record
class LogDir(Record):
    """One log dir of one broker (an entry of the broker's `log.dirs`, in that order), reachable from the
    auditor's host: the scanner reads it in place (a shared volume or mount)."""

    broker: BrokerId
    path: LogDirPath


def _unique_log_dirs(dirs: tuple) -> tuple:
    seen = set()
    for i, d in enumerate(dirs):
        if (d.broker, d.path) in seen:
            raise rule_error("each broker's log dir once", f"broker {d.broker} {d.path!r} again", at=(i,))
        seen.add((d.broker, d.path))
    return dirs


LogDirs = Annotated[listing(LogDir, "{broker, path} entries"), AfterValidator(_unique_log_dirs)]
BrokerIds = listing(BrokerId, "broker ids", unique=True)
GroupPatterns = listing(GroupPattern, "consumer group patterns", unique=True)


@record
class Mirror(Record):
    """One MirrorMaker 2 flow INTO the cluster that declares it (the target), from `source_cluster` (another
    systems.kafka[] entry). Aliases default to the clusters' names; `mm2_version` picks the translation rule."""

    source_cluster: Name
    source_alias: Alias | None = None          # default: source_cluster
    target_alias: Alias | None = None          # default: the target cluster's name
    mm2_version: Version | None = None         # unset: the current (3.4.1+) rule
    offset_syncs_location: choice(*SYNCS_LOCATIONS) = "source"
    separator: Separator = "."
    # replication.policy.internal.topic.separator.enabled (docs/formats/kafka.md §9.3)
    internal_topic_separator_enabled: Flag = True
    groups: GroupPatterns = ("*",)

    @property
    def translation_rule(self) -> str:
        """"pre-3.4.1" (latest sync only) or "3.4.1+" (OffsetSyncStore from 3.4.1): docs/formats/kafka.md §12."""
        return RULE_NEW if self.mm2_version is None else rule_for_version(self.mm2_version)

    @property
    def _internal_separator(self) -> str:
        return self.separator if self.internal_topic_separator_enabled else "."

    @property
    def offset_syncs_topic(self) -> str:
        """DefaultReplicationPolicy.offsetSyncsTopic(the other cluster's alias): the target alias when the topic lives
        on the source, the source alias when it lives on the target (MirrorCheckpointConfig.offsetSyncsTopic,
        docs/formats/kafka.md §9.3)."""
        sep = self._internal_separator
        other = self.target_alias if self.offset_syncs_location == "source" else self.source_alias
        return f"mm2-offset-syncs{sep}{other}{sep}internal"

    @property
    def checkpoints_topic(self) -> str:
        """DefaultReplicationPolicy.checkpointsTopic(source alias), on the target cluster."""
        sep = self._internal_separator
        return f"{self.source_alias}{sep}checkpoints{sep}internal"

    def remote_topic(self, topic: str) -> str:
        """DefaultReplicationPolicy.formatRemoteTopic: the target's name of a source topic."""
        return f"{self.source_alias}{self.separator}{topic}"

    def selects(self, group: str) -> bool:
        return any(fnmatch.fnmatchcase(group, pattern) for pattern in self.groups)


def _unique_aliases(mirrors: tuple) -> tuple:
    seen: dict[str, int] = {}
    for i, m in enumerate(mirrors):
        alias = m.source_alias or m.source_cluster
        if alias in seen:   # raw/kafka/<target>/mm2/<source alias>/ would hold two flows
            raise rule_error(f"one mirror per source alias (already mirrors[{seen[alias]}])", repr(alias),
                             at=(i, "source_alias"))
        seen[alias] = i
    return mirrors


Mirrors = Annotated[listing(Mirror, "mirror flows"), AfterValidator(_unique_aliases)]


@record
class KafkaCluster(Record):
    """One Kafka cluster. `source`: `admin` (the admin protocol on `bootstrap_servers`, plus the log dirs listed
    in `log_dirs` when they are mounted here), `log-dirs` (no admin endpoint: the log dirs in `log_dirs` and
    whatever `replaudit import --kind log-dir` brings) or `lab` (the simulation; `lab` is its plain mapping)."""

    system: ClassVar[str] = "kafka"

    name: Name
    source: Source
    bootstrap_servers: BootstrapServers | None = None
    security_protocol: choice(*SECURITY_PROTOCOLS) | None = None   # unset: SASL_PLAINTEXT with sasl, else PLAINTEXT
    sasl: Sasl | None = None
    log_dirs: LogDirs = ()
    # the brokers the cluster has (optional; admin metadata names them already): with every one's log dirs
    # collected, a partition found on one broker only has one replica and is judged as such
    brokers: BrokerIds = ()
    version: Version | None = None             # the brokers' release, as declared
    verify_crc: Flag = False
    mirrors: Mirrors = ()
    timeouts: Timeouts = Field(default_factory=Timeouts)
    lab: KafkaLab | None = None

    @model_validator(mode="after")
    def _rules(self) -> "KafkaCluster":
        self._check_admin_endpoint()
        self._check_lab_block()
        self._settle_security_protocol()
        self._check_log_dir_brokers()
        self._settle_mirrors()
        return self

    def _check_admin_endpoint(self) -> None:
        """A bootstrap list with source: admin, and no admin endpoint settings with any other source."""
        if self.source == "admin" and self.bootstrap_servers is None:
            raise rule_error("a bootstrap list host:port[,...] (required for source: admin)", "nothing",
                             at=("bootstrap_servers",))
        if self.source != "admin":
            for key in ("bootstrap_servers", "sasl", "security_protocol"):
                if getattr(self, key) is not None:
                    raise rule_error(f"no {key} with source: {self.source} (no admin endpoint is read)",
                                     "a value" if key == "sasl" else show(getattr(self, key)), at=(key,))

    def _check_lab_block(self) -> None:
        """A lab block exactly with source: lab, which writes its own log dirs."""
        if self.source == "lab":
            if self.lab is None:
                raise rule_error("a lab block (required for source: lab)", "nothing", at=("lab",))
            if self.log_dirs:
                raise rule_error("no log_dirs with source: lab (the lab writes its own)", "a list", at=("log_dirs",))
        elif self.lab is not None:
            raise rule_error("a lab block only with source: lab", f"source {self.source!r}", at=("lab",))

    def _settle_security_protocol(self) -> None:
        """The admin endpoint's default protocol (SASL_PLAINTEXT with sasl, else PLAINTEXT); sasl needs SASL_*."""
        if self.source == "admin" and self.security_protocol is None:
            set_field(self, "security_protocol", "SASL_PLAINTEXT" if self.sasl is not None else "PLAINTEXT")
        if self.sasl is not None and not self.security_protocol.startswith("SASL_"):
            raise rule_error("security_protocol SASL_PLAINTEXT or SASL_SSL with sasl", show(self.security_protocol),
                             at=("security_protocol",))

    def _check_log_dir_brokers(self) -> None:
        for i, d in enumerate(self.log_dirs):
            if self.brokers and d.broker not in self.brokers:
                raise rule_error(f"a broker of brokers ({', '.join(map(str, self.brokers))})", show(d.broker),
                                 at=("log_dirs", i, "broker"))

    def _settle_mirrors(self) -> None:
        """Each mirror flows from another cluster; its aliases default to the clusters' names."""
        for i, m in enumerate(self.mirrors):
            if m.source_cluster == self.name:
                raise rule_error("another cluster than this one (a mirror flows INTO this cluster)",
                                 repr(m.source_cluster), at=("mirrors", i, "source_cluster"))
            if m.source_alias is None:
                set_field(m, "source_alias", m.source_cluster)
            if m.target_alias is None:
                set_field(m, "target_alias", self.name)

    def source_of(self, mirror: Mirror) -> "KafkaCluster | None":
        """The estate entry a mirror flows from (known once the estate loader ran check_section over the list),
        else None. Kept beside the fields, not in them: entries may mirror each other both ways."""
        return getattr(self, "_estate_entries", {}).get(mirror.source_cluster)

    @property
    def dirs_of(self) -> dict[int, tuple[str, ...]]:
        """broker -> its mounted log dirs, in the order listed (dir0, dir1, ... in raw/)."""
        out: dict[int, tuple[str, ...]] = {}
        for d in self.log_dirs:
            out[d.broker] = out.get(d.broker, ()) + (d.path,)
        return out

    @classmethod
    def check_section(cls, clusters: Sequence["KafkaCluster"]) -> None:
        """Rules over the whole `systems.kafka` list (called by the estate loader): each mirror's source cluster is
        another entry, read the same way (a lab flow needs a lab source; a real one a source with an admin
        endpoint, whose groups and offset syncs the MirrorMaker 2 reader fetches)."""
        by_name = {c.name: c for c in clusters}
        for c in clusters:
            object.__setattr__(c, "_estate_entries", MappingProxyType(by_name))   # for source_of
        for i, target in enumerate(clusters):
            for j, m in enumerate(target.mirrors):
                at = (i, "mirrors", j, "source_cluster")
                source = by_name.get(m.source_cluster)
                if source is None:
                    known = ", ".join(sorted(set(by_name) - {target.name})) or "none"
                    raise rule_error(f"the name of another systems.kafka cluster (known: {known})",
                                     repr(m.source_cluster), at=at)
                if (target.source == "lab") != (source.source == "lab"):
                    raise rule_error("a source cluster read like the target (lab with lab)",
                                     f"{source.name!r} is source {source.source!r}, this cluster {target.source!r}",
                                     at=at)
                if target.source != "lab" and (target.source != "admin" or source.source != "admin"):
                    raise rule_error("mirrors between clusters with source: admin (MirrorMaker 2's topics and the "
                                     "groups are read with a client)",
                                     f"{source.name!r} is {source.source!r}, this cluster {target.source!r}", at=at)


@record
class KafkaThresholds(Record):
    """Kafka's keys of the estate's `thresholds:` block."""

    # A follower whose log end offset is this many messages behind its leader is reported (replica.lag.max is
    # time-based in the broker; this is the audit's count limit). Below it, lag is normal and only a metric.
    kafka_follower_lag_max: NonNegative = 10_000
    # Messages per group and partition a MirrorMaker 2 failover may redeliver before it is a finding (0: every
    # redelivery beyond what the translation rule itself implies is reported).
    kafka_mm2_redelivery_tolerance: NonNegative = 0
    # How long an assignment must stand before a broker's log dir listing may be missing its replica folder (a
    # broker creates the log when it applies the metadata, within seconds; docs/formats/kafka.md §11.3).
    kafka_replica_missing_settle_ms: NonNegative = 60_000


__all__ = ["KafkaCluster", "KafkaThresholds", "LogDir", "Mirror", "Sasl", "Timeouts", "SOURCES", "parse_version",
           "RULE_OLD", "RULE_NEW"]
