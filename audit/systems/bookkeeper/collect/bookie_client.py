"""Ask bookies which entries they store: GetListOfEntriesOfLedger over bookie protocol v3
(docs/formats/bookkeeper.md §1.7).

One TCP connection per bookie carries up to `window` requests at once; answers are matched by txnId because
a bookie answers from a thread pool, not in request order. Each answer's Response body is stored exactly as
received under `entries-of-ledger/<bookie>/<ledgerId>.pb` (EOK and ENOLEDGER alike: the normalizer reads the
status). A ledger whose answer never came is stored as `<ledgerId>.error.json` {"error", "message"} -- never as
"no entries", which would look like lost data -- and the bookie gets a CoverageGap.

Error kinds: "unreachable" (connect refused / no route / bad address), "timeout" (connect or answer deadline),
"connection_closed" (bookie hung up), "protocol_error" (an answer that does not decode or match).
After a failed connection the bookie gets `reconnects` more connections for the ledgers not yet asked.

Capability probe: a DbLedgerStorage bookie never answers GetListOfEntriesOfLedger (its read thread throws
UnsupportedOperationException: docs/formats/bookkeeper.md §1.7), which used to cost two request timeouts per bookie and
turn all its ledgers into "unavailable". So each bookie's first request is sent alone; if no answer comes
within `list_probe_timeout_s`, a plain ReadRequest (entry 0 of the same ledger) follows on the same connection.
An answer to it, whatever its status, shows a live bookie that does not serve the listing: the bookie is
marked "unsupported" for the run, gets no more list requests, and its ledgers go to `probe_unsupported` (the
read prober, read_probe.py) -- without one they are stored as "list_unsupported" errors. No answer to either
is the timeout path as before. A bookie answering the listing pays one round trip for the probe, no more
(docs/formats/bookkeeper.md §1.10).
"""
from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Awaitable, Callable, Iterable, Mapping

from audit.collectors.base import CollectionReport, RawSink
from audit.systems.bookkeeper.formats import protocol
from audit.errors import PayloadError

SYSTEM = "bookkeeper"
ENTRIES_PREFIX = "entries-of-ledger/"
WHAT = "entries of ledger"
UNREACHABLE, TIMEOUT, CLOSED, PROTOCOL_ERROR = "unreachable", "timeout", "connection_closed", "protocol_error"
LIST_UNSUPPORTED = "list_unsupported"
DB_LEDGER_STORAGE_ISSUE = "DbLedgerStorage, apache/bookkeeper#2078"
# Statuses that answer the question: EOK (here is the list) and ENOLEDGER (this bookie has nothing).
ANSWER_STATUSES = ("EOK", "ENOLEDGER")


# (bookie, ledger ids, reason) -> report of the read probes that replace the listing on that bookie
ProbeUnsupported = Callable[[str, list[int], str], Awaitable[CollectionReport]]


@dataclass(frozen=True)
class BookieClientConfig:
    connect_timeout_s: float = 5.0
    request_timeout_s: float = 60.0   # per request, from when it was sent
    window: int = 100                 # requests in flight per connection (the Auditor also uses 100)
    reconnects: int = 1
    max_concurrent_bookies: int = 16
    list_probe_timeout_s: float = 2.0  # wait for the first listing before asking whether the bookie reads

    def __post_init__(self):
        for name in ("connect_timeout_s", "request_timeout_s", "list_probe_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"BookieClientConfig.{name}: expected > 0, got {getattr(self, name)}")
        for name, low in (("window", 1), ("reconnects", 0), ("max_concurrent_bookies", 1)):
            if getattr(self, name) < low:
                raise ValueError(f"BookieClientConfig.{name}: expected >= {low}, got {getattr(self, name)}")


class BookieAddressError(ValueError):
    def __init__(self, bookie: str, address: str, expected: str):
        self.bookie, self.address, self.expected = bookie, address, expected
        super().__init__(f"bookie {bookie!r}: address {address!r}: expected {expected}")


def bookie_address(bookie: str, overrides: Mapping[str, str] | None = None) -> tuple[str, int]:
    """(host, port) for a bookie id: the override if given, else the id itself ("host:port", "[v6]:port")."""
    address = (overrides or {}).get(bookie, bookie)
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise BookieAddressError(bookie, address, "host:port (configure bookie_addresses for custom bookie ids)")
    return host.strip("[]"), int(port)


class ConnectionFailure(Exception):
    """Ends one connection: `kind`/`message` apply to `ledgers` (the ones in flight)."""

    def __init__(self, kind: str, message: str, ledgers: Iterable[int] = ()):
        self.kind, self.message, self.ledgers = kind, message, list(ledgers)
        super().__init__(message)


@contextlib.asynccontextmanager
async def bookie_connection(host: str, port: int, connect_timeout_s: float):
    """(reader, writer) of one connection to a bookie, closed on exit; ConnectionFailure when it cannot open."""
    address = f"{host}:{port}"
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), connect_timeout_s)
    except asyncio.TimeoutError:
        raise ConnectionFailure(TIMEOUT, f"connect to {address} timed out after {connect_timeout_s}s") from None
    except OSError as e:
        raise ConnectionFailure(UNREACHABLE, f"connect to {address}: {e}") from None
    try:
        yield reader, writer
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except OSError:
            pass  # the bookie reset the connection; nothing left to release


