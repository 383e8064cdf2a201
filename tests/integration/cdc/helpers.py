"""Helpers of the CDC tests: Debezium/upsert records as Kafka-shaped frames, table reads."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from streams.delta.arrow import read_table as read_arrow
from streams.delta.tables import open_table

KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp"
)
USERS_DDL = "user_id bigint, name string, city string"
UTC = dt.UTC


def ts(ms: int) -> dt.datetime:
    """The `valid_from`/`valid_to` Spark returns for epoch millis `ms` (session TZ is UTC)."""
    return dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)


def kafka_time(offset: int) -> dt.datetime:
    """The Kafka timestamp `kafka_frame` gives the record at `offset`: one second apart."""
    return dt.datetime(2024, 1, 1) + dt.timedelta(seconds=offset)


def debezium(op: str, ts_ms: int, *, before: dict | None = None, after: dict | None = None) -> str:
    return json.dumps(
        {"before": before, "after": after, "op": op, "source": {"ts_ms": ts_ms}, "ts_ms": ts_ms}
    )


def user(user_id: int, name: str | None = None, city: str | None = None) -> dict[str, Any]:
    return {"user_id": user_id, "name": name, "city": city}


def kafka_frame(
    spark: SparkSession,
    records: Sequence[tuple[Any, str | None]],
    *,
    first_offset: int = 0,
    topic: str = "shop.users",
) -> DataFrame:
    """Records `(key, value)` as the Kafka source yields them, offsets from `first_offset`."""
    rows = []
    for i, (key, value) in enumerate(records):
        k = json.dumps(key).encode() if key is not None else None
        v = value.encode() if value is not None else None
        offset = first_offset + i
        rows.append((k, v, topic, 0, offset, kafka_time(offset)))
    return spark.createDataFrame(rows, KAFKA_SCHEMA)


def read_table(spark: SparkSession, path: str, columns: Sequence[str]) -> DataFrame:
    data = pa.table(read_arrow(str(path), columns=list(columns)))
    return spark.createDataFrame(data)


# -- published topics ----------------------------------------------------------------


def read_records(
    bootstrap: str, topic: str, *, isolation: str = "read_committed", timeout: float = 60.0
) -> list[tuple[bytes | None, bytes | None, int | None]]:
    """Every record of partition 0 as `(key, value, warehouse.version header)`, in order."""
    import time
    import uuid

    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    try:
        tp = TopicPartition(topic, 0)
        low, high = consumer.get_watermark_offsets(tp, timeout=timeout, cached=False)
        out: list[tuple[bytes | None, bytes | None, int | None]] = []
        if high <= low:
            return out
        consumer.assign([TopicPartition(topic, 0, low)])
        deadline = time.monotonic() + timeout
        while consumer.position([tp])[0].offset < high:
            assert time.monotonic() < deadline, f"topic {topic}: did not reach offset {high}"
            for msg in consumer.consume(500, timeout=0.5):
                assert msg.error() is None, msg.error()
                version = dict(msg.headers() or []).get("warehouse.version")
                out.append((msg.key(), msg.value(), int(version) if version else None))
        return out
    finally:
        consumer.close()


def snapshot(path: str, version: int, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The table at `version` as `{key JSON: row}` (rows in published JSON form)."""
    from streams.cdc.changelog import encode_json

    rows = read_arrow(open_table(str(path), version=version)).to_pylist()
    return {encode_json({k: r[k] for k in keys}).decode(): json.loads(encode_json(r)) for r in rows}


def expected_changes(
    path: str, first: int, last: int, keys: Sequence[str]
) -> list[tuple[str, dict[str, Any] | None, int]]:
    """`(key, row or None, version)` for every key whose row differs between consecutive
    snapshots, found by comparing table versions (not from the change feed)."""
    out: list[tuple[str, dict[str, Any] | None, int]] = []
    before = snapshot(path, first - 1, keys) if first > 0 else {}
    for v in range(first, last + 1):
        after = snapshot(path, v, keys)
        for key in sorted(set(before) | set(after)):
            if before.get(key) != after.get(key):
                out.append((key, after.get(key), v))
        before = after
    return out


def decoded(records: list[tuple[bytes | None, bytes | None, int | None]]) -> list[tuple]:
    """Published records as comparable `(key, row or None, version)`."""
    return [
        (k.decode(), None if v is None else json.loads(v), version) for k, v, version in records
    ]


def sort_changes(changes: list[tuple]) -> list[tuple]:
    return sorted(changes, key=lambda c: (c[2], c[0], json.dumps(c[1], sort_keys=True)))
