"""The per-entry dump of one topic: `T/dump/<L>/<first>-<last>.jsonl` chunks and `T/dump.json`
(docs/pulsar/contracts.md, "Raw evidence").

Each window position is fetched through GET .../ledger/{L}/entry/{E} (or taken from a ReaderSource, see
reader.py) with at most `concurrency` requests in flight. A chunk is written once all its positions are
answered, one line per position in position order, so a chunk key present in the sink is complete: a later
attempt skips it ("resumed") and re-counts its lines instead of asking the broker again. Positions that were
not read get a "not read" line and, aggregated per contiguous run with the same error, one CoverageGap each.
dump.json also says when this attempt read entries: `read_started_at_ms` (before the first chunk it fetched)
and `read_finished_at_ms` (after the last one), null when every chunk was resumed. Entries never change once
written, so these instants only tell how long the dump took; the window's instant is its stats-internal read.
"""
from __future__ import annotations

import base64
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

from audit.collectors.base import CollectionReport, RawSink
from audit.systems.pulsar.collect.admin_client import AdminClient, excerpt, is_html
from audit.systems.pulsar.collect.discovery import TopicName
from audit.systems.pulsar.collect.reader import ReaderEntry, ReaderFeed, ReaderSource, server_only_positions
from audit.systems.pulsar.collect.dump_window import Chunk, DumpWindow, LedgerSpan, plan_chunks
from audit.systems.pulsar.domain.positions import Position

log = logging.getLogger(__name__)

WHAT = "topic entries"
DUMP_KEY = "dump.json"


def stored(sink: RawSink, key: str) -> bytes | None:
    """The bytes an earlier attempt stored under `key`, or None (also for sinks that cannot tell)."""
    exists = getattr(sink, "exists", None)
    if exists is None or not exists(key):
        return None
    return sink.path_for(key).read_bytes()


def wall_ms() -> int:
    """Milliseconds since the epoch: the instants of dump.json and of the read.json sidecars (collector.py)."""
    return time.time_ns() // 1_000_000


def _line(doc: dict) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode() + b"\n"


def gap_line(pos: Position, status: int, error: str, content_type: str | None) -> bytes:
    return _line({"ledger_id": pos.ledger_id, "entry_id": pos.entry_id, "status": status, "error": error,
                  "content_type": content_type})


def read_line(pos: Position, content_type: str | None, headers: dict, body: bytes, via: str | None = None) -> bytes:
    doc = {"ledger_id": pos.ledger_id, "entry_id": pos.entry_id, "status": 200, "content_type": content_type,
           "headers": headers, "body_b64": base64.b64encode(body).decode()}
    if via is not None:
        doc["via"] = via  # lines not taken from the admin endpoint say where they come from
    return _line(doc)


def reader_line(entry: ReaderEntry) -> bytes:
    return read_line(entry.position, "application/octet-stream", dict(entry.headers), entry.body, via="reader")


@dataclass
class DumpSettings:
    concurrency: int = 8
    chunk_entries: int = 1000
    max_entries_per_topic: int = 1_000_000
    progress_every: int = 10  # chunks between progress log lines


@dataclass
class DumpOutcome:
    read: int = 0
    failed: int = 0
    not_fetched: int = 0
    chunks_written: int = 0
    chunks_resumed: int = 0
    from_reader: int = 0
    read_started_at_ms: int | None = None    # this attempt's first chunk request (None: nothing read now)
    read_finished_at_ms: int | None = None   # this attempt's last chunk answer
    gaps: list[tuple[str, str]] = field(default_factory=list)  # (source, error) per aggregated run


class _FailureRuns:
    """Contiguous not-read positions with the same (status, error) become one gap."""

    def __init__(self, url_of: Callable[[Position], str], outcome: DumpOutcome):
        self._url_of, self._outcome = url_of, outcome
        self._run: tuple[Position, Position, int, tuple[int, str]] | None = None

    def failed(self, pos: Position, status: int, error: str) -> None:
        kind = (status, error)
        if self._run is not None and self._run[3] == kind:
            self._run = (self._run[0], pos, self._run[2] + 1, kind)
            return
        self.close()
        self._run = (pos, pos, 1, kind)

    def close(self) -> None:
        if self._run is not None:
            first, last, n, (_, error) = self._run
            span = f"{first}" if n == 1 else f"{first}..{last} ({n} positions)"
            self._outcome.gaps.append((self._url_of(first), f"{span} not read: {error}"))
            self._run = None


