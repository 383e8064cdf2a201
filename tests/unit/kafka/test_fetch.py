"""`_to_batch`: one consume() run of a partition into the source's Arrow batch."""

from __future__ import annotations

import datetime as dt

from confluent_kafka import Message
from pyspark.sql.pandas.types import to_arrow_schema

from streams.kafka.fetch import _to_batch
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
