"""The framework against Apache Kafka itself: a three-node cluster (replication factor 3,
min.insync.replicas=2), the `apache_kafka_cluster` fixture.

- the Kafka source, on both engines: every record by its coordinates exactly once,
  aborted transactions skipped, a checkpoint resuming exactly after its last batch;
- the publisher: a Delta table's changes published in transactions, seen once each by a
  read_committed consumer;
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from streams.cdc import publish_changes, read_ktable
from streams.cdc.changelog import encode_json
from streams.kafka import ensure_topic, produce, read_kafka_stream
from tests.integration.cdc import tables
from tests.integration.cdc.helpers import (
    decoded,
    expected_changes,
    read_records,
    snapshot,
    sort_changes,
)
from tests.integration.kafka.helpers import run_available_now
from tests.integration.oracle.differential import unique
from tests.support.apache_kafka import ApacheKafka
from tests.support.broker_clients import produce_transactions

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[3]
Coord = tuple[str, int, int]


def replicas(bootstrap: str, topic: str) -> dict[int, int]:
    """Replica count per partition of `topic`."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    parts = admin.list_topics(topic, timeout=30).topics[topic].partitions
    return {p: len(m.replicas) for p, m in parts.items()}


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
