"""Read probes: where a bookie does not answer GetListOfEntriesOfLedger (DbLedgerStorage, docs/formats/bookkeeper.md
§1.7), ask it for single entries with plain v3 ReadRequests, choosing the entries as the Auditor's LedgerChecker does
(audit/systems/bookkeeper/domain/verification.py; docs/formats/bookkeeper.md §1.10).

Per bookie, one connection carries up to `window` reads at once, matched by txnId (answers come from a thread
pool, in any order); a read unanswered after `request_timeout_s` ends the connection, and the bookie gets
`reconnects` more connections for the entries not yet asked. Raw evidence (docs/formats/bookkeeper.md
§1.10):
- `read-probes/<bookie>/<ledgerId>.json`: {"ledger_id", "share_percent", "probed", "present": [[first, last],
  ...] (entries answered EOK, as ascending ranges), "absent": {"ENOENTRY": [...], "ENOLEDGER": [...]} (the bookie
  said it does not have them), "failed": {"<status or error kind>": [...]} (unknown: EIO, timeout,
  unreachable, connection_closed, protocol_error ... never counted as missing)}. Entry bodies are never kept.
- `read-probes/<bookie>/bookie.json`: {"bookie", "evidence": "read_probe", "share_percent", "reason"}.

Only CLOSED ledgers are probed: the audit judges replicas of CLOSED ledgers only (as AuditorReplicasCheckTask
does), and an OPEN ledger's metadata does not say where its last segment ends. Other ledgers get no file and
are counted (`read_probe_ledgers_not_closed`).
"""
from __future__ import annotations

import asyncio
import itertools
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping

from audit.collectors.base import CollectionReport, RawSink
from audit.systems.bookkeeper.collect.bookie_client import (CLOSED, PROTOCOL_ERROR, TIMEOUT, UNREACHABLE,
                                                       BookieAddressError, ConnectionFailure, bookie_address,
                                                       bookie_connection)
from audit.systems.bookkeeper.domain.model import LedgerMetadata
from audit.systems.bookkeeper.domain.verification import FULL_SHARE, iter_ledger_probes
from audit.systems.bookkeeper.formats import protocol
from audit.systems.bookkeeper.formats.raw_evidence import ABSENT_STATUSES  # the bookie said it does not have the entry
from audit.errors import PayloadError

SYSTEM = "bookkeeper"
PROBES_PREFIX = "read-probes/"
EVIDENCE = "read_probe"
READ_CHUNK = 1 << 16


@dataclass(frozen=True)
class ReadProbeConfig:
    connect_timeout_s: float = 5.0
    request_timeout_s: float = 60.0  # per read, from when it was sent
    window: int = 100                # reads in flight per connection
    reconnects: int = 1
    share_percent: int = 0           # auditorLedgerVerificationPercentage; 0 = first and last of each fragment

    def __post_init__(self):
        for name in ("connect_timeout_s", "request_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"ReadProbeConfig.{name}: expected > 0, got {getattr(self, name)}")
        for name, low in (("window", 1), ("reconnects", 0)):
            if getattr(self, name) < low:
                raise ValueError(f"ReadProbeConfig.{name}: expected >= {low}, got {getattr(self, name)}")
        if not 0 <= self.share_percent <= FULL_SHARE:
            raise ValueError(f"ReadProbeConfig.share_percent: expected 0..{FULL_SHARE}, got {self.share_percent}")


@dataclass
class _LedgerProbes:
    """What one ledger's probes found so far; written once every chosen entry has a result."""

    ledger_id: int
    share_percent: int
    probed: int = 0
    outstanding: int = 0
    sent_all: bool = False
    present: list[int] = field(default_factory=list)
    absent: dict[str, list[int]] = field(default_factory=lambda: {s: [] for s in ABSENT_STATUSES})
    failed: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))

    def record(self, entry_id: int, status: str) -> None:
        self.outstanding -= 1
        if status == "EOK":
            self.present.append(entry_id)
        elif status in ABSENT_STATUSES:
            self.absent[status].append(entry_id)
        else:
            self.failed[status].append(entry_id)

    def to_json(self) -> bytes:
        return probe_file(self.ledger_id, self.share_percent, self.probed, self.present, self.absent, self.failed)


def probe_file(ledger_id: int, share_percent: int, probed: int, present: Iterable[int],
               absent: Mapping[str, Iterable[int]], failed: Mapping[str, Iterable[int]]) -> bytes:
    """The bytes of `read-probes/<bookie>/<ledgerId>.json` (the lab writes the same for its silent bookies)."""
    return json.dumps({
        "ledger_id": ledger_id, "share_percent": share_percent, "probed": probed,
        "present": _ranges(sorted(present)),
        "absent": {s: sorted(ids) for s, ids in absent.items()},
        "failed": {kind: sorted(ids) for kind, ids in sorted(failed.items())},
    }, sort_keys=True).encode()


