"""The estate's shared models: store, Spark, alerts, secret references, timeouts and the validated `Estate`.

Every model is a frozen pydantic dataclass refusing unknown keys (audit/config/values.py). A system contributes
its own models in audit/config/<system>.py (its `cluster_model` and `thresholds_model`, see audit.contracts.System);
audit.config.estate composes them with these into the estate file's model. `load_estate` builds the `Estate`.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Mapping, Protocol

from annotated_types import Gt
from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, Strict, StringConstraints, ValidationInfo, \
    WithJsonSchema, model_validator
from pydantic.dataclasses import dataclass

from audit.config.values import (SECRET_HINT, Duration, HttpUrl, Name, PositiveSeconds, Record, check_keys, choice,
                                 expect, expect_mapping, file_context, listing, record, rule_error, set_field, show,
                                 text, unique_names)
from audit.contracts import SEVERITIES

CONNECTION_FIELDS = ("password", "login", "host", "schema")  # parts of an Airflow connection a SecretRef may pick
EXTRA_PREFIX = "extra."
DEFAULT_STORE_URI = "file://.work/store"

ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CONN_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
REGION_RE = re.compile(r"^[a-z0-9-]+$")
HEADER_RE = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")


def is_connection_field(part: object) -> bool:
    """True for a part a SecretRef may pick: one of CONNECTION_FIELDS or `extra.<key>`."""
    return part in CONNECTION_FIELDS or (isinstance(part, str) and part.startswith(EXTRA_PREFIX)
                                         and len(part) > len(EXTRA_PREFIX))


# -- secret references ----------------------------------------------------------------------------------------
@record
class SecretRef:
    """Where a secret lives -- never the secret itself. Exactly one of `env` / `airflow_conn` is set (the
    estate's `Secret` fields check that; a SecretRef built in code is taken as it is, the resolver refuses a
    malformed one).

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


SECRET_EXPECTED = f"a reference {{env: NAME}} or {{airflow_conn: ID}} ({SECRET_HINT})"
FIELD_TEXT = "one of " + " | ".join(CONNECTION_FIELDS) + " | extra.<key>"


def _secret_ref(value: Any) -> SecretRef:
    """{env: NAME} or {airflow_conn: ID[, field: password|login|host|schema|extra.KEY]}. A literal is refused
    and never repeated in the error: it may be the secret itself."""
    if isinstance(value, SecretRef):
        return value
    if not isinstance(value, dict):
        raise rule_error(SECRET_EXPECTED, "a literal value (not shown)" if value is not None else "nothing")
    check_keys(value, ["env", "airflow_conn", "field"])
    if ("env" in value) == ("airflow_conn" in value):
        raise rule_error("exactly one of env / airflow_conn", f"keys {sorted(value)}")
    if "env" in value:
        if "field" in value:
            raise rule_error("field only with airflow_conn", "field with env", at=("field",))
        name = value["env"]
        if not isinstance(name, str) or not ENV_RE.match(name):
            raise rule_error("an environment variable name", show(name), at=("env",))
        return SecretRef(env=name)
    conn = value["airflow_conn"]
    if not isinstance(conn, str) or not CONN_RE.match(conn):
        raise rule_error("an Airflow connection id", show(conn), at=("airflow_conn",))
    part = value.get("field", "password")
    if not is_connection_field(part):
        raise rule_error(FIELD_TEXT, show(part), at=("field",))
    return SecretRef(airflow_conn=conn, field=part)


SECRET_SCHEMA = {
    "description": "a secret reference, never the secret: {env: NAME} or {airflow_conn: ID[, field: F]}",
    "oneOf": [
        {"type": "object", "additionalProperties": False, "required": ["env"],
         "properties": {"env": {"type": "string", "pattern": ENV_RE.pattern}}},
        {"type": "object", "additionalProperties": False, "required": ["airflow_conn"],
         "properties": {"airflow_conn": {"type": "string", "pattern": CONN_RE.pattern},
                        "field": {"type": "string", "pattern": r"^(password|login|host|schema|extra\..+)$"}}},
    ],
}
Secret = Annotated[SecretRef, BeforeValidator(_secret_ref), WithJsonSchema(SECRET_SCHEMA)]
"""A field holding a secret reference (estate files can only say where a secret is)."""

ConnectionId = text(CONN_RE, "an Airflow connection id")


# -- store ----------------------------------------------------------------------------------------------------
@record
class StoreCredentials(Record):
    """Either explicit key references or one Airflow AWS connection (login/password/extra)."""

    access_key: Secret | None = None
    secret_key: Secret | None = None
    session_token: Secret | None = None
    airflow_conn: ConnectionId | None = None

    @classmethod
    def _shape(cls, data: dict, info: ValidationInfo) -> dict:
        if "airflow_conn" in data:
            if len(data) > 1:
                raise rule_error("either {airflow_conn: ID} alone or access_key + secret_key", f"keys {sorted(data)}")
            return data
        for key in ("access_key", "secret_key"):
            if key not in data:
                raise rule_error("a value (required)", "nothing", at=(key,))
        return data


