"""Helpers of the Kafka source tests (and of the landing path's): fill topics, run a
query to its end."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from streams.kafka import ensure_topic, produce
from streams.kafka.admin import end_offsets, watermarks


def run_available_now(df, sink, checkpoint: Path) -> None:
    """Run `df` into `foreachBatch(sink)` with Trigger.AvailableNow until it finishes."""
    query = (
        df.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(240), "query did not finish in 240 s"
        if query.exception() is not None:
            raise query.exception()  # type: ignore[misc]
    finally:
        query.stop()


def fill(bootstrap: str, topic: str, counts: dict[int, int], tag: str = "v") -> None:
    for part, n in counts.items():
        produce(bootstrap, topic, [(None, f"{tag}-{part}-{i}") for i in range(n)], partition=part)


def topic_with_deleted_head(broker_factory, topic: str) -> tuple[str, int, int]:
    """A one-partition `topic` on a broker of its own whose first segments retention has
    deleted: `(bootstrap, earliest offset, end offset)`."""
    b = broker_factory(**{"log.retention.check.interval.ms": 100})
    ensure_topic(
        b.bootstrap,
        topic,
        partitions=1,
        config={"segment.bytes": "2048", "retention.bytes": "4096"},
    )
    for _ in range(10):  # separate batches so segments roll
        produce(b.bootstrap, topic, [(None, "x" * 100) for _ in range(10)])
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        low, _ = watermarks(admin, {topic: [0]}, read_committed=False)
        if low[(topic, 0)] > 0:
            return b.bootstrap, low[(topic, 0)], end_offsets(b.bootstrap, topic)[topic][0]
        time.sleep(0.2)
    pytest.fail(f"retention did not delete the first segment of `{topic}` in 60s")
