"""PulsarCollector: a cluster's topics through the admin REST API, read-only (docs/pulsar/collector.md).

Per topic (a partition is a topic), under `topics/<tenant>/<namespace>/<topic>/`:
  stats-internal.json  GET .../internalStats
  stats.json           GET .../stats
  subscriptions/<percent-encoded sub>/replicated-status.json   GET .../subscription/{sub}/replicatedSubscriptionStatus
                       (replicated subscriptions only)
  message-ttl.json     GET .../messageTTL?applied=true: the TTL the broker applies to the topic, or, on a broker
  namespace-message-ttl.json   without that GET, GET /admin/v2/namespaces/{t}/{ns}/messageTTL (asked once per
                       namespace, stored beside each of its topics)
  dump/<L>/<first>-<last>.jsonl, dump.json   the per-entry dump of the window (dump.py)
Beside each of these bodies, `<key>.read.json` says when it was read (the URL, the instant the request
was sent and the instant the answer came, audit/systems/pulsar/formats/read_instant.py): clusters are collected minutes
apart, and the audit orders their reads by these instants. Per cluster `broker-version.txt`
(GET /admin/v2/brokers/version: the answering broker's version, bare text under a JSON Content-Type,
audit/systems/pulsar/formats/broker_version.py) and `collection.json` (the CollectionReport). Bodies are stored
byte for byte.

Remote failures become CoverageGaps and the collection goes on; only a broken configuration raises (a missing
token secret raises SecretError). Resuming: keys an earlier attempt stored are not asked for again; a stored
stats-internal.json is decoded again so the window, and with it every chunk key, is the same; its read instant
is the one stored with it (a body stored without one keeps none: an instant is never made up).
"""
from __future__ import annotations

import json
import logging
import re
import time
from typing import Any, Callable

from audit.collectors.base import CollectionReport, CoverageGap, RawSink
from audit.systems.pulsar.collect.admin_client import AdminClient, RetryPolicy, quote
from audit.systems.pulsar.collect.discovery import TopicName, discover_topics, subject_names
from audit.systems.pulsar.collect.dump import DUMP_KEY, DumpSettings, TopicDump, stored, wall_ms
from audit.systems.pulsar.collect.reader import PulsarClientReaderSource, ReaderSource
from audit.systems.pulsar.collect.dump_window import plan_window, replicated_subscriptions
from audit.systems.pulsar.config import PulsarCluster
from audit.config.secrets import SecretResolver
from audit.systems.pulsar.domain.snapshot_cache import version_tuple
from audit.errors import PayloadError
from audit.systems.pulsar.formats.broker_version import decode_broker_version
from audit.systems.pulsar.formats.message_ttl import MESSAGE_TTL_KEY, NAMESPACE_MESSAGE_TTL_KEY
from audit.systems.pulsar.formats.read_instant import READ_SUFFIX, encode_read_instant
from audit.systems.pulsar.formats.stats import TopicStats, decode_topic_stats
from audit.systems.pulsar.formats.stats_internal import StatsInternal, decode_stats_internal

log = logging.getLogger(__name__)

COLLECTION_KEY = "collection.json"
BROKER_VERSION_KEY, BROKER_VERSION_PATH = "broker-version.txt", "/admin/v2/brokers/version"
TOPIC_TTL = "/messageTTL?applied=true"
# `applied` since 2.8.0; a 2.7 broker ignores it and answers the topic's own TTL or 0 (docs/formats/pulsar.md §2.14)
APPLIED_TTL_SINCE = (2, 8, 0)


class PulsarConfigError(ValueError):
    """The cluster entry cannot be collected: `cluster` names it, `field` the key, `expected` what it should be."""

    def __init__(self, cluster: str, field: str, expected: str, got: Any = None):
        self.cluster, self.field, self.expected, self.got = cluster, field, expected, got
        super().__init__(f"pulsar cluster {cluster!r}: field {field}: expected {expected}, got {got!r}")


def _endpoint_missing(resp, own_reasons: str) -> bool:
    """405, or a 404 that is not the broker's own JSON `{"reason": ...}` about `own_reasons` (Jetty's page or no
    body when no resource has the path): the broker has no such endpoint."""
    if resp.status == 405:
        return True
    if resp.status != 404:
        return False
    try:
        reason = json.loads(resp.body).get("reason")
    except (ValueError, AttributeError):
        return True
    return not isinstance(reason, str) or not re.search(own_reasons, reason, re.IGNORECASE)


