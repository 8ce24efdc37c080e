"""The ZooKeeper test-server helper itself: missing installs fail loudly, servers leave nothing behind."""
from __future__ import annotations

import os

import pytest
from kazoo.client import KazooClient

from tests.zk import ZooKeeperServer, ZooKeeperUnavailable, four_letter_word, zookeeper_classpath


def test_missing_install_is_an_error_naming_the_jar(tmp_path):
    with pytest.raises(ZooKeeperUnavailable, match="zookeeper.jar"):
        zookeeper_classpath(tmp_path)


def test_classpath_holds_the_server_and_its_manifest_dependencies():
    cp = zookeeper_classpath()
    names = {os.path.basename(j) for j in cp}
    assert {"zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar"} <= names
    assert all(os.path.isfile(j) for j in cp)


def test_server_serves_then_stops_and_removes_its_directory():
    with ZooKeeperServer() as zk:
        root, pid = zk.root, zk.proc.pid
        assert b"Mode: standalone" in four_letter_word(zk.host, zk.port, b"srvr")
        client = KazooClient(hosts=zk.hosts)
        client.start(timeout=10)
        try:
            client.create("/probe", b"x")
            assert client.get("/probe")[0] == b"x"
        finally:
            client.stop()
            client.close()
    assert not root.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
