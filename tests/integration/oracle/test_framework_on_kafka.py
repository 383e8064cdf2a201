"""The framework against Apache Kafka itself: a three-node cluster (replication factor 3,
min.insync.replicas=2), the `apache_kafka_cluster` fixture.

- the Kafka source, on both engines: every record by its coordinates exactly once,
  aborted transactions skipped, a checkpoint resuming exactly after its last batch;
- the publisher: a Delta table's changes published in transactions, seen once each by a
  read_committed consumer;
- `warehouse run --layer all --once` on the bundled example as a user runs it (a
  subprocess, the cluster given by environment variables) while one broker is SIGKILLed
  and restarted: the tables equal the independent computation of
  tests/integration/demo/expected.py, and every source record is in its ODS table or its
  quarantine exactly once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from streams.cdc import Publisher, publish_changes, read_ktable
from streams.cdc.changelog import encode_json
from streams.kafka import ensure_topic, produce, read_kafka_stream
from streams.kafka.admin import end_offsets
from tests.integration.cdc import tables
from tests.integration.cdc.helpers import (
    decoded,
    expected_changes,
    read_records,
    snapshot,
    sort_changes,
)
from tests.integration.demo.expected import compute
from tests.integration.demo.tables import assert_published, assert_tables, ods_coordinates
from tests.integration.kafka.helpers import run_available_now
from tests.integration.oracle.differential import unique
from tests.support.apache_kafka import ApacheKafka
from tests.support.broker_clients import produce_transactions
from warehouse.generate import TOPICS, generate

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[3]
Coord = tuple[str, int, int]


def replicas(bootstrap: str, topic: str, timeout: float = 30) -> dict[int, int]:
    """Replica count per partition of `topic`, once the broker answering knows the topic
    and every partition's replicas are in sync (each broker learns a new topic from the
    metadata log a moment after CreateTopics answers)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        parts = md.partitions if md is not None and md.error is None else {}
        settled = bool(parts) and all(sorted(m.isrs) == sorted(m.replicas) for m in parts.values())
        if settled or time.monotonic() > deadline:
            return {p: len(m.replicas) for p, m in parts.items()}
        time.sleep(0.2)


# -- the Kafka source ------------------------------------------------------------------


def fill(bootstrap: str, topic: str, counts: dict[int, int], tag: str = "v") -> None:
    """`tag-partition-i` values, acks=all: each written to at least two replicas."""
    for part, n in counts.items():
        records = [(None, f"{tag}-{part}-{i}") for i in range(n)]
        produce(bootstrap, topic, records, partition=part, client_config={"acks": "all"})


def read_coords(spark, checkpoint: Path, **kwargs: Any) -> list[list[tuple[Coord, bytes]]]:
    """Run one availableNow query; the `(coordinates, value)` each batch saw."""
    batches: list[list[tuple[Coord, bytes]]] = []

    def sink(batch, batch_id: int) -> None:
        rows = batch.select("topic", "partition", "offset", "value").collect()
        batches.append([((r.topic, r.partition, r.offset), bytes(r.value)) for r in rows])

    run_available_now(read_kafka_stream(spark, **kwargs), sink, checkpoint)
    return batches


