"""Materialized views out: a table's change feed to a compacted topic, read back as a KTable.

Real broker process, real Delta tables (delta-rs merges and deletes produce the change
feed). The oracle is independent of the publisher: the changes expected per version
come from comparing consecutive snapshots of the table.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource
from deltalake import DeltaTable

from streams.cdc import (
    Publisher,
    PublishError,
    latest_values,
    marker_group,
    position_topic,
    publish_changes,
    read_ktable,
)
from streams.cdc.changelog import encode_json
from streams.kafka import ensure_topic
from tests.integration.cdc import tables
from tests.integration.cdc.helpers import (
    decoded,
    expected_changes,
    read_records,
    snapshot,
    sort_changes,
)
from tests.support.ports import free_port

pytestmark = pytest.mark.kafka


def _ktable_rows(bootstrap: str, topic: str) -> dict[str, dict]:
    got = read_ktable(None, bootstrap, topic)
    return {encode_json({"user_id": r["user_id"]}).decode(): r for r in got.to_pylist()}


def test_publish_upserts_and_tombstones_once_per_version(broker, where: str, unique) -> None:
    path, topic, name = f"{where}/users", unique("mv.users"), unique("ads_users")
    tables.create(path)
    tables.upsert(path, [tables.row(i, f"u{i}", 100 * i) for i in (1, 2, 3)])
    first = publish_changes(
        path, bootstrap=broker.bootstrap, topic=topic, keys=tables.KEYS, table=name
    )
    assert (first.first_version, first.last_version, first.records) == (0, 1, 3)
    assert first.transactional

    tables.upsert(path, [tables.row(2, "u2-renamed", 250), tables.row(4, "u4", 400)])
    last = tables.delete(path, [3])
    # a backlog of two versions, one transaction (and marker) per version
    second = publish_changes(
        path, bootstrap=broker.bootstrap, topic=topic, keys=tables.KEYS, table=name, max_versions=1
    )
    assert (second.first_version, second.last_version) == (2, last)
    assert second.tombstones == 1

    # a call with nothing new (a replayed batch) publishes nothing
    again = publish_changes(
        path, bootstrap=broker.bootstrap, topic=topic, keys=tables.KEYS, table=name
    )
    assert again.skipped and again.records == 0

    published = decoded(read_records(broker.bootstrap, topic))
    assert len(published) == 6  # 3 inserts, an update and an insert, a delete
    assert sort_changes(published) == sort_changes(expected_changes(path, 0, last, tables.KEYS))
    assert _ktable_rows(broker.bootstrap, topic) == snapshot(path, last, tables.KEYS)

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    assert configs["cleanup.policy"].value == "compact"


def test_a_new_table_at_the_same_path_is_published_from_its_start(
    broker, tmp_path: Path, unique
) -> None:
    """The marker carries the Delta table id: a reset table is not mistaken for done."""
    import shutil

    path, topic, name = str(tmp_path / "users"), unique("mv.users"), unique("ads_users")
    tables.create(path)
    tables.upsert(path, [tables.row(i, f"u{i}", i) for i in range(1, 4)])
    tables.upsert(path, [tables.row(1, "again", 9)])
    publish_changes(path, bootstrap=broker.bootstrap, topic=topic, keys=tables.KEYS, table=name)
    shutil.rmtree(path)
    tables.create(path)
    tables.upsert(path, [tables.row(7, "seven", 7)])  # version 1 < the marker's 3
    result = publish_changes(
        path, bootstrap=broker.bootstrap, topic=topic, keys=tables.KEYS, table=name
    )
    # key 7, and tombstones of the old table's keys 1, 2 and 3
    assert (result.first_version, result.records, result.tombstones) == (0, 4, 3)
    assert set(latest_values(broker.bootstrap, topic)) == {b'{"user_id":7}'}


def test_a_kept_publisher_follows_its_table_replaced(broker, tmp_path: Path, unique) -> None:
    """The kept publisher keeps its table open between calls: a table written again at
    its path is opened again and published from its start."""
    import shutil

    path, topic, name = str(tmp_path / "users"), unique("mv.users"), unique("ads_users")
    tables.create(path)
    kw = {"bootstrap": broker.bootstrap, "topic": topic, "keys": tables.KEYS, "table": name}
    with Publisher(path, **kw) as publisher:
        for i in range(1, 4):
            tables.upsert(path, [tables.row(i, f"u{i}", i)])
        assert publisher.publish().last_version == 3
        shutil.rmtree(path)
        with pytest.raises(PublishError, match="no Delta table at"):
            publisher.publish()
        tables.create(path)
        tables.upsert(path, [tables.row(7, "seven", 7)])  # version 1 < the marker's 3
        result = publisher.publish()
    assert (result.first_version, result.last_version, result.records) == (0, 1, 4)
    assert set(latest_values(broker.bootstrap, topic)) == {b'{"user_id":7}'}


def test_without_transactions_publishes_at_least_once_and_says_so(
    broker, tmp_path: Path, unique, caplog
) -> None:
    path, topic, name = str(tmp_path / "users"), unique("mv.users"), unique("ads_users")
    tables.create(path)
    last = tables.upsert(path, [tables.row(i, f"u{i}", i) for i in range(1, 6)])
    caplog.set_level(logging.INFO, logger="streams.cdc.publish")
    result = publish_changes(
        path,
        bootstrap=broker.bootstrap,
        topic=topic,
        keys=tables.KEYS,
        table=name,
        transactional=False,
    )
    assert not result.transactional and result.records == 5
    assert "at-least-once" in caplog.text
    assert publish_changes(
        path,
        bootstrap=broker.bootstrap,
        topic=topic,
        keys=tables.KEYS,
        table=name,
        transactional=False,
    ).skipped
    published = decoded(read_records(broker.bootstrap, topic, isolation="read_uncommitted"))
    assert sort_changes(published) == sort_changes(expected_changes(path, 0, last, tables.KEYS))


def test_the_position_is_a_record_of_the_position_topic(broker, tmp_path: Path, unique) -> None:
    """The position goes to `<topic>.publish-position`, keyed by the table, in the same
    transaction as the records: no group offset, which Kafka would expire."""
    from confluent_kafka import Consumer, TopicPartition

    path, topic, name = str(tmp_path / "users"), unique("mv.users"), unique("ads_users")
    tables.create(path)
    last = tables.upsert(path, [tables.row(1, "a", 1)])
    publish_changes(path, bootstrap=broker.bootstrap, topic=topic, keys=tables.KEYS, table=name)
    positions = read_records(broker.bootstrap, position_topic(topic))
    table_id = DeltaTable(path).metadata().id
    assert [(json.loads(k), json.loads(v)) for k, v, _ in positions] == [
        (
            {"table": name},
            {"table_id": table_id, "version": last + 1, "records": 0, "clearing": False},
        )
    ]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": marker_group(name)})
    try:
        assert consumer.committed([TopicPartition(topic, 0)], timeout=30)[0].offset < 0
    finally:
        consumer.close()


def test_a_position_kept_as_a_group_offset_is_read(broker, tmp_path: Path, unique) -> None:
    """A topic published by an older publisher (its position a committed offset of the
    group `warehouse-publish.<table>`) goes on from there, and from then on has a record."""
    from confluent_kafka import Consumer, TopicPartition

    path, topic, name = str(tmp_path / "users"), unique("mv.users"), unique("ads_users")
    tables.create(path)
    tables.upsert(path, [tables.row(1, "a", 1)])
    done = tables.upsert(path, [tables.row(2, "b", 2)])
    table_id = DeltaTable(path).metadata().id
    ensure_topic(broker.bootstrap, topic, config={"cleanup.policy": "compact"})
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": marker_group(name)})
    try:
        meta = json.dumps({"table_id": table_id, "version": done})
        consumer.commit(offsets=[TopicPartition(topic, 0, done + 1, meta)], asynchronous=False)
    finally:
        consumer.close()
    last = tables.upsert(path, [tables.row(3, "c", 3)])
    kw = {"bootstrap": broker.bootstrap, "topic": topic, "keys": tables.KEYS, "table": name}
    result = publish_changes(path, **kw)
    assert (result.first_version, result.last_version, result.records) == (last, last, 1)
    assert len(read_records(broker.bootstrap, position_topic(topic))) == 1
    assert publish_changes(path, **kw).skipped


def test_a_kept_publisher_publishes_each_version_once(broker, tmp_path: Path, unique) -> None:
    """A table's writer keeps one `Publisher`: each call starts from its own last commit,
    and a new publisher of the table starts from the marker that commit left."""
    path, topic, name = str(tmp_path / "users"), unique("mv.users"), unique("ads_users")
    tables.create(path)
    kw = {"bootstrap": broker.bootstrap, "topic": topic, "keys": tables.KEYS, "table": name}
    with Publisher(path, **kw) as publisher:
        assert publisher.publish().records == 0  # version 0: the table's creation
        for i in range(1, 6):
            rows = [tables.row(i, f"u{i}", i)] + ([tables.row(1, f"x{i}", i)] if i > 1 else [])
            version = tables.upsert(path, rows)
            result = publisher.publish()
            assert (result.first_version, result.last_version) == (version, version)
        assert publisher.publish().skipped
    last = tables.delete(path, [2])
    with Publisher(path, **kw) as again:
        assert (again.publish().first_version, again.publish().skipped) == (last, True)

    published = decoded(read_records(broker.bootstrap, topic))
    assert sort_changes(published) == sort_changes(expected_changes(path, 0, last, tables.KEYS))


def test_a_fenced_publisher_starts_over(broker, tmp_path: Path, unique, caplog) -> None:
    """Another publisher of the same table fences a kept one (`init_transactions`): the
    kept one's next transaction fails and is aborted, and the call starts its clients
    again and publishes from the marker, so no version is lost or published twice."""
    path, topic, name = str(tmp_path / "users"), unique("mv.users"), unique("ads_users")
    tables.create(path)
    kw = {"bootstrap": broker.bootstrap, "topic": topic, "keys": tables.KEYS, "table": name}
    caplog.set_level(logging.WARNING, logger="streams.cdc.publish")
    with Publisher(path, **kw) as first:
        tables.upsert(path, [tables.row(1, "a", 1)])
        assert first.publish().records == 1
        tables.upsert(path, [tables.row(2, "b", 2)])
        assert publish_changes(path, **kw).records == 1  # a second publisher: fences `first`
        last = tables.upsert(path, [tables.row(3, "c", 3)])
        result = first.publish()
        assert (result.first_version, result.last_version, result.records) == (last, last, 1)
    assert "another publisher of the table" in caplog.text
    assert "starting them again" in caplog.text

    published = decoded(read_records(broker.bootstrap, topic))
    assert sort_changes(published) == sort_changes(expected_changes(path, 0, last, tables.KEYS))


def test_a_failed_publish_with_new_clients_is_raised(tmp_path: Path, unique) -> None:
    """No broker at the address: the call fails with the table named, and nothing is
    kept for the next one."""
    path = str(tmp_path / "users")
    tables.create(path)
    tables.upsert(path, [tables.row(1, "a", 1)])
    with Publisher(
        path, bootstrap="127.0.0.1:1", topic="mv.users", keys=tables.KEYS, timeout=2.0
    ) as publisher:
        with pytest.raises(PublishError, match="`users`: topic `mv.users` could not be created"):
            publisher.publish()


@pytest.mark.timeout(120, method="thread")  # a hang inside librdkafka ignores signals
def test_a_kept_publisher_survives_a_broker_restart(tmp_path: Path, unique) -> None:
    """The broker restarts between two calls, on its data and port: the kept clients,
    which lost it, are started again, and each version is published once."""

    from streams.broker.launcher import BrokerProcess

    port = free_port()
    path, topic, name = str(tmp_path / "users"), unique("mv.users"), unique("ads_users")
    tables.create(path)
    broker = BrokerProcess(tmp_path / "broker", port=port).start()
    try:
        kw = {"bootstrap": broker.bootstrap, "topic": topic, "keys": tables.KEYS, "table": name}
        with Publisher(path, **kw, timeout=10.0) as publisher:
            tables.upsert(path, [tables.row(1, "a", 1)])
            assert publisher.publish().records == 1
            assert broker.stop() == 0
            broker = BrokerProcess(tmp_path / "broker", port=port).start()
            for i in (2, 3):
                last = tables.upsert(path, [tables.row(i, f"u{i}", i)])
                assert publisher.publish().last_version == last
        published = decoded(read_records(broker.bootstrap, topic))
        assert sort_changes(published) == sort_changes(expected_changes(path, 0, last, tables.KEYS))
    finally:
        broker.stop()


def test_a_backlog_goes_in_bounded_transactions(broker, tmp_path: Path, unique) -> None:
    """A version larger than a transaction's bounds is split across transactions, each
    with its position (records of a version in a fixed order); versions are grouped up
    to the bounds. Each change is seen once, and a new publisher goes on from there."""
    path, topic, name = str(tmp_path / "users"), unique("mv.users"), unique("ads_users")
    tables.create(path)
    tables.upsert(path, [tables.row(i, f"u{i}", i) for i in range(1, 1001)])  # v1: 1000
    for v in range(2, 12):  # v2..v11: 10 records each
        tables.upsert(path, [tables.row(i, f"v{v}-{i}", i) for i in range(1, 11)])
    kw = {"bootstrap": broker.bootstrap, "topic": topic, "keys": tables.KEYS, "table": name}
    result = publish_changes(path, **kw, max_records=300)
    assert (result.first_version, result.last_version, result.records) == (0, 11, 1100)
    positions = [json.loads(v) for _, v, _ in read_records(broker.bootstrap, position_topic(topic))]
    steps = [(p["version"], p["records"]) for p in positions]
    # version 1 in three transactions of 300 records and a fourth with its last 100 and
    # the 10 records of each of versions 2..11
    assert steps == [(1, 300), (1, 600), (1, 900), (12, 0)]
    last = tables.upsert(path, [tables.row(5000, "new", 1)])
    again = publish_changes(path, **kw, max_records=300)
    assert (again.first_version, again.records) == (last, 1)
    published = decoded(read_records(broker.bootstrap, topic))
    assert sort_changes(published) == sort_changes(expected_changes(path, 0, last, tables.KEYS))

    # bounded by bytes (keys and values) as well
    by_bytes = {**kw, "topic": unique("mv.users")}
    assert publish_changes(path, **by_bytes, max_bytes=20_000).records == 1101
    records = read_records(broker.bootstrap, by_bytes["topic"])
    size = sum(len(k or b"") + len(v or b"") for k, v, _ in records)
    steps = len(read_records(broker.bootstrap, position_topic(by_bytes["topic"])))
    assert size // 20_000 + 1 <= steps <= size // 10_000 + 1


def test_a_backlog_too_slow_for_one_transaction_is_published(
    broker, tmp_path: Path, unique, caplog
) -> None:
    """A backlog whose records cannot all be delivered within the producer's transaction
    timeout (1 s here; Kafka's default is 60 s): the publisher does not try the same
    transaction again and again, it publishes the backlog in transactions that fit."""
    path, topic, name = str(tmp_path / "users"), unique("mv.users"), unique("ads_users")
    tables.create(path)
    rows = [tables.row(i, "x" * 200, i) for i in range(1, 120_001)]
    for start in range(0, len(rows), 40_000):
        last = tables.upsert(path, rows[start : start + 40_000])
    kw = {"bootstrap": broker.bootstrap, "topic": topic, "keys": tables.KEYS, "table": name}
    slow = {"transaction.timeout.ms": 1000}
    caplog.set_level(logging.WARNING, logger="streams.cdc.publish")
    result = publish_changes(path, **kw, client_config=slow)
    assert (result.last_version, result.records) == (last, 120_000)
    published = read_records(broker.bootstrap, topic)
    assert len(published) == 120_000
    assert len({k for k, _, _ in published}) == 120_000
    assert len(read_records(broker.bootstrap, position_topic(topic))) >= 3


def test_a_table_built_again_tombstones_the_keys_it_no_longer_has(
    broker, tmp_path: Path, unique
) -> None:
    """`warehouse reset` deletes the table; the table built again is another Delta table
    at the same path, published from its version 0. The topic's keys the new table does
    not have are tombstoned in the same transactions that move the position to it (here
    one key per transaction), each once: the compacted topic is the new table."""
    import shutil

    path, topic, name = str(tmp_path / "users"), unique("mv.users"), unique("ads_users")
    tables.create(path)
    tables.upsert(path, [tables.row(i, f"u{i}", i) for i in (1, 2, 3, 4)])
    kw = {"bootstrap": broker.bootstrap, "topic": topic, "keys": tables.KEYS, "table": name}
    publish_changes(path, **kw)
    before = len(read_records(broker.bootstrap, topic))

    shutil.rmtree(path)  # what `warehouse reset` does to the table
    tables.create(path)
    tables.upsert(path, [tables.row(1, "one again", 10), tables.row(5, "five", 5)])
    last = tables.delete(path, [5])
    result = publish_changes(path, **kw, max_records=1)
    assert publish_changes(path, **kw).skipped
    assert _ktable_rows(broker.bootstrap, topic) == snapshot(path, last, tables.KEYS)
    after = decoded(read_records(broker.bootstrap, topic))[before:]
    # first the keys only the old table had, as of the version published up to
    assert after[:3] == [(f'{{"user_id":{i}}}', None, last) for i in (2, 3, 4)]
    assert sort_changes(after[3:]) == sort_changes(expected_changes(path, 0, last, tables.KEYS))
    assert (result.records, result.tombstones) == (3 + 3, 3 + 1)  # key 5 deleted
    new_id = DeltaTable(path).metadata().id
    steps = [json.loads(v) for _, v, _ in read_records(broker.bootstrap, position_topic(topic))]
    assert [p["clearing"] for p in steps if p["table_id"] == new_id][:4] == [
        True,
        True,
        False,  # the last of the three keys cleared: the position moves to version 0
        False,
    ]