class _BookieRun:
    def __init__(self, bookie: str, ledger_ids: Iterable[int], addresses: Mapping[str, str] | None,
                 sink: RawSink, report: CollectionReport, cfg: BookieClientConfig,
                 probe_unsupported: ProbeUnsupported | None = None):
        self.bookie, self.sink, self.report, self.cfg = bookie, sink, report, cfg
        self.addresses = addresses
        self.probe_unsupported = probe_unsupported
        self.lists: bool | None = None          # does the bookie answer GetListOfEntriesOfLedger? None: not known
        self.unsupported_reason = ""
        self.probe_read_txn: int | None = None  # the capability probe's read, whose answer may come late
        self.remaining = deque(sorted(set(ledger_ids)))
        self.txn_ids = itertools.count(1)
        self.errors: dict[str, list[tuple[int, str]]] = defaultdict(list)
        self.odd_statuses: dict[str, list[int]] = defaultdict(list)

    def key(self, ledger_id: int, suffix: str) -> str:
        return f"{ENTRIES_PREFIX}{self.bookie}/{ledger_id}{suffix}"

    async def run(self) -> None:
        self.report.count("entries_of_ledger_asked", len(self.remaining))
        try:
            host, port = bookie_address(self.bookie, self.addresses)
        except BookieAddressError as e:
            self._fail_all(ConnectionFailure(UNREACHABLE, str(e)), "not asked")
        else:
            connections = 0
            while self.remaining and self.lists is not False:
                connections += 1
                try:
                    await self._connection(host, port)
                except ConnectionFailure as f:
                    for ledger_id in f.ledgers:
                        self._error(ledger_id, f.kind, f.message)
                    if connections > self.cfg.reconnects:
                        self._fail_all(f, f"not asked after {connections} failed connection(s)")
        if self.lists is False:
            await self._hand_over()
        self._report_gaps()

    async def _hand_over(self) -> None:
        """The bookie reads but does not list: its remaining ledgers go to the read prober."""
        ledger_ids = list(self.remaining)
        self.remaining.clear()
        self.report.count("bookies_list_unsupported")
        self.report.count("entries_of_ledger_unsupported", len(ledger_ids))
        if self.probe_unsupported is not None:
            self.report.merge(await self.probe_unsupported(self.bookie, ledger_ids, self.unsupported_reason))
            return
        for ledger_id in ledger_ids:
            self._error(ledger_id, LIST_UNSUPPORTED, self.unsupported_reason)

    def _fail_all(self, f: ConnectionFailure, why: str) -> None:
        while self.remaining:
            self._error(self.remaining.popleft(), f.kind, f"{why}: {f.message}")

    async def _connection(self, host: str, port: int) -> None:
        async with bookie_connection(host, port, self.cfg.connect_timeout_s) as (reader, writer):
            await self._exchange(reader, writer, f"{host}:{port}")

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, address: str) -> None:
        loop = asyncio.get_running_loop()
        if self.lists is None:
            await self._probe_lists(reader, writer, address)
            if not self.lists:
                return
        in_flight: dict[int, tuple[int, float]] = {}  # txnId -> (ledgerId, deadline); insertion = send order
        while self.remaining or in_flight:
            while self.remaining and len(in_flight) < self.cfg.window:
                ledger_id, txn_id = self.remaining.popleft(), next(self.txn_ids)
                writer.write(protocol.encode_request(ledger_id, txn_id))
                in_flight[txn_id] = (ledger_id, loop.time() + self.cfg.request_timeout_s)
            pending = [lid for lid, _ in in_flight.values()]
            oldest_deadline = next(iter(in_flight.values()))[1]
            try:
                await asyncio.wait_for(writer.drain(), max(0.0, oldest_deadline - loop.time()))
                body = await asyncio.wait_for(self._read_frame(reader, address),
                                              max(0.0, oldest_deadline - loop.time()))
            except asyncio.TimeoutError:
                raise ConnectionFailure(TIMEOUT, f"{address} did not answer within {self.cfg.request_timeout_s}s",
                               pending) from None
            except (asyncio.IncompleteReadError, ConnectionError) as e:
                raise ConnectionFailure(CLOSED, f"{address} closed the connection: {type(e).__name__}",
                                        pending) from None
            except ConnectionFailure as f:  # a bad frame length: the stream cannot be re-synchronised
                raise ConnectionFailure(f.kind, f.message, pending) from None
            self._answer(body, in_flight, address, pending)

    async def _probe_lists(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, address: str) -> None:
        """The first listing, alone; if unanswered within list_probe_timeout_s, a ReadRequest tells a live bookie
        without the listing (sets self.lists False) from a silent one (ConnectionFailure, as before)."""
        loop = asyncio.get_running_loop()
        ledger_id, list_txn = self.remaining.popleft(), next(self.txn_ids)
        sent = loop.time()
        in_flight = {list_txn: (ledger_id, sent + self.cfg.request_timeout_s)}
        writer.write(protocol.encode_request(ledger_id, list_txn))
        probe_wait = min(self.cfg.list_probe_timeout_s, self.cfg.request_timeout_s)
        # One frame read for both waits, never cancelled in between: a frame half read when the probe's wait ends
        # must not be lost.
        frame = asyncio.ensure_future(self._read_frame(reader, address))
        try:
            await asyncio.wait_for(writer.drain(), probe_wait)
            await asyncio.wait({frame}, timeout=probe_wait)
            if not frame.done():
                self.probe_read_txn = next(self.txn_ids)
                writer.write(protocol.encode_read_request(ledger_id, 0, self.probe_read_txn))
                # The listing keeps its own deadline; the read gets at least the probe's wait.
                deadline = max(sent + self.cfg.request_timeout_s, loop.time() + probe_wait)
                await asyncio.wait_for(writer.drain(), max(0.0, deadline - loop.time()))
                await asyncio.wait({frame}, timeout=max(0.0, deadline - loop.time()))
            if not frame.done():
                raise ConnectionFailure(TIMEOUT, f"{address} answered neither GetListOfEntriesOfLedger "
                                        f"nor a ReadRequest within {self.cfg.request_timeout_s}s", [ledger_id])
            body = frame.result()
        except asyncio.TimeoutError:
            raise ConnectionFailure(TIMEOUT, f"{address} did not take the request within {self.cfg.request_timeout_s}s",
                           [ledger_id]) from None
        except (asyncio.IncompleteReadError, ConnectionError) as e:
            raise ConnectionFailure(CLOSED, f"{address} closed the connection: {type(e).__name__}",
                                    [ledger_id]) from None
        except ConnectionFailure as f:
            raise ConnectionFailure(f.kind, f.message, [ledger_id]) from None
        finally:
            frame.cancel()
        answer = self._decode(body, address, [ledger_id])
        if isinstance(answer, protocol.ReadEntryAnswer) and answer.txn_id == self.probe_read_txn:
            self.lists = False
            self.remaining.appendleft(ledger_id)
            self.unsupported_reason = (
                f"GetListOfEntriesOfLedger unanswered within {probe_wait} s while a ReadRequest was answered "
                f"({answer.status}): {DB_LEDGER_STORAGE_ISSUE}")
            return
        # The listing came (perhaps late, with the read's answer still to come: _answer drops that one).
        self.lists = True
        self._answer(body, in_flight, address, [ledger_id])

    def _decode(self, body: bytes, address: str, pending: list[int]):
        try:
            return protocol.decode_any_response(body, f"bookie://{self.bookie} ({address})")
        except PayloadError as e:
            raise ConnectionFailure(PROTOCOL_ERROR, str(e), pending) from None

    async def _read_frame(self, reader: asyncio.StreamReader, address: str) -> bytes:
        (size,) = protocol.FRAME_LENGTH.unpack(await reader.readexactly(protocol.FRAME_LENGTH.size))
        if not 0 <= size <= protocol.DEFAULT_MAX_FRAME:
            raise ConnectionFailure(PROTOCOL_ERROR,
                                    f"{address}: frame length {size} outside 0..{protocol.DEFAULT_MAX_FRAME}")
        return await reader.readexactly(size)

    def _answer(self, body: bytes, in_flight: dict[int, tuple[int, float]], address: str,
                pending: list[int]) -> None:
        source = f"bookie://{self.bookie} ({address})"
        answer = self._decode(body, address, pending)
        if isinstance(answer, protocol.ReadEntryAnswer):
            if answer.txn_id == self.probe_read_txn:
                return  # the capability probe's read, answered after the listing: nothing to store
            raise ConnectionFailure(PROTOCOL_ERROR, f"{source}: a read answer (txnId {answer.txn_id}) nobody asked for",
                           pending)
        if answer.txn_id not in in_flight:
            raise ConnectionFailure(PROTOCOL_ERROR, f"{source}: answer with unknown txnId {answer.txn_id}", pending)
        ledger_id, _ = in_flight.pop(answer.txn_id)
        if answer.ledger_id is not None and answer.ledger_id != ledger_id:
            self._error(ledger_id, PROTOCOL_ERROR,
                        f"{source}: asked for ledger {ledger_id}, answer names ledger {answer.ledger_id}")
            return
        self.sink.put(self.key(ledger_id, ".pb"), body)
        self.report.count("entries_of_ledger_answered")
        self.report.count(f"entries_of_ledger_status_{answer.status}")
        if answer.status not in ANSWER_STATUSES:
            self.odd_statuses[answer.status].append(ledger_id)

    def _error(self, ledger_id: int, kind: str, message: str) -> None:
        self.sink.put(self.key(ledger_id, ".error.json"),
                      json.dumps({"error": kind, "message": message}, sort_keys=True).encode())
        self.report.count("entries_of_ledger_errors")
        self.errors[kind].append((ledger_id, message))

    def _report_gaps(self) -> None:
        # One gap per bookie and failure kind; the per-ledger detail is in the .error.json files.
        source = f"bookie://{self.bookie}"
        for kind, failed in sorted(self.errors.items()):
            ids = sorted(lid for lid, _ in failed)
            self.report.gap(source, f"{WHAT} ({len(ids)} ledgers: {_id_sample(ids)})", f"{kind}: {failed[0][1]}")
        for status, ids in sorted(self.odd_statuses.items()):
            self.report.gap(source, f"{WHAT} ({len(ids)} ledgers: {_id_sample(sorted(ids))})",
                            f"bookie answered {status}")
        if self.errors or self.odd_statuses:
            self.report.count("bookies_with_gaps")