def status_endpoint_missing(resp) -> bool:
    """GET .../replicatedSubscriptionStatus exists from Pulsar 2.10; 2.7.3-2.9 brokers have only its POST and
    answer 405, older ones 404 from the servlet container (an HTML page or no body; docs/formats/pulsar.md §2.4).
    The broker's own 404s ("Subscription not found", "Topic not found") are JSON
    `{"reason": ...}` bodies: those stay gaps."""
    return _endpoint_missing(resp, r"subscription|topic")


def ttl_endpoint_missing(resp) -> bool:
    """GET .../{topic}/messageTTL exists from 2.7.0; with `topicLevelPoliciesEnabled=false` (the default before
    2.11) it answers 405 (AdminResource.checkTopicLevelPolicyEnable), older brokers Jetty's 404
    (docs/formats/pulsar.md §2.14). "Topic not found" / "Namespace does not exist" stay gaps."""
    return _endpoint_missing(resp, r"topic|namespace")


def dump_settings(cluster: PulsarCluster, progress_every: int = 10) -> DumpSettings:
    d = cluster.dump
    return DumpSettings(concurrency=d.concurrency, chunk_entries=d.chunk_entries,
                        max_entries_per_topic=d.max_entries_per_topic, progress_every=progress_every)


def check_cluster(cluster: PulsarCluster) -> None:
    """Only `source: admin` clusters are collected (the model guarantees their admin_url, and a service_url for
    `dump.mode: reader`); lab clusters are simulated."""
    if cluster.source != "admin":
        raise PulsarConfigError(cluster.name, "source", "'admin' (lab clusters are simulated, not collected)",
                                cluster.source)


class PulsarCollector:
    system = "pulsar"

    def __init__(self, *, sleep: Callable[[float], None] = time.sleep, retry_attempts: int = 5,
                 retry_base_delay_s: float = 0.5, reader: ReaderSource | None = None, progress_every: int = 10,
                 now_ms: Callable[[], int] = wall_ms, scope: Any = None):
        """`sleep` and the retry knobs shape the backoff for moving topics (tests pass a no-op sleep).
        `reader` replaces the admin endpoint for data messages (reader.py); without it, `dump.mode: reader`
        builds a pulsar-client Reader from the cluster's `service_url`. `now_ms` is the clock of the read instants
        (tests pass a counter). `cluster` is the estate's validated PulsarCluster: its values are not checked
        again here."""
        self._retry = RetryPolicy(attempts=retry_attempts, base_delay_s=retry_base_delay_s, sleep=sleep)
        self._scope = scope         # an incident check's audit.contracts.Scope: only the topics it wants
        self._reader = reader
        self._progress_every = progress_every
        self._now_ms = now_ms

    def collect(self, cluster: PulsarCluster, sink: RawSink, secrets: SecretResolver) -> CollectionReport:
        check_cluster(cluster)
        settings = dump_settings(cluster, self._progress_every)
        token = secrets.resolve(cluster.token) if cluster.token is not None else None
        reader = self._reader_for(cluster, token)
        report = CollectionReport(self.system, cluster.name)
        client = AdminClient(cluster.admin_url, token, connect_timeout_s=cluster.timeouts.connect_s,
                             request_timeout_s=cluster.timeouts.request_s, verify=cluster.tls_verify,
                             pool_size=settings.concurrency, retry=self._retry, redact=secrets.redact)
        try:
            version = _parsed_version(_broker_version(client, sink, report))
            ttls = MessageTtls(client, report, self._now_ms,
                               topic_level=version is None or version >= APPLIED_TTL_SINCE)
            topics = discover_topics(client, cluster.namespaces, cluster.topics, report)
            if self._scope is not None and self._scope.subjects:
                topics = [t for t in topics if self._scope.wants_any(*subject_names(t.full))]
                report.count("topics_in_scope", len(topics))
            for topic in topics:
                if client.unauthorized is not None:
                    break
                _TopicCollection(client, topic, sink, settings, reader, report, self._now_ms, ttls).run()
            if client.unauthorized is not None:
                # 401 = the token itself is refused: every further request would fail the same way.
                report.gap(cluster.admin_url, "admin API (collection stopped)", client.unauthorized.error or "HTTP 401")
        finally:
            client.close()
        report.count("http_requests", client.requests_sent)
        report.count("http_retries", client.retries)
        report.gaps = [CoverageGap(secrets.redact(g.source), g.what, secrets.redact(g.error)) for g in report.gaps]
        for gap in report.gaps:
            log.warning("pulsar %s: not covered: %s (%s): %s", cluster.name, gap.source, gap.what, gap.error)
        if stored(sink, COLLECTION_KEY) is None:
            sink.put(COLLECTION_KEY, report.to_json().encode())
        else:  # a resumed attempt over a finished one: evidence is never replaced
            log.warning("pulsar %s: %s already stored by an earlier attempt; kept", cluster.name, COLLECTION_KEY)
        return report

    def _reader_for(self, cluster: PulsarCluster, token: str | None) -> ReaderSource | None:
        if self._reader is not None or cluster.dump.mode != "reader":
            return self._reader
        return PulsarClientReaderSource(cluster.service_url, token,
                                        operation_timeout_s=int(cluster.timeouts.request_s),
                                        read_timeout_ms=int(cluster.timeouts.request_s * 1000))


