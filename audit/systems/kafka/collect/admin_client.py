"""kafka-python plumbing of the admin collector (admin.py): the client's settings from an estate entry, a log
filter that keeps SASL secrets out of kafka-python's DEBUG logs, the network-client factory that lets a failed
bootstrap be cleaned up, and `Requests`: protocol requests sent through the client's connection manager
(`_manager.send`: private in kafka-python, which has no public OffsetForLeaderEpoch call), several in flight at
once, each with the instants it was sent and answered, a failed send one broker's error only, and a broker that did
not answer once not asked again."""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import kafka.errors as kerrors
from kafka.admin import KafkaAdminClient
from kafka.net.compat import KafkaNetClient

_NAMES = {6: "NOT_LEADER_OR_FOLLOWER"}    # NOT_LEADER_FOR_PARTITION before 2.6 (docs/formats/kafka.md §14.2)


def error_name(code: int) -> str:
    return _NAMES.get(code) or getattr(kerrors.for_code(code), "message", None) or f"error code {code}"


def describe(exc: BaseException) -> str:
    """kafka-python's errors already start with their class name."""
    text = str(exc)
    name = type(exc).__name__
    return text if text.startswith(name) or f"] {name}" in text else f"{name}: {text}"


def nodes(values) -> list[int]:
    return [int(v) for v in values] if values is not None else []


class RedactingFilter(logging.Filter):
    """kafka-python logs its whole configuration at DEBUG when it starts, and at DEBUG every request it sends,
    the SASL exchange included (as a bytes repr): every record of its loggers goes through the resolver's
    `redact`, and each secret's bytes-repr spelling is scrubbed too."""

    def __init__(self, redact: Callable[[str], str], secrets: tuple[str, ...] = ()):
        super().__init__()
        self.redact = redact
        self.escaped = [e for v in secrets if v and (e := repr(v.encode())[2:-1]) != v]

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = self.redact(message)
        for e in self.escaped:
            cleaned = cleaned.replace(e, "***")
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        return True


def library_loggers() -> list[logging.Logger]:
    """Every logger of kafka-python (a filter acts only on records of the logger it is attached to)."""
    names = [n for n in list(logging.root.manager.loggerDict) if n == "kafka" or n.startswith("kafka.")]
    return [logging.getLogger(n) for n in sorted(names)]


def client_config(cluster: Any, resolve: Callable[[Any], str]) -> dict:
    """KafkaAdminClient settings of an estate entry (audit/systems/kafka/config.py KafkaCluster); SASL secrets
    resolved."""
    timeout_ms = int(cluster.timeouts.request_s * 1000)
    config = {"bootstrap_servers": cluster.bootstrap_servers, "client_id": "replaudit",
              "request_timeout_ms": timeout_ms, "bootstrap_timeout_ms": 2 * timeout_ms,
              "security_protocol": getattr(cluster, "security_protocol", None) or "PLAINTEXT"}
    sasl = getattr(cluster, "sasl", None)
    if sasl is not None:
        config.update(sasl_mechanism=sasl.mechanism, sasl_plain_username=resolve(sasl.username),
                      sasl_plain_password=resolve(sasl.password))
    return config


class TrackedNetClients:
    """The `kafka_client` factory of a KafkaAdminClient, remembering what it built: the admin client starts its IO
    thread before it bootstraps and, when bootstrap fails, raises without stopping it (kafka-python 3.0.12)."""

    def __init__(self):
        self.clients: list[KafkaNetClient] = []

    def __call__(self, **configs) -> KafkaNetClient:
        client = KafkaNetClient(**configs)
        self.clients.append(client)
        return client

    def stop(self) -> None:
        for client in self.clients:
            try:
                client.close()
            finally:
                client._net.stop()


