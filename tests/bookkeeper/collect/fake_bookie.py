"""A bookie-protocol v3 peer for tests: answers GetListOfEntriesOfLedger and READ_ENTRY from a map
ledger -> entry ids.

Built from the same protocol module as the client, on 127.0.0.1:0, in its own thread and event loop
(lab.loopback, as the lab's bookies).
Modes: "answer" (EOK with the entries; ENOLEDGER for unknown ledgers; reads EOK / ENOENTRY / ENOLEDGER),
"no_list" (a DbLedgerStorage bookie: never answers GetListOfEntriesOfLedger, answers reads), "silent" (reads,
never answers), "close" (hangs up on the first request), "garbage" (answers a frame that is not a Response).
`read_status` overrides the status of every read answer (e.g. "EIO").
`silent_ledgers` are never answered even in "answer" mode; `answer_in_batches_of=n` holds answers until n are
ready and sends them in reverse order (out-of-order answers, as a bookie's thread pool produces them); the first
request of a connection is answered at once, since the client sends it alone (its capability probe).
"""
from __future__ import annotations

import asyncio
from typing import Iterable, Mapping

from audit.systems.bookkeeper.formats import availability, protocol
from lab.bookkeeper.bookie_server import read_request
from lab.loopback import LoopbackListeners


class FakeBookie:
    def __init__(self, entries: Mapping[int, Iterable[int]] | None = None, mode: str = "answer",
                 silent_ledgers: Iterable[int] = (), answer_in_batches_of: int | None = None,
                 read_status: str | None = None):
        if mode not in ("answer", "no_list", "silent", "close", "garbage"):
            raise ValueError(f"mode: expected answer|no_list|silent|close|garbage, got {mode!r}")
        self.entries = {lid: sorted(ids) for lid, ids in (entries or {}).items()}
        self.mode = mode
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

    def answer_body(self, txn_id: int, ledger_id: int) -> bytes:
        if ledger_id in self.entries:
            return protocol.encode_response(txn_id, ledger_id, "EOK",
                                            availability.encode_entries(self.entries[ledger_id]))
        return protocol.encode_response(txn_id, ledger_id, "ENOLEDGER", None)

    def read_body(self, req: protocol.ReadEntryRequest) -> bytes:
        if self.read_status is not None:
            status = self.read_status
        elif req.ledger_id not in self.entries:
            status = "ENOLEDGER"
        else:
            status = "EOK" if req.entry_id in self.entries[req.ledger_id] else "ENOENTRY"
        return protocol.encode_read_response(req.txn_id, req.ledger_id, req.entry_id, status,
                                             b"entry" if status == "EOK" else None)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        conn = self.connections
        held: list[bytes] = []
        while True:
            req = await read_request(reader, f"fake bookie conn {conn}")
            is_read = isinstance(req, protocol.ReadEntryRequest)
            if is_read:
                self.reads.append((conn, req.ledger_id, req.entry_id, req.txn_id))
            else:
                self.requests.append((conn, req.ledger_id, req.txn_id))
            if self.mode == "close":
                return
            if self.mode == "silent" or (self.mode == "no_list" and not is_read) or (
                    not is_read and req.ledger_id in self.silent_ledgers):
                continue
            if self.mode == "garbage":
                writer.write(protocol.frame(b"\xff\xff not a protobuf"))
                await writer.drain()
                continue
            held.append(protocol.frame(self.read_body(req) if is_read else self.answer_body(req.txn_id, req.ledger_id)))
            if self.batch is None or len(held) >= self.batch or len(self.requests) + len(self.reads) == 1:
                writer.write(b"".join(reversed(held)))
                held.clear()
                await writer.drain()

    def __enter__(self) -> "FakeBookie":
        self._listeners = LoopbackListeners([self._handle], "fake-bookie", timeout_s=10)
        (self.port,) = self._listeners.__enter__().ports
        return self

    def __exit__(self, *exc) -> None:
        self._listeners.__exit__(*exc)
