"""Load and validate an estate YAML file (every key is documented in docs/estate.md)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from audit.config._fields import NAME_RE, Reader, join, show
from audit.config.errors import EstateError
from audit.config.home import project_home
from audit.config.model import (
    SEVERITIES,
    SOURCES_BOOKKEEPER,
    AlertRoute,
    Alerts,
    BookKeeperCluster,
    ClusterConfig,
    Estate,
    SecretRef,
    SparkConfig,
    StoreConfig,
    StoreCredentials,
    Thresholds,
    Timeouts,
    ZooKeeperConfig,
)

__all__ = [
    "EstateError", "load_estate", "parse_estate", "Estate", "StoreConfig", "StoreCredentials", "SecretRef",
    "SparkConfig", "Thresholds", "Alerts", "AlertRoute", "BookKeeperCluster", "ClusterConfig",
    "ZooKeeperConfig", "Timeouts",
]

TOP_KEYS = ("estate", "store", "spark", "thresholds", "alerts", "systems")
SYSTEMS = ("bookkeeper", "pulsar")
BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
HOST_PORT_RE = re.compile(r"^[A-Za-z0-9_.\-\[\]:]+:\d{1,5}$")
ZK_HOSTS_RE = re.compile(r"^[A-Za-z0-9_.\-]+:\d{1,5}(,[A-Za-z0-9_.\-]+:\d{1,5})*(/[^/\s]+)*$")
ZNODE_PATH_RE = re.compile(r"^(/[^/\s]+)+$")
RACK_RE = re.compile(r"^(/[^/\s]+)+$")
HEADER_RE = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
LAB_INT_KEYS = ("seed", "ledgers", "bookies", "entries_per_ledger")


def load_estate(path: str | Path, home: str | Path | None = None) -> Estate:
    """Read, validate and normalize an estate file. Relative `file://` store paths resolve against
    `home` (default: $REPLAUDIT_HOME, else the current directory). Raises EstateError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise EstateError(path, "", f"a readable estate file, got {exc.strerror or exc}") from exc
    return parse_estate(text, path, home)


def parse_estate(text: str, path: str | Path = "<estate>", home: str | Path | None = None) -> Estate:
    """Like load_estate for YAML text already in memory; `path` is only used to name the source."""
    path = Path(path)
    home = Path(home).resolve() if home is not None else project_home()
    r = Reader(str(path))
    try:
        doc = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        raise EstateError(path, "", f"valid YAML, got {_yaml_problem(exc)}") from exc
    r.mapping("", doc, TOP_KEYS, required=("estate", "systems"))
    name = r.string("estate", doc["estate"], NAME_RE, "a name of lowercase letters, digits and '-'")
    return Estate(
        name=name,
        path=path,
        home=home,
        store=_store(r, doc.get("store"), home),
        spark=_spark(r, doc.get("spark")),
        thresholds=_thresholds(r, doc.get("thresholds")),
        alerts=_alerts(r, doc.get("alerts")),
        **_systems(r, doc["systems"]),
    )


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys instead of silently keeping the last one."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}" if mark else problem


def _store(r: Reader, value: Any, home: Path) -> StoreConfig:
    if value is None:
        value = {"uri": "file://.work/store"}
    r.mapping("store", value, ("uri", "endpoint_url", "region", "credentials"), required=("uri",))
    uri = _store_uri(r, value["uri"], home)
    endpoint = value.get("endpoint_url")
    if endpoint is not None:
        r.http_url("store.endpoint_url", endpoint)
    region = value.get("region")
    if region is not None:
        r.string("store.region", region, re.compile(r"^[a-z0-9-]+$"), "an AWS region name like us-east-1")
    creds = _store_credentials(r, value.get("credentials"))
    if uri.startswith("file://") and (endpoint or region or creds):
        r.fail("store", "endpoint_url / region / credentials only with an s3:// uri", f"uri {value['uri']!r}")
    return StoreConfig(uri=uri, endpoint_url=endpoint, region=region, credentials=creds)