STORE_URI_TEXT = "file://<path> or s3://<bucket>[/<prefix>]"
StoreUri = Annotated[str, StringConstraints(strict=True, pattern=r"^(file|s3)://"), expect(STORE_URI_TEXT)]
Region = text(REGION_RE, "an AWS region name like us-east-1")


def normalize_store_uri(value: str, home: Path) -> str:
    """`file:///absolute/path` (a relative path resolved against `home`) or `s3://bucket[/prefix]`."""
    if value.startswith("file://"):
        raw = value[len("file://"):]
        if not raw or raw.startswith("//"):
            raise rule_error(STORE_URI_TEXT, show(value), at=("uri",))
        local = Path(raw)
        return "file://" + str(local if local.is_absolute() else (home / local).resolve())
    bucket, _, prefix = value[len("s3://"):].partition("/")
    if not BUCKET_RE.match(bucket) or ".." in bucket:
        raise rule_error("an S3 bucket name (3-63 of a-z 0-9 . -) in s3://<bucket>[/<prefix>]", show(value),
                         at=("uri",))
    prefix = prefix.strip("/")
    if prefix and any(part in ("", ".", "..") for part in prefix.split("/")):
        raise rule_error("a prefix without empty, '.' or '..' segments", show(value), at=("uri",))
    return f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"


@record
class StoreConfig(Record):
    """`uri` is normalized when read from an estate file: `file:///absolute/path` or `s3://bucket[/prefix]`
    (no trailing slash)."""

    uri: StoreUri
    endpoint_url: HttpUrl | None = None
    region: Region | None = None
    credentials: StoreCredentials | None = None

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> "StoreConfig":
        given = self.uri
        ctx = file_context(info)
        if ctx is not None:
            set_field(self, "uri", normalize_store_uri(given, ctx["home"]))
        if self.uri.startswith("file://") and (self.endpoint_url or self.region or self.credentials):
            raise rule_error("endpoint_url / region / credentials only with an s3:// uri", f"uri {given!r}")
        return self

    @property
    def scheme(self) -> str:
        return self.uri.split("://", 1)[0]


# -- spark ----------------------------------------------------------------------------------------------------
def _spark_conf(value: Any) -> dict[str, str]:
    """Spark properties; numbers and booleans become the strings Spark wants."""
    if not isinstance(value, dict):
        raise rule_error("a mapping of spark.* keys to values", show(value))
    conf = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key.startswith("spark."):
            raise rule_error("a Spark property name starting with 'spark.'", show(key), at=(str(key),))
        if isinstance(item, bool):
            conf[key] = "true" if item else "false"
        elif isinstance(item, (str, int, float)):
            conf[key] = str(item)
        else:
            raise rule_error("a string, number or boolean", show(item), at=(key,))
    return conf


SparkConf = Annotated[dict[str, str], BeforeValidator(_spark_conf), WithJsonSchema({
    "type": "object", "propertyNames": {"pattern": r"^spark\."},
    "additionalProperties": {"type": ["string", "number", "boolean"]}})]


SparkMaster = text(r"^\s*\S", "a Spark master URL like local[*]")


@record
class SparkConfig(Record):
    master: SparkMaster = "local[*]"
    conf: SparkConf = Field(default_factory=dict)  # values already strings, as Spark wants


# -- alerts ---------------------------------------------------------------------------------------------------
HeaderName = text(HEADER_RE, "HTTP header names")
HeadersFrom = Annotated[dict[HeaderName, Secret], expect_mapping("a mapping of header name to secret reference")]
ROUTE_KINDS = ("webhook", "alertmanager", "slack", "email", "pushgateway")     # audit/alerts/<kind>.py each
EmailAddress = text(r"^[^@\s,;<>]+@[^@\s,;<>]+$", "an e-mail address")
Recipients = Annotated[tuple[EmailAddress, ...], expect("a list of e-mail addresses")]
ConnId = text(r"^[A-Za-z0-9_.-]+$", "an Airflow connection id")
RouteKind = choice(*ROUTE_KINDS)
Severity = choice(*SEVERITIES)


