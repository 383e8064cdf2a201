"""Apache Kafka itself, the reference the bundled broker is compared against.

`scripts/apache-kafka.sh` (run by `make install`) caches the newest Apache Kafka 4.x jars
and a class path file under `~/.cache/spark-warehouse/apache-kafka/`; `ApacheKafka`
formats KRaft storage in a temporary directory and starts real `kafka.Kafka` JVMs on
that class path: one combined-mode node (broker and controller in one process), or
three such nodes forming one cluster (replication factor 3, `min.insync.replicas=2`).
Each node listens for PLAINTEXT clients (`bootstrap`) and for SASL_PLAINTEXT clients with
the PLAIN mechanism (`sasl_bootstrap`, the users of `SASL_USERS`), the security the
bundled broker offers.

Tests get them through the `apache_kafka` (session) and `apache_kafka_cluster` fixtures
in tests/conftest.py. When the jars are not cached those fixtures fail the test and say
how to cache them: a skipped oracle test would pass without comparing anything.
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from tests.support.ports import free_ports

CACHE_DIR_ENV = "APACHE_KAFKA_CACHE"
SCRIPT = "scripts/apache-kafka.sh"
# Small heaps: the machine is small and shared; a test cluster holds little data.
# (benchmarks/kafka_vs_bundled_bench.py passes Kafka's own start-script options instead.)
HEAP = "-Xmx384m"
JVM_OPTIONS = (
    HEAP,
    "-Xms64m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
)
LOG_LEVEL = "warn"
SASL_USERS = {"alice": "alice-secret"}
"""The users (name: password) of every node's SASL_PLAINTEXT listener (mechanism PLAIN)."""


class ApacheKafkaError(Exception):
    """Apache Kafka is not cached, or a node did not come up; the message says which and why."""


def cache_dir() -> Path:
    override = os.environ.get(CACHE_DIR_ENV)
    return (
        Path(override) if override else Path.home() / ".cache" / "spark-warehouse" / "apache-kafka"
    )


def cached_classpath(root: Path | None = None) -> tuple[str, str]:
    """(version, class path) of the cached Apache Kafka; `ApacheKafkaError` naming what is
    missing and the command that caches it."""
    root = root or cache_dir()
    how = f"Run `make install` or `{SCRIPT}` (they resolve it from Maven Central into {root})."
    current = root / "current"
    if not current.is_file():
        raise ApacheKafkaError(f"Apache Kafka is not cached: `{current}` does not exist. {how}")
    version = current.read_text().strip()
    listing = root / version / "classpath"
    if not listing.is_file():
        raise ApacheKafkaError(
            f"Apache Kafka `{version}` is not cached completely: `{listing}` is missing. {how}"
        )
    jars = [line for line in listing.read_text().splitlines() if line]
    missing = [j for j in jars if not Path(j).is_file()]
    if not jars or missing:
        raise ApacheKafkaError(
            f"Apache Kafka `{version}` cache is stale: {len(missing)} of {len(jars)} jars in "
            f"`{listing}` are missing (first: `{missing[0] if missing else '-'}`). {how}"
        )
    return version, os.pathsep.join(jars)


def _cluster_id() -> str:
    # Kafka's Uuid string form: 16 bytes, URL-safe base64 without padding. One that
    # starts with `-` would read as an option on StorageTool's command line.
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


@dataclass
class _Node:
    node_id: int
    port: int
    controller_port: int
    sasl_port: int
    properties: Path
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None