def test_kafka_source_reads_each_record_once(
    spark, engine: str, apache_kafka_cluster: ApacheKafka, tmp_path: Path
) -> None:
    bootstrap = apache_kafka_cluster.bootstrap
    topic = unique(f"src-{engine}")
    ensure_topic(bootstrap, topic, partitions=3)
    assert replicas(bootstrap, topic) == {0: 3, 1: 3, 2: 3}  # the broker's default, not 1
    counts = {0: 60, 1: 25, 2: 7}
    fill(bootstrap, topic, counts)
    # A committed and an aborted transaction on partition 2: their markers take offsets
    # 7+2 and 7+2+1+2, the aborted records are not read (read_committed).
    produce_transactions(
        bootstrap,
        unique("txn"),
        topic,
        [([(None, "c-0"), (None, "c-1")], True), ([(None, "a-0"), (None, "a-1")], False)],
        partition=2,
    )
    kwargs = dict(bootstrap=bootstrap, topics=topic, engine=engine, max_offsets_per_trigger=40)
    batches = read_coords(spark, tmp_path / "cp", **kwargs)
    rows = [r for b in batches for r in b]
    expected = {(topic, p, o): f"v-{p}-{o}".encode() for p, n in counts.items() for o in range(n)}
    expected[(topic, 2, 7)] = b"c-0"
    expected[(topic, 2, 8)] = b"c-1"
    assert sorted(rows) == sorted(expected.items())  # every offset once, value with it
    assert len(batches) >= 3 and all(len(b) <= 40 for b in batches)

    # The checkpoint resumes exactly after the last batch.
    fill(bootstrap, topic, {0: 5}, tag="w")
    again = [r for b in read_coords(spark, tmp_path / "cp", **kwargs) for r in b]
    assert sorted(again) == [((topic, 0, o), f"w-0-{o - 60}".encode()) for o in range(60, 65)]


# -- the publisher ---------------------------------------------------------------------


def test_publisher_changes_once_each(apache_kafka_cluster: ApacheKafka, tmp_path: Path) -> None:
    bootstrap = apache_kafka_cluster.bootstrap
    path, topic, name = str(tmp_path / "users"), unique("mv.users"), unique("ads_users")
    tables.create(path)
    tables.upsert(path, [tables.row(i, f"u{i}", 100 * i) for i in (1, 2, 3)])
    first = publish_changes(path, bootstrap=bootstrap, topic=topic, keys=tables.KEYS, table=name)
    assert (first.first_version, first.last_version, first.records) == (0, 1, 3)
    assert first.transactional
    assert replicas(bootstrap, topic) == {0: 3}

    tables.upsert(path, [tables.row(2, "u2-renamed", 250), tables.row(4, "u4", 400)])
    last = tables.delete(path, [3])
    second = publish_changes(
        path, bootstrap=bootstrap, topic=topic, keys=tables.KEYS, table=name, max_versions=1
    )
    assert (second.first_version, second.last_version, second.tombstones) == (2, last, 1)
    again = publish_changes(path, bootstrap=bootstrap, topic=topic, keys=tables.KEYS, table=name)
    assert again.skipped and again.records == 0

    published = decoded(read_records(bootstrap, topic))
    assert len(published) == 6  # 3 inserts, an update and an insert, a delete
    assert sort_changes(published) == sort_changes(expected_changes(path, 0, last, tables.KEYS))
    got = read_ktable(None, bootstrap, topic).to_pylist()
    by_key = {encode_json({"user_id": r["user_id"]}).decode(): r for r in got}
    assert by_key == snapshot(path, last, tables.KEYS)


def test_a_kept_publisher_publishes_each_version_once(
    apache_kafka_cluster: ApacheKafka, tmp_path: Path
) -> None:
    """A table writer's `Publisher`, one transaction right after another, each call
    starting after its own last commit; a new publisher reads the marker they left."""
    bootstrap = apache_kafka_cluster.bootstrap
    path, topic, name = str(tmp_path / "users"), unique("mv.users"), unique("ads_users")
    tables.create(path)
    kw = {"bootstrap": bootstrap, "topic": topic, "keys": tables.KEYS, "table": name}
    with Publisher(path, **kw) as publisher:
        for i in range(1, 9):
            version = tables.upsert(
                path,
                [tables.row(i, f"u{i}", i), tables.row(1, f"x{i}", i)]
                if i > 1
                else [tables.row(1, "u1", 1)],
            )
            result = publisher.publish()
            assert (result.last_version, result.transactional) == (version, True)
    assert publish_changes(path, **kw).skipped

    published = decoded(read_records(bootstrap, topic))
    assert sort_changes(published) == sort_changes(expected_changes(path, 0, version, tables.KEYS))


