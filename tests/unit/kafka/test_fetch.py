"""`_runs`: a consume() result split into runs of one partition; `_to_batch`: one run
into the source's Arrow batch."""

from __future__ import annotations

import datetime as dt

from confluent_kafka import Message
from pyspark.sql.pandas.types import to_arrow_schema

from streams.kafka.fetch import _runs, _to_batch
from streams.kafka.source import SCHEMA

ARROW = to_arrow_schema(SCHEMA, timezone="UTC")
UTC = dt.UTC


def _msg(offset: int, ts: tuple[int, int] = (1, 1_700_000_000_123), key: bytes | None = b"k"):
    return Message(
        topic="t", partition=2, offset=offset, key=key, value=b"v%d" % offset, timestamp=ts
    )


def _columns(msgs: list[Message]) -> dict[str, list]:
    batch = _to_batch(msgs, "t", 2, ARROW)
    assert batch.schema == ARROW
    return batch.to_pydict()


def test_contiguous_and_gapped_offsets() -> None:
    assert _columns([_msg(o) for o in range(10, 14)])["offset"] == [10, 11, 12, 13]
    # Compaction or transaction markers leave gaps: each record keeps its own offset.
    got = _columns([_msg(o) for o in (10, 12, 13, 20)])
    assert got["offset"] == [10, 12, 13, 20]
    assert got["value"] == [b"v10", b"v12", b"v13", b"v20"]


def test_timestamps_types_and_constant_columns() -> None:
    msgs = [
        _msg(0, (1, 1_700_000_000_123)),  # CreateTime
        _msg(1, (2, 1_700_000_000_456), key=None),  # LogAppendTime
        _msg(2, (0, -1)),  # not available
    ]
    got = _columns(msgs)
    assert got["timestamp"] == [
        dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC),
        dt.datetime(2023, 11, 14, 22, 13, 20, 456000, tzinfo=UTC),
        None,
    ]
    assert got["timestamp_type"] == [0, 1, -1]
    assert got["key"] == [b"k", None, b"k"]
    assert (got["topic"], got["partition"]) == (["t"] * 3, [2] * 3)
    assert got["headers"] == [None] * 3


def test_runs_split_a_consume_result_where_the_partition_or_topic_changes() -> None:
    def at(topic: str, partition: int, offset: int) -> Message:
        return Message(topic=topic, partition=partition, offset=offset, value=b"")

    msgs = [at("t", 0, 5), at("t", 0, 6), at("t", 1, 0), at("t", 0, 7), at("t", 0, 8)]
    assert _runs(msgs, False) == [(0, 0, 2), (1, 2, 3), (0, 3, 5)]
    assert _runs(msgs[:2], False) == [(0, 0, 2)]
    assert _runs(msgs[2:3], False) == [(1, 0, 1)]
    # Two topics: the same partition number of another topic is another run.
    mixed = [at("a", 0, 1), at("b", 0, 1), at("b", 0, 2), at("b", 1, 0)]
    assert _runs(mixed, True) == [(("a", 0), 0, 1), (("b", 0), 1, 3), (("b", 1), 3, 4)]
