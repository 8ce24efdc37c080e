"""Read-only copy of BookKeeper ledger metadata and bookie registrations from ZooKeeper
(docs/formats/bookkeeper.md §1.3).

Walks the ledgers root in all three layouts -- flat `L%010d`, legacy hierarchical 2-4-4 and long hierarchical
3-4-4-4-4 (the hybrid "hierarchical" manager mixes the last two) -- and skips everything else (available,
cookies, LAYOUT, INSTANCEID, idgen, underreplication, ...). Reads are pipelined -- up to `window` znodes in
flight, because one round trip per znode would cap a 1 ms network at 1,000 ledgers/s -- and batched `batch`
per multiRead request (audit.collectors.zkread), because kazoo's per-request overhead alone caps single reads
near 2,000/s; servers older than ZooKeeper 3.6 get one getData per znode.

Beside each stored value, `<path>.stat.json` keeps the znode's ZooKeeper Stat (czxid ... pzxid, ctime/mtime in ms):
BookKeeper stores a ledger's creation time in the metadata only when the client set
storeSystemTimeAsLedgerCreationTime, and otherwise reads it from the znode's ctime (AbstractZkLedgerManager hands
stat.getCtime() to LedgerMetadataSerDe), so the Stat is part of the evidence. It holds no data, hence no secret.

Every value is stored only after `redact_password` succeeded: an undecodable znode may hold a password in a
shape the redactor does not know, so it is not stored and becomes a CoverageGap instead.
"""
from __future__ import annotations

import json
import queue
import re
from collections import deque
from typing import Any, Callable, NamedTuple

from audit.collectors.base import CollectionReport, RawSink
from audit.collectors.zkread import MultiReadFormatError, multi_read_async, quiet_kazoo_logging
from audit.systems.bookkeeper.formats.raw_evidence import STAT_SUFFIX
from audit.errors import PayloadError

SYSTEM = "bookkeeper"
DEFAULT_LEDGERS_ROOT = "/ledgers"
DEFAULT_WINDOW = 1000  # znodes in flight
DEFAULT_BATCH = 100    # znodes per multiRead; 1 = one getData per znode
LEDGER_METADATA_PREFIX = "ledger-metadata/"
BOOKIES_KEY = "bookies/available.json"
WHAT_METADATA = "ledger metadata"
WHAT_BOOKIES = "bookie registrations"
READONLY = "readonly"
_TRANSIENT_ATTEMPTS = 3  # see _is_transient: reads are idempotent, so the request is simply re-sent

_FLAT_LEAF = re.compile(r"L\d{10}")
_LEAF4 = re.compile(r"L\d{4}")
_D2, _D3, _D4 = re.compile(r"\d{2}"), re.compile(r"\d{3}"), re.compile(r"\d{4}")

# A walk position: ("root", 0), ("legacy", depth) or ("long", depth); depth = path parts below the root.
Kind = tuple[str, int]
LEAF: Kind = ("leaf", 0)


class LedgerZnode(NamedTuple):
    ledger_id: int
    path: str  # relative to the ledgers root, e.g. "00/0000/L0001"


def child_kind(parent: Kind, name: str) -> Kind | None:
    """What a child znode is in the ledger layouts, or None when it is not part of a ledger path."""
    layout, depth = parent
    if layout == "root":
        if _FLAT_LEAF.fullmatch(name):
            return LEAF
        if _D2.fullmatch(name):
            return ("legacy", 1)
        if _D3.fullmatch(name):
            return ("long", 1)
        return None
    last_dir_depth = 2 if layout == "legacy" else 4
    if depth < last_dir_depth:
        return (layout, depth + 1) if _D4.fullmatch(name) else None
    return LEAF if _LEAF4.fullmatch(name) else None


def normalize_root(ledgers_root: str) -> str:
    if not ledgers_root.startswith("/"):
        raise ValueError(f"ledgers_root: expected an absolute znode path like /ledgers, got {ledgers_root!r}")
    return ledgers_root.rstrip("/")  # "" for "/": children are then "/" + name