def bookie_file(bookie: str, share_percent: int, reason: str) -> bytes:
    """The bytes of `read-probes/<bookie>/bookie.json`: why the bookie was probed, and at which share."""
    return json.dumps({"bookie": bookie, "evidence": EVIDENCE, "share_percent": share_percent, "reason": reason},
                      sort_keys=True).encode()


def _ranges(ids: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for e in ids:
        if out and e == out[-1][1] + 1:
            out[-1][1] = e
        else:
            out.append([e, e])
    return out


class _BookieProbe:
    def __init__(self, bookie: str, ledger_ids: Iterable[int], metadata: Mapping[int, LedgerMetadata],
                 sink: RawSink, report: CollectionReport, cfg: ReadProbeConfig, addresses: Mapping[str, str] | None,
                 cluster: str, reason: str):
        self.bookie, self.metadata, self.sink, self.report, self.cfg = bookie, metadata, sink, report, cfg
        self.addresses, self.cluster, self.reason = addresses, cluster, reason
        self.ledger_ids = sorted(set(ledger_ids))
        self.plan = self._plan()
        self.peeked: list[tuple[_LedgerProbes, int]] = []  # taken by run() to see whether reads remain
        self.txn_ids = itertools.count(1)
        self.errors: dict[str, list[str]] = defaultdict(list)  # kind -> messages
        self.failed_ledgers: dict[str, set[int]] = defaultdict(set)
        self.ledgers_written = 0

    def _plan(self) -> Iterator[tuple[_LedgerProbes, int]]:
        """(ledger state, entry id) in ledger order; a ledger is marked sent_all before the next one starts."""
        for ledger_id in self.ledger_ids:
            md = self.metadata.get(ledger_id)
            if md is None:
                self.report.count("read_probe_ledgers_without_metadata")
                continue
            if not md.is_closed:
                self.report.count("read_probe_ledgers_not_closed")
                continue
            state = _LedgerProbes(ledger_id, self.cfg.share_percent)
            for entry_id in iter_ledger_probes(md, self.bookie, self.cfg.share_percent, self.cluster):
                state.probed += 1
                state.outstanding += 1
                yield state, entry_id
            state.sent_all = True
            self._maybe_write(state)

    def _next(self) -> tuple[_LedgerProbes, int] | None:
        if self.peeked:
            return self.peeked.pop()
        return next(self.plan, None)

    def _maybe_write(self, state: _LedgerProbes) -> None:
        if state.sent_all and state.outstanding == 0:
            self.sink.put(f"{PROBES_PREFIX}{self.bookie}/{state.ledger_id}.json", state.to_json())
            self.ledgers_written += 1
            for kind in state.failed:
                self.failed_ledgers[kind].add(state.ledger_id)

    def _record(self, state: _LedgerProbes, entry_id: int, status: str) -> None:
        state.record(entry_id, status)
        self.report.count(f"read_probe_status_{status}")
        self._maybe_write(state)

    async def run(self) -> None:
        self.sink.put(f"{PROBES_PREFIX}{self.bookie}/bookie.json",
                      bookie_file(self.bookie, self.cfg.share_percent, self.reason))
        try:
            host, port = bookie_address(self.bookie, self.addresses)
        except BookieAddressError as e:
            self._fail_rest(ConnectionFailure(UNREACHABLE, str(e)))
        else:
            connections = 0
            while (probe := self._next()) is not None:
                self.peeked.append(probe)
                connections += 1
                try:
                    await self._connection(host, port)
                except ConnectionFailure as f:
                    self.errors[f.kind].append(f.message)
                    if connections > self.cfg.reconnects:
                        self._fail_rest(f)
        self._report()

    def _fail_rest(self, f: ConnectionFailure) -> None:
        self.errors[f.kind].append(f.message)
        while (probe := self._next()) is not None:
            self._record(*probe, f.kind)

    async def _connection(self, host: str, port: int) -> None:
        in_flight: dict[int, tuple[_LedgerProbes, int, float]] = {}  # txnId -> (ledger, entry, deadline)
        async with bookie_connection(host, port, self.cfg.connect_timeout_s) as (reader, writer):
            try:
                await self._exchange(reader, writer, f"{host}:{port}", in_flight)
            except ConnectionFailure as f:
                for state, entry_id, _ in in_flight.values():
                    self._record(state, entry_id, f.kind)
                raise

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, address: str,
                        in_flight: dict[int, tuple[_LedgerProbes, int, float]]) -> None:
        loop = asyncio.get_running_loop()
        frames = protocol.FrameSplitter(f"bookie://{self.bookie} ({address})")
        while True:
            out = []
            while len(in_flight) < self.cfg.window and (probe := self._next()) is not None:
                txn_id = next(self.txn_ids)
                out.append(protocol.encode_read_request(probe[0].ledger_id, probe[1], txn_id))
                in_flight[txn_id] = (*probe, loop.time() + self.cfg.request_timeout_s)
            if not in_flight:
                return
            if out:
                writer.write(b"".join(out))
                self.report.count("read_probes_sent", len(out))
            oldest_deadline = next(iter(in_flight.values()))[2]
            try:
                async with asyncio.timeout(max(0.0, oldest_deadline - loop.time())):
                    await writer.drain()
                    chunk = await reader.read(READ_CHUNK)
            except TimeoutError:
                raise ConnectionFailure(TIMEOUT,
                                        f"{address} did not answer a read within {self.cfg.request_timeout_s}s") \
                    from None
            except ConnectionError as e:
                raise ConnectionFailure(CLOSED, f"{address} closed the connection: {type(e).__name__}") from None
            if not chunk:
                raise ConnectionFailure(CLOSED, f"{address} closed the connection")
            try:
                bodies = frames.feed(chunk)
            except PayloadError as e:  # a bad frame length: the stream cannot be re-synchronised
                raise ConnectionFailure(PROTOCOL_ERROR, str(e)) from None
            for body in bodies:
                self._answer(body, in_flight, frames.source)

    def _answer(self, body: bytes, in_flight: dict, source: str) -> None:
        try:
            answer = protocol.decode_read_response(body, source)
        except PayloadError as e:
            raise ConnectionFailure(PROTOCOL_ERROR, str(e)) from None
        if answer.txn_id not in in_flight:
            raise ConnectionFailure(PROTOCOL_ERROR, f"{source}: answer with unknown txnId {answer.txn_id}")
        state, entry_id, _ = in_flight.pop(answer.txn_id)
        if answer.ledger_id is not None and (answer.ledger_id, answer.entry_id) != (state.ledger_id, entry_id):
            self.errors[PROTOCOL_ERROR].append(f"{source}: asked for entry {state.ledger_id}/{entry_id}, answer "
                                               f"names {answer.ledger_id}/{answer.entry_id}")
            self._record(state, entry_id, PROTOCOL_ERROR)
            return
        self._record(state, entry_id, answer.status)

    def _report(self) -> None:
        source = f"bookie://{self.bookie}"
        self.report.count("read_probe_bookies")
        self.report.count("read_probe_ledgers", self.ledgers_written)
        if self.cfg.share_percent < FULL_SHARE and self.ledgers_written:
            # Sampled evidence: the entries between the probed ones are not seen, so coverage is not complete.
            self.report.gap(source, f"entries of ledger ({self.ledgers_written} ledgers, sampled)",
                            f"{self.reason}; read probes at {self.cfg.share_percent} % (the Auditor's fragment "
                            f"verification), raw read-probes/{self.bookie}/: configure read_probe_percent: 100 or "
                            f"location_index for every entry")
        for kind, ledgers in sorted(self.failed_ledgers.items()):
            ids = sorted(ledgers)
            sample = ", ".join(map(str, ids[:5])) + (", ..." if len(ids) > 5 else "")
            why = self.errors[kind][0] if self.errors.get(kind) else f"bookie answered {kind}"
            self.report.gap(source, f"read probes ({len(ids)} ledgers: {sample})", f"{kind}: {why}")


async def probe_bookie_async(bookie: str, ledger_ids: Iterable[int], metadata: Mapping[int, LedgerMetadata],
                             sink: RawSink, *, config: ReadProbeConfig = ReadProbeConfig(),
                             addresses: Mapping[str, str] | None = None, cluster: str = "",
                             reason: str = "") -> CollectionReport:
    """Probe `bookie` for the ledgers `ledger_ids` ({ledger id: metadata} in `metadata`); writes the raw
    read-probes/ keys and returns a report (counts, and gaps for sampled coverage and failed reads)."""
    report = CollectionReport(SYSTEM, cluster)
    await _BookieProbe(bookie, ledger_ids, metadata, sink, report, config, addresses, cluster, reason).run()
    return report


def probe_bookie(bookie: str, ledger_ids: Iterable[int], metadata: Mapping[int, LedgerMetadata], sink: RawSink,
                 **kw) -> CollectionReport:
    """probe_bookie_async from synchronous code."""
    return asyncio.run(probe_bookie_async(bookie, ledger_ids, metadata, sink, **kw))