class ApacheKafka:
    """`nodes` combined-mode Apache Kafka nodes (1 or 3) under `work_dir` on 127.0.0.1.

    Not thread-safe: one owner starts and stops it. `stop()` ends every process it started,
    by pid, SIGTERM first and SIGKILL after a grace period.
    """

    def __init__(
        self,
        work_dir: Path,
        *,
        nodes: int = 1,
        overrides: dict[str, str] | None = None,
        jvm_options: Sequence[str] = JVM_OPTIONS,
    ):
        if nodes not in (1, 3):
            raise ApacheKafkaError(f"nodes=`{nodes}`: expected 1 (single node) or 3 (a cluster)")
        self.work_dir = Path(work_dir)
        self.version, self.classpath = cached_classpath()
        self.overrides = dict(overrides or {})
        self.jvm_options = tuple(jvm_options)
        self._nodes: list[_Node] = []
        ports = free_ports(3 * nodes)
        for i in range(nodes):
            node_dir = self.work_dir / f"node-{i + 1}"
            node_dir.mkdir(parents=True, exist_ok=True)
            self._nodes.append(
                _Node(
                    node_id=i + 1,
                    port=ports[3 * i],
                    controller_port=ports[3 * i + 1],
                    sasl_port=ports[3 * i + 2],
                    properties=node_dir / "server.properties",
                    log_path=node_dir / "server.log",
                )
            )

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self._nodes)

    @property
    def sasl_bootstrap(self) -> str:
        """The SASL_PLAINTEXT (mechanism PLAIN, users `SASL_USERS`) listeners."""
        return ",".join(f"127.0.0.1:{n.sasl_port}" for n in self._nodes)

    @property
    def pids(self) -> list[int]:
        return [n.proc.pid for n in self._nodes if n.proc is not None]

    def _properties(self, node: _Node) -> dict[str, str]:
        n = len(self._nodes)
        voters = ",".join(f"{m.node_id}@127.0.0.1:{m.controller_port}" for m in self._nodes)
        data = node.properties.parent / "data"
        users = " ".join(f'user_{u}="{p}"' for u, p in SASL_USERS.items())
        props = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{node.port},"
                f"CONTROLLER://127.0.0.1:{node.controller_port},"
                f"SASL_PLAINTEXT://127.0.0.1:{node.sasl_port}"
            ),
            "advertised.listeners": (
                f"PLAINTEXT://127.0.0.1:{node.port},SASL_PLAINTEXT://127.0.0.1:{node.sasl_port}"
            ),
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT"
            ),
            "sasl.enabled.mechanisms": "PLAIN",
            # the server side of PLAIN: the users it accepts, as `user_<name>="<password>"`
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};"
            ),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(data),
            "num.partitions": "1",
            "default.replication.factor": str(n),
            "min.insync.replicas": "2" if n == 3 else "1",
            "offsets.topic.replication.factor": str(n),
            "offsets.topic.num.partitions": "3",
            "transaction.state.log.replication.factor": str(n),
            "transaction.state.log.min.isr": "2" if n == 3 else "1",
            "transaction.state.log.num.partitions": "3",
            "share.coordinator.state.topic.replication.factor": str(n),
            "share.coordinator.state.topic.min.isr": "2" if n == 3 else "1",
            # Tests start groups often and want their first assignment without waiting.
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
            "log.cleaner.threads": "1",
            "log.cleaner.dedupe.buffer.size": str(2 * 1024 * 1024),
            # The active controller appends a no-op record to the metadata log this often
            # (500 ms by default), which every node fetches and applies: most of an idle
            # node's CPU. Idle three nodes took 0.067 CPU-s a second, 0.042 with 5 s; the
            # servers group holds them for most of the run.
            "metadata.max.idle.interval.ms": "5000",
        }
        props.update(self.overrides)
        return props

    def _java(self, main: str, *args: str) -> list[str]:
        return [
            "java",
            *self.jvm_options,
            f"-Dorg.slf4j.simpleLogger.defaultLogLevel={LOG_LEVEL}",
            "-cp",
            self.classpath,
            main,
            *args,
        ]

    def start(self, timeout: float = 120) -> ApacheKafka:
        """Format each node's storage, start every node, wait until the cluster answers
        metadata with all its brokers; `ApacheKafkaError` with the log tail otherwise."""
        cluster_id = _cluster_id()
        for node in self._nodes:
            node.properties.write_text(
                "".join(f"{k}={v}\n" for k, v in self._properties(node).items())
            )
            fmt = subprocess.run(
                self._java(
                    "kafka.tools.StorageTool",
                    "format",
                    "-t",
                    cluster_id,
                    "-c",
                    str(node.properties),
                ),
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            if fmt.returncode != 0:
                raise ApacheKafkaError(
                    f"Apache Kafka {self.version}: formatting the storage of node {node.node_id} "
                    f"(`{node.properties}`) failed with status {fmt.returncode}:\n"
                    f"{fmt.stdout[-2000:]}{fmt.stderr[-2000:]}"
                )
        for node in self._nodes:
            node.log = open(node.log_path, "ab")
            node.proc = subprocess.Popen(
                self._java("kafka.Kafka", str(node.properties)),
                stdin=subprocess.DEVNULL,
                stdout=node.log,
                stderr=subprocess.STDOUT,
            )
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            for node in self._nodes:
                assert node.proc is not None
                if node.proc.poll() is not None:
                    raise ApacheKafkaError(
                        f"Apache Kafka {self.version} node {node.node_id} exited with status "
                        f"{node.proc.returncode} while starting; log `{node.log_path}`:\n"
                        f"{self._tail(node)}"
                    )
            try:
                brokers = admin.list_topics(timeout=2).brokers
            except KafkaException as e:
                last = str(e)
            else:
                if len(brokers) == len(self._nodes):
                    return
                last = f"{len(brokers)} of {len(self._nodes)} brokers registered"
            time.sleep(0.5)
        tails = "\n".join(f"node {n.node_id}:\n{self._tail(n)}" for n in self._nodes)
        raise ApacheKafkaError(
            f"Apache Kafka {self.version} at {self.bootstrap} did not answer metadata within "
            f"{timeout:.0f}s ({last}); logs:\n{tails}"
        )

    @staticmethod
    def _tail(node: _Node, lines: int = 30) -> str:
        if not node.log_path.exists():
            return "(no log file)"
        return "\n".join(node.log_path.read_text(errors="replace").splitlines()[-lines:])

    def kill_node(self, node_id: int) -> int:
        """SIGKILL node `node_id` (1-based) as a crash would: no shutdown, no flush; returns
        the pid it killed. Its storage and ports stay for `restart_node`."""
        node = self._node(node_id)
        assert node.proc is not None and node.proc.poll() is None, f"node {node_id} is not running"
        pid = node.proc.pid
        os.kill(pid, signal.SIGKILL)
        node.proc.wait(30)
        return pid

    def restart_node(self, node_id: int, timeout: float = 120) -> None:
        """Start node `node_id` again on its storage directory and ports (after `kill_node`)
        and wait until the cluster answers metadata with all its brokers again."""
        node = self._node(node_id)
        assert node.proc is not None and node.proc.poll() is not None, f"node {node_id} runs"
        if node.log is None:
            node.log = open(node.log_path, "ab")
        node.proc = subprocess.Popen(
            self._java("kafka.Kafka", str(node.properties)),
            stdin=subprocess.DEVNULL,
            stdout=node.log,
            stderr=subprocess.STDOUT,
        )
        self._wait_ready(timeout)

    def wait_in_sync(self, topics: list[str], timeout: float = 120) -> None:
        """Wait until every partition of `topics` has all its replicas in sync again;
        `ApacheKafkaError` naming the partitions still behind after `timeout`."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        deadline = time.monotonic() + timeout
        behind: list[str] = ["no metadata yet"]
        while time.monotonic() < deadline:
            metadata = admin.list_topics(timeout=10).topics
            behind = [
                f"{t}[{p}] isr {sorted(m.isrs)} of {sorted(m.replicas)}"
                for t in topics
                for p, m in (metadata[t].partitions.items() if t in metadata else [])
                if sorted(m.isrs) != sorted(m.replicas)
            ] + [f"{t} unknown" for t in topics if t not in metadata or not metadata[t].partitions]
            if not behind:
                return
            time.sleep(0.5)
        raise ApacheKafkaError(f"replicas not in sync after {timeout:.0f}s: {', '.join(behind)}")

    def _node(self, node_id: int) -> _Node:
        for node in self._nodes:
            if node.node_id == node_id:
                return node
        raise ApacheKafkaError(f"node_id=`{node_id}`: expected 1 to {len(self._nodes)}")

    def stop(self, grace: float = 20) -> None:
        """SIGTERM every node this object started, SIGKILL whichever is still alive after `grace`."""
        running = [n for n in self._nodes if n.proc is not None and n.proc.poll() is None]
        for node in running:
            assert node.proc is not None
            with contextlib.suppress(ProcessLookupError):
                os.kill(node.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for node in running:
            assert node.proc is not None
            try:
                node.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(node.proc.pid, signal.SIGKILL)
                node.proc.wait(10)
        for node in self._nodes:
            if node.log is not None:
                node.log.close()
                node.log = None

    def __enter__(self) -> ApacheKafka:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def started_nodes(work_dir: Path, *, nodes: int) -> ApacheKafka:
    """Started nodes; a failed test (not a skipped one) saying why when they cannot start."""
    try:
        return ApacheKafka(work_dir, nodes=nodes).start()
    except ApacheKafkaError as e:
        reason = str(e)
    pytest.fail(reason, pytrace=False)


@pytest.fixture(scope="session")
def apache_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafka]:
    """One single-node Apache Kafka (combined broker and controller) shared by the run."""
    kafka = started_nodes(tmp_path_factory.mktemp("apache-kafka"), nodes=1)
    try:
        yield kafka
    finally:
        kafka.stop()


SCRAM_MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SECURE_OVERRIDES = {
    # SCRAM beside PLAIN on the SASL_PLAINTEXT listener; credentials live in the metadata log
    "sasl.enabled.mechanisms": SCRAM_MECHANISMS,
    **{
        f"listener.name.sasl_plaintext.{m.lower()}.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        )
        for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")
    },
    # ACLs: the PLAIN user `alice` may do everything; ANONYMOUS is the PLAINTEXT listener,
    # which the node's broker and controller use to talk to each other
    "authorizer.class.name": STANDARD_AUTHORIZER,
    "super.users": "User:alice;User:ANONYMOUS",
    "allow.everyone.if.no.acl.found": "false",
}
"""A node whose SASL_PLAINTEXT listener also offers SCRAM and that authorizes with ACLs."""


@pytest.fixture(scope="session")
def secure_apache_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafka]:
    """One single-node Apache Kafka with `SECURE_OVERRIDES`, shared by the run."""
    try:
        kafka = ApacheKafka(
            tmp_path_factory.mktemp("secure-apache-kafka"), overrides=SECURE_OVERRIDES
        ).start()
    except ApacheKafkaError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield kafka
    finally:
        kafka.stop()


@pytest.fixture(scope="module")
def apache_kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafka]:
    """Three Apache Kafka nodes in one cluster (replication factor 3, min.insync.replicas=2),
    shared by the module that asks for it."""
    kafka = started_nodes(tmp_path_factory.mktemp("apache-kafka-cluster"), nodes=3)
    try:
        yield kafka
    finally:
        kafka.stop()