class _Walk:
    """One pipelined walk. A task is ("children"|"data", relative path, kind, attempt); a request carries
    one listing, one read, or (multiRead) a batch of reads."""

    def __init__(self, client: Any, root: str, sink: RawSink, report: CollectionReport, window: int,
                 batch: int, timeout_s: float, source_prefix: str,
                 on_ledger: Callable[[LedgerZnode, bytes], None] | None,
                 wants: Callable[[int], bool] | None = None):
        from audit.systems.bookkeeper.formats import ledger_metadata  # lazily: owned by the formats subsystem

        self._lm = ledger_metadata
        self.client, self.root, self.sink, self.report = client, root, sink, report
        self.window, self.timeout_s, self.source_prefix, self.on_ledger = window, timeout_s, source_prefix, on_ledger
        self.wants = wants              # an incident check's ledgers: the others are listed, never read
        self.batch = batch              # > 1: multiRead; falls back to 1 if the server does not know it
        self.multi_read_proven = False  # a multiRead succeeded once: later failures are not "unsupported"
        self.data_tasks: deque = deque()
        self.dir_tasks: deque = deque()
        self.replies: queue.Queue = queue.Queue()
        self.outstanding: dict[int, tuple[str, list[tuple]]] = {}  # ticket -> (request kind, tasks)
        self.in_flight = 0  # znodes in outstanding requests
        self.ledgers: list[LedgerZnode] = []

    def abs_path(self, rel: str) -> str:
        return f"{self.root}/{rel}" if rel else (self.root or "/")

    def source(self, rel: str) -> str:
        return self.source_prefix + self.abs_path(rel)

    def run(self) -> list[LedgerZnode]:
        self.dir_tasks.append(("children", "", ("root", 0), 1))
        ticket = 0
        while self.data_tasks or self.dir_tasks or self.outstanding:
            # Leaves first: keeps the backlog of known-but-unread znodes small.
            while (self.data_tasks or self.dir_tasks) and self.in_flight < self.window:
                ticket += 1
                self._send(ticket)
            try:
                ticket_done, result = self.replies.get(timeout=self.timeout_s)
            except queue.Empty:
                self._stalled()
                break
            kind, tasks = self.outstanding.pop(ticket_done)
            self.in_flight -= len(tasks)
            if kind == "multi":
                self._handle_multi(tasks, result)
            else:
                self._handle_one(tasks[0], result)
        self.ledgers.sort()
        return self.ledgers

    def _send(self, ticket: int) -> None:
        if self.data_tasks and self.batch > 1:
            n = min(self.batch, len(self.data_tasks), self.window - self.in_flight)
            tasks = [self.data_tasks.popleft() for _ in range(n)]
            kind, result = "multi", multi_read_async(self.client, [self.abs_path(t[1]) for t in tasks])
        elif self.data_tasks:
            tasks = [self.data_tasks.popleft()]
            kind, result = "one", self.client.get_async(self.abs_path(tasks[0][1]))
        else:
            tasks = [self.dir_tasks.popleft()]
            kind, result = "one", self.client.get_children_async(self.abs_path(tasks[0][1]))
        self.outstanding[ticket] = (kind, tasks)
        self.in_flight += len(tasks)
        result.rawlink(lambda r, t=ticket: self.replies.put((t, r)))

    def _handle_multi(self, tasks: list[tuple], result: Any) -> None:
        if result.successful() and len(result.value) == len(tasks):
            self.multi_read_proven = True
            for task, value in zip(tasks, result.value):
                if isinstance(value, Exception):
                    self._failed(task, value)
                else:
                    data, stat = value
                    self._store(task[1], data or b"", stat)
            return
        err = result.exception if not result.successful() else MultiReadFormatError(
            "results", f"{len(tasks)} results", len(result.value))
        if not self.multi_read_proven and not _is_transient(err):
            # ZooKeeper < 3.6 answers opcode 22 with an error: read one znode per request instead.
            if self.batch > 1:
                self.batch = 1
                self.report.count("multiread_unsupported")
            self.data_tasks.extendleft(reversed(tasks))
            return
        for task in tasks:
            self._failed(task, err)

    def _handle_one(self, task: tuple, result: Any) -> None:
        if not result.successful():
            self._failed(task, result.exception)
        elif task[0] == "children":
            self._expand(task[1], task[2], result.value)
        else:
            data, stat = result.value
            self._store(task[1], data or b"", stat)

    def _failed(self, task: tuple, err: BaseException) -> None:
        from kazoo.exceptions import NoNodeError

        op, rel, kind, attempt = task
        if isinstance(err, NoNodeError):
            self._vanished(op, rel)
        elif _is_transient(err) and attempt < _TRANSIENT_ATTEMPTS:
            (self.dir_tasks if op == "children" else self.data_tasks).append((op, rel, kind, attempt + 1))
        else:
            self.report.count("znode_read_errors")
            self.report.gap(self.source(rel), WHAT_METADATA, f"{type(err).__name__}: {err}")

    def _vanished(self, op: str, rel: str) -> None:
        if rel == "":
            self.report.gap(self.source(rel), WHAT_METADATA, "ledgers root does not exist (NoNode)")
        elif op == "data":
            self.report.count("ledger_znodes_deleted")  # ledger deleted between listing and reading: normal
        else:
            self.report.count("ledger_dirs_deleted")

    def _expand(self, rel: str, kind: Kind, children: list[str]) -> None:
        for name in sorted(children):
            child = f"{rel}/{name}" if rel else name
            ck = child_kind(kind, name)
            if ck is None:
                self.report.count("non_ledger_znodes_skipped")
            elif ck == LEAF:
                self.report.count("ledger_znodes_listed")
                ledger_id = self._lm.ledger_id_from_znode_path(child)
                if self.wants is not None and ledger_id is not None and not self.wants(ledger_id):
                    self.report.count("ledger_znodes_not_in_scope")
                    continue
                self.data_tasks.append(("data", child, ck, 1))
            else:
                self.dir_tasks.append(("children", child, ck, 1))

    def _store(self, rel: str, data: bytes, stat: Any) -> None:
        source = self.source(rel)
        ledger_id = self._lm.ledger_id_from_znode_path(rel)
        if ledger_id is None:  # child_kind and the formats module disagree: a bug, but do not lose the ledger
            self.report.gap(source, WHAT_METADATA, "path matches a ledger layout but yields no ledger id")
            return
        try:
            redacted = self._lm.redact_password(data, source)
        except (PayloadError, ValueError) as e:
            self.report.count("ledger_znodes_undecodable")
            self.report.gap(source, WHAT_METADATA, f"not stored, password redaction impossible: {e}")
            return
        self.sink.put(LEDGER_METADATA_PREFIX + rel, redacted)
        self.sink.put(LEDGER_METADATA_PREFIX + rel + STAT_SUFFIX, stat_json(stat))
        self.report.count("ledger_znodes_stored")
        ledger = LedgerZnode(ledger_id, rel)
        self.ledgers.append(ledger)
        if self.on_ledger is not None:
            self.on_ledger(ledger, redacted)

    def _stalled(self) -> None:
        why = f"no reply from ZooKeeper within {self.timeout_s}s; walk abandoned"
        in_requests = [task for _, tasks in self.outstanding.values() for task in tasks]
        for op, rel, _, _ in [*in_requests, *self.data_tasks, *self.dir_tasks]:
            self.report.count("znode_read_errors")
            self.report.gap(self.source(rel), WHAT_METADATA, f"{why} ({'listing' if op == 'children' else 'read'})")


