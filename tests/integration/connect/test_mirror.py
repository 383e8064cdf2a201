"""`warehouse mirror` (MirrorMaker 2, dedicated mode) from two spokes into a hub while
`warehouse run` reads the hub, both run as a user runs them: `python -m warehouse mirror`
and `python -m warehouse run` (continuous) as child processes.

The spokes are bundled brokers; the hub is a bundled broker on both engines, and once a
real Apache Kafka 4.4.0 node (the target of MirrorMaker's exactly-once delivery: its
transactions, and Connect's worker groups and internal topics, are then Apache Kafka's
own). The hub is the project's default cluster and one spoke one of its
`kafka.clusters`, both named in `mirror.flows` without being written again; the other
spoke is declared in `mirror.clusters` only. Records flow into both spokes from producer
threads the whole time; once the hub's ODS table fills, `warehouse mirror` is SIGKILLed
and started again, the run going on. Each of the hub's `<spoke>.<topic>`, read
committed, then holds every record of its spoke exactly once, key and value equal, and
so does the ODS table the run fills from them, `_topic` naming the spoke; both commands
stop on SIGTERM with exit status 0.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.runtime.helpers import rows
from tests.integration.runtime.runs import stop, warehouse_run
from tests.support.broker_clients import read_topic
from tests.support.processes import stop_process

# A variant took 82-141 s on 2 cores alone, 98-175 s beside other work (`VARIANTS`);
# its waits add up to 780 s.
pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[3]
PARTITIONS = 2


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def committed_records(bootstrap: str, topic: str, timeout: float = 30) -> list[tuple[bytes, bytes]]:
    """Every committed record of `topic` as (key, value), read with isolation.level=
    read_committed up to each partition's end; [] when the topic does not exist yet."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    meta = admin.list_topics(topic, timeout=10).topics.get(topic)
    if meta is None or meta.error is not None or not meta.partitions:
        return []
    return [(r.key, r.value) for r in read_topic(bootstrap, topic, timeout=timeout)]


class Feed:
    """A producer thread writing `(k<i>, {"i": i})` to the spoke until stopped; `sent`
    holds what the spoke acknowledged. Owned by one test; `stop()` joins the thread."""

    def __init__(self, bootstrap: str, topic: str, *, per_second: float) -> None:
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
        )
        self.topic = topic
        self.interval = 1 / per_second
        self.sent: list[tuple[bytes, bytes]] = []
        self.next = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def burst(self, count: int) -> None:
        for _ in range(count):
            self._send()
        assert self.producer.flush(30) == 0

    def _send(self) -> None:
        i = self.next
        self.next += 1
        key, value = f"k{i:05d}".encode(), json.dumps({"i": i, "pad": "x" * (i % 13)}).encode()

        def delivered(err: object, _msg: object) -> None:
            assert err is None, err
            self.sent.append((key, value))

        self.producer.produce(self.topic, value, key, on_delivery=delivered)
        self.producer.poll(0)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._send()
            time.sleep(self.interval)

    def start(self) -> Feed:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        assert self.producer.flush(30) == 0


class Mirror:
    """`python -m warehouse mirror --project P` as a child process, its output in a log file."""

    def __init__(self, project: Path) -> None:
        self.project = project
        self.log = project / "mirror.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Mirror:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "warehouse", "mirror", "--project", str(self.project)],
                cwd=REPO,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        return self

    def jvm_pids(self) -> list[int]:
        assert self.proc is not None
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        return [int(p) for p in children.read_text().split()] if children.exists() else []

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        stop_process(self.proc, signal.SIGTERM, 30)