def _broker_version(client: AdminClient, sink: RawSink, report: CollectionReport) -> bytes | None:
    """The version picks the audit's replicated-subscription snapshot cache rule (docs/pulsar/audit.md,
    docs/formats/pulsar.md §2.6); without it the audit assumes one and says so, so a failure is a gap, never fatal.
    Asked once per cluster: behind a load balancer another broker may answer, which is why an estate can declare the
    version instead. Returns the body."""
    body = stored(sink, BROKER_VERSION_KEY)
    if body is not None:
        report.count("keys_resumed")
        return body
    resp = client.get(BROKER_VERSION_PATH)
    if resp.error is not None:
        report.gap(resp.url, "broker version", resp.error)
        return None
    sink.put(BROKER_VERSION_KEY, resp.body)   # as received, even when it will not decode: it is the evidence
    report.count("keys_stored")
    return resp.body


def _parsed_version(body: bytes | None) -> tuple[int, int, int] | None:
    try:
        return version_tuple(decode_broker_version(body, BROKER_VERSION_KEY)) if body is not None else None
    except PayloadError:
        return None


def store_read_instant(sink: RawSink, key: str, url: str, requested_ms: int, answered_ms: int) -> None:
    """`<key>.read.json` beside a body just stored. Written after the body: an attempt killed in between leaves a
    body without an instant, and a resumed attempt does not make one up (the read happened earlier)."""
    sidecar = key + READ_SUFFIX
    if stored(sink, sidecar) is None:
        sink.put(sidecar, encode_read_instant(url, requested_ms, answered_ms))


class MessageTtls:
    """The message TTL each topic's replicator applies (docs/pulsar/collector.md "Message TTL"): GET
    .../messageTTL?applied=true (topic, else namespace, else the broker's ttlDurationDefaultInSeconds), or on a
    broker without it the namespace's own, asked once per namespace. A failure is a gap naming the URL: the audit
    then takes the estate's `pulsar_message_ttl`."""

    def __init__(self, client: AdminClient, report: CollectionReport, now_ms: Callable[[], int],
                 topic_level: bool = True):
        self.client, self.report, self.now_ms = client, report, now_ms
        self.topic_level = topic_level   # False: a broker before APPLIED_TTL_SINCE, whose answer is not the applied one
        self._namespaces: dict[tuple[str, str], tuple[bytes, str, int, int] | None] = {}

    def topic(self, topic: TopicName) -> tuple[str, bytes, str, int, int] | None:
        """(key, body, url, requested_ms, answered_ms) to store beside the topic, or None (a gap, or already noted)."""
        if self.topic_level:
            requested = self.now_ms()
            resp = self.client.get(topic.path(TOPIC_TTL))
            answered = self.now_ms()
            if resp.error is None or resp.status == 204:   # 204: null (not set), stored empty
                return MESSAGE_TTL_KEY, resp.body, resp.url, requested, answered
            if not ttl_endpoint_missing(resp):
                self.report.gap(resp.url, "message TTL", resp.error)
                return None
            log.info("%s: no topic-level message TTL on this broker (%s); asking the namespace", resp.url, resp.error)
        ns = self.namespace(topic.tenant, topic.namespace)
        return None if ns is None else (NAMESPACE_MESSAGE_TTL_KEY, *ns)

    def namespace(self, tenant: str, namespace: str) -> tuple[bytes, str, int, int] | None:
        key = (tenant, namespace)
        if key not in self._namespaces:
            requested = self.now_ms()
            resp = self.client.get(f"/admin/v2/namespaces/{quote(tenant)}/{quote(namespace)}/messageTTL")
            answered = self.now_ms()
            if resp.error is None or resp.status == 204:
                self._namespaces[key] = (resp.body, resp.url, requested, answered)
                self.report.count("namespace_message_ttls")
            else:   # one gap per namespace, not per topic
                self._namespaces[key] = None
                self.report.gap(resp.url, "namespace message TTL", resp.error)
        return self._namespaces[key]


