"""BookKeeperCollector: ledger metadata from ZooKeeper, then each ensemble bookie's entry list.

Takes an audit.config.model.BookKeeperCluster (source "zookeeper") or the same shape as a mapping:
    name: bk-a
    source: zookeeper                                            # optional in a mapping
    zookeeper: {hosts: "zk1:2181,zk2:2181[/chroot]", ledgers_root: /ledgers,
                digest_auth: {env: ZK_DIGEST}}                   # optional; resolves to "user:password"
    bookie_addresses: {"<bookie id>": "host:port"}               # optional
    racks: {"<bookie id>": /region/rack}                         # optional -> bookies/racks.json
    timeouts: {connect_s: 5, request_s: 30}                      # optional; ZooKeeper and bookies
    bookie_window: 100                                           # optional, requests in flight per bookie
"""
from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from typing import Any, Mapping

from audit.collectors.base import CollectionReport, Collector, CoverageGap, RawSink
from audit.collectors.bookkeeper import zk_metadata
from audit.collectors.bookkeeper.bookie_client import BookieClientConfig, collect_entries_of_ledgers
from audit.config.secrets import SecretResolver
from audit.formats.errors import PayloadError

COLLECTION_KEY = "collection.json"
RACKS_KEY = "bookies/racks.json"
_TIMEOUT_DEFAULTS = {"connect_s": 5.0, "request_s": 30.0}
_TOP_KEYS = {"name", "system", "source", "zookeeper", "bookie_addresses", "racks", "timeouts", "lab",
             "bookie_window"}
_ZK_KEYS = {"hosts", "ledgers_root", "digest_auth"}


class ClusterConfigError(ValueError):
    """The cluster config is unusable: `cluster` names it, `field` the key, `expected` what it should be."""

    def __init__(self, cluster: str, field: str, expected: str, got: Any = None):
        self.cluster, self.field, self.expected, self.got = cluster, field, expected, got
        super().__init__(f"cluster {cluster!r}: field {field}: expected {expected}, got {got!r}")


@dataclasses.dataclass(frozen=True)
class BookKeeperClusterSettings:
    name: str
    zk_hosts: str
    ledgers_root: str
    zk_digest_auth: Any  # a secret reference, resolved only when connecting
    bookie_addresses: Mapping[str, str]
    racks: Mapping[str, str]
    zk_timeout_s: float
    bookie: BookieClientConfig


def _as_mapping(cfg: Any) -> Mapping[str, Any]:
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        # Shallow on purpose: a nested SecretRef stays an object the resolver understands.
        return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
    if isinstance(cfg, Mapping):
        return cfg
    raise ClusterConfigError("?", "<cluster>", "a mapping or a BookKeeperCluster", type(cfg).__name__)


def _string_map(name: str, field: str, value: Any) -> dict[str, str]:
    value = value or {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                 for k, v in value.items()):
        raise ClusterConfigError(name, field, "a mapping of bookie id -> string", value)
    return dict(value)