def wait_until(
    what: str,
    predicate: Callable[[], bool],
    mirror: Mirror,
    timeout: float,
    *,
    run: subprocess.Popen | None = None,
    run_log: Path | None = None,
) -> None:
    """Poll `predicate` while `mirror` (and `run`, when given) still run; fail with their
    logs' tails."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        assert mirror.proc is not None
        if mirror.proc.poll() is not None:
            raise AssertionError(
                f"warehouse mirror exited ({mirror.proc.returncode}) before {what}:\n{mirror.tail()}"
            )
        if run is not None and run.poll() is not None:
            raise AssertionError(
                f"warehouse run exited ({run.returncode}) before {what}:\n{log_tail(run_log)}"
            )
        time.sleep(0.5)
    raise AssertionError(
        f"no {what} after {timeout:.0f}s; warehouse mirror's log:\n{mirror.tail()}"
        + (f"\nwarehouse run's log:\n{log_tail(run_log)}" if run is not None else "")
    )


def log_tail(path: Path | None, lines: int = 40) -> str:
    if path is None or not path.is_file():
        return ""
    # Without Java stack frames and Spark's bracketed log lines: what the run said.
    kept = [
        line
        for line in path.read_text(errors="replace").splitlines()
        if not line.startswith(("\tat ", "["))
    ]
    return "\n".join(kept[-lines:])


def pid_gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split()[2]
        except FileNotFoundError:
            return True
        if state == "Z":  # exited; its parent (init) has not reaped it yet
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def mirrors() -> Iterator[list[Mirror]]:
    started: list[Mirror] = []
    yield started
    for m in started:
        m.stop()


def write_project(
    path: Path,
    *,
    spokes: dict[str, str],
    shared: set[str],
    hub_bootstrap: str,
    topic: str,
    engine: str,
) -> Path:
    """A project whose default Kafka cluster is the hub: `mirror:` flows `<spoke> -> default`
    of `topic` from each of `spokes` (alias: bootstrap), those of `shared` declared once as
    the project's `kafka.clusters`, the others in `mirror.clusters`; and one ODS table
    reading every mirrored topic on `engine` (Kafka and Delta)."""
    (path / "conf").mkdir(parents=True)
    (path / "layers" / "ods").mkdir(parents=True)
    clusters = {alias: {"bootstrap": bootstrap} for alias, bootstrap in spokes.items()}
    conf = {
        "warehouse_root": str(path / ".warehouse"),
        "kafka": {
            "bootstrap": hub_bootstrap,
            "clusters": {a: c for a, c in clusters.items() if a in shared},
        },
        "mirror": {
            "clusters": {a: c for a, c in clusters.items() if a not in shared},
            "flows": {f"{alias} -> default": {"topics": [topic]} for alias in spokes},
            "replication_factor": 1,
            # One MirrorMaker node: a restarted one takes its tasks back at once instead of
            # waiting for the killed one (Connect's default: five minutes).
            "properties": {"scheduled.rebalance.max.delay.ms": 0},
        },
        "engines": {"kafka": engine, "delta": engine},
        "spark": {
            "master": "local[2]",
            "conf": {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"},
        },
    }
    (path / "conf" / "local.yml").write_text(yaml.safe_dump(conf))
    # The warehouse's ODS reads the hub's mirrored topics like any other.
    table = {
        "table": "ods_orders",
        "source": {
            "kafka": {
                "topics": [f"{alias}.{topic}" for alias in spokes],
                "format": "raw",
                "starting_offsets": "earliest",
            }
        },
        "sink": {"mode": "append"},
    }
    (path / "layers" / "ods" / "orders.yml").write_text(yaml.safe_dump(table))
    return path


def hub_counts(hub: str, topics: list[str]) -> list[int]:
    return [len(committed_records(hub, t)) for t in topics]


def ods_rows(project: Path) -> list[tuple[str, bytes, bytes]]:
    """The hub's ODS table as (_topic, key, value) rows; [] before its first commit."""
    table = project / ".warehouse" / "tables" / "ods_orders"
    # delta-spark makes `_delta_log` before it writes the first commit into it.
    if not any((table / "_delta_log").glob("[0-9]*.json")):
        return []
    return rows(table, ["_topic", "key", "value"])


def ods_counts(project: Path, topics: list[str]) -> list[int]:
    got = Counter(t for t, _, _ in ods_rows(project))
    return [got[t] for t in topics]


VARIANTS = [
    pytest.param("bundled", "python", id="bundled-hub-python"),
    pytest.param("bundled", "native", id="bundled-hub-native"),
    pytest.param("apache", "native", id="apache-hub-native"),
]
"""The hub and the engines of the run: the bundled hub on both engines, Apache Kafka as
hub once, on the native engines (Spark's own Kafka source and delta-spark): what it adds
is the hub's side of MirrorMaker's exactly-once delivery, which no engine changes."""


