"""A Spark standalone cluster on 127.0.0.1 from the installed pyspark, for the cluster tests.

Its SPARK_HOME is the installed pyspark's files with a compiled `pyspark.zip`
(`compiled_home`): every Python process Spark starts imports pyspark from that zip.

One master and N workers, each a `spark-class` JVM (`spark-class` execs `java`, so
the pid we hold is the JVM's). Every port is chosen by the OS (`--port 0`,
`--webui-port 0`); the master's URL is read from its log. Logs, worker and local
dirs live under the given folder, never in the repository. `stop()` ends each
process by its pid: SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyspark

from tests.integration.cluster.compiled_home import compiled_home

SPARK_HOME = Path(pyspark.__file__).resolve().parent
_MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")
_REGISTERED = "Successfully registered with master"
_ANY_LOCAL_PORT = ("--host", "127.0.0.1", "--port", "0", "--webui-port", "0")
"""The daemons' flags: on 127.0.0.1 only, each port the system's choice."""


class ClusterStartError(RuntimeError):
    """A daemon of the test cluster did not come up; the message carries its log tail."""


def _tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


_EXECUTOR_REGISTERED = "Successfully registered with driver"
"""The line an executor logs once its driver has accepted it."""


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


class StandaloneCluster:
    """A master and `workers` workers (`cores` cores, `memory` each), stopped by `stop()`."""

    def __init__(self, base: Path, *, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.base = base
        self.workers, self.cores, self.memory = workers, cores, memory
        self.log_dir = base / "logs"
        self.work_dir = base / "work"
        self.local_dir = base / "local"
        self.conf_dir = base / "conf"
        self.pycache_dir = base / "pycache"
        self.home = base / "spark-home"
        """SPARK_HOME of the daemons, the executors and `spark-submit`, made by `start()`."""
        self.url: str | None = None
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def env(self) -> dict[str, str]:
        """The environment of the daemons and of `spark-submit` against them."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
        env.update(
            SPARK_HOME=str(self.home),
            SPARK_CONF_DIR=str(self.conf_dir),  # empty: no spark-defaults from elsewhere
            SPARK_LOG_DIR=str(self.log_dir),
            SPARK_WORKER_DIR=str(self.work_dir),
            SPARK_LOCAL_DIRS=str(self.local_dir),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_DAEMON_MEMORY="256m",
            # The master's REST submission server has a fixed port (6066); nobody here needs it.
            SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
            # A worker removes a stopped application's folder two minutes after its last
            # write: the applications that ship a Python environment unpack 1.1 GB into
            # each executor's folder, and the suite's kept 5.4 GB of them to its end.
            # A test lists its executors' folders right after its application ends.
            SPARK_WORKER_OPTS=" ".join(
                [
                    "-Dspark.worker.cleanup.enabled=true",
                    "-Dspark.worker.cleanup.interval=30",
                    "-Dspark.worker.cleanup.appDataTtl=120",
                ]
            ),
            PYSPARK_PYTHON=sys.executable,
            # A cluster's Python reads its modules' byte code; without a cache every
            # Python process here (the driver, each executor's Python workers) compiled
            # pyspark, pyarrow, pandas and the framework from source: 1.4 s of CPU each
            # on this machine, in every application's first batch (docs/benchmarks.md).
            PYTHONPYCACHEPREFIX=str(self.pycache_dir),
        )
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        return env

    def _spawn(self, name: str, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
        log = self.log_dir / f"{name}.out"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [str(self.home / "bin" / "spark-class"), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                cwd=self.base,
                start_new_session=True,
            )
        self.procs.append(proc)
        return proc, log

    def _wait(
        self,
        proc: subprocess.Popen[bytes],
        log: Path,
        pattern: re.Pattern[str] | str,
        timeout: float,
    ) -> re.Match[str] | str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = log.read_text(errors="replace") if log.exists() else ""
            found = (
                pattern.search(text)
                if isinstance(pattern, re.Pattern)
                else (pattern if pattern in text else None)
            )
            if found:
                return found
            if proc.poll() is not None:
                raise ClusterStartError(f"{log.name} exited with {proc.returncode}:\n{_tail(log)}")
            time.sleep(0.5)
        raise ClusterStartError(f"{log.name}: no `{pattern}` after {timeout:.0f}s:\n{_tail(log)}")

    def start(self, timeout: float = 180) -> StandaloneCluster:
        for d in (self.log_dir, self.work_dir, self.local_dir, self.conf_dir, self.pycache_dir):
            d.mkdir(parents=True, exist_ok=True)
        compiled_home(SPARK_HOME, self.home)
        try:
            master, mlog = self._spawn(
                "master",
                "org.apache.spark.deploy.master.Master",
                *_ANY_LOCAL_PORT,
            )
            found = self._wait(master, mlog, _MASTER_URL, timeout)
            assert isinstance(found, re.Match)
            self.url = found.group(1)
            self._wait(master, mlog, "ALIVE", timeout)
            workers = [
                self._spawn(
                    f"worker-{i}",
                    "org.apache.spark.deploy.worker.Worker",
                    *_ANY_LOCAL_PORT,
                    "--cores",
                    str(self.cores),
                    "--memory",
                    self.memory,
                    "--work-dir",
                    str(self.work_dir / f"worker-{i}"),
                    self.url,
                )
                for i in range(self.workers)
            ]
            for proc, log in workers:
                self._wait(proc, log, _REGISTERED, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 30) -> None:
        """Workers first (they would try to reconnect), then the master; by pid."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout)
        self.procs.clear()

    def executor_dirs(self) -> list[Path]:
        """`<worker dir>/<app id>/<executor id>` of every executor that registered with its
        driver. When an executor exits at its application's end before the master hears
        that the application ended, the master launches a replacement and kills it a moment
        later: that one never registers and is not listed."""
        return sorted(
            p
            for p in self.work_dir.glob("worker-*/app-*/*")
            if p.is_dir() and _EXECUTOR_REGISTERED in _text(p / "stderr")
        )

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