class Requests:
    """Sends protocol requests to brokers of a bootstrapped client; `dead` holds the brokers not asked again."""

    def __init__(self, client: KafkaAdminClient, timeout_ms: int, now_ms: Callable[[], int]):
        self.manager = client._manager
        self.timeout_ms, self.now_ms = timeout_ms, now_ms
        self.dead: dict[int, str] = {}          # broker -> why it is not asked again

    def known_brokers(self) -> list[int | None]:
        """The brokers the client learnt at bootstrap (None: let the client pick, when it knows none)."""
        ids = sorted(b.node_id for b in self.manager.cluster.brokers())
        return ids or [None]

    def api_versions(self) -> dict:
        return getattr(self.manager.broker_version_data, "api_versions", None) or {}

    def send_all(self, sends: list[tuple[int | None, Any]]) -> list[tuple[Any, Exception | None, int, int]]:
        """(response, error, sent_ms, answered_ms) per (broker, request), all in flight together. A send that fails
        in any way is that send's error only: the others' answers are kept."""
        try:
            return self.manager.run(self._gather, sends)
        except Exception as exc:     # the client's own loop failed: nothing of this batch was read, nothing stops
            now = self.now_ms()
            return [(None, exc, now, now) for _ in sends]

    def _give_up(self, node: int | None, exc: BaseException) -> None:
        if node is not None and node not in self.dead:
            self.dead[node] = f"broker {node} did not answer earlier ({type(exc).__name__})"

    async def _gather(self, sends):
        pending = []                # (future | None, sent_ms, answered instants, error of a send not made)
        for node, request in sends:
            sent = self.now_ms()
            if node is not None and node in self.dead:
                pending.append((None, sent, None, kerrors.NodeNotReadyError(f"not asked: {self.dead[node]}")))
                continue
            answered: list[int] = []
            try:
                # raises at once for a broker the client does not know (UnknownBrokerIdError, kafka-python 3.0.12
                # KafkaConnectionManager.get_connection): that broker's gap, not the batch's
                fut = self.manager.send(request, node_id=node, request_timeout_ms=self.timeout_ms)
                fut.add_both(lambda _, a=answered: a.append(self.now_ms()))
            except Exception as exc:
                self._give_up(node, exc)
                pending.append((None, sent, None, exc))
                continue
            pending.append((fut, sent, answered, None))
        out = []
        for (node, _), (fut, sent, answered, error) in zip(sends, pending):
            if fut is None:                 # never on the wire
                out.append((None, error, sent, sent))
                continue
            try:
                response = await self.manager.wait_for(fut, self.timeout_ms)
                out.append((response, None, sent, answered[0] if answered else self.now_ms()))
            except Exception as exc:   # a broker that does not answer, refuses or hangs up: a gap, not a stop
                out.append((None, exc, sent, self.now_ms()))
                self._give_up(node, exc)
        return out


class BootstrapFailed(Exception):
    """The client could not be bootstrapped (unreachable, refused, authentication failed): `cause` says why."""

    def __init__(self, cause: BaseException):
        self.cause = cause
        super().__init__(describe(cause))


@contextmanager
def bootstrapped(cluster: Any, secrets: Any, factory: Callable[..., KafkaAdminClient] = KafkaAdminClient
                 ) -> Iterator[tuple[KafkaAdminClient, dict]]:
    """(client, its settings) bootstrapped from the estate entry, closed on exit; SASL secrets kept out of
    kafka-python's logs meanwhile. A failed bootstrap raises BootstrapFailed, its IO thread stopped."""
    config = client_config(cluster, secrets.resolve)
    filt = RedactingFilter(secrets.redact, (config.get("sasl_plain_username"), config.get("sasl_plain_password")))
    loggers = library_loggers()
    for lg in loggers:
        lg.addFilter(filt)
    try:
        tracked = TrackedNetClients()
        try:
            client = factory(**config, kafka_client=tracked)
        except Exception as exc:
            tracked.stop()      # a failed bootstrap leaves the IO thread running
            raise BootstrapFailed(exc) from exc
        try:
            yield client, config
        finally:
            client.close()
    finally:
        for lg in loggers:
            lg.removeFilter(filt)