class TopicDump:
    """Dumps one topic's window into `sink` under `prefix` (the topic folder + "/")."""

    def __init__(self, client: AdminClient, topic: TopicName, sink: RawSink, prefix: str,
                 settings: DumpSettings, reader: ReaderSource | None = None,
                 now_ms: Callable[[], int] | None = None):
        self.client, self.topic, self.sink, self.prefix = client, topic, sink, prefix
        self.settings, self.reader, self.now_ms = settings, reader, now_ms or wall_ms
        self._gone = threading.Event()  # the topic stayed unavailable through every retry: stop asking
        self._gone_error = ""

    def entry_url(self, pos: Position) -> str:
        return self.client.url(self.entry_path(pos))

    def entry_path(self, pos: Position) -> str:
        return self.topic.path(f"/ledger/{pos.ledger_id}/entry/{pos.entry_id}")

    def fetch(self, pos: Position) -> bytes | None:
        """The position's dump line; None when it was not asked because the topic went away."""
        if self._gone.is_set():
            return None
        resp = self.client.get(self.entry_path(pos))
        if resp.error is not None:
            if resp.topic_moving:  # still moving after every retry: the rest of the topic would fail the same way
                self._gone_error = f"topic unavailable after {self.client.retry.attempts} attempts ({resp.error})"
                self._gone.set()
                return None
            return gap_line(pos, resp.status, resp.error, resp.content_type)
        if is_html(resp.content_type):  # a proxy or login page answering 200 is not an entry
            return gap_line(pos, 200, self.client.redact(f"HTML page instead of an entry: {excerpt(resp.body)}"),
                            resp.content_type)
        return read_line(pos, resp.content_type, resp.pulsar_headers(self.client.redact), resp.body)

    def run(self, window: DumpWindow, report: CollectionReport) -> DumpOutcome:
        s = self.settings
        chunks, beyond = plan_chunks(window, s.chunk_entries, s.max_entries_per_topic)
        outcome = DumpOutcome()
        runs = _FailureRuns(self.entry_url, outcome)
        feed = None
        if self.reader is not None and chunks:
            feed = ReaderFeed(self.reader, self.topic.full, window.start, chunks[-1].end)
        abandoned: list[LedgerSpan] = []
        with ThreadPoolExecutor(max_workers=s.concurrency, thread_name_prefix="pulsar-dump") as pool:
            for i, chunk in enumerate(chunks, 1):
                key = self.prefix + chunk.key
                data = stored(self.sink, key)
                if data is not None:
                    outcome.chunks_resumed += 1
                    if feed is not None:
                        feed.take(chunk.start, chunk.end)  # move the reader past it
                else:
                    started = self.now_ms()
                    data = self._fetch_chunk(chunk, pool, feed, outcome)
                    if outcome.read_started_at_ms is None:
                        outcome.read_started_at_ms = started
                    outcome.read_finished_at_ms = self.now_ms()
                    if data is None:  # the topic went away: a chunk is written complete or not at all
                        abandoned = chunks[i - 1:]
                        break
                    self.sink.put(key, data)
                    outcome.chunks_written += 1
                self._tally(data, runs, outcome)
                if i % s.progress_every == 0 or i == len(chunks):
                    log.info("%s: dump %d/%d chunks (%d resumed), %d entries read, %d not read", self.topic.full,
                             i, len(chunks), outcome.chunks_resumed, outcome.read, outcome.failed)
        runs.close()
        if feed is not None and feed.error is not None:
            outcome.gaps.append((self.topic.full, self.client.redact(feed.error) + " (admin endpoint used instead)"))
        self._not_fetched(abandoned, self._gone_error, outcome)
        self._not_fetched(beyond, f"beyond dump.max_entries_per_topic={s.max_entries_per_topic}", outcome)
        for source, error in outcome.gaps:
            report.gap(source, WHAT, error)
        self._write_summary(window, outcome, abandoned)
        return outcome

    def _not_fetched(self, spans: list[LedgerSpan], why: str, outcome: DumpOutcome) -> None:
        if spans:
            n = sum(span.count for span in spans)
            outcome.not_fetched += n
            first, last = spans[0].start, spans[-1].end
            outcome.gaps.append((self.entry_url(first), f"{first}..{last} ({n} positions) not fetched: {why}"))

    def _fetch_chunk(self, chunk: Chunk, pool: ThreadPoolExecutor, feed: ReaderFeed | None,
                     outcome: DumpOutcome) -> bytes | None:
        positions = list(chunk.positions())
        from_reader = feed.take(chunk.start, chunk.end) if feed is not None else {}
        outcome.from_reader += len(from_reader)
        todo = server_only_positions(positions, from_reader)
        answers = dict(zip(todo, pool.map(self.fetch, todo)))
        if any(line is None for line in answers.values()):
            return None
        return b"".join(reader_line(from_reader[p]) if p in from_reader else answers[p] for p in positions)

    def _tally(self, data: bytes, runs: _FailureRuns, outcome: DumpOutcome) -> None:
        for line in data.splitlines():
            doc = json.loads(line)
            pos = Position(doc["ledger_id"], doc["entry_id"])
            if doc["status"] == 200 and not is_html(doc.get("content_type")):
                outcome.read += 1
                runs.close()
            else:
                outcome.failed += 1
                runs.failed(pos, doc["status"], doc.get("error") or "")

    def _write_summary(self, window: DumpWindow, outcome: DumpOutcome, abandoned: list[LedgerSpan]) -> None:
        reasons = []
        if outcome.failed:
            reasons.append(f"{outcome.failed} positions not read")
        if abandoned:
            reasons.append(f"{sum(sp.count for sp in abandoned)} positions not fetched: {self._gone_error}")
        capped = outcome.not_fetched - sum(sp.count for sp in abandoned)
        if capped:
            reasons.append(f"{capped} positions beyond dump.max_entries_per_topic="
                           f"{self.settings.max_entries_per_topic} not fetched")
        doc = {"topic": self.topic.full, "from": str(window.start), "to": str(window.end),
               "from_cursor": window.from_cursor, "basis": window.basis,
               "ledgers": [{"ledger_id": sp.ledger_id, "entries": sp.count} for sp in window.spans],
               "entries_expected": window.count, "entries_read": outcome.read, "entries_failed": outcome.failed,
               "entries_not_fetched": outcome.not_fetched, "complete": outcome.read == window.count,
               "reason": "; ".join(reasons) or "every position in the window was read",
               "read_started_at_ms": outcome.read_started_at_ms, "read_finished_at_ms": outcome.read_finished_at_ms}
        self.sink.put(self.prefix + DUMP_KEY, json.dumps(doc, indent=2).encode() + b"\n")
