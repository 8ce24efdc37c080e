"""Real Prometheus daemons from Debian's packages for tests, on free loopback ports: `prometheus-alertmanager` and
`prometheus-pushgateway` (Makefile `system-deps` installs them). A missing binary raises DaemonUnavailable: tests
that need one must fail, not skip. Each runs in a fresh temp dir and its own process group, stopped at the end."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from lab.loopback import unused_loopback_port

ALERTMANAGER_CONFIG = """route:
  receiver: blackhole
  group_by: ['...']
receivers:
  - name: blackhole
"""


class DaemonUnavailable(RuntimeError):
    pass


class Daemon:
    """`with Daemon("prometheus-alertmanager", args) as d: d.url`: started, ready (GET /-/ready is 200), stopped."""

    def __init__(self, binary: str, args: list[str], start_timeout_s: float = 30.0):
        self.binary, self.args, self.start_timeout_s = binary, args, start_timeout_s
        self.port = unused_loopback_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.root = Path(tempfile.mkdtemp(prefix=f"replaudit-{binary}-"))
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "Daemon":
        path = shutil.which(self.binary)
        if path is None:
            shutil.rmtree(self.root, ignore_errors=True)
            raise DaemonUnavailable(f"{self.binary} not found: install Debian's {self.binary} (make system-deps)")
        args = [a.format(root=self.root, port=self.port) for a in self.args]
        with open(self.root / "daemon.log", "wb") as log:
            self.proc = subprocess.Popen([path, *args], stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            self._wait_ready()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise DaemonUnavailable(f"{self.binary} exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=0.5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.05)    # poll interval; the loop ends on readiness or the deadline
        raise DaemonUnavailable(f"{self.binary} not ready on {self.url} in {self.start_timeout_s} s: "
                                f"{self.log_tail()}")

    def log_tail(self) -> str:
        try:
            return (self.root / "daemon.log").read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def get_json(self, path: str):
        with urllib.request.urlopen(f"{self.url}{path}", timeout=5) as r:
            return json.loads(r.read())

    def get_text(self, path: str) -> str:
        with urllib.request.urlopen(f"{self.url}{path}", timeout=5) as r:
            return r.read().decode()

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        shutil.rmtree(self.root, ignore_errors=True)


def alertmanager() -> Daemon:
    d = Daemon("prometheus-alertmanager", ["--config.file={root}/alertmanager.yml", "--storage.path={root}/data",
                                           "--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="])
    (d.root / "alertmanager.yml").write_text(ALERTMANAGER_CONFIG)
    return d


def pushgateway() -> Daemon:
    return Daemon("prometheus-pushgateway", ["--web.listen-address=127.0.0.1:{port}"])


@pytest.fixture
def alertmanager_server():
    with alertmanager() as d:
        yield d


@pytest.fixture
def pushgateway_server():
    with pushgateway() as d:
        yield d
