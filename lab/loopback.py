"""Loopback plumbing for the lab's simulated servers (and the test peers built the same way): TCP listeners on
127.0.0.1 served by an asyncio event loop in a thread of its own, so synchronous callers can talk to them."""
from __future__ import annotations

import asyncio
import socket
import threading
from typing import Awaitable, Callable, Sequence

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def unused_loopback_port() -> int:
    """A 127.0.0.1 port nobody listens on (once closed, connections to it are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LoopbackListeners:
    """One listener on 127.0.0.1:<free port> per handler, all served by one event loop in thread `name`.

    `with LoopbackListeners([handler, ...], "name") as listeners:` -- `listeners.ports[i]` serves `handlers[i]`.
    A connection ends when its handler returns or the client hangs up (the writer is closed either way);
    leaving the block closes every listener and cancels the connections still open."""

    def __init__(self, handlers: Sequence[Handler], name: str, timeout_s: float = 30.0):
        self.handlers = list(handlers)
        self.name = name
        self.timeout_s = timeout_s
        self.ports: list[int] = []
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._connections: set[asyncio.Task] = set()

    async def _connection(self, handler: Handler, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._connections.add(task)
        try:
            await handler(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client hung up
        finally:
            writer.close()
            self._connections.discard(task)

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        servers = []
        for handler in self.handlers:
            server = await asyncio.start_server(lambda r, w, h=handler: self._connection(h, r, w), "127.0.0.1", 0)
            servers.append(server)
            self.ports.append(server.sockets[0].getsockname()[1])
        self._ready.set()
        await self._stop.wait()
        for server in servers:
            server.close()
        connections = list(self._connections)
        for task in connections:
            task.cancel()
        await asyncio.gather(*connections, return_exceptions=True)
        for server in servers:
            await server.wait_closed()

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(self._main())
        except BaseException as exc:  # surfaced to the caller by __enter__
            self._error = exc
            self._ready.set()
        finally:
            self._loop.close()

    def __enter__(self) -> "LoopbackListeners":
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout=self.timeout_s) or self._error is not None:
            self.__exit__()
            raise RuntimeError(f"{self.name} did not start: {self._error!r}")
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is None:
            return
        if self._thread.is_alive() and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=self.timeout_s)
        if self._thread.is_alive():
            raise RuntimeError(f"{self.name} did not stop within {self.timeout_s}s")
