"""The source's reader (`read_range`, confluent-kafka's `Consumer.consume`) against a
real broker process, without Spark."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from pyspark.sql.pandas.types import to_arrow_schema

from streams.kafka import DataLossError
from streams.kafka.admin import end_offsets, ensure_topic, produce
from streams.kafka.fetch import consumer_config, read_range, read_ranges
from streams.kafka.offsets import OffsetRange
from streams.kafka.source import SCHEMA, SCHEMA_WITHOUT_HEADERS
from tests.integration.kafka.helpers import topic_with_deleted_head
from tests.support.broker_clients import produce_transactions

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

ARROW = to_arrow_schema(SCHEMA, timezone="UTC")


def _read(bootstrap: str, rng: OffsetRange, **kwargs) -> list[tuple[int, bytes]]:
    conf = consumer_config(bootstrap, {}, isolation_level="read_committed", size=rng.size)
    out = []
    for batch in read_range(rng, conf, ARROW, **kwargs):
        out += zip(
            batch.column("offset").to_pylist(), batch.column("value").to_pylist(), strict=True
        )
    return out


def test_a_range_up_to_the_log_end_does_not_wait_for_more_records(broker, unique) -> None:
    # Each micro-batch reads up to the high watermark, where no later record can fill
    # a `consume` call's batch. With a poll timeout longer than this test's own timeout,
    # a reader that asked for more records than the range holds would never finish.
    topic = unique("tail")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    produce(broker.bootstrap, topic, [(None, f"v{i}") for i in range(300)], partition=0)
    assert end_offsets(broker.bootstrap, topic)[topic] == {0: 300}
    got = _read(broker.bootstrap, OffsetRange(topic, 0, 100, 300), poll_timeout=600)
    assert got == [(o, f"v{o}".encode()) for o in range(100, 300)]
    # A range ending before the log's end stops at its end, records after it unread.
    got = _read(broker.bootstrap, OffsetRange(topic, 0, 0, 7), poll_timeout=600)
    assert [o for o, _ in got] == list(range(7))


def test_a_range_whose_tail_is_a_transaction_marker_ends_at_its_position(broker, unique) -> None:
    # The last offset is the commit marker: no record will ever arrive for it, so the
    # range ends through the consumer's position once a poll comes back empty.
    topic = unique("marker")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    produce_transactions(
        broker.bootstrap, unique("tx"), topic, [([(None, f"t{i}") for i in range(20)], True)]
    )
    end = end_offsets(broker.bootstrap, topic)[topic][0]
    assert end == 21  # 20 records and the marker
    got = _read(broker.bootstrap, OffsetRange(topic, 0, 0, end), poll_timeout=0.2)
    assert got == [(o, f"t{o}".encode()) for o in range(20)]


def _table(bootstrap: str, ranges: list[OffsetRange], schema: pa.Schema, **kwargs) -> pa.Table:
    conf = consumer_config(bootstrap, {}, isolation_level="read_committed", size=1000)
    batches = list(read_ranges(ranges, conf, schema, batch_records=50, **kwargs))
    assert all(b.schema == schema for b in batches)
    t = pa.Table.from_batches(batches, schema)
    return t.sort_by([("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")])


EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _row(
    topic: str,
    partition: int,
    offset: int,
    key: bytes | None,
    value: bytes | None,
    timestamp: dt.datetime | None,
) -> dict:
    """A record as the reader's batches hold it (`timestamp_type` 0: CreateTime)."""
    return {
        "key": key,
        "value": value,
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "timestamp": timestamp,
        "timestamp_type": 0,
    }


