"""Load a lab BookKeeper cluster into a real ZooKeeper, laid out like a hierarchical ledger manager
(docs/formats/bookkeeper.md §1.3): <root>/LAYOUT, INSTANCEID, idgen, available[/readonly]/<bookie>, cookies/<bookie>,
and one znode per ledger at its 2-4-4 (or 3-4-4-4-4) path, carrying the ledger password as BookKeeper
stores it -- so a collector's redaction has something to redact.

Creates are pipelined (`window` requests in flight): one round trip per znode would make loading
thousands of ledgers slow on anything but loopback."""
from __future__ import annotations

import random
import uuid
from collections import deque
from typing import Any, Iterable

from lab.bookkeeper.cluster import BookKeeperLab
from lab.bookkeeper.sim import LabError

LAYOUT = b"2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1"  # LedgerLayout.serialize
COOKIE_VERSION = 4
DEFAULT_WINDOW = 500


def instance_id(lab: BookKeeperLab) -> str:
    return str(uuid.UUID(int=random.Random(f"bookkeeper-lab:{lab.config.seed}:instance").getrandbits(128),
                         version=4))


def cookie(lab: BookKeeperLab, bookie: str) -> bytes:
    """Cookie.toString() for layout version 4: version line + TextFormat of CookieFormat."""
    return (f"{COOKIE_VERSION}\n"
            f'bookieHost: "{bookie}"\n'
            f'journalDir: "/data/bookkeeper/journal"\n'
            f'ledgerDirs: "1\\t/data/bookkeeper/ledgers"\n'
            f'instanceId: "{instance_id(lab)}"\n').encode()


def znodes(lab: BookKeeperLab, ledgers_root: str = "/ledgers") -> list[tuple[str, bytes]]:
    """Every znode to create, parents before children."""
    root = "/" + ledgers_root.strip("/")
    lists = lab.bookie_lists()
    nodes: list[tuple[str, bytes]] = [
        (f"{root}/LAYOUT", LAYOUT), (f"{root}/INSTANCEID", instance_id(lab).encode()), (f"{root}/idgen", b""),
        (f"{root}/available", b""), (f"{root}/available/readonly", b""), (f"{root}/cookies", b"")]
    nodes += [(f"{root}/available/{b}", b"") for b in lists["available"]]
    nodes += [(f"{root}/available/readonly/{b}", b"") for b in lists["readonly"]]
    nodes += [(f"{root}/cookies/{b}", cookie(lab, b)) for b in lists["cookies"]]
    dirs: dict[str, None] = {}
    for lid in lab.ledger_ids:
        parts = lab.znode_path(lid).split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            dirs.setdefault(f"{root}/{'/'.join(parts[:depth])}")
    nodes += [(d, b"") for d in sorted(dirs, key=lambda d: (d.count("/"), d))]
    nodes += [(f"{root}/{lab.znode_path(lid)}", lab.znode(lid, with_password=True)) for lid in lab.ledger_ids]
    return nodes


def load_into_zookeeper(lab: BookKeeperLab, zk_hosts: str | None = None, ledgers_root: str = "/ledgers", *,
                        client: Any = None, timeout_s: float = 10.0, window: int = DEFAULT_WINDOW) -> int:
    """Create the cluster's znodes under `ledgers_root` (which must not hold them yet). Uses `client` (a
    started kazoo client, left open) or connects to `zk_hosts`. -> number of znodes created."""
    if client is None and not zk_hosts:
        raise ValueError("load_into_zookeeper: give zk_hosts or a started kazoo client")
    if window < 1:
        raise ValueError(f"window: expected >= 1, got {window}")
    own = client is None
    if own:
        from kazoo.client import KazooClient

        client = KazooClient(hosts=zk_hosts, timeout=max(timeout_s, 10.0))
        client.start(timeout=timeout_s)
    try:
        root = "/" + ledgers_root.strip("/")
        client.ensure_path(root)
        nodes = znodes(lab, root)
        _create_pipelined(client, _by_depth(nodes), timeout_s, window, zk_hosts or "zookeeper")
        return len(nodes)
    finally:
        if own:
            client.stop()
            client.close()


def _by_depth(nodes: list[tuple[str, bytes]]) -> list[list[tuple[str, bytes]]]:
    """Batches in which no znode's parent is created in the same batch (ZooKeeper needs the parent first)."""
    batches: dict[int, list[tuple[str, bytes]]] = {}
    for path, data in nodes:
        batches.setdefault(path.count("/"), []).append((path, data))
    return [batches[d] for d in sorted(batches)]


def _create_pipelined(client: Any, batches: Iterable[list[tuple[str, bytes]]], timeout_s: float, window: int,
                      where: str) -> None:
    from kazoo.exceptions import NodeExistsError

    for batch in batches:
        in_flight: deque = deque()

        def settle() -> None:
            path, result = in_flight.popleft()
            try:
                result.get(timeout=timeout_s)
            except NodeExistsError:
                raise LabError(f"{where}: znode {path} already exists; load the lab into an empty ledgers root") \
                    from None

        for path, data in batch:
            in_flight.append((path, client.create_async(path, data)))
            if len(in_flight) >= window:
                settle()
        while in_flight:
            settle()


def delete_znodes(zk_hosts: str, ledgers_root: str, paths: list[str], timeout_s: float = 10.0) -> None:
    """Delete ledger znodes (paths below the ledgers root), as BookKeeper's client does for a deleted ledger."""
    if not paths:
        return
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zk_hosts, timeout=max(timeout_s, 10.0))
    client.start(timeout=timeout_s)
    try:
        root = "/" + ledgers_root.strip("/")
        for result in [client.delete_async(f"{root}/{p}") for p in paths]:
            result.get(timeout=timeout_s)
    finally:
        client.stop()
        client.close()


def znode_times(lab: BookKeeperLab, zk_hosts: str, ledgers_root: str = "/ledgers",
                timeout_s: float = 10.0) -> dict[int, tuple[int, int]]:
    """{ledger id: (ctime, mtime)} of the lab's ledger znodes as the ZooKeeper at `zk_hosts` stamped them."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zk_hosts, timeout=max(timeout_s, 10.0))
    client.start(timeout=timeout_s)
    try:
        root = "/" + ledgers_root.strip("/")
        pending = {lid: client.exists_async(f"{root}/{lab.znode_path(lid)}") for lid in lab.ledger_ids}
        stats = {lid: result.get(timeout=timeout_s) for lid, result in pending.items()}
        return {lid: (stat.ctime, stat.mtime) for lid, stat in stats.items() if stat is not None}   # deleted: none
    finally:
        client.stop()
        client.close()
