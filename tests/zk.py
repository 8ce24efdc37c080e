"""A real ZooKeeper (the Debian `zookeeper` package) for tests, on a free loopback port.

The classpath is zookeeper.jar plus the jars its manifest `Class-Path` names (that is how Debian wires the
package's dependencies), plus the log4j 1.2 binding so the server log explains a failed start. A missing
install raises ZooKeeperUnavailable: tests that need ZooKeeper must fail, not skip.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import zipfile
from pathlib import Path

from lab.loopback import unused_loopback_port

JAVA_DIR = Path(os.environ.get("REPLAUDIT_ZK_JAVA_DIR", "/usr/share/java"))
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
# The server cannot start without these; other manifest entries (jline for the CLI ...) are optional,
# as they are for the JVM, which skips missing Class-Path entries.
REQUIRED_JARS = ("zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar")
# slf4j binding + log4j 1.2: optional, only for a readable server log.
LOGGING_JARS = ("slf4j-log4j12.jar", "log4j-1.2.jar")
INSTALL_HINT = "install it with `apt-get install -y zookeeper` (Debian package; java comes with it)"


class ZooKeeperUnavailable(RuntimeError):
    """ZooKeeper cannot be started here (not installed, java missing, or it did not become ready)."""


def _manifest_class_path(jar: Path) -> list[str]:
    with zipfile.ZipFile(jar) as zf:
        text = zf.read("META-INF/MANIFEST.MF").decode("utf-8")
    # Manifest lines are wrapped at 72 bytes; a continuation line starts with one space.
    unwrapped = text.replace("\r\n", "\n").replace("\n ", "")
    for line in unwrapped.splitlines():
        if line.startswith("Class-Path:"):
            return line.split(":", 1)[1].split()
    return []


def zookeeper_classpath(java_dir: Path = JAVA_DIR) -> list[str]:
    main_jar = java_dir / "zookeeper.jar"
    if not main_jar.is_file():
        raise ZooKeeperUnavailable(f"{main_jar} not found: ZooKeeper is not installed; {INSTALL_HINT}")
    missing = [j for j in REQUIRED_JARS if not (java_dir / j).is_file()]
    if missing:
        raise ZooKeeperUnavailable(f"ZooKeeper jars missing from {java_dir}: {', '.join(missing)}; {INSTALL_HINT}")
    jars = [main_jar]
    for entry in _manifest_class_path(main_jar):
        dep = Path(entry) if entry.startswith("/") else java_dir / entry
        if dep.is_file():
            jars.append(dep)
    jars += [java_dir / j for j in (*REQUIRED_JARS, *LOGGING_JARS) if (java_dir / j).is_file()]
    return list(dict.fromkeys(str(j) for j in jars))


def four_letter_word(host: str, port: int, word: bytes, timeout_s: float = 1.0) -> bytes:
    """Send a 4lw command (ruok, srvr, mntr ...) and return the whole reply."""
    with socket.create_connection((host, port), timeout=timeout_s) as s:
        s.sendall(word)
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks)


class ZooKeeperServer:
    """Context manager: `with ZooKeeperServer() as zk: KazooClient(zk.hosts)`.

    Standalone server, dataDir in a fresh temp dir, Jetty admin server off, all 4lw commands allowed."""

    def __init__(self, start_timeout_s: float = 30.0, heap: str = "256m", java: str | None = None):
        self.start_timeout_s = start_timeout_s
        self.heap = heap
        self.java = java or shutil.which("java")
        self.host = "127.0.0.1"
        self.port: int | None = None
        self.root: Path | None = None
        self.proc: subprocess.Popen | None = None

    @property
    def hosts(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        assert self.root is not None
        return self.root / "zookeeper.out"

    def start(self) -> "ZooKeeperServer":
        if self.java is None:
            raise ZooKeeperUnavailable(f"no `java` on PATH; {INSTALL_HINT}")
        classpath = zookeeper_classpath()
        self.root = Path(tempfile.mkdtemp(prefix="replaudit-zk-"))
        try:
            self._launch(classpath)
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self, classpath: list[str]) -> None:
        assert self.root is not None
        conf = self.root / "conf"
        conf.mkdir()
        (self.root / "data").mkdir()
        self.port = unused_loopback_port()
        (conf / "zoo.cfg").write_text(
            "tickTime=2000\n"
            f"dataDir={self.root / 'data'}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={self.host}\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=*\n"
            # Tests create thousands of znodes quickly; skip the 64 MiB txn-log preallocation.
            "preAllocSize=1024\n"
            "maxClientCnxns=0\n")
        (conf / "log4j.properties").write_text(
            "log4j.rootLogger=INFO,CONSOLE\n"
            "log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] %m%n\n")
        cmd = [self.java, f"-Xmx{self.heap}", "-XX:+UseSerialGC",
               f"-Dzookeeper.log.dir={self.root}",
               f"-Dlog4j.configuration=file:{conf / 'log4j.properties'}",
               # fsync per txn makes bulk znode loads disk-bound; durability is irrelevant here.
               "-Dzookeeper.forceSync=no",
               "-cp", os.pathsep.join([str(conf), *classpath]), MAIN_CLASS, str(conf / "zoo.cfg")]
        with open(self.log_path, "wb") as log:
            # Own process group so stop() can signal the JVM without touching the test runner.
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)

    def _wait_ready(self) -> None:
        assert self.proc is not None and self.port is not None
        deadline = time.monotonic() + self.start_timeout_s
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ZooKeeperUnavailable(
                    f"ZooKeeper exited with code {self.proc.returncode} before becoming ready; "
                    f"log tail:\n{self._log_tail()}")
            try:
                # `imok` comes from the network layer before the database is loaded (connections are then
                # dropped with "ZooKeeperServer not running"); `srvr` reports a Mode only once it serves.
                if (four_letter_word(self.host, self.port, b"ruok", timeout_s=0.5) == b"imok"
                        and b"Mode: " in four_letter_word(self.host, self.port, b"srvr", timeout_s=0.5)):
                    return
            except OSError as e:
                last_error = e
            # Poll interval, not a wait for an outcome: the loop ends on `imok` or the deadline.
            time.sleep(0.05)
        raise ZooKeeperUnavailable(
            f"ZooKeeper on {self.hosts} did not answer ruok->imok and srvr->Mode within {self.start_timeout_s}s "
            f"(last error: {last_error}); log tail:\n{self._log_tail()}")

    def _log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        root, self.root = self.root, None
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)

    def __enter__(self) -> "ZooKeeperServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
