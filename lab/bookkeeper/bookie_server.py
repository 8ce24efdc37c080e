"""The lab's bookies on loopback: one bookie-protocol v3 listener per simulated bookie, answering from the
simulation state. Unreachable lab bookies get an address nobody listens on, so the collector sees a refused
connection, as with a dead host.

Every bookie answers READ_ENTRY as ReadEntryProcessorV3 does for a plain read: EOK with a small deterministic
body when it stores the entry, ENOENTRY when it knows the ledger but not the entry, ENOLEDGER when it holds
nothing of the ledger. GetListOfEntriesOfLedger is answered by SortedLedgerStorage bookies only: a
DbLedgerStorage bookie reads the request and sends nothing, like a real one whose read thread throws
UnsupportedOperationException (apache/bookkeeper#2078), and keeps serving the connection.

`list_status` ({bookieId: {ledgerId: StatusCode name}}) makes a listing bookie answer GetListOfEntriesOfLedger for
those ledgers with that status and no availability, e.g. ENOENTRY: what a real bookie sends when its storage throws
NoSuchEntryException."""
from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Callable, Iterator, Mapping

from audit.systems.bookkeeper.formats import protocol
from lab.bookkeeper.config import DB_LEDGER_STORAGE
from lab.loopback import LoopbackListeners, unused_loopback_port

READ_CHUNK = 1 << 16


async def read_request(reader: asyncio.StreamReader,
                       source: str) -> protocol.EntriesOfLedgerRequest | protocol.ReadEntryRequest:
    """The next request frame a client sends, decoded (IncompleteReadError once it hangs up)."""
    size = protocol.FRAME_LENGTH.unpack(await reader.readexactly(4))[0]
    return protocol.decode_any_request(await reader.readexactly(size), source)


def entry_body(ledger_id: int, entry_id: int) -> bytes:
    """What a lab bookie returns as an entry's data (the collector never keeps it)."""
    return b"lab-entry %d/%d" % (ledger_id, entry_id)


class LabBookie:
    """One lab bookie's answers, from the finished simulation."""

    def __init__(self, lab, bookie: str, before_first_answer: Callable[[], None] | None = None,
                 list_status: Mapping[int, str] | None = None):
        self.lab, self.bookie, self.before_first_answer = lab, bookie, before_first_answer
        self.lists = lab.storage(bookie) != DB_LEDGER_STORAGE
        self.list_status = dict(list_status or {})

    def answer(self, req) -> bytes | None:
        """The Response body for a request, or None when the bookie stays silent."""
        if isinstance(req, protocol.ReadEntryRequest):
            status = self.lab.read_status(self.bookie, req.ledger_id, req.entry_id)
            body = entry_body(req.ledger_id, req.entry_id) if status == "EOK" else None
            return protocol.encode_read_response(req.txn_id, req.ledger_id, req.entry_id, status, body)
        if not self.lists:
            return None
        status = self.list_status.get(req.ledger_id)
        if status is not None:
            return protocol.encode_response(req.txn_id, req.ledger_id, status, None)
        return self.lab.entries_of_ledger_answer(self.bookie, req.ledger_id, req.txn_id)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Chunked reads and one write per chunk: a read probe pipelines many small requests.
        frames = protocol.FrameSplitter(f"lab bookie {self.bookie}")
        while True:
            try:
                chunk = await reader.read(READ_CHUNK)
            except asyncio.CancelledError:
                # The listeners are closing while a client's hang-up is still in flight: end like a hang-up
                # (a cancelled handler makes asyncio log a traceback per connection).
                return
            if not chunk:
                return
            out = []
            for body in frames.feed(chunk):
                if self.before_first_answer is not None:
                    self.before_first_answer()
                answer = self.answer(protocol.decode_any_request(body, frames.source))
                if answer is not None:
                    out.append(protocol.frame(answer))
            if out:
                writer.write(b"".join(out))
                await writer.drain()


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
