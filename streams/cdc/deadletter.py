"""Dead letters: a quarantine table's new rows as the original Kafka records, published
to a dead-letter topic by a `Publisher` (docs/decisions/0038-dead-letter-topics.md).

Each quarantine row (`warehouse.quality.quarantine.QUARANTINE_SCHEMA`) becomes one
record: the key and value of the source record it came from, byte for byte, with the
headers Kafka Connect's dead-letter queue writes when
`errors.deadletterqueue.context.headers.enable` is on (`__connect.errors.topic`,
`.partition`, `.offset`, `.connector.name`, `.stage`, `.exception.message`) and
`__connect.errors.expectations`, the expectations the record failed.

A record that did not parse keeps its raw key and value in the quarantine row. A row
held by an expectation was judged after the parse (and the transform), where the raw
bytes are no longer carried; its source coordinates name the original record, which
`DeadLetters` reads back from the source topic.

Exactly once with the quarantine table: the `Publisher` commits the dead letters of the
quarantine table's versions and its position in one Kafka transaction, as it does for
a published view.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from streams.cdc.changelog import ChangeRecord
from streams.cdc.errors import PublishError

HEADER_PREFIX = "__connect.errors."
HEADER_TOPIC = HEADER_PREFIX + "topic"
HEADER_PARTITION = HEADER_PREFIX + "partition"
HEADER_OFFSET = HEADER_PREFIX + "offset"
HEADER_CONNECTOR = HEADER_PREFIX + "connector.name"
"""The warehouse table that quarantined the record (Connect names its connector)."""
HEADER_STAGE = HEADER_PREFIX + "stage"
HEADER_MESSAGE = HEADER_PREFIX + "exception.message"
"""The quarantine row's `reason`: `parse error: ...` or `failed expectations: ...`."""
HEADER_EXPECTATIONS = HEADER_PREFIX + "expectations"
"""The ids of the expectations the record failed, `, `-separated (none for a parse error)."""
STAGE_PARSE = "PARSE"
STAGE_EXPECTATION = "EXPECTATION"

DEAD_LETTER_TOPIC_CONFIG: dict[str, str] = {"cleanup.policy": "delete"}
"""A dead-letter topic is a log of records, not a changelog: nothing is compacted away,
and a record without a key is accepted."""

_COLUMNS = [
    "reason",
    "failed_expectations",
    "source_topic",
    "source_partition",
    "source_offset",
    "raw_key",
    "raw_value",
]
_GAP = 1000
"""Offsets further apart than this are read from a new position, not read through."""