def stat_json(stat: Any) -> bytes:
    """A kazoo ZnodeStat as the JSON object of the raw key `<path>.stat.json`: ZooKeeper's field names, ints."""
    return json.dumps({name: int(value) for name, value in stat._asdict().items()}).encode()


def _is_transient(err: BaseException) -> bool:
    """Errors after which kazoo reconnects (a new session after expiry) and the same read may succeed."""
    from kazoo.exceptions import ConnectionLoss, OperationTimeoutError, SessionExpiredError

    return isinstance(err, (ConnectionLoss, OperationTimeoutError, SessionExpiredError))


def read_bookie_inventory(client: Any, root: str, sink: RawSink, report: CollectionReport,
                          source_prefix: str = "") -> dict[str, list[str]] | None:
    """Children of <root>/available (minus "readonly"), <root>/available/readonly and <root>/cookies ->
    bookies/available.json. Not written when the registrations cannot be listed (a gap says why)."""
    from kazoo.exceptions import KazooException, NoNodeError

    lists: dict[str, list[str]] = {}
    available_listed = True
    for key, path, required in (("available", f"{root}/available", True),
                                ("readonly", f"{root}/available/{READONLY}", False),
                                ("cookies", f"{root}/cookies", True)):
        children: list[str] = []
        try:
            children = client.get_children(path)
        except NoNodeError:
            if required:
                report.gap(source_prefix + path, WHAT_BOOKIES, "znode does not exist (NoNode)")
                available_listed = available_listed and key != "available"
        except KazooException as e:
            report.gap(source_prefix + path, WHAT_BOOKIES, f"{type(e).__name__}: {e}")
            available_listed = available_listed and key != "available"
        lists[key] = sorted(c for c in children if not (key == "available" and c == READONLY))
        report.count(f"bookies_{key}", len(lists[key]))
    if not available_listed:  # an empty list would read as "no bookie is up"
        return None
    sink.put(BOOKIES_KEY, json.dumps(lists, indent=2, sort_keys=True).encode())
    return lists