class _TopicCollection:
    """stats-internal, stats, replicated-subscription status and the dump of one topic."""

    def __init__(self, client: AdminClient, topic: TopicName, sink: RawSink, settings: DumpSettings,
                 reader: ReaderSource | None, report: CollectionReport, now_ms: Callable[[], int] = wall_ms,
                 ttls: MessageTtls | None = None):
        self.client, self.topic, self.sink, self.settings = client, topic, sink, settings
        self.reader, self.report, self.now_ms = reader, report, now_ms
        self.ttls = ttls or MessageTtls(client, report, now_ms)
        self.prefix = topic.folder + "/"

    def _fetch(self, suffix: str, key: str, what: str, unavailable=None) -> tuple[bytes | None, str]:
        """The body stored under `key` (asked for only when no earlier attempt stored it), and its source.
        `unavailable(resp)`: the answer means this broker has no such endpoint, which is no gap (counted)."""
        url = self.client.url(self.topic.path(suffix))
        body = stored(self.sink, self.prefix + key)
        if body is not None:
            self.report.count("keys_resumed")
            return body, url
        requested = self.now_ms()
        resp = self.client.get(self.topic.path(suffix))
        answered = self.now_ms()
        if resp.error is not None and unavailable is not None and unavailable(resp):
            self.report.count("replicated_status_unavailable")
            log.info("%s: %s not available on this broker (%s)", resp.url, what, resp.error)
            return None, url
        if resp.error is not None:
            self.report.gap(resp.url, what, resp.error)
            return None, url
        self.sink.put(self.prefix + key, resp.body)  # stored even when it will not decode: it is the evidence
        self.report.count("keys_stored")
        store_read_instant(self.sink, self.prefix + key, self.client.redact(resp.url), requested, answered)
        return resp.body, url

    def _decode(self, body: bytes | None, source: str, what: str, decode):
        if body is None:
            return None
        try:
            return decode(body, source)
        except PayloadError as e:
            why = str(e).removeprefix(f"{e.source}: ")  # the gap's source already names the URL
            self.report.gap(source, what, f"stored as received, not decodable: {why}")
            return None

    def _message_ttl(self) -> None:
        if any(stored(self.sink, self.prefix + k) is not None for k in (MESSAGE_TTL_KEY, NAMESPACE_MESSAGE_TTL_KEY)):
            self.report.count("keys_resumed")
            return
        found = self.ttls.topic(self.topic)
        if found is None:
            return
        key, body, url, requested, answered = found
        self.sink.put(self.prefix + key, body)
        self.report.count("keys_stored")
        store_read_instant(self.sink, self.prefix + key, self.client.redact(url), requested, answered)

    def run(self) -> None:
        body, url = self._fetch("/internalStats", "stats-internal.json", "topic internal stats")
        si: StatsInternal | None = self._decode(body, url, "topic internal stats", decode_stats_internal)
        body, url = self._fetch("/stats", "stats.json", "topic stats")
        stats: TopicStats | None = self._decode(body, url, "topic stats", decode_topic_stats)
        subscriptions = replicated_subscriptions(si, stats)
        for sub in subscriptions:
            self._fetch(f"/subscription/{quote(sub)}/replicatedSubscriptionStatus",
                        f"subscriptions/{quote(sub)}/replicated-status.json", "replicated subscription status",
                        unavailable=status_endpoint_missing)
        if si is None:
            self.report.count("topics_without_dump")  # the gap above says why
            return
        self.report.count("topics_collected")
        self._message_ttl()
        if stored(self.sink, self.prefix + DUMP_KEY) is not None:
            self.report.count("dumps_resumed_complete")
            return
        window = plan_window(si, subscriptions)
        outcome = TopicDump(self.client, self.topic, self.sink, self.prefix, self.settings, self.reader,
                            self.now_ms).run(window, self.report)
        counts = {"entries_read": outcome.read, "entries_failed": outcome.failed,
                  "entries_not_fetched": outcome.not_fetched, "entries_from_reader": outcome.from_reader,
                  "chunks_written": outcome.chunks_written, "chunks_resumed": outcome.chunks_resumed,
                  "topics_dumped": 1}
        for name, n in counts.items():
            self.report.count(name, n)