@dataclass(frozen=True)
class DeadLetters:
    """The `ChangeFeed` of a quarantine table: its inserted rows as dead letters.

    `table`: the table whose quarantine it is (the `connector.name` header);
    `bootstrap`, `client_config`: the source's Kafka cluster, read back for the
    original records of rows held by expectations; `timeout`: seconds a read back
    waits for them."""

    path: str
    table: str
    topic: str
    bootstrap: str
    client_config: Mapping[str, Any] = field(default_factory=dict)
    timeout: float = 60.0

    clears: ClassVar[bool] = False

    def read(self, delta: DeltaTable, first: int, last: int) -> list[ChangeRecord]:
        try:
            rows = pa.table(
                delta.load_cdf(
                    starting_version=first,
                    ending_version=last,
                    columns=[*_COLUMNS, "_change_type", "_commit_version"],
                ).read_all()
            ).to_pylist()
        except DeltaError as e:
            raise PublishError(
                f"table `{self.table}`: reading the change feed of its quarantine table "
                f"`{self.path}` versions {first}..{last} failed: {e}",
                topic=self.topic,
                table=self.table,
            ) from e
        rows = [r for r in rows if r["_change_type"] == "insert"]
        # The order a position counts a version's records in (a transaction may end
        # inside a version): by source coordinates, then reason.
        rows.sort(
            key=lambda r: (
                r["_commit_version"],
                r["source_topic"] or "",
                r["source_partition"] if r["source_partition"] is not None else -1,
                r["source_offset"] if r["source_offset"] is not None else -1,
                r["reason"] or "",
            )
        )
        held = {_coordinates(r, self.table, self.topic) for r in rows if r["failed_expectations"]}
        originals = self._originals(held) if held else {}
        out = []
        for r in rows:
            if r["failed_expectations"]:
                key, value = originals[_coordinates(r, self.table, self.topic)]
            else:
                key, value = r["raw_key"], r["raw_value"]
            out.append(ChangeRecord(r["_commit_version"], key, value, _headers(r, self.table)))
        return out

    def _originals(
        self, wanted: set[tuple[str, int, int]]
    ) -> dict[tuple[str, int, int], tuple[bytes | None, bytes | None]]:
        """The key and value of each source record of `wanted` (topic, partition, offset),
        read from the source topic at those offsets."""
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                **dict(self.client_config),
                "group.id": f"warehouse-dead-letters.{self.table}",  # never commits
                "enable.auto.commit": False,
                # The offset names the record the table read, whatever its transaction.
                "isolation.level": "read_uncommitted",
                "auto.offset.reset": "error",
                "enable.partition.eof": True,
            }
        )
        found: dict[tuple[str, int, int], tuple[bytes | None, bytes | None]] = {}
        try:
            by_partition: dict[tuple[str, int], list[int]] = {}
            for t, p, o in wanted:
                by_partition.setdefault((t, p), []).append(o)
            for (t, p), offsets in sorted(by_partition.items()):
                for run in _runs(sorted(offsets)):
                    self._read_run(consumer, t, p, run, found)
        finally:
            consumer.close()
        return found

    def _read_run(
        self,
        consumer: Consumer,
        topic: str,
        partition: int,
        run: list[int],
        found: dict[tuple[str, int, int], tuple[bytes | None, bytes | None]],
    ) -> None:
        consumer.assign([TopicPartition(topic, partition, run[0])])
        pending = set(run)
        deadline = time.monotonic() + self.timeout
        while pending:
            msg = consumer.poll(max(0.1, min(1.0, deadline - time.monotonic())))
            if msg is None:
                if time.monotonic() > deadline:
                    raise PublishError(
                        f"table `{self.table}`: reading the quarantined records back from "
                        f"`{topic}` [{partition}] returned nothing for {self.timeout:.0f}s "
                        f"(offsets {sorted(pending)[:5]} still to read). Is the broker "
                        "reachable?",
                        topic=self.topic,
                        table=self.table,
                    )
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    break
                raise PublishError(
                    f"table `{self.table}`: reading the quarantined records back from "
                    f"`{topic}` [{partition}] at offset {run[0]} failed: {err.str()}. The "
                    "dead letters need the source records still in their topic.",
                    topic=self.topic,
                    table=self.table,
                ) from KafkaException(err)
            if (msg.topic(), msg.partition()) != (topic, partition):
                continue  # fetched for an earlier assignment
            offset = msg.offset()
            if offset in pending:
                pending.discard(offset)
                found[(topic, partition, offset)] = (msg.key(), msg.value())
            if offset >= run[-1]:
                break
        if pending:
            raise PublishError(
                f"table `{self.table}`: the source topic `{topic}` [{partition}] no longer "
                f"holds the quarantined record(s) at offset(s) {sorted(pending)[:5]}, so "
                f"their dead letters cannot be sent to `{self.topic}`. The quarantine "
                "table keeps them; raise the topic's retention if the dead letters fall "
                "this far behind.",
                topic=self.topic,
                table=self.table,
            )


def _coordinates(row: Mapping[str, Any], table: str, topic: str) -> tuple[str, int, int]:
    t, p, o = row["source_topic"], row["source_partition"], row["source_offset"]
    if t is None or p is None or o is None:
        raise PublishError(
            f"table `{table}`: a quarantined row has no source coordinates "
            "(`_topic`, `_partition`, `_offset`), so its original record cannot be sent to "
            f"`{topic}`. Keep those columns in the table's SELECT.",
            topic=topic,
            table=table,
        )
    return str(t), int(p), int(o)


def _runs(offsets: list[int]) -> list[list[int]]:
    runs: list[list[int]] = [[offsets[0]]]
    for o in offsets[1:]:
        if o - runs[-1][-1] > _GAP:
            runs.append([o])
        else:
            runs[-1].append(o)
    return runs


def _headers(row: Mapping[str, Any], table: str) -> tuple[tuple[str, bytes], ...]:
    failed = row["failed_expectations"] or []
    headers = [
        (HEADER_TOPIC, str(row["source_topic"] or "").encode()),
        (HEADER_PARTITION, str(row["source_partition"]).encode()),
        (HEADER_OFFSET, str(row["source_offset"]).encode()),
        (HEADER_CONNECTOR, table.encode()),
        (HEADER_STAGE, (STAGE_EXPECTATION if failed else STAGE_PARSE).encode()),
        (HEADER_MESSAGE, str(row["reason"] or "").encode()),
    ]
    if failed:
        headers.append((HEADER_EXPECTATIONS, ", ".join(failed).encode()))
    return tuple(headers)
