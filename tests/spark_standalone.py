"""A real Spark standalone cluster on loopback, from the pyspark package itself (bin/spark-class: one Master, one
Worker), for the test that submits a job to it with spark-submit. Each daemon runs in its own process group and is
stopped at the end; readiness is the master's JSON status showing an alive worker."""
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

import pyspark

from lab.loopback import unused_loopback_port

SPARK_HOME = Path(pyspark.__file__).parent


class StandaloneCluster:
    def __init__(self, cores: int = 1, memory: str = "1g", start_timeout_s: float = 90.0):
        self.port, self.ui = unused_loopback_port(), unused_loopback_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.cores, self.memory, self.start_timeout_s = cores, memory, start_timeout_s
        self.root = Path(tempfile.mkdtemp(prefix="replaudit-spark-standalone-"))
        self.procs: list[subprocess.Popen] = []

    def env(self) -> dict:
        return {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_WORKER_DIR": str(self.root / "work"), "SPARK_LOG_DIR": str(self.root / "logs"),
                "SPARK_NO_DAEMONIZE": "1"}

    def _start(self, name: str, *args: str) -> None:
        log = open(self.root / f"{name}.log", "wb")
        self.procs.append(subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], stdout=log,
                                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env(),
                                           start_new_session=True))
        log.close()

    def __enter__(self) -> "StandaloneCluster":
        try:
            self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                        str(self.port), "--webui-port", str(self.ui))
            self._start("worker", "org.apache.spark.deploy.worker.Worker", self.master_url, "--host", "127.0.0.1",
                        "--cores", str(self.cores), "--memory", self.memory, "--webui-port",
                        str(unused_loopback_port()), "--work-dir", str(self.root / "work"))
            self._wait_for_worker()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait_for_worker(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited with {p.returncode}: {self.logs()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.ui}/json/", timeout=1) as r:
                    if json.loads(r.read()).get("aliveworkers", 0) >= 1:
                        return
            except (OSError, ValueError):   # not listening yet, or its UI answering before the JSON handler is up
                pass
            time.sleep(0.2)     # poll interval; the loop ends when the worker registered or at the deadline
        raise RuntimeError(f"no worker registered with {self.master_url} in {self.start_timeout_s} s: {self.logs()}")

    def logs(self) -> str:
        return "\n".join(f"--- {f.name}\n{f.read_text(errors='replace')[-1500:]}" for f in sorted(
            self.root.glob("*.log")))

    def __exit__(self, *exc) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)
        shutil.rmtree(self.root, ignore_errors=True)
