"""pytest fixtures for a real ZooKeeper (loaded from tests/conftest.py via `pytest_plugins`).

- `zk_server`: one server per session, yields "127.0.0.1:<port>".
- `zk_client`: a started KazooClient chrooted at a fresh /t-<uuid> per test (so tests never see each other's
  znodes); `zk_client.hosts_with_chroot` is the connect string a collector under test should use.
"""
from __future__ import annotations

import uuid

import pytest

from tests.zk import ZooKeeperServer


@pytest.fixture(scope="session")
def zk_server():
    with ZooKeeperServer() as server:
        yield server.hosts


@pytest.fixture
def zk_client(zk_server):
    from kazoo.client import KazooClient

    chroot = f"/t-{uuid.uuid4().hex}"
    admin = KazooClient(hosts=zk_server, timeout=10)
    admin.start(timeout=10)
    try:
        admin.create(chroot)
        client = KazooClient(hosts=zk_server + chroot, timeout=10)
        client.start(timeout=10)
        client.hosts_with_chroot = zk_server + chroot
        try:
            yield client
        finally:
            client.stop()
            client.close()
        admin.delete(chroot, recursive=True)
    finally:
        admin.stop()
        admin.close()