# -- warehouse run, a broker killed and restarted --------------------------------------

EVENTS, SEED = 300, 11
ENGINE = "native"
"""The example's default (`auto`) resolves to the native engines when their jars are cached."""
MAX_RUNS = 3


class Run:
    """One `warehouse run --layer all --once` subprocess; its output read by a thread."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        command = [sys.executable, "-m", "warehouse", "--project", str(REPO)]
        command += ["run", "--layer", "all", "--once"]
        self.lines: list[str] = []
        self.log = log
        self.proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=log.parent,
        )
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with self.log.open("w") as f:
            for line in self.proc.stdout:
                f.write(line)
                f.flush()
                self.lines.append(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            if any(text in line for line in self.lines):
                return True
            time.sleep(0.2)
        return any(text in line for line in self.lines)

    def finish(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(30)
            self._thread.join(30)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def leader(bootstrap: str, topic: str, partition: int) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.list_topics(topic, timeout=30).topics[topic].partitions[partition].leader


def test_warehouse_run_survives_a_broker_kill(
    apache_kafka_cluster: ApacheKafka, tmp_path: Path, native_jars: object
) -> None:
    kafka = apache_kafka_cluster
    bootstrap = kafka.bootstrap
    root = tmp_path / "wh"
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "WAREHOUSE__KAFKA__BOOTSTRAP": bootstrap,
        "WAREHOUSE__WAREHOUSE_ROOT": str(root),
        "WAREHOUSE__SPARK__MASTER": "local[2]",
        "WAREHOUSE__ENGINES__KAFKA": ENGINE,
        "WAREHOUSE__ENGINES__DELTA": ENGINE,
    }
    generated = subprocess.run(
        [sys.executable, "-m", "warehouse", "--project", str(REPO), "generate"]
        + ["--events", str(EVENTS), "--seed", str(SEED)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert generated.returncode == 0, generated.stdout + generated.stderr
    for topic, partitions in TOPICS.items():
        assert replicas(bootstrap, topic) == dict.fromkeys(range(partitions), 3), topic
    ends = {t: end_offsets(bootstrap, t)[t] for t in TOPICS}

    # The broker leading `orders` goes down (SIGKILL) as the first query starts, and
    # comes back on its storage while later tables run.
    victim = leader(bootstrap, "orders", 0)
    runs: list[Run] = []
    run = Run(env, tmp_path / "run-1.log")
    runs.append(run)
    assert run.wait_for("running once from", 300), run.text
    kafka.kill_node(victim)
    killed_at = len(run.lines)
    run.wait_for("dim_users [dwd]: running once from", 240)
    kafka.restart_node(victim)
    restarted_at = len(run.lines)
    code = run.finish(600)
    while code != 0 and len(runs) < MAX_RUNS:  # a failed run is run again, as an operator would
        run = Run(env, tmp_path / f"run-{len(runs) + 1}.log")
        runs.append(run)
        code = run.finish(600)
    print(
        f"node {victim} killed after output line {killed_at}, restarted after line "
        f"{restarted_at}; {len(runs)} run(s), exit statuses "
        f"{[r.proc.returncode for r in runs]}"
    )
    assert code == 0, "\n\n".join(r.text[-4000:] for r in runs)
    kafka.wait_in_sync(list(TOPICS))

    for topic in ("orders", "payments", "page_views"):
        assert ods_coordinates(root, topic) == {
            (p, o): 1 for p, end in ends[topic].items() for o in range(end)
        }, topic
    exp = compute(generate(EVENTS, seed=SEED))
    assert_tables(root, exp)

    # The views published on the cluster: their latest rows equal the ADS tables'
    # expected rows, and no change is there twice (read_committed).
    assert_published(bootstrap, exp)
    for topic in ("mv.city_leaderboard", "mv.conversion"):
        assert replicas(bootstrap, topic) == {0: 3}, topic