def parse_cluster(cfg: Any) -> BookKeeperClusterSettings:
    cfg = _as_mapping(cfg)
    name = cfg.get("name")
    if not isinstance(name, str) or not name:
        raise ClusterConfigError("?", "name", "a non-empty string", name)
    unknown = set(cfg) - _TOP_KEYS
    if unknown:
        raise ClusterConfigError(name, sorted(unknown)[0], f"one of {sorted(_TOP_KEYS)}")
    if cfg.get("source", "zookeeper") != "zookeeper":
        raise ClusterConfigError(name, "source", "'zookeeper' (lab clusters are simulated, not collected)",
                                 cfg.get("source"))
    zk = _as_mapping(cfg["zookeeper"]) if cfg.get("zookeeper") is not None else None
    if zk is None or set(zk) - _ZK_KEYS or not isinstance(zk.get("hosts"), str) or not zk["hosts"]:
        raise ClusterConfigError(name, "zookeeper", f"a mapping with keys among {sorted(_ZK_KEYS)} and a "
                                 "'host:port[,host:port][/chroot]' hosts string", zk)
    root = zk.get("ledgers_root") or zk_metadata.DEFAULT_LEDGERS_ROOT
    if not isinstance(root, str) or not root.startswith("/"):
        raise ClusterConfigError(name, "zookeeper.ledgers_root", "an absolute znode path like /ledgers", root)
    timeouts = cfg.get("timeouts") or {}
    timeouts = _as_mapping(timeouts)
    if set(timeouts) - set(_TIMEOUT_DEFAULTS):
        raise ClusterConfigError(name, "timeouts", f"keys among {sorted(_TIMEOUT_DEFAULTS)}", timeouts)
    t = {k: timeouts.get(k, default) for k, default in _TIMEOUT_DEFAULTS.items()}
    for k, v in t.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            raise ClusterConfigError(name, f"timeouts.{k}", "a positive number of seconds", v)
    window = cfg.get("bookie_window", BookieClientConfig.window)
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ClusterConfigError(name, "bookie_window", "a positive integer", window)
    return BookKeeperClusterSettings(
        name=name, zk_hosts=zk["hosts"], ledgers_root=root, zk_digest_auth=zk.get("digest_auth"),
        bookie_addresses=_string_map(name, "bookie_addresses", cfg.get("bookie_addresses")),
        racks=_string_map(name, "racks", cfg.get("racks")),
        zk_timeout_s=float(t["request_s"]),
        bookie=BookieClientConfig(connect_timeout_s=float(t["connect_s"]), request_timeout_s=float(t["request_s"]),
                                  window=window))


class BookKeeperCollector(Collector):
    system = "bookkeeper"

    def collect(self, cluster_cfg: Any, sink: RawSink, secrets: SecretResolver) -> CollectionReport:
        s = parse_cluster(cluster_cfg)
        report = CollectionReport(self.system, s.name)
        ledgers_by_bookie: dict[str, set[int]] = defaultdict(set)

        def learn_ensembles(znode: zk_metadata.LedgerZnode, redacted: bytes) -> None:
            from audit.formats.bookkeeper.ledger_metadata import decode_znode

            source = f"zookeeper://{s.zk_hosts}{s.ledgers_root.rstrip('/')}/{znode.path}"
            try:
                md = decode_znode(redacted, source, znode.ledger_id)
            except (PayloadError, ValueError) as e:
                report.count("ledgers_without_ensembles")
                report.gap(source, "ledger ensembles (metadata stored, bookies not asked)", str(e))
                return
            report.count("ledgers_decoded")
            for seg in md.segments:
                for bookie in seg.ensemble:
                    ledgers_by_bookie[bookie].add(znode.ledger_id)

        auth_data = None
        if s.zk_digest_auth is not None:
            # A missing secret is a configuration error: raise (the SecretError names the reference).
            auth_data = [("digest", secrets.resolve(s.zk_digest_auth))]
        if s.racks:
            sink.put(RACKS_KEY, json.dumps(dict(s.racks), indent=2, sort_keys=True).encode())
        zk_report, _ = zk_metadata.collect_ledger_metadata(
            s.zk_hosts, s.ledgers_root, sink, s.zk_timeout_s, cluster=s.name, auth_data=auth_data,
            on_ledger=learn_ensembles)
        report.merge(zk_report)
        report.merge(collect_entries_of_ledgers(ledgers_by_bookie, sink, addresses=s.bookie_addresses,
                                                config=s.bookie, cluster=s.name))
        # Error texts come from remote systems and exceptions: scrub every resolved secret before storing.
        report.gaps = [CoverageGap(secrets.redact(g.source), g.what, secrets.redact(g.error)) for g in report.gaps]
        sink.put(COLLECTION_KEY, report.to_json().encode())
        return report