@record
class AlertRoute(Record):
    name: Name
    url: HttpUrl | None = None       # or url_from: a Slack webhook URL is itself a secret
    url_from: Secret | None = None
    kind: RouteKind = "webhook"
    headers_from: HeadersFrom = Field(default_factory=dict)  # HTTP header -> secret reference
    min_severity: Severity = "warning"
    timeout_s: PositiveSeconds = 10.0
    # alertmanager: how long a firing alert stays active without the next run's resend (its endsAt)
    alert_ttl: Duration = 2 * 24 * 3600
    # email: through Airflow's SMTP notifier and the Airflow connection smtp_conn_id (host, port, login, password)
    to: Recipients = ()
    from_email: EmailAddress | None = None     # default: the connection's from_email
    smtp_conn_id: ConnId = "smtp_default"

    @model_validator(mode="after")
    def _where_to(self) -> "AlertRoute":
        if self.kind == "email":
            if not self.to or self.url is not None or self.url_from is not None:
                raise rule_error("an email route: `to` (one or more addresses) and no url / url_from",
                                 f"to {list(self.to)!r}, url {'set' if self.url or self.url_from else 'unset'}")
        elif (self.url is None) == (self.url_from is None):
            raise rule_error("exactly one of url or url_from (a secret reference)",
                             "both" if self.url else "neither")
        return self

    def accepts(self, severity: str) -> bool:
        """True if a finding of `severity` is at least as severe as this route's minimum."""
        return SEVERITIES.index(severity) <= SEVERITIES.index(self.min_severity)


def _unique_routes(routes: tuple) -> tuple:
    unique_names(routes, "alerts.routes", "a route name")
    return routes


Routes = Annotated[listing(AlertRoute, "routes"), AfterValidator(_unique_routes)]


MetricName = text(r"^replaudit_[a-z0-9_]+$", "a metric name replaudit_* (docs/alerts.md)")
LabelFilter = Annotated[dict[str, str], expect_mapping("a mapping of label name to value")]


@record
class DriftRule(Record):
    """Tonight against the metrics history (audit/history/drift.py; Deequ's strategies)."""

    metric: MetricName
    strategy: choice("absolute", "relative", "threshold")
    max_increase: float | None = None     # absolute: tonight - before; relative: tonight / before (1.5 = +50 %)
    max_decrease: float | None = None     # absolute: before - tonight; relative: the lowest tonight / before
    lower: float | None = None            # threshold
    upper: float | None = None
    compare_with: choice("previous", "week") = "previous"
    labels: LabelFilter = Field(default_factory=dict)
    severity: Severity = "warning"

    @model_validator(mode="after")
    def _bounds(self) -> "DriftRule":
        if self.strategy == "threshold" and self.lower is None and self.upper is None:
            raise rule_error("a threshold rule: lower and/or upper", f"metric {self.metric}")
        if self.strategy != "threshold" and self.max_increase is None and self.max_decrease is None:
            raise rule_error(f"a {self.strategy} rule: max_increase and/or max_decrease", f"metric {self.metric}")
        return self


WorseFactor = Annotated[float, Strict(), Gt(1), expect("a number > 1 (how many times its last notified count a "
                                                       "finding must grow to alert again)")]


@record
class Alerts(Record):
    routes: Routes = ()
    # the alert lifecycle (audit/alerts/lifecycle.py): a finding that persists is reminded after repeat_interval;
    # one whose count grows past worse_factor times the count last notified alerts again as "worse"
    repeat_interval: Duration = 7 * 24 * 3600
    worse_factor: WorseFactor = 2.0
    drift: listing(DriftRule, "drift rules") = ()     # each run against the metrics history (docs/alerts.md)


@record
class Repairs(Record):
    # an approved repair acts on what the audit saw: a plan older than this is refused (docs/repair.md), since its
    # preconditions describe a cluster that has kept moving
    max_plan_age: Duration = 24 * 3600


# -- shared by the systems' cluster models ----------------------------------------------------------------------
@record
class Timeouts(Record):
    connect_s: PositiveSeconds = 5.0
    request_s: PositiveSeconds = 30.0


class ClusterConfig(Protocol):
    """What every system's cluster model has (audit.contracts.System.cluster_model)."""

    name: str
    source: str


# -- the estate -----------------------------------------------------------------------------------------------
@dataclass(frozen=True, config=ConfigDict(arbitrary_types_allowed=True))
class Estate:
    """A validated estate file. `systems` holds every registered system's clusters (an empty tuple for a
    system the file does not list), in registry order. Built by audit.config.estate.load_estate."""

    name: str
    path: Path  # the estate file, as given to load_estate
    home: Path  # what relative paths resolved against (see audit.config.home)
    store: StoreConfig
    spark: SparkConfig = Field(default_factory=SparkConfig)
    thresholds: Any = None  # every registered system's thresholds, as attributes (audit.config.estate)
    alerts: Alerts = Field(default_factory=Alerts)
    repairs: Repairs = Field(default_factory=Repairs)
    systems: Mapping[str, tuple[Any, ...]] = Field(default_factory=dict)

    def clusters(self, system: str) -> tuple[Any, ...]:
        if system in self.systems:
            return self.systems[system]
        from audit import systems as registry

        known = registry.names()
        if system in known:
            return ()
        raise KeyError(f"estate {self.name!r} has no system {system!r} (known: {', '.join(known)})")

    def cluster(self, system: str, name: str) -> Any:
        for cluster in self.clusters(system):
            if cluster.name == name:
                return cluster
        known = ", ".join(c.name for c in self.clusters(system)) or "none"
        raise KeyError(f"estate {self.name!r} has no {system} cluster {name!r} (known: {known})")
