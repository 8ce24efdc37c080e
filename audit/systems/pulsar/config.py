"""Pulsar's part of the estate: one entry of `systems.pulsar[]` and its `thresholds:` keys (docs/estate.md,
docs/pulsar/collector.md). audit/systems/pulsar/system.py names these as the system's `cluster_model` /
`thresholds_model`."""
from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Sequence

from pydantic import BeforeValidator, Field, WithJsonSchema, model_validator

from audit.config.model import Secret, Timeouts
from audit.config.values import (SECRET_HINT, Duration, Flag, HttpUrl, Record, choice, expect_mapping, integer,
                                 lab_block, listing, record, rule_error, set_field, show, text)

SOURCES = ("lab", "admin")
DUMP_MODES = ("admin", "reader")  # reader: data messages through a pulsar-client Reader (collectors/pulsar/reader.py)
# Pulsar cluster names are what brokers put in replicated_from and pulsar.repl.<name>: keep them plain.
PULSAR_CLUSTER_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,62}[A-Za-z0-9])?$")
NAMESPACE_RE = re.compile(r"^[A-Za-z0-9_.=-]+/[A-Za-z0-9_.=-]+$")
TOPIC_RE = re.compile(r"^persistent://[A-Za-z0-9_.=-]+/[A-Za-z0-9_.=-]+/[A-Za-z0-9_.=:%-]+$")
SERVICE_URL_RE = re.compile(r"^pulsar(\+ssl)?://[^/@\s]+(/.*)?$")
SERVICE_URL_TEXT = "a pulsar:// or pulsar+ssl:// broker URL"


