"""`planned_partitions` on real Spark against a real broker process: the Kafka ranges
Spark planned for each micro-batch, read back from the batch's DataFrame, on either
Kafka engine (our source's partitions, or Spark's own source's ranges read with the
fetch options given)."""

from __future__ import annotations

import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from streams.kafka import (
    SCHEMA_WITHOUT_HEADERS,
    FetchOptions,
    ensure_topic,
    read_kafka_stream,
    read_partition,
)
from streams.landing import planned_partitions
from tests.integration.kafka.helpers import fill, run_available_now

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

Coord = tuple[str, int, int]


def test_planned_partitions_are_the_batch_ranges(spark, broker, unique, tmp_path, engine) -> None:
    """`planned_partitions` reads back from each micro-batch the ranges Spark planned,
    and `read_partition` reads exactly the batch's records from them."""
    topic = unique("planned")
    ensure_topic(broker.bootstrap, topic, partitions=2)
    fill(broker.bootstrap, topic, {0: 90, 1: 35})
    df = read_kafka_stream(
        spark,
        bootstrap=broker.bootstrap,
        topics=topic,
        max_offsets_per_trigger=40,
        split_offsets=15,
        include_headers=False,
        engine=engine,
    )
    schema = to_arrow_schema(SCHEMA_WITHOUT_HEADERS, timezone="UTC")
    fetch = FetchOptions(broker.bootstrap, {}, "read_committed", "fail", 7)
    seen: list[tuple[list[Coord], list[Coord], list[Coord]]] = []

    def sink(batch, batch_id: int) -> None:
        if engine == "native":  # Spark's source: its ranges need the fetch options
            assert planned_partitions(batch) is None
            parts = planned_partitions(batch, fetch, max_tasks=1)
            assert parts is not None and len(parts) <= 1
        else:  # ours: they come with the partitions
            parts = planned_partitions(batch)
        assert parts is not None
        ranges = [
            (r.topic, r.partition, o)
            for p in parts
            for r in p.ranges
            for o in range(r.start, r.end)
        ]
        read = [
            (t, p, o)
            for part in parts
            for b in read_partition(part, schema)
            for t, p, o in zip(
                *(b.column(c).to_pylist() for c in ("topic", "partition", "offset")), strict=True
            )
        ]
        rows = [(r.topic, r.partition, r.offset) for r in batch.collect()]
        seen.append((sorted(ranges), sorted(read), sorted(rows)))

    run_available_now(df, sink, tmp_path / "cp")
    assert len(seen) >= 3
    for ranges, read, rows in seen:
        assert ranges == read == rows and 0 < len(rows) <= 40
    everything = sorted(c for _, _, rows in seen for c in rows)
    assert everything == sorted((topic, p, o) for p, n in {0: 90, 1: 35}.items() for o in range(n))
    assert planned_partitions(spark.range(3)) is None
