"""BookKeeperCollector: ledger metadata from ZooKeeper (or, for source "admin_http", from a bookie's admin HTTP
API), then each ensemble bookie's entry list.

Takes a validated audit.systems.bookkeeper.config.BookKeeperCluster with source "zookeeper" or "admin_http" (the
estate's systems.bookkeeper[] entry, docs/estate.md: zookeeper.hosts / ledgers_root / digest_auth, admin_http.url,
bookie_addresses, racks, timeouts, bookie_window). The configuration is validated once, by that model; a mapping of the
same keys (source may be left out) is read through the same model.
"""
from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from typing import Any, Mapping

from audit.collectors.base import CollectionReport, CoverageGap, RawSink
from audit.systems.bookkeeper.collect import admin_http, zk_metadata
from audit.systems.bookkeeper.collect import read_probe
from audit.systems.bookkeeper.collect.bookie_client import BookieClientConfig, collect_entries_of_ledgers
from audit.systems.bookkeeper.collect.deleted import HoldsNothingWatch, mark_deleted
from audit.systems.bookkeeper.config import BookKeeperCluster
from audit.config.secrets import SecretResolver
from audit.errors import PayloadError

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
    source: str = "zookeeper"  # or "admin_http": where the ledger metadata comes from
    read_probe: read_probe.ReadProbeConfig = read_probe.ReadProbeConfig()  # bookies without the entry list
    location_index: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)  # bookie -> dirs
    admin_url: str | None = None  # admin_http.url


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
    if c.source not in ("zookeeper", "admin_http"):
        raise ClusterConfigError(c.name, "source",
                                 "'zookeeper' or 'admin_http' (lab clusters are simulated, not collected)", c.source)
    zk, t = c.zookeeper, c.timeouts
    if c.source == "admin_http":  # the metadata comes from the bookie's HTTP server; ZooKeeper is not read
        zk_hosts, ledgers_root, digest_auth = "", "", None
    else:
        zk_hosts, ledgers_root, digest_auth = zk.hosts, zk.ledgers_root, zk.digest_auth
    return BookKeeperClusterSettings(
        source=c.source, admin_url=c.admin_http.url if c.source == "admin_http" else None,
        name=c.name, zk_hosts=zk_hosts, ledgers_root=ledgers_root, zk_digest_auth=digest_auth,
        bookie_addresses=dict(c.bookie_addresses), racks=dict(c.racks), zk_timeout_s=float(t.request_s),
        bookie=BookieClientConfig(connect_timeout_s=float(t.connect_s), request_timeout_s=float(t.request_s),
                                  window=c.bookie_window, list_probe_timeout_s=float(c.list_probe_timeout_s)),
        read_probe=read_probe.ReadProbeConfig(connect_timeout_s=float(t.connect_s),
                                              request_timeout_s=float(t.request_s), window=c.read_probe_window,
                                              share_percent=c.read_probe_percent),
        location_index=dict(c.location_index))


def _keep_for_probes(md: Any, kept: dict[int, Any], names: dict[str, str]) -> None:
    """Keep what read probes need of a CLOSED ledger (segments, E, Qw, lastEntryId; the audit judges only CLOSED
    ledgers), without custom metadata and with each bookie id stored once."""
    if md.is_closed:
        segments = tuple(dataclasses.replace(seg, ensemble=tuple(names.setdefault(b, b) for b in seg.ensemble))
                         for seg in md.segments)
        kept[md.ledger_id] = dataclasses.replace(md, segments=segments, custom_metadata={})


class _LedgerEnsembles:
    """What the decoded ledger metadata tells the rest of the collection: which ledgers each ensemble bookie is
    asked about, the CLOSED ledgers read probes need, and each ledger's znode path (for the deleted recheck)."""

    def __init__(self, report: CollectionReport):
        self.report = report
        self.ledgers_by_bookie: dict[str, set[int]] = defaultdict(set)
        self.closed: dict[int, Any] = {}      # ledger id -> LedgerMetadata, for read probes
        self.bookie_names: dict[str, str] = {}
        self.paths: dict[int, str] = {}       # ledger id -> znode path below the ledgers root
        self.ledgers_read: set[int] = set()   # every ledger whose metadata was decoded

    def learn(self, md: Any, ledger_id: int, znode_path: str | None = None) -> None:
        """One decoded ledger: every bookie of every ensemble is asked about `ledger_id`."""
        self.report.count("ledgers_decoded")
        self.ledgers_read.add(md.ledger_id)
        _keep_for_probes(md, self.closed, self.bookie_names)
        if znode_path is not None:
            self.paths[ledger_id] = znode_path
        for seg in md.segments:
            for bookie in seg.ensemble:
                self.ledgers_by_bookie[bookie].add(ledger_id)

    def learn_znode(self, s: BookKeeperClusterSettings, znode: zk_metadata.LedgerZnode, redacted: bytes) -> None:
        from audit.systems.bookkeeper.formats.ledger_metadata import decode_znode

        source = f"zookeeper://{s.zk_hosts}{s.ledgers_root.rstrip('/')}/{znode.path}"
        try:
            md = decode_znode(redacted, source, znode.ledger_id)
        except (PayloadError, ValueError) as e:
            self.report.count("ledgers_without_ensembles")
            self.report.gap(source, "ledger ensembles (metadata stored, bookies not asked)", str(e))
            return
        self.learn(md, znode.ledger_id, znode.path)

    def learn_admin(self, md: Any) -> None:  # already decoded (and redacted) by admin_http
        self.learn(md, md.ledger_id)


