"""The lab's bookies on loopback: one bookie-protocol v3 listener per simulated bookie, answering
GetListOfEntriesOfLedger from the simulation state. Unreachable lab bookies get an address nobody listens on,
so the collector sees a refused connection, as with a dead host."""
from __future__ import annotations

import asyncio
import contextlib
from typing import Iterator

from audit.formats.bookkeeper import protocol
from audit.lab.loopback import LoopbackListeners, unused_loopback_port


async def read_request(reader: asyncio.StreamReader, source: str) -> protocol.EntriesOfLedgerRequest:
    """The next request frame a client sends, decoded (IncompleteReadError once it hangs up)."""
    size = protocol.FRAME_LENGTH.unpack(await reader.readexactly(4))[0]
    return protocol.decode_request(await reader.readexactly(size), source)


@contextlib.contextmanager
def serve_lab_bookies(lab) -> Iterator[dict[str, str]]:
    """Yields {bookieId: "127.0.0.1:port"}; every listener is closed on exit."""

    def answering(bookie: str):
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while True:
                req = await read_request(reader, f"lab bookie {bookie}")
                writer.write(protocol.frame(lab.entries_of_ledger_answer(bookie, req.ledger_id, req.txn_id)))
                await writer.drain()
        return serve

    reachable = [b for b in lab.bookies if lab.reachable(b)]
    with LoopbackListeners([answering(b) for b in reachable], "lab-bookies") as listeners:
        addresses = {b: f"127.0.0.1:{port}" for b, port in zip(reachable, listeners.ports)}
        # Nothing listens on these ports: connections are refused.
        yield {b: addresses.get(b) or f"127.0.0.1:{unused_loopback_port()}" for b in lab.bookies}