def _id_sample(ids: list[int], n: int = 5) -> str:
    return ", ".join(map(str, ids[:n])) + (", ..." if len(ids) > n else "")


async def collect_entries_of_ledgers_async(ledgers_by_bookie: Mapping[str, Iterable[int]], sink: RawSink, *,
                                           addresses: Mapping[str, str] | None = None,
                                           config: BookieClientConfig = BookieClientConfig(),
                                           cluster: str = "",
                                           probe_unsupported: ProbeUnsupported | None = None) -> CollectionReport:
    report = CollectionReport(SYSTEM, cluster)
    limit = asyncio.Semaphore(config.max_concurrent_bookies)

    async def one(bookie: str, ledger_ids: Iterable[int]) -> None:
        async with limit:
            await _BookieRun(bookie, ledger_ids, addresses, sink, report, config, probe_unsupported).run()

    report.count("bookies_asked", len(ledgers_by_bookie))
    await asyncio.gather(*(one(b, ids) for b, ids in sorted(ledgers_by_bookie.items())))
    return report


def collect_entries_of_ledgers(ledgers_by_bookie: Mapping[str, Iterable[int]], sink: RawSink, *,
                               addresses: Mapping[str, str] | None = None,
                               config: BookieClientConfig = BookieClientConfig(),
                               cluster: str = "",
                               probe_unsupported: ProbeUnsupported | None = None) -> CollectionReport:
    """Ask every bookie about its ledgers ({bookie id: ledger ids}); stores answers and errors in `sink`.
    Ledgers of a bookie that does not serve the listing go to `probe_unsupported` (module docstring)."""
    return asyncio.run(collect_entries_of_ledgers_async(ledgers_by_bookie, sink, addresses=addresses,
                                                        config=config, cluster=cluster,
                                                        probe_unsupported=probe_unsupported))