def _now_ms() -> dt.datetime:
    """Now, cut to the millisecond a record's timestamp has."""
    now = dt.datetime.now(dt.UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


@pytest.mark.parametrize("arrow", [ARROW, to_arrow_schema(SCHEMA_WITHOUT_HEADERS, timezone="UTC")])
def test_a_round_returns_exactly_the_records_produced(broker, unique, arrow) -> None:
    # One task's round over two topics and three partitions, ranges cut inside the log,
    # with what a record can carry: null and empty keys and values, headers (one with a
    # null value), and aborted transactions that read_committed skips.
    a, b = unique("a"), unique("b")
    for t in (a, b):
        ensure_topic(broker.bootstrap, t, partitions=2)
    # Idempotent: no retry reorders a partition's records, so their offsets are known.
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "enable.idempotence": True}
    )
    produced: dict[tuple[str, int], list[dict]] = {(t, p): [] for t in (a, b) for p in (0, 1)}
    for i in range(400):
        topic, partition = (a if i % 3 else b), i % 2
        key = None if i % 7 == 0 else (b"" if i % 11 == 0 else f"k{i}".encode())
        value = None if i % 13 == 0 else (b"" if i % 17 == 0 else f'{{"i":{i}}}'.encode())
        headers = [("h", f"{i}".encode()), ("empty", None)] if i % 5 == 0 else None
        ms = 1_700_000_000_000 + i
        producer.produce(
            topic, partition=partition, key=key, value=value, headers=headers, timestamp=ms
        )
        log = produced[(topic, partition)]
        log.append(
            _row(topic, partition, len(log), key, value, EPOCH + dt.timedelta(milliseconds=ms))
            | {"headers": None if headers is None else [{"key": k, "value": v} for k, v in headers]}
        )
    producer.flush(30)
    before = _now_ms()
    produce_transactions(
        broker.bootstrap,
        unique("tx"),
        b,
        [([(None, f"gone-{i}") for i in range(30)], False), ([(None, "kept")], True)],
        partition=1,
    )
    after = dt.datetime.now(dt.UTC)
    ends = {t: end_offsets(broker.bootstrap, t)[t] for t in (a, b)}
    ranges = [
        OffsetRange(a, 0, 3, ends[a][0] - 5),
        OffsetRange(a, 1, 0, ends[a][1]),
        OffsetRange(b, 1, 10, ends[b][1]),  # ends on the commit marker
    ]
    # b's partition 1 ends: 30 aborted records, their abort marker, `kept`, its commit marker.
    kept = _row(b, 1, ends[b][1] - 2, None, b"kept", None) | {"headers": None}
    expected = [
        r
        for rng in ranges
        for r in produced[(rng.topic, rng.partition)]
        if rng.start <= r["offset"] < rng.end
    ] + [kept]
    expected.sort(key=lambda r: (r["topic"], r["partition"], r["offset"]))
    if "headers" not in arrow.names:
        expected = [{k: v for k, v in r.items() if k != "headers"} for r in expected]
    got = _table(broker.bootstrap, ranges, arrow).to_pylist()
    for r in got:
        if r["value"] == b"kept":  # CreateTime: the transactional producer's clock
            assert before <= r["timestamp"] <= after
            r["timestamp"] = None
    assert got == expected
    assert sum(r.size for r in ranges) - len(got) == 30 + 2  # aborted records, two markers


def test_data_loss_fails_or_skips_to_the_earliest_offset(broker_factory, unique) -> None:
    topic = unique("loss")
    bootstrap, earliest, end = topic_with_deleted_head(broker_factory, topic)
    rng = OffsetRange(topic, 0, 0, end)
    with pytest.raises(DataLossError, match=f"`{topic}` partition 0: offset 0 is no longer"):
        _read(bootstrap, rng)
    got = [o for o, _ in _read(bootstrap, rng, on_data_loss="skip")]
    assert got and got[0] >= earliest and got == list(range(got[0], end))


def test_a_callable_setting_reaches_the_consumer(broker, unique) -> None:
    # A callback (an error or OAuth token callback) is taken as it is, not as text.
    topic = unique("cb")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    produce(broker.bootstrap, topic, [(None, "one")])
    errors: list[object] = []
    conf = consumer_config(
        broker.bootstrap, {"error_cb": errors.append}, isolation_level="read_committed", size=1
    )
    batches = list(read_range(OffsetRange(topic, 0, 0, 1), conf, ARROW))
    assert [v for b in batches for v in b.column("value").to_pylist()] == [b"one"]