def _zk_auth(s: BookKeeperClusterSettings, secrets: SecretResolver) -> list[tuple[str, Any]] | None:
    if s.zk_digest_auth is None:
        return None
    # A missing secret is a configuration error: raise (the SecretError names the reference).
    return [("digest", secrets.resolve(s.zk_digest_auth))]


class BookKeeperCollector:
    system = "bookkeeper"

    def __init__(self, scope: Any = None):
        # an incident check's scope: only the ledgers it asks for are read and asked about (docs/incident.md)
        self.wants = (lambda ledger_id: scope.wants(str(ledger_id))) if scope is not None and scope.subjects \
            else None

    def collect(self, cluster_cfg: Any, sink: RawSink, secrets: SecretResolver) -> CollectionReport:
        s = parse_cluster(cluster_cfg)
        report = CollectionReport(self.system, s.name)
        known = _LedgerEnsembles(report)
        auth_data = _zk_auth(s, secrets)
        if s.racks:
            sink.put(RACKS_KEY, json.dumps(dict(s.racks), indent=2, sort_keys=True).encode())
        self._read_ledger_metadata(s, sink, auth_data, known, report)
        watch = HoldsNothingWatch(sink)   # which ledgers some bookie holds nothing of (deleted.py)
        index_members = self._read_location_indexes(s, watch, known, report)
        _ask_ensemble_bookies(s, watch, known, report)
        if s.source == "zookeeper":
            _recheck_deleted(s, auth_data, known.paths, watch.candidates(index_members), sink, report)
        # Error texts come from remote systems and exceptions: scrub every resolved secret before storing.
        report.gaps = [CoverageGap(secrets.redact(g.source), g.what, secrets.redact(g.error)) for g in report.gaps]
        sink.put(COLLECTION_KEY, report.to_json().encode())
        return report

    def _read_ledger_metadata(self, s: BookKeeperClusterSettings, sink: RawSink, auth_data,
                              known: _LedgerEnsembles, report: CollectionReport) -> None:
        if s.source == "admin_http":
            report.merge(admin_http.collect_ledger_metadata_http(
                s.admin_url, sink, connect_timeout_s=s.bookie.connect_timeout_s,
                request_timeout_s=s.bookie.request_timeout_s, cluster=s.name, on_ledger=known.learn_admin,
                wants=self.wants))
        else:
            zk_report, _ = zk_metadata.collect_ledger_metadata(
                s.zk_hosts, s.ledgers_root, sink, s.zk_timeout_s, cluster=s.name, auth_data=auth_data,
                on_ledger=lambda znode, redacted: known.learn_znode(s, znode, redacted), wants=self.wants)
            report.merge(zk_report)

    def _read_location_indexes(self, s: BookKeeperClusterSettings, watch: HoldsNothingWatch,
                               known: _LedgerEnsembles, report: CollectionReport) -> dict[str, set[int]]:
        """bookie -> the ledgers metadata places on it, for each bookie whose index is read instead of asked."""
        index_members: dict[str, set[int]] = {}
        # Bookies whose locations index is read on this host are not asked (location_index.py).
        for bookie, ledger_dirs in sorted(s.location_index.items()):
            index_members[bookie] = known.ledgers_by_bookie.pop(bookie, set())
            # scoped: the ledgers asked for only (those whose metadata was read), not the whole inventory
            asked = sorted(known.ledgers_read) if self.wants is not None else None
            report.merge(_read_location_index(bookie, ledger_dirs, watch, s.name, asked))
        return index_members


def _ask_ensemble_bookies(s: BookKeeperClusterSettings, watch: HoldsNothingWatch, known: _LedgerEnsembles,
                          report: CollectionReport) -> None:
    """Each remaining ensemble bookie's entry list, with read probes where it cannot give one."""
    async def probe_unsupported(bookie: str, ledger_ids: list[int], reason: str) -> CollectionReport:
        return await read_probe.probe_bookie_async(bookie, ledger_ids, known.closed, watch, config=s.read_probe,
                                                   addresses=s.bookie_addresses, cluster=s.name, reason=reason)

    report.merge(collect_entries_of_ledgers(known.ledgers_by_bookie, watch, addresses=s.bookie_addresses,
                                            config=s.bookie, cluster=s.name, probe_unsupported=probe_unsupported))


def _recheck_deleted(s: BookKeeperClusterSettings, auth_data, paths: dict[int, str], candidates: set[int],
                     sink: RawSink, report: CollectionReport) -> None:
    if not candidates:
        return
    try:
        client = zk_metadata.connect(s.zk_hosts, s.zk_timeout_s, auth_data)
    except Exception as e:  # kazoo's timeout type or socket errors: the ledgers are judged as read
        report.gap(f"zookeeper://{s.zk_hosts}", "whether ledgers still exist", f"cannot connect: {type(e).__name__}")
        return
    try:
        mark_deleted(client, s.ledgers_root, paths, candidates, sink, report, s.zk_timeout_s)
    finally:
        client.stop()
        client.close()


def _read_location_index(bookie: str, ledger_dirs, sink: RawSink, cluster: str,
                         ledger_ids: list[int] | None = None) -> CollectionReport:
    # The whole index (ledger_ids=None): a complete inventory, which also shows ledgers held outside ensembles.
    # Imported here: it needs RocksDB bindings, which clusters without location_index never load.
    from audit.systems.bookkeeper.collect.location_index import read_location_index

    return read_location_index(bookie, list(ledger_dirs), sink, ledger_ids=ledger_ids, cluster=cluster)