def connect(zk_hosts: str, timeout_s: float, auth_data: list[tuple[str, str]] | None = None, *,
            read_only: bool = True) -> Any:
    """A started kazoo client (raises kazoo's timeout error when unreachable); `read_only`: it may also connect to
    a server in read-only mode (a collector); False for a client that writes (an approved repair).
    `auth_data`: e.g. [("digest", "user:password")]."""
    from kazoo.client import KazooClient

    quiet_kazoo_logging()
    # Session timeout at least 10 s: a short one expires the session during a long walk's GC pause.
    client = KazooClient(hosts=zk_hosts, timeout=max(timeout_s, 10.0), read_only=read_only, auth_data=auth_data)
    try:
        client.start(timeout=timeout_s)
    except BaseException:
        client.close()
        raise
    return client


def collect_ledger_metadata(zk_hosts: str, ledgers_root: str, sink: RawSink, timeout_s: float = 30.0, *,
                            cluster: str = "", window: int = DEFAULT_WINDOW, batch: int = DEFAULT_BATCH,
                            client: Any = None,
                            auth_data: list[tuple[str, str]] | None = None,
                            on_ledger: Callable[[LedgerZnode, bytes], None] | None = None,
                            wants: Callable[[int], bool] | None = None,
                            ) -> tuple[CollectionReport, list[LedgerZnode]]:
    """Store every ledger znode (redacted) under `ledger-metadata/<path>`, its Stat under
    `ledger-metadata/<path>.stat.json`, and the bookie lists under
    `bookies/available.json`. -> (report, ledger znodes sorted by id). `client`: an already started kazoo
    client to use (left open); otherwise one is opened on `zk_hosts` (with `auth_data`) and closed. `on_ledger(znode,
    redacted_bytes)` is called for each stored ledger, e.g. to decode ensembles without re-reading. `wants(ledger
    id)`: only those ledgers' znodes are read (an incident check); the others are counted as not in scope."""
    if window < 1 or batch < 1:
        raise ValueError(f"window, batch: expected >= 1, got {window}, {batch}")
    root = normalize_root(ledgers_root)
    quiet_kazoo_logging()  # also for a client passed in: its replies carry the znode bytes
    report = CollectionReport(SYSTEM, cluster)
    source_prefix = f"zookeeper://{zk_hosts}"
    own_client = client is None
    if own_client:
        try:
            client = connect(zk_hosts, timeout_s, auth_data)
        except Exception as e:  # kazoo raises its handler's timeout type, or socket errors for bad hosts
            report.gap(source_prefix + (root or "/"), WHAT_METADATA, f"cannot connect: {type(e).__name__}: {e}")
            return report, []
    try:
        read_bookie_inventory(client, root, sink, report, source_prefix)
        ledgers = _Walk(client, root, sink, report, window, batch, timeout_s, source_prefix, on_ledger,
                        wants).run()
        return report, ledgers
    finally:
        if own_client:
            client.stop()
            client.close()
