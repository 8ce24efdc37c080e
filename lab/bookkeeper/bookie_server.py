"""Bookies on loopback: bookie-protocol v3 listeners (BookieServer: one serve loop and one way of answering), over
two sources of what a bookie holds.

`serve_lab_bookies` (LabBookie): one listener per simulated bookie, answering from the simulation state.
Unreachable lab bookies get an address nobody listens on, so the collector sees a refused connection, as with a
dead host.

Every bookie answers READ_ENTRY as ReadEntryProcessorV3 does for a plain read: EOK with a small deterministic
body when it stores the entry, ENOENTRY when it knows the ledger but not the entry, ENOLEDGER when it holds
nothing of the ledger. GetListOfEntriesOfLedger is answered by SortedLedgerStorage bookies only: a
DbLedgerStorage bookie reads the request and sends nothing, like a real one whose read thread throws
UnsupportedOperationException (apache/bookkeeper#2078), and keeps serving the connection.

`list_status` ({bookieId: {ledgerId: StatusCode name}}) makes a listing lab bookie answer GetListOfEntriesOfLedger
for those ledgers with that status and no availability, e.g. ENOENTRY: what a real bookie sends when its storage
throws NoSuchEntryException.

`ScriptedBookie`: a peer for the collector's tests, answering from a map ledger -> entry ids, on 127.0.0.1:0 in
its own thread and event loop. Modes: "answer" (EOK with the entries; ENOLEDGER for unknown ledgers; reads EOK /
ENOENTRY / ENOLEDGER), "no_list" (a DbLedgerStorage bookie: never answers GetListOfEntriesOfLedger, answers
reads), "silent" (reads, never answers), "close" (hangs up on the first request), "garbage" (answers a frame that
is not a Response). `read_status` overrides the status of every read answer (e.g. "EIO"). `silent_ledgers` are
never answered even in "answer" mode; `answer_in_batches_of=n` holds answers until n are ready and sends them in
reverse order (out-of-order answers, as a bookie's thread pool produces them); the very first request is answered
at once, since the client sends it alone (its capability probe). It records every request and read with the
number of the connection that carried it."""
from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Iterable, Iterator, Mapping

from audit.systems.bookkeeper.formats import availability, protocol
from lab.bookkeeper.config import DB_LEDGER_STORAGE
from lab.loopback import LoopbackListeners, unused_loopback_port

READ_CHUNK = 1 << 16
Request = protocol.EntriesOfLedgerRequest | protocol.ReadEntryRequest


def entry_body(ledger_id: int, entry_id: int) -> bytes:
    """What a lab bookie returns as an entry's data (the collector never keeps it)."""
    return b"lab-entry %d/%d" % (ledger_id, entry_id)


def read_status(held: Collection[int] | None, entry_id: int) -> str:
    """ReadEntryProcessorV3's status for a plain read, `held` the entry ids the bookie stores of the ledger (None:
    nothing of it)."""
    if held is None:
        return "ENOLEDGER"
    return "EOK" if entry_id in held else "ENOENTRY"


def entries_of_ledger_body(txn_id: int, ledger_id: int, held: Iterable[int] | None) -> bytes:
    """The v3 Response body to GetListOfEntriesOfLedger: EOK with the availability of `held`, or ENOLEDGER."""
    if held is None:
        return protocol.encode_response(txn_id, ledger_id, "ENOLEDGER", None)
    return protocol.encode_response(txn_id, ledger_id, "EOK", availability.encode_entries(held))


