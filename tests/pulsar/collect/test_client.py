"""AdminClient against the loopback fake admin API: headers as received, redirects, retries, failures as values."""
import socket

import pytest

from audit.systems.pulsar.collect.admin_client import AdminClient, RetryPolicy
from audit.systems.pulsar.collect.discovery import TopicName
from lab.pulsar.admin_server import TOPIC_NOT_FOUND, Answer, ScriptedAdmin, reason
from tests.pulsar.collect.recorded import ORDERS_STATS_INTERNAL, orders_topic

TOKEN = "tok-3f9a-very-secret"
ORDERS = TopicName("acme", "orders", "orders")


@pytest.fixture
def fakes():
    made = []

    def make(token=TOKEN):
        fake = ScriptedAdmin(token)
        fake.add_topic("acme/orders/orders", orders_topic())
        made.append(fake)
        return fake
    yield make
    for fake in made:
        fake.close()


def client_for(fake, token=TOKEN, sleeps=None, attempts=4, request_timeout_s=5.0):
    retry = RetryPolicy(attempts=attempts, base_delay_s=0.5, max_delay_s=8.0,
                        sleep=(sleeps.append if sleeps is not None else lambda s: None))
    return AdminClient(fake.url, token, connect_timeout_s=2.0, request_timeout_s=request_timeout_s, retry=retry)


def test_entry_answer_keeps_every_pulsar_header_as_received(fakes):
    fake = fakes()
    client = client_for(fake)
    resp = client.get(ORDERS.path("/ledger/10/entry/4"))
    assert (resp.status, resp.error, resp.content_type, resp.body) == (200, None, "application/octet-stream",
                                                                     b"local order 4")
    assert resp.pulsar_headers() == {
        "X-Pulsar-Message-ID": "10:4", "X-Pulsar-publish-time": "2023-11-14T22:13:20Z",
        "X-Pulsar-producer-name": "orders-producer", "X-Pulsar-sequence-id": "4",
        "X-Pulsar-replicated-to": ["west", "north"]}  # sent twice: kept as two values, not "west, north"
    assert fake.requests == ["/admin/v2/persistent/acme/orders/orders/ledger/10/entry/4"]


def test_redirect_to_the_owning_broker_keeps_the_token(fakes):
    front, owner = fakes(), fakes()
    path = ORDERS.path("/internalStats")
    front.script("internalStats", [Answer(307, b"", None, [("Location", owner.url + path)])])
    resp = client_for(front).get(path)
    assert (resp.status, resp.body, resp.url) == (200, ORDERS_STATS_INTERNAL, owner.url + path)
    assert owner.requests == [path] and owner.unauthorized == []


def test_moving_topic_is_retried_with_exponential_backoff(fakes):
    fake = fakes()
    fake.script("internalStats", [TOPIC_NOT_FOUND] * 3)
    sleeps = []
    client = client_for(fake, sleeps=sleeps)
    resp = client.get(ORDERS.path("/internalStats"))
    assert (resp.status, resp.body) == (200, ORDERS_STATS_INTERNAL)
    assert sleeps == [0.5, 1.0, 2.0]
    assert (client.retries, client.requests_sent, len(fake.requests)) == (3, 4, 4)


def test_retries_are_bounded_then_the_failure_is_returned(fakes):
    fake = fakes()
    fake.script("internalStats", [reason(503, "Service unavailable")] * 10)
    sleeps = []
    resp = client_for(fake, sleeps=sleeps, attempts=4).get(ORDERS.path("/internalStats"))
    assert (resp.status, resp.error, resp.topic_moving) == (503, 'HTTP 503: {"reason": "Service unavailable"}', True)
    assert sleeps == [0.5, 1.0, 2.0] and len(fake.requests) == 4


def test_deleted_ledger_is_not_retried(fakes):
    fake = fakes()
    fake.topics["acme/orders/orders"].deleted_ledgers.add(10)
    sleeps = []
    resp = client_for(fake, sleeps=sleeps).get(ORDERS.path("/ledger/10/entry/2"))
    assert (resp.status, resp.error, resp.topic_moving) == (404, 'HTTP 404: {"reason": "Message not found"}', False)
    assert sleeps == [] and len(fake.requests) == 1


def test_timeout_is_an_answer_with_status_0(fakes):
    fake = fakes()
    fake.slow("/ledger/12/entry/1$")
    resp = client_for(fake, request_timeout_s=0.3).get(ORDERS.path("/ledger/12/entry/1"))
    assert (resp.status, resp.error, resp.body) == (0, "no answer within 0.3 s (read timeout)", b"")


def test_connection_refused_is_an_answer_with_status_0():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    client = AdminClient(f"http://127.0.0.1:{port}", TOKEN, connect_timeout_s=2.0, request_timeout_s=2.0)
    resp = client.get(ORDERS.path("/stats"))
    assert (resp.status, resp.error) == (0, "connection failed: [Errno 111] Connection refused")


def test_missing_token_is_401_and_remembered(fakes):
    fake = fakes()
    client = client_for(fake, token=None)
    resp = client.get(ORDERS.path("/stats"))
    assert (resp.status, resp.error) == (401, 'HTTP 401: {"reason": "HTTP 401 Unauthorized"}')
    assert client.unauthorized is resp and fake.unauthorized == [ORDERS.path("/stats")]


def test_error_texts_are_redacted(fakes):
    fake = fakes()
    fake.script("/stats", [Answer(502, b"<html>bad gateway</html>", "text/html", echo_auth=True)])
    client = AdminClient(fake.url, TOKEN, redact=lambda text: text.replace(TOKEN, "***"))
    resp = client.get(ORDERS.path("/stats"))
    assert resp.error == "HTTP 502: <html>bad gateway</html><pre>request header Authorization: Bearer ***</pre>"
