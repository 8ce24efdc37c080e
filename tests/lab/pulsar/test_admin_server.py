"""The lab's Pulsar admin REST server on loopback answers what the emitter writes, byte for byte."""
from __future__ import annotations

import base64
import json

import pytest
import requests

from audit.systems.pulsar.collect.admin_client import AdminClient, RetryPolicy
from lab.pulsar.admin_server import serve_pulsar_admin
from lab.pulsar.emit import emit_cluster, headers_dict
from lab.pulsar.runner import UnknownLabCluster, lab_world
from tests.lab.sinks import DictSink

AS_OF = 1_760_000_000_000
TOPIC = "/admin/v2/persistent/lab/geo/orders-healthy"


@pytest.fixture(scope="module")
def world():
    return lab_world({"seed": 7}, AS_OF)[0]


@pytest.fixture(scope="module")
def emitted(world):
    sink = DictSink()
    emit_cluster(world, "west", sink)
    return dict(sink)


def test_without_token_everything_answers(world, emitted):
    with serve_pulsar_admin(world, "west") as url:
        topics = requests.get(f"{url}/admin/v2/persistent/lab/geo", timeout=5).json()
        assert "persistent://lab/geo/orders-legacy-partition-1" in topics and len(topics) == 13
        assert requests.get(f"{url}/admin/v2/namespaces/lab/geo/topics", timeout=5).json() == topics
        assert requests.get(f"{url}/admin/v2/persistent/lab/geo/partitioned", timeout=5).json() == \
            ["persistent://lab/geo/orders-legacy"]
        assert requests.get(f"{url}/admin/v2/persistent/lab/geo/orders-legacy/partitions", timeout=5).json() == \
            {"partitions": 2}
        assert requests.get(f"{url}{TOPIC}/partitions", timeout=5).json() == {"partitions": 0}
        for path, key in (("internalStats", "stats-internal.json"), ("stats", "stats.json")):
            r = requests.get(f"{url}{TOPIC}/{path}", timeout=5)
            assert r.headers["Content-Type"] == "application/json"
            assert r.content == emitted[f"topics/lab/geo/orders-healthy/{key}"]
        r = requests.get(f"{url}/admin/v2/persistent/lab/geo3/payments/subscription/payments%3Aeu/"
                         "replicatedSubscriptionStatus", timeout=5)
        assert r.json() == {"persistent://lab/geo3/payments": True}
        missing = requests.get(f"{url}/admin/v2/persistent/lab/geo/nope/stats", timeout=5)
        assert missing.status_code == 404 and missing.json() == {"reason": "Topic not found"}
        assert requests.get(f"{url}/admin/v2/persistent/nope/ns", timeout=5).status_code == 404
        assert requests.post(f"{url}{TOPIC}/stats", timeout=5).status_code == 405


def test_token_is_required_when_given(world):
    with serve_pulsar_admin(world, "east", token="lab-token") as url:
        bare = requests.get(f"{url}{TOPIC}/stats", timeout=5)
        assert bare.status_code == 401 and bare.headers["Content-Type"].startswith("text/html")
        wrong = requests.get(f"{url}{TOPIC}/stats", headers={"Authorization": "Bearer other"}, timeout=5)
        assert wrong.status_code == 401
        ok = requests.get(f"{url}{TOPIC}/stats", headers={"Authorization": "Bearer lab-token"}, timeout=5)
        assert ok.status_code == 200 and "replication" in ok.json()


def test_entries_over_http_make_the_same_dump_lines(world, emitted):
    """The real admin client reads entries with repeated headers kept apart; the line it would store equals
    the emitted one."""
    west = world.topic("west", "persistent://lab/geo/orders-healthy")
    chunks = [k for k in emitted if k.startswith("topics/lab/geo/orders-healthy/dump/")]
    lines = [line for k in chunks for line in emitted[k].splitlines(keepends=True)]
    assert lines
    with serve_pulsar_admin(world, "west", token="t") as url:
        admin = AdminClient(url, "t", retry=RetryPolicy(attempts=1, sleep=lambda s: None))
        try:
            for line in lines:
                doc = json.loads(line)
                resp = admin.get(f"{TOPIC}/ledger/{doc['ledger_id']}/entry/{doc['entry_id']}")
                assert resp.status == 200 and resp.content_type == "application/octet-stream"
                assert resp.pulsar_headers() == doc["headers"]
                assert base64.b64encode(resp.body).decode() == doc["body_b64"]
            gone = admin.get(f"{TOPIC}/ledger/{west.ml.ledgers[0].ledger_id - 1}/entry/0")
            assert gone.status == 404 and "Message not found" in gone.error
        finally:
            admin.close()


def test_a_header_sent_twice_is_a_list():
    assert headers_dict([("X-Pulsar-replicated-to", "a"), ("X-Pulsar-sequence-id", "3"),
                         ("X-Pulsar-replicated-to", "b")]) == {"X-Pulsar-replicated-to": ["a", "b"],
                                                               "X-Pulsar-sequence-id": "3"}


def test_injected_entry_errors_and_unknown_cluster(world):
    east = world.topic("east", "persistent://lab/geo/orders-healthy")
    pos = east.ml.last_position()
    with serve_pulsar_admin(world, "east", entry_errors={pos: 500}) as url:
        r = requests.get(f"{url}{TOPIC}/ledger/{pos[0]}/entry/{pos[1]}", timeout=5)
        assert r.status_code == 500
    with pytest.raises(UnknownLabCluster, match="north"):
        with serve_pulsar_admin(world, "north"):
            pass


@pytest.mark.parametrize("version,topic_level,applied,namespace,unset", [
    # broker version: (status, body) of GET .../{topic}/messageTTL, of ...?applied=true, of the namespace's, and
    # of a namespace without a TTL
    ("3.0.12", (204, b""), (200, b"20"), (200, b"20"), (204, b"")),   # topic policies on by default since 2.11
    ("2.10.0", (405, None), (405, None), (200, b"20"), (204, b"")),   # topicLevelPoliciesEnabled=false: 405
    ("2.6.4", (404, None), (404, None), (200, b"20"), (200, b"0")),   # no such resource: Jetty's page; int TTL
])
def test_message_ttl_endpoints_by_broker_version(version, topic_level, applied, namespace, unset):
    world, _ = lab_world({"seed": 7, "scenarios": ["healthy", "message-ttl"], "message_ttl_s": {"lab/geo-ttl": 20},
                          "broker_versions": {"east": version}}, AS_OF)
    ttl_topic = "/admin/v2/persistent/lab/geo-ttl/orders-expiring/messageTTL"
    with serve_pulsar_admin(world, "east") as url:
        for path, (status, body) in ((ttl_topic, topic_level), (ttl_topic + "?applied=true", applied),
                                     ("/admin/v2/namespaces/lab/geo-ttl/messageTTL", namespace)):
            r = requests.get(url + path, timeout=5)
            assert r.status_code == status, path
            if body is not None:
                assert r.content == body, path
            elif status == 404:
                assert r.headers["Content-Type"].startswith("text/html")
            else:
                assert "Topic level policies is disabled" in r.json()["reason"]
        r = requests.get(f"{url}/admin/v2/namespaces/lab/geo/messageTTL", timeout=5)   # no TTL there
        assert (r.status_code, r.content) == unset
        assert requests.get(f"{url}/admin/v2/namespaces/lab/nope/messageTTL", timeout=5).status_code == 404
