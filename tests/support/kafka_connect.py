"""Kafka Connect workers for the Connect and CDC tests: Apache Kafka's own `connect-runtime`.

`scripts/kafka-connect.sh` (run by `make install`) caches Connect's worker jars (with the
FileStream connectors and the JSON converter) and a plugin folder holding Debezium's
Postgres connector under `~/.cache/spark-warehouse/kafka-connect/<version>/`.
`ConnectWorker` starts a real worker JVM on that class path against a given bootstrap:
standalone (`ConnectStandalone`, source offsets in a file) or distributed
(`ConnectDistributed`, its config, offset and status topics and its group on the
broker), its REST API on 127.0.0.1 at a free port. Connectors are created and watched
through that API, as an operator would.

Records are written by Connect's JsonConverter with schemas enabled (Debezium's default),
so values are `{"schema": ..., "payload": ...}` envelopes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any, Literal

import pytest

from tests.support.ports import free_port
from tests.support.processes import stop_process

VERSION = "4.1.1"
SCRIPT = "scripts/kafka-connect.sh"
DEBEZIUM_POSTGRES = "io.debezium.connector.postgresql.PostgresConnector"
FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
JVM_OPTIONS = (
    "-Xmx384m",
    "-Xms64m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    # What a failed test's log tail should say: connector and task life, Debezium's progress.
    "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.connect.runtime.Worker=info",
    "-Dorg.slf4j.simpleLogger.log.io.debezium=info",
)
Mode = Literal["standalone", "distributed"]
_MAIN = {
    "standalone": "org.apache.kafka.connect.cli.ConnectStandalone",
    "distributed": "org.apache.kafka.connect.cli.ConnectDistributed",
}


class ConnectError(Exception):
    """Connect is not cached, a worker did not come up, or a connector did not run; the
    message says which and why."""


def cache_dir() -> Path:
    override = os.environ.get("KAFKA_CONNECT_CACHE")
    root = (
        Path(override) if override else Path.home() / ".cache" / "spark-warehouse" / "kafka-connect"
    )
    return root / VERSION


def cached() -> tuple[str, Path]:
    """(class path, plugin folder) of the cached worker; `ConnectError` naming what is
    missing and the command that caches it."""
    root = cache_dir()
    how = f"Run `make install` or `{SCRIPT}` (they resolve it from Maven Central into {root})."
    listing = root / "classpath"
    if not listing.is_file():
        raise ConnectError(f"Kafka Connect {VERSION} is not cached: `{listing}` is missing. {how}")
    jars = [line for line in listing.read_text().splitlines() if line]
    missing = [j for j in jars if not Path(j).is_file()]
    plugins = root / "plugins"
    if not jars or missing or not any(plugins.glob("*/*.jar")):
        raise ConnectError(
            f"Kafka Connect {VERSION} cache in `{root}` is incomplete ({len(missing)} of "
            f"{len(jars)} jars missing, plugins in `{plugins}`: "
            f"{sorted(p.name for p in plugins.glob('*'))}). {how}"
        )
    return os.pathsep.join(jars), plugins


class ConnectWorker:
    """One Connect worker JVM in `work_dir`, talking to the Kafka at `bootstrap`.

    A distributed worker's group and internal topics are named after `group` (a new one
    by default): workers given the same `group` form one Connect cluster, and a worker of
    that group started after another stopped goes on from the state in its topics.
    Not thread-safe: one owner starts and stops it. `stop()` ends the process it
    started, by pid: SIGTERM (Connect stops its tasks and commits their offsets), SIGKILL
    after a grace period.
    """

    def __init__(
        self,
        work_dir: Path,
        bootstrap: str,
        *,
        mode: Mode = "standalone",
        group: str | None = None,
        overrides: Mapping[str, str] | None = None,
    ):
        self.classpath, self.plugins = cached()
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.bootstrap = bootstrap
        self.mode: Mode = mode
        self.group = group or f"connect-{uuid.uuid4().hex[:8]}"
        self.port = free_port()
        self.overrides = dict(overrides or {})
        self.properties = self.work_dir / "worker.properties"
        self.log_path = self.work_dir / "worker.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def internal_topics(self) -> dict[str, str]:
        """A distributed worker's topics by role: `config`, `offset`, `status`."""
        return {role: f"{self.group}-{role}s" for role in ("config", "offset", "status")}

    def _properties(self) -> dict[str, str]:
        props = {
            "bootstrap.servers": self.bootstrap,
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "true",
            "value.converter.schemas.enable": "true",
            "listeners": f"http://127.0.0.1:{self.port}",
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(self.port),
            "plugin.path": str(self.plugins),
            # Plugins are found by their ServiceLoader manifests (Kafka's and Debezium's
            # jars carry them) instead of a reflective scan of every jar: seconds of CPU.
            "plugin.discovery": "service_load",
            # Tests wait for what was produced: flush source offsets and sink output often.
            "offset.flush.interval.ms": "1000",
            # A connector may send its records to another cluster than the worker's
            # (`producer.override.bootstrap.servers`, KIP-458).
            "connector.client.config.override.policy": "All",
        }
        if self.mode == "standalone":
            props["offset.storage.file.filename"] = str(self.work_dir / "offsets")
        else:
            topics = self.internal_topics
            props.update(
                {
                    "group.id": self.group,
                    "config.storage.topic": topics["config"],
                    "offset.storage.topic": topics["offset"],
                    "status.storage.topic": topics["status"],
                    "config.storage.replication.factor": "1",
                    "offset.storage.replication.factor": "1",
                    "status.storage.replication.factor": "1",
                    "scheduled.rebalance.max.delay.ms": "0",
                }
            )
        props.update(self.overrides)
        return props

    def start(self, timeout: float = 120) -> ConnectWorker:
        """Start the worker and wait until its REST API answers (a distributed worker: until
        it has joined its group and read its config topic); `ConnectError` with the log
        tail otherwise."""
        if self.proc is not None and self.proc.poll() is None:
            raise ConnectError(f"the worker at {self.url} runs already (pid {self.proc.pid})")
        self.properties.write_text("".join(f"{k}={v}\n" for k, v in self._properties().items()))
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            ["java", *JVM_OPTIONS, "-cp", self.classpath, _MAIN[self.mode], str(self.properties)],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=self.work_dir,
        )
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            self._check_alive("while starting")
            try:
                # /connectors answers once the herder has started (for a distributed
                # worker: joined the group and read the config topic); before that the
                # server refuses or answers an error.
                self.request("GET", "/connectors", timeout=5)
                return
            except (OSError, ConnectError) as e:
                last = str(e)
            time.sleep(0.5)
        raise ConnectError(
            f"the Connect worker ({self.mode}) at {self.url} did not answer within "
            f"{timeout:.0f}s ({last}); log `{self.log_path}`:\n{self.tail()}"
        )

    def _check_alive(self, when: str) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise ConnectError(
                f"the Connect worker ({self.mode}) exited with status {self.proc.returncode} "
                f"{when}; log `{self.log_path}`:\n{self.tail()}"
            )

    def request(self, method: str, path: str, body: Any = None, *, timeout: float = 30) -> Any:
        """A call of the worker's REST API; its JSON answer, `ConnectError` with the status
        and Connect's message on an error status."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                text = resp.read()
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")
            raise ConnectError(f"{method} {path}: HTTP {e.code}: {detail}") from e
        return json.loads(text) if text else None

    def put_connector(self, name: str, config: Mapping[str, str], *, timeout: float = 60) -> None:
        """Create or update connector `name`. A distributed worker refuses while its group
        rebalances (409) or forwards to a leader not known yet: retried until `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.request("PUT", f"/connectors/{name}/config", dict(config))
                return
            except ConnectError as e:
                if time.monotonic() > deadline or not any(
                    f"HTTP {code}" in str(e) for code in (409, 500, 503)
                ):
                    raise
            self._check_alive(f"while creating connector `{name}`")
            time.sleep(0.5)

    def status(self, name: str) -> dict[str, Any]:
        return self.request("GET", f"/connectors/{name}/status")

    def wait_running(self, name: str, *, tasks: int = 1, timeout: float = 120) -> dict[str, Any]:
        """Wait until connector `name` and `tasks` tasks of it are RUNNING; its status then.
        `ConnectError` with Connect's trace as soon as it or a task FAILED, or at `timeout`."""
        deadline = time.monotonic() + timeout
        last: Any = "no status yet"
        while time.monotonic() < deadline:
            self._check_alive(f"while waiting for connector `{name}`")
            try:
                last = self.status(name)
            except ConnectError as e:
                last = str(e)
            else:
                states = [last["connector"]["state"], *(t["state"] for t in last["tasks"])]
                if "FAILED" in states:
                    raise ConnectError(
                        f"connector `{name}` failed: {json.dumps(last, indent=1)}\n"
                        f"log:\n{self.tail()}"
                    )
                if len(last["tasks"]) >= tasks and set(states) == {"RUNNING"}:
                    return last
            time.sleep(0.3)
        raise ConnectError(
            f"connector `{name}` not RUNNING with {tasks} task(s) within {timeout:.0f}s: "
            f"{last}\nlog:\n{self.tail()}"
        )

    def tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return "(no log file)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, grace: float = 30) -> None:
        """SIGTERM the worker (it stops its connectors and commits their offsets), SIGKILL
        if it is still there after `grace`."""
        proc, self.proc = self.proc, None
        stop_process(proc, signal.SIGTERM, grace)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> ConnectWorker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def started(work_dir: Path, bootstrap: str, **kwargs: Any) -> ConnectWorker:
    """A started worker; a failed test (not a skipped one) saying why when it cannot start."""
    try:
        return ConnectWorker(work_dir, bootstrap, **kwargs).start()
    except ConnectError as e:
        reason = str(e)
    pytest.fail(reason, pytrace=False)


@pytest.fixture
def connect_workers(tmp_path: Path) -> Iterator[Any]:
    """Start Connect workers: `connect_workers(bootstrap, mode=..., group=...)`; all are
    stopped, by pid, when the test ends."""
    workers: list[ConnectWorker] = []

    def start(bootstrap: str, **kwargs: Any) -> ConnectWorker:
        worker = started(tmp_path / f"connect-{len(workers)}", bootstrap, **kwargs)
        workers.append(worker)
        return worker

    try:
        yield start
    finally:
        for worker in workers:
            worker.stop()
