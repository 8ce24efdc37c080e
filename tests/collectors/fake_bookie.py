"""A bookie-protocol v3 peer for tests: answers GetListOfEntriesOfLedger from a map ledger -> entry ids.

Built from the same protocol module as the client, on 127.0.0.1:0, in its own thread and event loop.
Modes: "answer" (EOK with the entries; ENOLEDGER for unknown ledgers), "silent" (reads, never answers),
"close" (hangs up on the first request), "garbage" (answers a frame that is not a Response).
`silent_ledgers` are never answered even in "answer" mode; `answer_in_batches_of=n` holds answers until n are ready and sends them in reverse order (out-of-order
answers, as a bookie's thread pool produces them).
"""
from __future__ import annotations

import asyncio
import threading
from typing import Iterable, Mapping

from audit.formats.bookkeeper import availability, protocol


class FakeBookie:
    def __init__(self, entries: Mapping[int, Iterable[int]] | None = None, mode: str = "answer",
                 silent_ledgers: Iterable[int] = (), answer_in_batches_of: int | None = None):
        if mode not in ("answer", "silent", "close", "garbage"):
            raise ValueError(f"mode: expected answer|silent|close|garbage, got {mode!r}")
        self.entries = {lid: sorted(ids) for lid, ids in (entries or {}).items()}
        self.mode = mode
        self.silent_ledgers = set(silent_ledgers)
        self.batch = answer_in_batches_of
        self.requests: list[tuple[int, int, int]] = []  # (connection number, ledgerId, txnId)
        self.connections = 0
        self.port: int | None = None
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None

    @property
    def bookie_id(self) -> str:
        return f"127.0.0.1:{self.port}"

    def answer_body(self, txn_id: int, ledger_id: int) -> bytes:
        if ledger_id in self.entries:
            return protocol.encode_response(txn_id, ledger_id, "EOK",
                                            availability.encode_entries(self.entries[ledger_id]))
        return protocol.encode_response(txn_id, ledger_id, "ENOLEDGER", None)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        conn = self.connections
        self._tasks.add(asyncio.current_task())
        held: list[bytes] = []
        try:
            while True:
                size = protocol.FRAME_LENGTH.unpack(await reader.readexactly(4))[0]
                req = protocol.decode_request(await reader.readexactly(size), f"fake bookie conn {conn}")
                self.requests.append((conn, req.ledger_id, req.txn_id))
                if self.mode == "close":
                    return
                if self.mode == "silent" or req.ledger_id in self.silent_ledgers:
                    continue
                if self.mode == "garbage":
                    writer.write(protocol.frame(b"\xff\xff not a protobuf"))
                    await writer.drain()
                    continue
                held.append(protocol.frame(self.answer_body(req.txn_id, req.ledger_id)))
                if self.batch is None or len(held) >= self.batch:
                    writer.write(b"".join(reversed(held)))
                    held.clear()
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client hung up
        finally:
            writer.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        self._tasks: set[asyncio.Task] = set()
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stop.wait()
        server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await server.wait_closed()

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(self._main())
        except BaseException as e:  # surfaced by start()/stop()
            self._error = e
            self._ready.set()
        finally:
            self._loop.close()

    def __enter__(self) -> "FakeBookie":
        self._thread = threading.Thread(target=self._run, name="fake-bookie", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout=10) or self._error is not None:
            raise RuntimeError(f"fake bookie did not start: {self._error!r}")
        return self

    def __exit__(self, *exc) -> None:
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=10)
        if self._thread.is_alive():
            raise RuntimeError("fake bookie did not stop within 10s")
