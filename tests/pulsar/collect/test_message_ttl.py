"""The message TTL each topic's broker applies, read by the collector (docs/pulsar/collector.md "Message TTL"):
against the lab served over loopback, with brokers that have the topic-level GET, brokers that answer 405 or
Jetty's 404 for it (the namespace's own, asked once per namespace), and failures that are gaps, never fatal."""
from __future__ import annotations

import pytest

from audit.collectors.base import DirSink
from audit.systems.pulsar.collect.admin_client import AdminResponse
from audit.systems.pulsar.collect.collector import PulsarCollector, ttl_endpoint_missing
from audit.config.model import SecretRef
from audit.systems.pulsar.config import PulsarCluster, PulsarDump
from audit.config.secrets import SecretResolver
from audit.systems.pulsar.formats.read_instant import READ_SUFFIX, decode_read_instant
from lab.pulsar.admin_server import Answer, reason, serve_pulsar_admin
from lab.pulsar.emit import emit_cluster
from lab.pulsar.runner import lab_world
from tests.pulsar.collect.test_collector import ORDERS, files, run  # noqa: F401
from tests.pulsar.collect.test_collector import fake  # noqa: F401  (the fixture)

AS_OF_MS = 1_795_440_000_000
TOKEN = "lab-ttl-token"
# the TTL scenario's namespace runs 20 s; the healthy one's none
LAB = {"seed": 7, "traffic": "quiet", "scenarios": ["healthy", "message-ttl"], "message_ttl_s": {"lab/geo-ttl": 20}}
GEO, GEO_TTL = "topics/lab/geo/orders-healthy", "topics/lab/geo-ttl/orders-expiring"


def _collect(tmp_path, versions=None):
    world, _ = lab_world({**LAB, "broker_versions": versions or {}}, AS_OF_MS)
    emit_cluster(world, "east", DirSink(tmp_path / "direct"))
    with serve_pulsar_admin(world, "east", token=TOKEN) as url:
        spec = PulsarCluster(name="east", source="admin", admin_url=url, token=SecretRef(env="T"),
                             namespaces=("lab/geo", "lab/geo-ttl"), dump=PulsarDump(max_entries_per_topic=2))
        report = PulsarCollector().collect(spec, DirSink(tmp_path / "http"), SecretResolver(environ={"T": TOKEN}))
    assert all(g.what == "topic entries" for g in report.gaps), report.gaps   # only the dump cap
    return url, report, files(tmp_path / "http"), files(tmp_path / "direct")


def _ttl_files(got: dict) -> dict:
    return {k: v for k, v in got.items() if "message-ttl.json" in k}


def test_the_applied_ttl_is_stored_beside_each_topic_with_its_read_instant(tmp_path):
    url, report, got, direct = _collect(tmp_path)
    assert {k: got[k] for k in _ttl_files(got) if not k.endswith(READ_SUFFIX)} == {
        f"{GEO}/message-ttl.json": b"0", f"{GEO_TTL}/message-ttl.json": b"20"}
    read = decode_read_instant(got[f"{GEO_TTL}/message-ttl.json" + READ_SUFFIX], "x")
    assert read.url == f"{url}/admin/v2/persistent/lab/geo-ttl/orders-expiring/messageTTL?applied=true"
    assert read.requested_at_ms <= read.answered_at_ms
    assert TOKEN.encode() not in b"".join(_ttl_files(got).values())
    assert {k: v for k, v in _ttl_files(direct).items() if not k.endswith(READ_SUFFIX)} == {
        k: v for k, v in _ttl_files(got).items() if not k.endswith(READ_SUFFIX)}   # the lab writes the same
    assert "namespace_message_ttls" not in report.counts


@pytest.mark.parametrize("version,unset", [
    ("2.10.0", b""),    # 405: topic level policies disabled (the default before 2.11); unset = 204, empty
    ("2.6.4", b"0"),    # before 2.8 the topic-level answer is not the applied one: not asked; unset reads 0
])
def test_a_broker_without_the_topic_level_get_gives_the_namespaces_asked_once(tmp_path, version, unset):
    url, report, got, direct = _collect(tmp_path, {"east": version})
    ttl = _ttl_files(got)
    assert {k: ttl[k] for k in ttl if not k.endswith(READ_SUFFIX)} == {
        f"{GEO}/namespace-message-ttl.json": unset, f"{GEO_TTL}/namespace-message-ttl.json": b"20"}
    read = decode_read_instant(ttl[f"{GEO_TTL}/namespace-message-ttl.json" + READ_SUFFIX], "x")
    assert read.url == f"{url}/admin/v2/namespaces/lab/geo-ttl/messageTTL"
    assert report.counts["namespace_message_ttls"] == 2
    assert _ttl_files(direct).keys() == ttl.keys()


def test_a_27_broker_is_asked_for_the_namespaces_only(fake, tmp_path):   # noqa: F811
    fake.broker_version = b"2.7.4"   # its topic-level answer would be the topic's own TTL or 0: never asked
    fake.namespace_ttl["acme/orders"] = Answer(200, b"30")
    report = run(fake, tmp_path)
    got = files(tmp_path)
    assert got[ORDERS + "namespace-message-ttl.json"] == b"30" and ORDERS + "message-ttl.json" not in got
    assert fake.paths(r"/messageTTL$") == ["/admin/v2/namespaces/acme/orders/messageTTL"]
    assert report.gaps == [] and report.counts["namespace_message_ttls"] == 1


def test_failures_are_gaps_naming_the_url_and_the_collection_goes_on(fake, tmp_path):   # noqa: F811
    for topic in fake.topics.values():
        topic.message_ttl = reason(405, "Topic level policies is disabled, to enable the topic level policy and retry.")
    fake.namespace_ttl["acme/orders"] = reason(500, "metadata store unavailable")
    report = run(fake, tmp_path)
    assert [(g.source, g.what) for g in report.gaps] == [
        (fake.url + "/admin/v2/namespaces/acme/orders/messageTTL", "namespace message TTL")]   # once, not per topic
    assert "HTTP 500" in report.gaps[0].error
    assert report.counts["topics_dumped"] == 3 and not _ttl_files(files(tmp_path))


def test_a_topic_level_failure_is_a_gap_not_a_fallback(fake, tmp_path):   # noqa: F811
    fake.topics["acme/orders/orders"].message_ttl = reason(403, "Don't have permission to read the TTL policy")
    report = run(fake, tmp_path)
    assert [(g.source, g.what) for g in report.gaps] == [
        (fake.url + "/admin/v2/persistent/acme/orders/orders/messageTTL?applied=true", "message TTL")]
    assert fake.paths(r"^/admin/v2/namespaces/") == []
    assert files(tmp_path)["topics/acme/orders/payments-partition-0/message-ttl.json"] == b"0"


@pytest.mark.parametrize("status, ctype, body, missing", [
    (405, "application/json", b'{"reason": "Topic level policies is disabled, to enable the topic level policy '
                              b'and retry."}', True),
    (404, "text/html", b"<html><title>Error 404 Not Found</title></html>", True),   # before 2.7: no resource
    (404, None, b"", True),
    (404, "application/json", b'{"reason": "Topic not found"}', False),            # the broker's own answers
    (404, "application/json", b'{"reason": "Namespace does not exist"}', False),
    (403, "application/json", b'{"reason": "Unauthorized"}', False),
])
def test_ttl_endpoint_missing(status, ctype, body, missing):
    assert ttl_endpoint_missing(AdminResponse("http://b/x", status, ctype, body, (), f"HTTP {status}")) is missing
