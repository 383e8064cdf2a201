"""A real Spark Connect server for the Connect tests: the one pyspark ships.

pyspark's jars include `spark-connect_2.13`, so `spark-submit --class
org.apache.spark.sql.connect.service.SparkConnectServer` runs a Connect server from the
installed pyspark, as `sbin/start-connect-server.sh` of a Spark distribution does. The
server listens on 127.0.0.1 at a free port, with the native engines' jars (Spark's Kafka
connector, delta-spark, as `make install` caches them) on its class path and Delta's SQL
extension and catalog: the tests of both engines share it, the Python engines simply do
not use those formats. Its Python workers run this interpreter with the checkout on their
path, as a cluster's would have the project installed. Started once per test run (a
second JVM costs the test run a core for half a minute), stopped by its pid.

It is launched from the SPARK_HOME the framework gives its own local sessions
(`warehouse.runtime.spark_home`): the server starts a new Python worker for every streaming
query's Python source and `foreachBatch` function, and from pyspark's own home each would
compile pyspark from `python/lib/pyspark.zip`, three times the CPU of importing the
installed package. On a loaded machine such a worker missed Spark's fixed 10 s to connect
back, again and again: one Connect test took 20 minutes beside the rest of the suite
against under 4 alone.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.ports import free_port

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
START_TIMEOUT = 180.0
ROOT = Path(__file__).resolve().parents[2]


class ConnectServerError(Exception):
    """The Connect server did not start; the message holds the end of its log."""


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class ConnectServer:
    """One Spark Connect server process; `url` is what `SparkSession.builder.remote` takes."""

    work_dir: Path
    conf: dict[str, str] = field(default_factory=dict)
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.work_dir / "connect-server.log"

    def home(self, environ: dict[str, str]) -> Path:
        """The SPARK_HOME to launch from: the framework's links home for local sessions
        when it applies to this interpreter (`launch_home`), else pyspark's own."""
        import pyspark

        from warehouse.runtime.spark_home import launch_home

        own = {k: v for k, v in environ.items() if k != "SPARK_HOME"}
        return launch_home("local[2]", environ=own) or Path(pyspark.__file__).parent

    def command(self, home: Path) -> list[str]:
        from warehouse.runtime.session import local_conf

        submit = home / "bin" / "spark-submit"
        conf = {
            # What the framework sets for the local sessions it launches, as a user tunes a
            # small server: Delta's snapshots in one task per core, not 50.
            **local_conf("local[2]"),
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.ui.enabled": "false",
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.streaming.pollingDelay": "500ms",
            "spark.sql.streaming.stopTimeout": "30s",
            "spark.sql.warehouse.dir": str(self.work_dir / "spark-warehouse"),
            "spark.driver.extraJavaOptions": f"-Dderby.system.home={self.work_dir}",
            **self.conf,
        }
        args = [str(submit), "--master", "local[2]", "--class", SERVER_CLASS]
        for key, value in conf.items():
            args += ["--conf", f"{key}={value}"]
        return [*args, "spark-internal"]

    def start(self) -> ConnectServer:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        env = {
            **os.environ,
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
            ),
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
        home = self.home(env)
        env["SPARK_HOME"] = str(home)
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                self.command(home),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.work_dir,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            if _listening(self.port):
                return self
            time.sleep(0.2)
        self.stop()
        tail = self.log.read_text(errors="replace")[-3000:]
        raise ConnectServerError(f"the Spark Connect server did not start:\n{tail}")

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        # spark-submit runs the JVM as its child in the same (new) session: end the group.
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