class BookieServer:
    """One bookie's answers and its serve loop; a subclass says what it holds (status_of, list_answer) and
    whether it lists (`lists`: SortedLedgerStorage answers GetListOfEntriesOfLedger, DbLedgerStorage stays
    silent). `connected` and `respond` are the hooks of a scripted peer."""

    lists = True

    def status_of(self, ledger_id: int, entry_id: int) -> str:
        raise NotImplementedError

    def entry_body(self, ledger_id: int, entry_id: int) -> bytes:
        return entry_body(ledger_id, entry_id)

    def list_answer(self, txn_id: int, ledger_id: int) -> bytes:
        """The Response body to GetListOfEntriesOfLedger."""
        raise NotImplementedError

    def answer(self, req: Request) -> bytes | None:
        """The Response body for a request, or None when the bookie stays silent."""
        if isinstance(req, protocol.ReadEntryRequest):
            status = self.status_of(req.ledger_id, req.entry_id)
            body = self.entry_body(req.ledger_id, req.entry_id) if status == "EOK" else None
            return protocol.encode_read_response(req.txn_id, req.ledger_id, req.entry_id, status, body)
        if not self.lists:
            return None
        return self.list_answer(req.txn_id, req.ledger_id)

    def connected(self) -> Any:
        """A new connection: what respond() gets with each of its requests."""
        return None

    def source(self, conn: Any) -> str:
        """The connection's name in decoding errors."""
        return "bookie"

    def respond(self, conn: Any, req: Request) -> list[bytes] | None:
        """The frames to send now for a request; None: hang up."""
        answer = self.answer(req)
        return [] if answer is None else [protocol.frame(answer)]

    def _feed(self, conn: Any, frames: protocol.FrameSplitter, chunk: bytes) -> tuple[list[bytes], bool]:
        """(frames to send, whether the connection stays open) for what a chunk completes."""
        out: list[bytes] = []
        for body in frames.feed(chunk):
            sent = self.respond(conn, protocol.decode_any_request(body, frames.source))
            if sent is None:
                return out, False
            out += sent
        return out, True

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Chunked reads and one write per chunk: a read probe pipelines many small requests.
        conn = self.connected()
        frames = protocol.FrameSplitter(self.source(conn))
        open_ = True
        while open_:
            try:
                chunk = await reader.read(READ_CHUNK)
            except asyncio.CancelledError:
                # The listeners are closing while a client's hang-up is still in flight: end like a hang-up
                # (a cancelled handler makes asyncio log a traceback per connection).
                return
            if not chunk:
                return
            out, open_ = self._feed(conn, frames, chunk)
            if out:
                writer.write(b"".join(out))
                await writer.drain()


# -- the lab --------------------------------------------------------------------------------------------------
class LabBookie(BookieServer):
    """One lab bookie's answers, from the finished simulation."""

    def __init__(self, lab, bookie: str, before_first_answer: Callable[[], None] | None = None,
                 list_status: Mapping[int, str] | None = None):
        self.lab, self.bookie, self.before_first_answer = lab, bookie, before_first_answer
        self.lists = lab.storage(bookie) != DB_LEDGER_STORAGE
        self.list_status = dict(list_status or {})

    def source(self, conn: Any) -> str:
        return f"lab bookie {self.bookie}"

    def answer(self, req: Request) -> bytes | None:
        if self.before_first_answer is not None:
            self.before_first_answer()
        return super().answer(req)

    def status_of(self, ledger_id: int, entry_id: int) -> str:
        return self.lab.read_status(self.bookie, ledger_id, entry_id)

    def list_answer(self, txn_id: int, ledger_id: int) -> bytes:
        status = self.list_status.get(ledger_id)
        if status is not None:
            return protocol.encode_response(txn_id, ledger_id, status, None)
        return self.lab.entries_of_ledger_answer(self.bookie, ledger_id, txn_id)


class _Once:
    """Calls `action` once, before the first answer any lab bookie gives: what happened between the metadata walk
    and the bookie reads (retention deleting ledgers)."""

    def __init__(self, action: Callable[[], None]):
        self.action, self.lock, self.done = action, threading.Lock(), False

    def __call__(self) -> None:
        with self.lock:
            if not self.done:
                self.done = True
                self.action()