def _store_uri(r: Reader, value: Any, home: Path) -> str:
    expected = "file://<path> or s3://<bucket>[/<prefix>]"
    r.string("store.uri", value, what=expected)
    if value.startswith("file://"):
        raw = value[len("file://"):]
        if not raw or raw.startswith("//"):
            r.bad("store.uri", expected, value)
        local = Path(raw)
        return "file://" + str(local if local.is_absolute() else (home / local).resolve())
    if value.startswith("s3://"):
        bucket, _, prefix = value[len("s3://"):].partition("/")
        if not BUCKET_RE.match(bucket) or ".." in bucket:
            r.bad("store.uri", "an S3 bucket name (3-63 of a-z 0-9 . -) in s3://<bucket>[/<prefix>]", value)
        prefix = prefix.strip("/")
        if any(part in ("", ".", "..") for part in prefix.split("/")) and prefix:
            r.bad("store.uri", "a prefix without empty, '.' or '..' segments", value)
        return f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"
    r.bad("store.uri", expected, value)


def _store_credentials(r: Reader, value: Any) -> StoreCredentials | None:
    where = "store.credentials"
    if value is None:
        return None
    r.mapping(where, value, ("access_key", "secret_key", "session_token", "airflow_conn"))
    if "airflow_conn" in value:
        if len(value) > 1:
            r.fail(where, "either {airflow_conn: ID} alone or access_key + secret_key", f"keys {sorted(value)}")
        ref = r.secret_ref(where, {"airflow_conn": value["airflow_conn"]})
        return StoreCredentials(airflow_conn=ref.airflow_conn)
    r.mapping(where, value, ("access_key", "secret_key", "session_token"), required=("access_key", "secret_key"))
    token = value.get("session_token")
    return StoreCredentials(
        access_key=r.secret_ref(join(where, "access_key"), value["access_key"]),
        secret_key=r.secret_ref(join(where, "secret_key"), value["secret_key"]),
        session_token=r.secret_ref(join(where, "session_token"), token) if token is not None else None,
    )


def _spark(r: Reader, value: Any) -> SparkConfig:
    if value is None:
        return SparkConfig()
    r.mapping("spark", value, ("master", "conf"))
    master = r.string("spark.master", value.get("master", "local[*]"), what="a Spark master URL like local[*]")
    conf = {}
    raw_conf = value.get("conf") or {}
    if not isinstance(raw_conf, dict):
        r.bad("spark.conf", "a mapping of spark.* keys to values", raw_conf)
    for key, item in raw_conf.items():
        where = join("spark.conf", str(key))
        if not isinstance(key, str) or not key.startswith("spark."):
            r.bad(where, "a Spark property name starting with 'spark.'", key)
        if isinstance(item, bool):
            conf[key] = "true" if item else "false"
        elif isinstance(item, (str, int, float)):
            conf[key] = str(item)
        else:
            r.bad(where, "a string, number or boolean", item)
    return SparkConfig(master=master, conf=conf)


def _thresholds(r: Reader, value: Any) -> Thresholds:
    if value is None:
        return Thresholds()
    r.mapping("thresholds", value, ("open_ledger_max_age", "min_racks_per_write_quorum",
                                    "pulsar_replicator_backlog_max", "pulsar_snapshot_max_age"))
    default = Thresholds()
    age = value.get("open_ledger_max_age")
    racks = value.get("min_racks_per_write_quorum")
    backlog = value.get("pulsar_replicator_backlog_max")
    snap_age = value.get("pulsar_snapshot_max_age")
    return Thresholds(
        pulsar_replicator_backlog_max=r.integer("thresholds.pulsar_replicator_backlog_max", backlog, 0)
        if backlog is not None else default.pulsar_replicator_backlog_max,
        pulsar_snapshot_max_age_s=r.duration("thresholds.pulsar_snapshot_max_age", snap_age)
        if snap_age is not None else default.pulsar_snapshot_max_age_s,
        open_ledger_max_age_s=r.duration("thresholds.open_ledger_max_age", age)
        if age is not None else default.open_ledger_max_age_s,
        min_racks_per_write_quorum=r.integer("thresholds.min_racks_per_write_quorum", racks, 1)
        if racks is not None else default.min_racks_per_write_quorum,
    )