@pytest.mark.parametrize(("hub_kind", "engine"), VARIANTS, indirect=["engine"])
def test_mirror_killed_and_restarted_while_the_run_reads_the_hub_delivers_every_record_once(
    hub_kind: str,
    engine: str,
    broker,
    broker_factory,
    request: pytest.FixtureRequest,
    unique,
    tmp_path: Path,
    mirrors: list[Mirror],
) -> None:
    hub = (
        request.getfixturevalue("apache_kafka").bootstrap
        if hub_kind == "apache"
        else broker_factory().bootstrap
    )
    topic = unique("orders")
    # `eu` is one of the project's Kafka clusters (a lower-case identifier), `us` only
    # MirrorMaker's; the hub is the project's default cluster.
    eu, us = unique("eu").replace("-", "_"), unique("us")
    spokes = {eu: broker.bootstrap, us: broker_factory().bootstrap}
    mirrored = [f"{alias}.{topic}" for alias in spokes]
    for bootstrap in spokes.values():
        create_topic(bootstrap, topic, PARTITIONS)
    project = write_project(
        tmp_path / "project",
        spokes=spokes,
        shared={eu},
        hub_bootstrap=hub,
        topic=topic,
        engine=engine,
    )
    run_log = tmp_path / "run.log"
    feeds = {alias: Feed(b, topic, per_second=20) for alias, b in spokes.items()}
    for feed in feeds.values():
        feed.burst(150)
        feed.start()
    try:
        first = Mirror(project).start()
        mirrors.append(first)
        wait_until(
            "records of both spokes on the hub",
            lambda: min(hub_counts(hub, mirrored)) >= 60,
            first,
            120,
        )
        properties = project / ".warehouse" / "mirror" / "mm2.properties"
        assert properties.stat().st_mode & 0o777 == 0o600
        # What it printed before MirrorMaker started: each cluster and where it is declared.
        printed = first.log.read_text(errors="replace")
        assert f"cluster {eu}: {spokes[eu]} (from `kafka.clusters.{eu}`)" in printed
        assert f"cluster {us}: {spokes[us]} (from `mirror.clusters.{us}`)" in printed
        assert f"cluster default: {hub} (from `kafka.bootstrap`)" in printed

        with warehouse_run(project, run_log) as run:
            # The run reads the hub while it mirrors: rows of both spokes in the ODS table.
            wait_until(
                "rows of both spokes in the hub's ODS table",
                lambda: min(ods_counts(project, mirrored)) > 0,
                first,
                300,
                run=run,
                run_log=run_log,
            )
            jvms = first.jvm_pids()
            assert jvms, f"no MirrorMaker JVM under warehouse mirror:\n{first.tail()}"

            # Killed mid-flow: nothing of it can stop cleanly, and its JVM goes with it.
            stop_process(first.proc, signal.SIGKILL, 0)
            assert all(pid_gone(pid) for pid in jvms), (
                f"MirrorMaker outlived warehouse mirror: {jvms}"
            )
            killed_at = hub_counts(hub, mirrored)
            time.sleep(2)  # the feeds go on while nothing mirrors

            second = Mirror(project).start()
            mirrors.append(second)
            wait_until(
                "progress of both spokes in the hub's ODS table after the restart",
                lambda: all(
                    n > k + 60
                    for n, k in zip(ods_counts(project, mirrored), killed_at, strict=True)
                ),
                second,
                180,
                run=run,
                run_log=run_log,
            )
            for feed in feeds.values():
                feed.stop()
            sent = {f"{alias}.{topic}": Counter(feed.sent) for alias, feed in feeds.items()}
            for alias, feed in feeds.items():
                assert len(feed.sent) == len(sent[f"{alias}.{topic}"]) == feed.next
            wait_until(
                "every record in the hub's ODS table",
                lambda: ods_counts(project, mirrored) >= [len(feeds[a].sent) for a in spokes],
                second,
                180,
                run=run,
                run_log=run_log,
            )
            time.sleep(3)  # a duplicate would arrive now

            # Both stopped as an operator stops them: SIGTERM, exit status 0; MirrorMaker's
            # JVM goes with its command, the run stops between batches.
            assert second.proc is not None
            jvms = second.jvm_pids()
            second.proc.send_signal(signal.SIGTERM)
            assert second.proc.wait(60) == 0, second.tail()
            assert all(pid_gone(pid) for pid in jvms)
            code = stop(run)
        assert code == 0, log_tail(run_log)
        assert "stopped: ods_orders [ods]" in run_log.read_text(errors="replace")
    finally:
        for feed in feeds.values():
            feed.stop()

    for t in mirrored:
        got = Counter(committed_records(hub, t))
        assert got == sent[t], (
            f"{t}: {sum(got.values())} records on the hub for {len(sent[t])} sent: "
            f"missing {len(sent[t] - got)}, duplicated {sum((got - sent[t]).values())}, "
            f"e.g. {sorted((sent[t] - got) or (got - sent[t]))[:3]}"
        )

    # The hub's ODS table: every record of every spoke once, `_topic` naming its spoke.
    table = Counter((t, (k, v)) for t, k, v in ods_rows(project))
    want = Counter({(t, kv): n for t, c in sent.items() for kv, n in c.items()})
    assert table == want, (
        f"{sum(table.values())} rows in ods_orders for {sum(want.values())} sent: "
        f"missing {sum((want - table).values())}, duplicated {sum((table - want).values())}"
    )