@contextlib.contextmanager
def serve_lab_bookies(lab, before_first_answer: Callable[[], None] | None = None,
                      list_status: Mapping[str, Mapping[int, str]] | None = None) -> Iterator[dict[str, str]]:
    """Yields {bookieId: "127.0.0.1:port"}; every listener is closed on exit. `before_first_answer` runs once,
    before any bookie answers its first request. `list_status`: per-ledger listing statuses (module docstring)."""
    reachable = [b for b in lab.bookies if lab.reachable(b)]
    once = _Once(before_first_answer) if before_first_answer is not None else None
    handlers = [LabBookie(lab, b, once, (list_status or {}).get(b)).serve for b in reachable]
    with LoopbackListeners(handlers, "lab-bookies") as listeners:
        addresses = {b: f"127.0.0.1:{port}" for b, port in zip(reachable, listeners.ports)}
        # Nothing listens on these ports: connections are refused.
        yield {b: addresses.get(b) or f"127.0.0.1:{unused_loopback_port()}" for b in lab.bookies}


# -- a scripted peer for tests ------------------------------------------------------------------------------
@dataclass
class _Connection:
    number: int
    held: list[bytes] = field(default_factory=list)   # answers kept back for a batch


class ScriptedBookie(BookieServer):
    """`with ScriptedBookie({ledger: entry ids}, ...) as bk:` serves at `bk.bookie_id` (module docstring)."""

    MODES = ("answer", "no_list", "silent", "close", "garbage")

    def __init__(self, entries: Mapping[int, Iterable[int]] | None = None, mode: str = "answer",
                 silent_ledgers: Iterable[int] = (), answer_in_batches_of: int | None = None,
                 read_status: str | None = None):
        if mode not in self.MODES:
            raise ValueError(f"mode: expected {'|'.join(self.MODES)}, got {mode!r}")
        self.entries = {lid: sorted(ids) for lid, ids in (entries or {}).items()}
        self.mode = mode
        self.lists = mode != "no_list"
        self.read_status = read_status
        self.reads: list[tuple[int, int, int, int]] = []  # (connection number, ledgerId, entryId, txnId)
        self.silent_ledgers = set(silent_ledgers)
        self.batch = answer_in_batches_of
        self.requests: list[tuple[int, int, int]] = []  # (connection number, ledgerId, txnId)
        self.connections = 0
        self.port: int | None = None
        self._listeners: LoopbackListeners | None = None

    @property
    def bookie_id(self) -> str:
        return f"127.0.0.1:{self.port}"

    def status_of(self, ledger_id: int, entry_id: int) -> str:
        if self.read_status is not None:
            return self.read_status
        return read_status(self.entries.get(ledger_id), entry_id)

    def entry_body(self, ledger_id: int, entry_id: int) -> bytes:
        return b"entry"

    def list_answer(self, txn_id: int, ledger_id: int) -> bytes:
        return entries_of_ledger_body(txn_id, ledger_id, self.entries.get(ledger_id))

    def answer_body(self, txn_id: int, ledger_id: int) -> bytes:
        """What it sends for GetListOfEntriesOfLedger of the ledger (what the collector stores)."""
        return self.list_answer(txn_id, ledger_id)

    def connected(self) -> _Connection:
        self.connections += 1
        return _Connection(self.connections)

    def source(self, conn: _Connection) -> str:
        return f"scripted bookie conn {conn.number}"

    def respond(self, conn: _Connection, req: Request) -> list[bytes] | None:
        is_read = isinstance(req, protocol.ReadEntryRequest)
        if is_read:
            self.reads.append((conn.number, req.ledger_id, req.entry_id, req.txn_id))
        else:
            self.requests.append((conn.number, req.ledger_id, req.txn_id))
        if self.mode == "close":
            return None
        if self.mode == "silent" or (not is_read and req.ledger_id in self.silent_ledgers):
            return []
        if self.mode == "garbage":
            return [protocol.frame(b"\xff\xff not a protobuf")]
        conn.held += super().respond(conn, req)
        if self.batch is None or len(conn.held) >= self.batch or len(self.requests) + len(self.reads) == 1:
            sent, conn.held = conn.held[::-1], []
            return sent
        return []

    def __enter__(self) -> "ScriptedBookie":
        self._listeners = LoopbackListeners([self.serve], "scripted-bookie", timeout_s=10)
        (self.port,) = self._listeners.__enter__().ports
        return self

    def __exit__(self, *exc) -> None:
        self._listeners.__exit__(*exc)
