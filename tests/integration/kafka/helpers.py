"""Helpers of the Kafka source tests (and of the landing path's): fill topics, run a
query to its end."""

from __future__ import annotations

from pathlib import Path

from streams.kafka import produce


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