def _alerts(r: Reader, value: Any) -> Alerts:
    if value is None:
        return Alerts()
    r.mapping("alerts", value, ("routes",))
    routes_raw = value.get("routes") or []
    if not isinstance(routes_raw, list):
        r.bad("alerts.routes", "a list of routes", routes_raw)
    routes, names = [], set()
    for i, item in enumerate(routes_raw):
        where = join("alerts.routes", i)
        keys = ("name", "kind", "url", "headers_from", "min_severity", "timeout_s")
        r.mapping(where, item, keys, required=("name", "url"))
        name = r.string(join(where, "name"), item["name"], NAME_RE, "a name of lowercase letters, digits and '-'")
        if name in names:
            r.fail(join(where, "name"), "a route name unique within alerts.routes", f"duplicate {name!r}")
        names.add(name)
        headers = {}
        headers_raw = item.get("headers_from") or {}
        if not isinstance(headers_raw, dict):
            r.bad(join(where, "headers_from"), "a mapping of header name to secret reference", headers_raw)
        for header, ref in headers_raw.items():
            r.string(join(where, "headers_from"), header, HEADER_RE, "HTTP header names")
            headers[header] = r.secret_ref(join(join(where, "headers_from"), header), ref)
        timeout = item.get("timeout_s")
        routes.append(AlertRoute(
            name=name,
            kind=r.choice(join(where, "kind"), item.get("kind", "webhook"), ("webhook",)),
            url=r.http_url(join(where, "url"), item["url"]),
            headers_from=headers,
            min_severity=r.choice(join(where, "min_severity"), item.get("min_severity", "warning"), SEVERITIES),
            timeout_s=r.positive_number(join(where, "timeout_s"), timeout) if timeout is not None else 10.0,
        ))
    return Alerts(routes=tuple(routes))


def _systems(r: Reader, value: Any) -> dict[str, tuple]:
    from audit.config.pulsar import pulsar_clusters

    r.mapping("systems", value, SYSTEMS)
    systems = {"bookkeeper": _bookkeeper_clusters(r, value), "pulsar": pulsar_clusters(r, value.get("pulsar"), _timeouts)}
    # Cluster names key findings, lab ground truth (raw/_lab/<name>) and reports: unique across systems.
    owner: dict[str, str] = {}
    for system, clusters in systems.items():
        for i, c in enumerate(clusters):
            if c.name in owner:
                r.fail(join(join(f"systems.{system}", i), "name"),
                       f"a cluster name unique across systems (already used in systems.{owner[c.name]})",
                       f"duplicate {c.name!r}")
            owner[c.name] = system
    return systems


def _bookkeeper_clusters(r: Reader, value: Any) -> tuple[BookKeeperCluster, ...]:
    raw = value.get("bookkeeper") or []
    if not isinstance(raw, list):
        r.bad("systems.bookkeeper", "a list of clusters", raw)
    clusters, seen = [], {}
    for i, item in enumerate(raw):
        cluster = _bookkeeper_cluster(r, join("systems.bookkeeper", i), item)
        if cluster.name in seen:
            r.fail(join(join("systems.bookkeeper", i), "name"),
                   f"a cluster name unique within systems.bookkeeper (already used by systems.bookkeeper[{seen[cluster.name]}])",
                   f"duplicate {cluster.name!r}")
        seen[cluster.name] = i
        clusters.append(cluster)
    return tuple(clusters)


