"""The lab's bookies on loopback: one bookie-protocol v3 listener per simulated bookie, answering
GetListOfEntriesOfLedger from the simulation state. Unreachable lab bookies get an address nobody listens on,
so the collector sees a refused connection, as with a dead host."""
from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from typing import Iterator

from audit.formats.bookkeeper import protocol


def _refusing_address() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there any more: connections are refused
    return f"127.0.0.1:{port}"


class _LabBookies:
    def __init__(self, lab):
        self.lab = lab
        self.addresses: dict[str, str] = {}
        self._ready = threading.Event()
        self._error: BaseException | None = None

    async def _serve(self, bookie: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._conns.add(asyncio.current_task())
        try:
            while True:
                size = protocol.FRAME_LENGTH.unpack(await reader.readexactly(4))[0]
                req = protocol.decode_request(await reader.readexactly(size), f"lab bookie {bookie}")
                writer.write(protocol.frame(self.lab.entries_of_ledger_answer(bookie, req.ledger_id, req.txn_id)))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        self._conns: set[asyncio.Task] = set()
        servers = []
        for bookie in self.lab.bookies:
            if not self.lab.reachable(bookie):
                self.addresses[bookie] = _refusing_address()
                continue
            srv = await asyncio.start_server(lambda r, w, b=bookie: self._serve(b, r, w), "127.0.0.1", 0)
            servers.append(srv)
            self.addresses[bookie] = "127.0.0.1:%d" % srv.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stop.wait()
        for srv in servers:
            srv.close()
        for task in self._conns:
            task.cancel()
        await asyncio.gather(*self._conns, return_exceptions=True)
        for srv in servers:
            await srv.wait_closed()

    def run(self) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(self._main())
        except BaseException as exc:  # surfaced to the caller by serve_lab_bookies
            self._error = exc
            self._ready.set()
        finally:
            self._loop.close()


@contextlib.contextmanager
def serve_lab_bookies(lab) -> Iterator[dict[str, str]]:
    """Yields {bookieId: "127.0.0.1:port"}; every listener is closed on exit."""
    bookies = _LabBookies(lab)
    thread = threading.Thread(target=bookies.run, name="lab-bookies", daemon=True)
    thread.start()
    if not bookies._ready.wait(timeout=30) or bookies._error is not None:
        raise RuntimeError(f"lab bookies did not start: {bookies._error!r}")
    try:
        yield dict(bookies.addresses)
    finally:
        bookies._loop.call_soon_threadsafe(bookies._stop.set)
        thread.join(timeout=30)
