"""What the dead-letter tests read back: every record of a topic with its coordinates
and headers, and the check that a dead-letter topic holds exactly a quarantine table's
records, each once, as they were produced."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from streams.cdc.deadletter import (
    HEADER_CONNECTOR,
    HEADER_EXPECTATIONS,
    HEADER_MESSAGE,
    HEADER_OFFSET,
    HEADER_PARTITION,
    HEADER_STAGE,
    HEADER_TOPIC,
)
from streams.delta.arrow import read_table


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: dict[str, bytes]


def read_topic(
    bootstrap: str, topic: str, *, isolation: str = "read_committed", timeout: float = 60.0
) -> list[Record]:
    """Every record of every partition of `topic`, as a `read_committed` (or
    `isolation`) consumer sees it."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=timeout).topics[topic]
        out: list[Record] = []
        for p in sorted(meta.partitions):
            tp = TopicPartition(topic, p)
            low, high = consumer.get_watermark_offsets(tp, timeout=timeout, cached=False)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, p, low)])
            deadline = time.monotonic() + timeout
            while consumer.position([tp])[0].offset < high:
                assert time.monotonic() < deadline, f"{topic} [{p}]: did not reach {high}"
                for msg in consumer.consume(500, timeout=0.5):
                    assert msg.error() is None, msg.error()
                    out.append(
                        Record(p, msg.offset(), msg.key(), msg.value(), dict(msg.headers() or []))
                    )
        return out
    finally:
        consumer.close()


def assert_dead_letters(
    bootstrap: str, dlq: str, source: str, quarantine: Path | str, table: str
) -> int:
    """`dlq` holds one dead letter per row of the quarantine table `quarantine` (of
    `table`, reading `source`): the source record's key and value bytes, the Connect
    headers naming its coordinates, the table and the row's reason. Returns how many."""
    produced = {(r.partition, r.offset): r for r in read_topic(bootstrap, source)}
    rows = read_table(str(quarantine)).to_pylist()
    letters = read_topic(bootstrap, dlq)
    by_coordinates = Counter(
        (int(r.headers[HEADER_PARTITION]), int(r.headers[HEADER_OFFSET])) for r in letters
    )
    expected = Counter((r["source_partition"], r["source_offset"]) for r in rows)
    assert by_coordinates == expected, "dead letters are not the quarantined records, once each"
    quarantined = {(r["source_partition"], r["source_offset"]): r for r in rows}
    for letter in letters:
        h = letter.headers
        at = (int(h[HEADER_PARTITION]), int(h[HEADER_OFFSET]))
        original, row = produced[at], quarantined[at]
        assert (letter.key, letter.value) == (original.key, original.value), at
        assert h[HEADER_TOPIC] == source.encode()
        assert h[HEADER_CONNECTOR] == table.encode()
        assert h[HEADER_MESSAGE] == row["reason"].encode()
        failed = row["failed_expectations"]
        assert h[HEADER_STAGE] == (b"EXPECTATION" if failed else b"PARSE")
        assert h.get(HEADER_EXPECTATIONS) == (", ".join(failed).encode() if failed else None)
    return len(letters)