def _bookkeeper_cluster(r: Reader, where: str, item: Any) -> BookKeeperCluster:
    keys = ("name", "source", "zookeeper", "bookie_addresses", "racks", "timeouts", "lab")
    r.mapping(where, item, keys, required=("name", "source"))
    name = r.string(join(where, "name"), item["name"], NAME_RE, "a name of lowercase letters, digits and '-'")
    source = r.choice(join(where, "source"), item["source"], SOURCES_BOOKKEEPER)
    zk = item.get("zookeeper")
    lab = item.get("lab")
    if source == "zookeeper" and zk is None:
        r.fail(join(where, "zookeeper"), "a zookeeper block (required for source: zookeeper)", "nothing")
    if source == "lab" and zk is not None:
        r.fail(join(where, "zookeeper"), "no zookeeper block with source: lab", show(zk))
    if source != "lab" and lab is not None:
        r.fail(join(where, "lab"), "a lab block only with source: lab", f"source {source!r}")
    return BookKeeperCluster(
        name=name,
        source=source,
        zookeeper=_zookeeper(r, join(where, "zookeeper"), zk) if zk is not None else None,
        bookie_addresses=r.string_map(join(where, "bookie_addresses"), item.get("bookie_addresses"),
                                      HOST_PORT_RE, "an address host:port"),
        racks=r.string_map(join(where, "racks"), item.get("racks"), RACK_RE, "a rack path like /region/rack"),
        timeouts=_timeouts(r, join(where, "timeouts"), item.get("timeouts")),
        lab=_lab(r, join(where, "lab"), lab) if source == "lab" else None,
    )


def _zookeeper(r: Reader, where: str, value: Any) -> ZooKeeperConfig:
    r.mapping(where, value, ("hosts", "ledgers_root", "digest_auth"), required=("hosts",))
    hosts = r.string(join(where, "hosts"), value["hosts"], ZK_HOSTS_RE,
                     "a connect string host:port[,host:port...][/chroot]")
    for hp in hosts.split("/", 1)[0].split(","):
        if not 0 < int(hp.rsplit(":", 1)[1]) < 65536:
            r.bad(join(where, "hosts"), "ports between 1 and 65535", hosts)
    root = r.string(join(where, "ledgers_root"), value.get("ledgers_root", "/ledgers"), ZNODE_PATH_RE,
                    "an absolute znode path like /ledgers (no trailing '/')")
    auth = value.get("digest_auth")
    ref: SecretRef | None = r.secret_ref(join(where, "digest_auth"), auth) if auth is not None else None
    return ZooKeeperConfig(hosts=hosts, ledgers_root=root, digest_auth=ref)


def _timeouts(r: Reader, where: str, value: Any) -> Timeouts:
    if value is None:
        return Timeouts()
    r.mapping(where, value, ("connect_s", "request_s"))
    default = Timeouts()
    return Timeouts(
        connect_s=r.positive_number(join(where, "connect_s"), value["connect_s"])
        if value.get("connect_s") is not None else default.connect_s,
        request_s=r.positive_number(join(where, "request_s"), value["request_s"])
        if value.get("request_s") is not None else default.request_s,
    )


def _lab(r: Reader, where: str, value: Any) -> dict[str, Any]:
    """Validated just enough for safety; the simulator (audit.lab) owns the meaning of the rest."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        r.bad(where, "a mapping with string keys", value)
    for key in LAB_INT_KEYS:
        if value.get(key) is not None:
            r.integer(join(where, key), value[key], 0)
    faults = value.get("faults")
    if faults is not None:
        if not isinstance(faults, list):
            r.bad(join(where, "faults"), "a list of faults", faults)
        for i, fault in enumerate(faults):
            if not isinstance(fault, dict):
                r.bad(join(join(where, "faults"), i), "a mapping with a kind", fault)
            r.string(join(join(join(where, "faults"), i), "kind"), fault.get("kind"),
                     re.compile(r"^[a-z][a-z0-9_]*$"), "a fault kind like bookie_crash")
    return _plain_copy(value)


def _plain_copy(value: Any) -> Any:
    """Deep copy of YAML data so callers can never mutate the parsed document."""
    if isinstance(value, dict):
        return {k: _plain_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_copy(v) for v in value]
    return value
