"""The source's reader (`read_range`) against a real broker process, without Spark."""

from __future__ import annotations

import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from streams.kafka._fetch import consumer_config, read_range
from streams.kafka.admin import end_offsets, ensure_topic, produce
from streams.kafka.offsets import OffsetRange
from streams.kafka.source import SCHEMA
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
