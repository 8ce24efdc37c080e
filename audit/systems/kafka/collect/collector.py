"""KafkaCollector: one cluster of the estate (audit/systems/kafka/config.py KafkaCluster) by its `source`
(docs/kafka/collector.md):

  admin     the admin collector over `bootstrap_servers` (admin.py), then every `log_dirs` entry mounted here
            (logdir.py, each broker's dirs in their listed order: dir0, dir1, ...), then every MirrorMaker 2 flow
            into this cluster (mm2.py; the source cluster's entry comes from `clusters`)
  log-dirs  nothing remote: the evidence comes from `replaudit import --kind log-dir` (imports.py). Dirs listed
            in `log_dirs` (a shared volume or mount) are scanned in place; with none listed the report says the
            cluster is import-only (count `import_only`), which is not a coverage gap
  lab       refused: the lab (lab/kafka/) simulates it

An incident check (`scope`: audit.contracts.Scope with subject patterns, docs/incident.md): the admin collector
asks DescribeLogDirs, ListOffsets and OffsetForLeaderEpoch about the wanted topic-partitions only (Metadata stays
whole), the scanner skips the partition dirs no pattern wants (count `partition_dirs_not_in_scope`, never a gap),
and MirrorMaker 2 flows are read whole (the audit judges only the wanted group-partitions).

Remote failures are coverage gaps and the collection goes on; only a broken configuration raises. Resuming: a key
an earlier attempt stored is not written again (evidence is never replaced; counted as `keys_resumed`). Every
gap's text passes the secret resolver's `redact`."""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Mapping

from kafka.admin import KafkaAdminClient

from audit.collectors.base import CollectionReport, CoverageGap, RawSink
from audit.systems.kafka.collect.admin import collect_admin
from audit.systems.kafka.collect.logdir import SCAN_FILE, BrokerIdMismatch, dir_key, scan_log_dir
from audit.systems.kafka.collect.mm2 import collect_mirror
from audit.config.secrets import SecretResolver

log = logging.getLogger(__name__)
SYSTEM = "kafka"


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class KafkaConfigError(ValueError):
    """The entry cannot be collected: `cluster`, `field` and what was `expected`."""

    def __init__(self, cluster: str, field: str, expected: str, got: Any = None):
        self.cluster, self.field, self.expected, self.got = cluster, field, expected, got
        super().__init__(f"kafka cluster {cluster!r}: field {field}: expected {expected}, got {got!r}")


class NewKeysSink:
    """Writes only keys not stored yet (by an earlier attempt of this run): evidence is never replaced."""

    def __init__(self, sink: RawSink, report: CollectionReport):
        self.sink, self.report = sink, report
        self._exists = getattr(sink, "exists", None)

    def exists(self, key: str) -> bool:
        return self._exists is not None and self._exists(key)

    def put(self, key: str, data: bytes) -> None:
        if self.exists(key):
            self.report.count("keys_resumed")
            return
        self.sink.put(key, data)


def dirs_of(cluster: Any) -> dict[int, list[str]]:
    """broker -> its log dirs in the order listed."""
    out: dict[int, list[str]] = {}
    for d in getattr(cluster, "log_dirs", ()) or ():
        out.setdefault(d.broker, []).append(d.path)
    return out


class KafkaCollector:
    system = SYSTEM

    def __init__(self, *, clusters: Mapping[str, Any] | Callable[[str], Any] | None = None,
                 now_ms: Callable[[], int] = wall_ms,
                 admin_client_factory: Callable[..., KafkaAdminClient] = KafkaAdminClient, scope: Any = None):
        """`clusters`: the estate's other systems.kafka entries by name (a mapping or a lookup), where mirror flows
        find their source cluster; `now_ms` the clock of every read instant; `admin_client_factory` builds the
        kafka-python client (tests wrap it); `scope`: an incident check's audit.contracts.Scope (None: all)."""
        self._scope = scope if scope is not None and scope.subjects else None
        self._clusters = clusters
        self._now_ms = now_ms
        self._admin_client_factory = admin_client_factory

    def source_of(self, mirror: Any) -> Any | None:
        if self._clusters is None:
            return None
        if callable(self._clusters) and not isinstance(self._clusters, Mapping):
            return self._clusters(mirror.source_cluster)
        return self._clusters.get(mirror.source_cluster)

    def collect(self, cluster: Any, sink: RawSink, secrets: SecretResolver) -> CollectionReport:
        if cluster.source not in ("admin", "log-dirs"):
            raise KafkaConfigError(cluster.name, "source", "'admin' or 'log-dirs' (lab clusters are simulated, "
                                   "not collected)", cluster.source)
        report = CollectionReport(self.system, cluster.name)
        out = NewKeysSink(sink, report)
        if cluster.source == "admin":
            if self._all_stored(out, ("metadata.json", "log-dirs.json", "list-offsets.json",
                                      "offsets-for-leader-epoch.json")):
                report.count("admin_resumed")
            else:
                collect_admin(cluster, out, report, secrets, now_ms=self._now_ms,
                              client_factory=self._admin_client_factory, scope=self._scope)
        self._scan_dirs(cluster, out, report)
        if cluster.source == "log-dirs" and not getattr(cluster, "log_dirs", ()):
            report.count("import_only")   # the evidence is what `replaudit import --kind log-dir` brought
        if cluster.source == "admin":
            for mirror in getattr(cluster, "mirrors", ()) or ():
                collect_mirror(cluster, mirror, self.source_of(mirror), out, report, secrets, now_ms=self._now_ms)
        report.gaps = [CoverageGap(secrets.redact(g.source), g.what, secrets.redact(g.error)) for g in report.gaps]
        for gap in report.gaps:
            log.warning("kafka %s: not covered: %s (%s): %s", cluster.name, gap.source, gap.what, gap.error)
        return report

    @staticmethod
    def _all_stored(out: NewKeysSink, names) -> bool:
        return all(out.exists("admin/" + n) for n in names)

    def _scan_dirs(self, cluster: Any, out: NewKeysSink, report: CollectionReport) -> None:
        for broker, paths in sorted(dirs_of(cluster).items()):
            for index, path in enumerate(paths):
                if out.exists(f"{dir_key(broker, index)}/{SCAN_FILE}"):
                    report.count("log_dirs_resumed")
                    continue
                try:
                    result = scan_log_dir(path, broker, out.put, dir_index=index,
                                          verify_crc=bool(getattr(cluster, "verify_crc", False)),
                                          now_ms=self._now_ms, scope=self._scope)
                except BrokerIdMismatch as exc:
                    report.gap(path, f"log dir of broker {broker} (not read)",
                               f"meta.properties {exc.key}={exc.found}: the estate lists it as broker {broker}")
                    continue
                for name, n in result.counts.items():
                    report.count(name, n)
                report.gaps.extend(result.gaps)
