"""The bulk path for large topics: data messages through a Reader, the rest through the admin endpoint.

A Reader streams a topic over the binary protocol far faster than one admin GET per position, but the broker
never delivers server-only entries to it (replicated-subscription markers, transaction markers), and the audit
needs exactly those. So the dump asks the Reader first and fetches the complement of what it returned, per
chunk, through GET .../ledger/{L}/entry/{E}. `server_only_positions` is that complement.

`ReaderSource` is what the dump plugs in; `PulsarClientReaderSource` implements it with the `pulsar` client
module, imported only when used (pulsar-client is an optional dependency). It has not been run against a
broker in this repository's tests; see docs/pulsar/collector.md.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping, Protocol, runtime_checkable

from audit.systems.pulsar.domain.positions import Position
from audit.systems.pulsar.formats.entry import MESSAGE_ID, PRODUCER, PROPERTY_PREFIX, PUBLISH_TIME
from audit.systems.pulsar.formats.timefmt import format_time_ms


@dataclass(frozen=True)
class ReaderEntry:
    """One entry as a Reader saw it: `headers` named as the admin endpoint would send them."""

    position: Position
    headers: Mapping[str, str | list[str]]
    body: bytes


@runtime_checkable
class ReaderSource(Protocol):
    def read(self, topic: str, after: Position, until: Position) -> Iterable[ReaderEntry]:
        """Entries of `topic` strictly after `after` up to `until` (inclusive), in position order. Entries it
        cannot represent whole (markers, batches) are simply not yielded: the admin endpoint fetches them."""
        ...


def server_only_positions(window_positions: Iterable[Position],
                          reader_positions: Iterable[Position]) -> list[Position]:
    """The window's positions a Reader did not return, in window order: what the admin endpoint must fetch.
    Reader positions outside the window are ignored."""
    returned = set(reader_positions)
    return [p for p in window_positions if p not in returned]


class ReaderFeed:
    """Hands a ReaderSource's stream out chunk by chunk (chunks come in position order), so a large topic is
    never held in memory. A failing reader stops the feed; `error` says why and the admin path takes over."""

    def __init__(self, source: ReaderSource, topic: str, after: Position, until: Position):
        self._it: Iterator[ReaderEntry] | None = iter(source.read(topic, after, until))
        self._next: ReaderEntry | None = None
        self.error: str | None = None
        self.returned = 0

    def _pull(self) -> ReaderEntry | None:
        if self._next is not None:
            entry, self._next = self._next, None
            return entry
        if self._it is None:
            return None
        try:
            return next(self._it)
        except StopIteration:
            self._it = None
        except Exception as e:  # the client library's own errors: the admin endpoint still covers the chunk
            self._it, self.error = None, f"reader failed: {type(e).__name__}: {e}"
        return None

    def take(self, first: Position, last: Position) -> dict[Position, ReaderEntry]:
        """The reader's entries in first..last; entries before `first` (a skipped chunk) are dropped."""
        out: dict[Position, ReaderEntry] = {}
        while (entry := self._pull()) is not None:
            if entry.position > last:
                self._next = entry
                break
            if entry.position >= first:
                out[entry.position] = entry
        self.returned += len(out)
        return out


class PulsarClientReaderSource:
    """ReaderSource over the `pulsar` client (pulsar-client on PyPI). Batched entries are left to the admin
    endpoint (the Reader hands out the batch's messages, the dump records whole entries). The Python client does
    not expose `replicated_from`, `replicate_to` or the sequence id, so lines it yields lack those headers."""

    def __init__(self, service_url: str, token: str | None = None, *, operation_timeout_s: int = 30,
                 read_timeout_ms: int = 30_000):
        self.service_url = service_url
        self._token = token
        self.operation_timeout_s = operation_timeout_s
        self.read_timeout_ms = read_timeout_ms

    def read(self, topic: str, after: Position, until: Position) -> Iterator[ReaderEntry]:
        import pulsar  # optional dependency: only `dump.mode: reader` needs it

        auth = pulsar.AuthenticationToken(self._token) if self._token else None
        client = pulsar.Client(self.service_url, authentication=auth,
                               operation_timeout_seconds=self.operation_timeout_s)
        try:
            start = pulsar.MessageId(-1, after.ledger_id, after.entry_id, -1)
            reader = client.create_reader(topic, start, start_message_id_inclusive=False)
            try:
                while reader.has_message_available():
                    msg = reader.read_next(timeout_millis=self.read_timeout_ms)
                    mid = msg.message_id()
                    position = Position(mid.ledger_id(), mid.entry_id())
                    if position > until:
                        break
                    if mid.batch_index() >= 0:
                        continue
                    yield ReaderEntry(position, message_headers(position, msg), bytes(msg.data()))
            finally:
                reader.close()
        finally:
            client.close()


def message_headers(position: Position, msg) -> dict[str, str | list[str]]:
    """The X-Pulsar-* headers a client Message can fill in (what the admin endpoint would have sent)."""
    headers: dict[str, str | list[str]] = {MESSAGE_ID: str(position)}
    publish = msg.publish_timestamp()
    if publish:
        headers[PUBLISH_TIME] = format_time_ms(publish)
    producer = getattr(msg, "producer_name", None)  # pulsar-client >= 3.1
    if callable(producer) and producer():
        headers[PRODUCER] = producer()
    for key, value in sorted(msg.properties().items()):
        headers[PROPERTY_PREFIX + key] = value
    return headers
