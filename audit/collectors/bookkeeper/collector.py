"""BookKeeperCollector: ledger metadata from ZooKeeper, then each ensemble bookie's entry list.

Takes a validated audit.config.bookkeeper.BookKeeperCluster with source "zookeeper" (the estate's
systems.bookkeeper[] entry, docs/estate.md: zookeeper.hosts / ledgers_root / digest_auth, bookie_addresses,
racks, timeouts, bookie_window). The configuration is validated once, by that model; a mapping of the same keys
(source may be left out) is read through the same model.
"""
from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from typing import Any, Mapping

from audit.collectors.base import CollectionReport, Collector, CoverageGap, RawSink
from audit.collectors.bookkeeper import zk_metadata
from audit.collectors.bookkeeper.bookie_client import BookieClientConfig, collect_entries_of_ledgers
from audit.config.bookkeeper import BookKeeperCluster
from audit.config.secrets import SecretResolver
from audit.formats.errors import PayloadError

COLLECTION_KEY = "collection.json"
RACKS_KEY = "bookies/racks.json"


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


def _validated(cfg: Any) -> BookKeeperCluster:
    """The cluster as the estate's model; a mapping goes through that model (the one set of rules)."""
    if not isinstance(cfg, Mapping):
        return cfg
    from pydantic import TypeAdapter, ValidationError

    from audit.config.errors import first_problem

    try:
        return TypeAdapter(BookKeeperCluster).validate_python({"source": "zookeeper", **cfg})
    except ValidationError as exc:
        problem = first_problem(exc)
        name = cfg.get("name") if isinstance(cfg.get("name"), str) else "?"
        raise ClusterConfigError(name, problem.field or "<cluster>", problem.expected, problem.got) from None


def parse_cluster(cfg: Any) -> BookKeeperClusterSettings:
    c = _validated(cfg)
    if c.source != "zookeeper":
        raise ClusterConfigError(c.name, "source", "'zookeeper' (lab clusters are simulated, not collected)",
                                 c.source)
    zk, t = c.zookeeper, c.timeouts
    return BookKeeperClusterSettings(
        name=c.name, zk_hosts=zk.hosts, ledgers_root=zk.ledgers_root, zk_digest_auth=zk.digest_auth,
        bookie_addresses=dict(c.bookie_addresses), racks=dict(c.racks), zk_timeout_s=float(t.request_s),
        bookie=BookieClientConfig(connect_timeout_s=float(t.connect_s), request_timeout_s=float(t.request_s),
                                  window=c.bookie_window))


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