def _service_url(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise rule_error(SERVICE_URL_TEXT, show(value))
    if "@" in value.split("//", 1)[-1].split("/", 1)[0]:  # user:password@ in the authority: never echoed
        raise rule_error(f"a URL without credentials in it ({SECRET_HINT})", "a URL with user:password@")
    if not SERVICE_URL_RE.match(value):
        raise rule_error(SERVICE_URL_TEXT, show(value))
    return value


ServiceUrl = Annotated[str, BeforeValidator(_service_url),
                       WithJsonSchema({"type": "string", "pattern": r"^pulsar(\+ssl)?://[^/@\s]+(/\S*)?$"})]
ClusterName = text(PULSAR_CLUSTER_RE, "the Pulsar cluster name (letters, digits, '-', '_', '.')")
Namespaces = listing(text(NAMESPACE_RE, "tenant/namespace"), "tenant/namespace", unique=True)
Topics = listing(text(TOPIC_RE, "persistent://tenant/namespace/topic"), "persistent://tenant/namespace/topic",
                 unique=True)
Source = choice(*SOURCES)
DumpMode = choice(*DUMP_MODES)
AtLeastOne = integer(1)
NonNegative = integer(0)
def _broker_version(value: Any) -> str:
    from audit.systems.pulsar.domain.snapshot_cache import broker_cache_model, parse_version

    if not isinstance(value, str) or parse_version(value) is None:
        raise rule_error("a broker release 'MAJOR.MINOR.PATCH' or 'MAJOR.MINOR.x' (e.g. 3.0.x)", show(value))
    if broker_cache_model(value) is None:
        raise rule_error("the patch release on the 4.0 and 4.1 lines (the snapshot cache changed at 4.0.9 and "
                         "4.1.3, apache/pulsar#25044)", show(value))
    return value


BrokerVersion = Annotated[str, BeforeValidator(_broker_version),
                          WithJsonSchema({"type": "string", "pattern": r"^\d+\.\d+\.(\d+|x)"})]
PulsarLab = lab_block(schema={"type": "object", "description": "the simulated geo-replicated world "
                                                               "(lab/pulsar/config.py, docs/pulsar/lab.md)"})


@record
class PulsarDump(Record):
    """How the per-entry topic dump runs: parallel admin requests, entries per raw chunk, a cap per topic
    (positions beyond the cap are reported as not covered, never silently dropped), and where data messages
    come from: `admin` (one admin GET per position) or `reader` (a pulsar-client Reader on `service_url`, the
    admin endpoint fetching only what a Reader never returns; docs/pulsar/collector.md)."""

    concurrency: AtLeastOne = 8
    chunk_entries: AtLeastOne = 1000
    max_entries_per_topic: AtLeastOne = 1_000_000
    mode: DumpMode = "admin"


@record
class PulsarCluster(Record):
    """One Pulsar cluster. `name` is the cluster name its brokers use (replicated_from, pulsar.repl.<name>).
    `token` resolves to the admin bearer token (also used by the Reader). `lab` is a plain dict for the simulator
    (source "lab")."""

    system: ClassVar[str] = "pulsar"

    name: ClusterName
    source: Source
    admin_url: HttpUrl | None = None
    service_url: ServiceUrl | None = None  # binary protocol, for dump.mode: reader
    token: Secret | None = None
    namespaces: Namespaces = ()  # "tenant/namespace"
    topics: Topics = ()  # "persistent://tenant/namespace/topic"
    dump: PulsarDump = Field(default_factory=PulsarDump)
    timeouts: Timeouts = Field(default_factory=Timeouts)
    tls_verify: Flag = True
    lab: PulsarLab | None = None
    # The brokers' release ("3.0.4", "3.0.x"): picks the replicated-subscription snapshot cache rule the audit
    # expects (docs/formats/pulsar.md §2.6); unset = what /admin/v2/brokers/version reports, else the current rule.
    broker_version: BrokerVersion | None = None

    @model_validator(mode="after")
    def _rules(self) -> "PulsarCluster":
        if self.source == "admin":
            if self.admin_url is None:
                raise rule_error("the admin REST URL (required for source: admin)", "nothing", at=("admin_url",))
            if not self.namespaces and not self.topics:
                raise rule_error("namespaces and/or topics to audit (required for source: admin)", "neither")
            if self.lab is not None:
                raise rule_error("a lab block only with source: lab", "source 'admin'", at=("lab",))
            if self.dump.mode == "reader" and self.service_url is None:
                raise rule_error(f"{SERVICE_URL_TEXT} (required for dump.mode: reader)", "nothing",
                                 at=("service_url",))
        else:
            if self.admin_url is not None:
                raise rule_error("no admin_url with source: lab", show(self.admin_url), at=("admin_url",))
            if self.service_url is not None:
                raise rule_error("no service_url with source: lab", show(self.service_url), at=("service_url",))
            if self.lab is None:
                set_field(self, "lab", {})
        return self

    @classmethod
    def check_section(cls, clusters: Sequence["PulsarCluster"]) -> None:
        """Rules over the whole `systems.pulsar` list (called by the estate loader)."""
        # Lab clusters with the same mapping are views of one simulated world. Several worlds may share an estate
        # (one per lab seed), as long as each names its clusters and no two worlds name the same one: a replicator
        # of one world must never point at a cluster of another.
        worlds: dict[str, dict] = {}
        for c in clusters:
            if c.source == "lab":
                worlds.setdefault(repr(sorted((c.lab or {}).items(), key=lambda kv: kv[0])), dict(c.lab or {}))
        if len(worlds) > 1:
            named: dict[str, int] = {}
            for i, lab in enumerate(worlds.values()):
                names = lab.get("clusters")
                if not isinstance(names, (list, tuple)) or not names:
                    raise rule_error("the same lab mapping on every lab cluster of a world, and lab.clusters in "
                                     "each mapping when the estate holds several worlds (different mappings)",
                                     f"{len(worlds)} different lab mappings, one without clusters: {show(lab)}")
                for name in names:
                    if named.setdefault(str(name), i) != i:
                        raise rule_error("lab worlds with distinct cluster names (lab.clusters)",
                                         f"{name!r} in two lab worlds")


@record
class RedeliveryTolerance(Record):
    """How far a target subscription may lag behind what replicated subscriptions would have brought it to before
    a failover redelivery becomes a finding: more than `messages` such messages, or the oldest older than `age`."""

    messages: NonNegative = 0
    age_s: Duration = Field(0, alias="age")


NamespaceKey = text(NAMESPACE_RE, "tenant/namespace keys")


@record
class RedeliveryTolerances(Record):
    """`default` for every namespace, `namespaces` {"tenant/ns": {messages, age}} for some."""

    default: RedeliveryTolerance = Field(default_factory=RedeliveryTolerance)
    namespaces: Annotated[dict[NamespaceKey, RedeliveryTolerance],
                          expect_mapping("a mapping of tenant/namespace to {messages, age}")] = Field(
        default_factory=dict)

    def of(self, namespace: str) -> RedeliveryTolerance:
        return self.namespaces.get(namespace, self.default)


@record
class MessageTtls(Record):
    """The namespaces' message TTL (messageTTLInSeconds; 0 = none, the broker's default): a replicator
    drops expired messages unsent, so they are never missing on the remote."""

    default: Duration = 0
    namespaces: Annotated[dict[NamespaceKey, Duration], expect_mapping("a mapping of tenant/namespace to a "
                                                                       "duration")] = Field(default_factory=dict)

    def of(self, namespace: str) -> int:
        return self.namespaces.get(namespace, self.default)


@record
class PulsarThresholds(Record):
    """Pulsar's keys of the estate's `thresholds:` block."""

    pulsar_replicator_backlog_max: NonNegative = 10_000  # entries waiting in a pulsar.repl.<remote> cursor
    pulsar_snapshot_max_age_s: Duration = Field(300, alias="pulsar_snapshot_max_age")  # newest complete snapshot
    pulsar_redelivery_tolerance: RedeliveryTolerances = Field(default_factory=RedeliveryTolerances)
    pulsar_message_ttl: MessageTtls = Field(default_factory=MessageTtls)


__all__ = ["PulsarCluster", "PulsarDump", "PulsarThresholds", "RedeliveryTolerance", "RedeliveryTolerances",
           "MessageTtls", "Timeouts", "SOURCES", "DUMP_MODES"]
