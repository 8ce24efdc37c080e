"""The reread of `source: admin` clusters (the pipeline's reread stage, once every cluster of the estate is
collected; docs/pulsar/collector.md "Reread").

Clusters are collected one after another, minutes apart, while producers, replicators and consumers go on. To
compare cluster X's cursors with cluster Y's, the audit needs reads of X just before and just after a read of Y.
So every collected topic's internalStats is read again, topic by topic, in two passes over the clusters in
estate order (for topic T: c1, c2, c3, then c1, c2, c3): for any pair, some read of Y then lies between two
reads of X. Per cluster and pass, under the topic folder:

    rereads/<pass>/stats-internal.json    the body as received (an undecodable body is evidence too)
    rereads/<pass>/stats-internal.json.read.json    when it was read (audit/systems/pulsar/formats/read_instant.py)

The topics of a cluster are those its collection stored a stats-internal.json for. Remote failures are gaps of
that cluster's report and the reread goes on; a 401 stops that cluster. Keys already stored (by an earlier
attempt, in the run or in the sink) are never asked for again (`keys_resumed`).
"""
from __future__ import annotations

import logging
import time
from typing import Callable, Iterable

from audit.collectors.base import CollectionReport, CoverageGap, RawSink
from audit.systems.pulsar.collect.admin_client import AdminClient, RetryPolicy
from audit.systems.pulsar.collect.collector import check_cluster, store_read_instant
from audit.systems.pulsar.collect.discovery import TopicName
from audit.systems.pulsar.collect.dump import stored, wall_ms
from audit.config.secrets import SecretError
from audit.systems.pulsar.formats.read_instant import REREAD_BODY, REREADS

log = logging.getLogger(__name__)

PASSES = (1, 2)
WHAT = "reread of internal stats"
PRIMARY_KEY = "stats-internal.json"   # what the collection stored per topic (collector.py)


def collected_topics(keys: Iterable[str]) -> set[TopicName]:
    """The topics whose folder (topics/<tenant>/<namespace>/<topic>/) holds the collection's stats-internal.json."""
    topics = set()
    for key in keys:
        parts = key.split("/")
        if len(parts) == 5 and parts[0] == "topics" and parts[4] == PRIMARY_KEY and all(parts[1:4]):
            topics.add(TopicName(*parts[1:4]))
    return topics


def reread_key(topic: TopicName, n: int) -> str:
    return f"{topic.folder}/{REREADS}/{n}/{REREAD_BODY}"


class _Cluster:
    """One cluster's side of the reread: its client, sink, topics and report."""

    def __init__(self, cluster, sink: RawSink, collected: list[str], secrets, retry: RetryPolicy):
        check_cluster(cluster)
        self.name, self.admin_url, self.sink, self.redact = cluster.name, cluster.admin_url, sink, secrets.redact
        self.report = CollectionReport("pulsar", cluster.name)
        self.collected = set(collected)
        self.topics = collected_topics(collected)
        self.client: AdminClient | None = None
        try:
            token = secrets.resolve(cluster.token) if cluster.token is not None else None
        except SecretError as e:   # its collection failed the same way; the other clusters are still reread
            self.report.gap(cluster.admin_url, "admin API (reread not done)", str(e))
            return
        self.client = AdminClient(cluster.admin_url, token, connect_timeout_s=cluster.timeouts.connect_s,
                                  request_timeout_s=cluster.timeouts.request_s, verify=cluster.tls_verify,
                                  pool_size=1, retry=retry, redact=secrets.redact)

    def read(self, topic: TopicName, n: int, now_ms: Callable[[], int]) -> None:
        if self.client is None or self.client.unauthorized is not None or topic not in self.topics:
            return
        key = reread_key(topic, n)
        if key in self.collected or stored(self.sink, key) is not None:
            self.report.count("keys_resumed")
            return
        requested = now_ms()
        resp = self.client.get(topic.path("/internalStats"))
        answered = now_ms()
        if resp.error is not None:
            self.report.gap(resp.url, WHAT, resp.error)
            return
        self.sink.put(key, resp.body)
        store_read_instant(self.sink, key, self.redact(resp.url), requested, answered)
        self.report.count("rereads_stored")

    def finish(self) -> CollectionReport:
        report = self.report
        if self.client is not None:
            self.client.close()
            if self.client.unauthorized is not None:
                report.gap(self.admin_url, "admin API (reread stopped)", self.client.unauthorized.error or "HTTP 401")
            report.count("http_requests", self.client.requests_sent)
        report.gaps = [CoverageGap(self.redact(g.source), g.what, self.redact(g.error)) for g in report.gaps]
        for gap in report.gaps:
            log.warning("pulsar %s: reread: not covered: %s (%s): %s", self.name, gap.source, gap.what, gap.error)
        return report


def reread(req, *, now_ms: Callable[[], int] = wall_ms, sleep: Callable[[float], None] = time.sleep,
           retry_attempts: int = 5, retry_base_delay_s: float = 0.5) -> dict[str, CollectionReport]:
    """`req`: audit.contracts.RereadRequest whose clusters are `source: admin` PulsarClusters. The clock and the
    retry knobs are the collector's (PulsarCollector); tests pass a counter and a no-op sleep."""
    retry = RetryPolicy(attempts=retry_attempts, base_delay_s=retry_base_delay_s, sleep=sleep)
    sides: list[_Cluster] = []
    try:
        for cluster in req.clusters:
            sides.append(_Cluster(cluster, req.sink_for(cluster.name), req.collected(cluster.name), req.secrets,
                                  retry))
        for topic in sorted(set().union(*(side.topics for side in sides))):
            for n in PASSES:          # all of one topic's reads close together, the clusters in estate order
                for side in sides:
                    side.read(topic, n, now_ms)
    finally:
        reports = {side.name: side.finish() for side in sides}
    return reports
