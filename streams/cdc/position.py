"""Where a publisher stands: a record in a compacted topic beside the published one.

The position of table `T` publishing to topic `X` is the last record keyed
`{"table":"T"}` in partition 0 of `X.publish-position` (`position_topic`): the Delta
table id, the first version not wholly published, and how many records of that version
were (a version too big for one transaction is published in several). It goes in the
same Kafka transaction as the records it accounts for, so read_committed readers see the
records and the position move together.

Why a record and not a committed group offset: Kafka deletes the committed offsets of a
group without members `offsets.retention.minutes` after their commit (7 days by
default); the publisher would then publish the table's whole history again, or fail for
good once its change feed was vacuumed. A compacted topic keeps the last record of every
key for ever. A position committed as an offset of the group `warehouse-publish.<table>`
(how the publisher kept it before) is still read when the topic holds none.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from streams.cdc.changelog import encode_json
from streams.cdc.errors import PublishError

logger = logging.getLogger(__name__)

POSITION_SUFFIX = ".publish-position"
POSITION_PARTITION = 0
POSITION_TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": str(16 * 1024 * 1024)}
"""Compacted (a table's last position is kept for ever), small segments so the cleaner
can compact what a publish per batch writes."""
READER_GROUP = "warehouse-positions"
"""The group id a `PositionReader`'s consumer names (librdkafka wants one); it never
joins it nor commits."""
_TAIL = 64
"""Records read back from the position topic's end first; more only when the table's
last position is further back (another table publishing to the same topic)."""
COORDINATOR_MOVING = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
    }
)
"""Answers to an offset fetch that say "ask again": the group's coordinator is moving or
loading (retriable in Kafka's protocol; the Java client retries them). librdkafka's
`committed()` hands them to the caller: a fresh three-node cluster answered
NOT_COORDINATOR while it created its offsets topic."""


def position_topic(topic: str) -> str:
    """The compacted topic holding the positions of the tables published to `topic`."""
    return f"{topic}{POSITION_SUFFIX}"


def transactional_id(table: str) -> str:
    """Stable per table: a restarted publisher fences its killed predecessor."""
    return f"warehouse-publish.{table}"


def marker_group(table: str) -> str:
    """The consumer group whose committed offset marked the position before it was a
    record of `position_topic` (read when there is no such record)."""
    return f"warehouse-publish.{table}"


@dataclass(frozen=True)
class Position:
    """Versions before `version` are published, and the first `records` records of
    `version` (in the publisher's order) too; all of the Delta table `table_id`.
    `clearing`: the topic may still hold keys the table does not (it was built again);
    the publisher tombstones them before it publishes version 0 (`streams.cdc.stale`)."""

    table_id: str
    version: int
    records: int = 0
    clearing: bool = False

    def value(self) -> bytes:
        return encode_json(
            {
                "table_id": self.table_id,
                "version": self.version,
                "records": self.records,
                "clearing": self.clearing,
            }
        )


def position_key(table: str) -> bytes:
    return encode_json({"table": table})


def _parse(value: bytes | None, topic: str, offset: int) -> Position | None:
    if value is None:
        return None
    try:
        data = json.loads(value)
        return Position(
            str(data["table_id"]),
            int(data["version"]),
            int(data.get("records", 0)),
            bool(data.get("clearing", False)),
        )
    except (ValueError, KeyError, TypeError) as e:
        raise PublishError(
            f"topic `{topic}`: the publish position at offset {offset} is not one "
            f"(`{value[:200]!r}`: {e}). Delete the topic `{topic}` to publish the table "
            "again from its first version.",
            topic=topic,
        ) from e


def read_position(consumer: Consumer, topic: str, table: str, *, timeout: float) -> Position | None:
    """The last committed position of `table` in `position_topic(topic)`, or None.

    `consumer` is read_committed. Called after the publisher's `init_transactions`, which
    returns only once Kafka has completed every earlier transaction of the table's
    transactional id, markers included (InitProducerId answers CONCURRENT_TRANSACTIONS
    until then): the last stable offset is then past every position this table wrote.
    The consumer is left unassigned."""
    ptopic = position_topic(topic)
    tp = TopicPartition(ptopic, POSITION_PARTITION)
    try:
        low, end = consumer.get_watermark_offsets(tp, timeout=timeout, cached=False)
        key = position_key(table)
        upper, window = end, _TAIL
        while upper > low:
            start = max(low, upper - window)
            found = _last_of(consumer, ptopic, key, start, upper, timeout)
            if found is not None:
                return found
            upper, window = start, window * 16
        return None
    except KafkaException as e:
        raise PublishError(
            f"table `{table}`: reading its publish position from `{ptopic}` failed: "
            f"{e.args[0].str()}",
            topic=topic,
            table=table,
        ) from e
    finally:
        consumer.unassign()


def _last_of(
    consumer: Consumer, topic: str, key: bytes, start: int, end: int, timeout: float
) -> Position | None:
    """The last record keyed `key` in `[start, end)` of partition 0, parsed."""
    tp = TopicPartition(topic, POSITION_PARTITION, start)
    consumer.assign([tp])
    found: tuple[bytes | None, int] | None = None
    deadline = time.monotonic() + timeout
    while consumer.position([TopicPartition(topic, POSITION_PARTITION)])[0].offset < end:
        if time.monotonic() > deadline:
            raise PublishError(
                f"topic `{topic}`: reading the publish positions up to offset {end} took "
                f"longer than {timeout:.0f}s",
                topic=topic,
            )
        for msg in consumer.consume(min(1000, max(1, end - start)), timeout=0.5):
            if msg.error() is not None:
                raise KafkaException(msg.error())
            if msg.offset() >= end:
                break
            if msg.key() == key:
                found = (msg.value(), msg.offset())
    return None if found is None else _parse(found[0], topic, found[1])


def legacy_position(consumer: Consumer, topic: str, *, timeout: float) -> Position | None:
    """The position as an older publisher kept it: the offset the group `consumer`
    belongs to (`marker_group`) committed on partition 0 of `topic`, the Delta table id
    in its metadata. None when there is none (Kafka may have expired it)."""
    tp = _committed(consumer, TopicPartition(topic, 0), timeout)
    if tp.error is not None:
        raise PublishError(f"reading the publish marker of topic `{topic}` failed: {tp.error}")
    if tp.offset < 0:
        return None
    try:
        meta = json.loads(tp.metadata or "{}")
    except ValueError:
        meta = {}
    if not meta.get("table_id"):
        return None
    logger.info(
        "topic %s: publish position read from the committed offset %d of the publish group "
        "(kept as a record of %s from the next publish on)",
        topic,
        tp.offset,
        position_topic(topic),
    )
    return Position(str(meta["table_id"]), int(tp.offset))


def _committed(consumer: Consumer, tp: TopicPartition, timeout: float) -> TopicPartition:
    """`consumer.committed` of `tp`, asked again while the group's coordinator is moving
    or loading (a new cluster creating its offsets topic, a broker restarting), until
    `timeout` has passed."""
    deadline = time.monotonic() + timeout
    while True:
        left = max(1.0, deadline - time.monotonic())
        try:
            return consumer.committed([tp], timeout=left)[0]
        except KafkaException as e:
            if e.args[0].code() not in COORDINATOR_MOVING or time.monotonic() >= deadline:
                raise
            logger.info(
                "topic %s: the committed offset's coordinator said %s; asking again",
                tp.topic,
                e.args[0].name(),
            )
            time.sleep(0.2)


def published_position(
    bootstrap: str,
    topic: str,
    table: str,
    *,
    client_config: Mapping[str, Any] | None = None,
    timeout: float = 10.0,
) -> Position | None:
    """Where the publisher of `table` to `topic` stands, as a `read_committed` reader sees
    it (an open transaction's position shows once it commits): the record of
    `position_topic(topic)`, else the offset an older publisher committed; None when it
    has published nothing (no position topic yet, or no position of `table` in it).

    For readers beside the publisher (`warehouse status`): it opens its own consumer,
    joins no group and commits nothing."""
    ptopic = position_topic(topic)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            **dict(client_config or {}),
            "group.id": marker_group(table),  # only read (`legacy_position`), never joined
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        meta = consumer.list_topics(ptopic, timeout=timeout).topics.get(ptopic)
        if meta is None or meta.error is not None:
            return None
        return read_position(consumer, topic, table, timeout=timeout) or legacy_position(
            consumer, topic, timeout=timeout
        )
    finally:
        consumer.close()


class PositionReader:
    """Reads publish positions at one cluster again and again with one read_committed
    consumer, kept open until `close` (`published_position` opens one per call): for a
    reader that asks every few seconds, such as the pipeline page's `warehouse status`.

    It reads only the position records of `position_topic`, never the committed offset
    an older publisher kept (`legacy_position` needs a consumer of that table's group):
    for positions that were always records, such as a quarantine table's dead letters.

    Concurrency: any thread may call `position`; one lock makes the calls take turns on
    the consumer. `close` is called once, after the last `position`."""

    def __init__(
        self,
        bootstrap: str,
        *,
        client_config: Mapping[str, Any] | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.bootstrap = bootstrap
        self.timeout = timeout
        self._lock = threading.Lock()
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                **dict(client_config or {}),
                "group.id": READER_GROUP,  # assign() only: never joined, nothing committed
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )

    def position(self, topic: str, table: str) -> Position | None:
        """The last committed position record of `table` publishing to `topic`, or None
        (no position topic yet, or no record of `table` in it)."""
        ptopic = position_topic(topic)
        with self._lock:
            try:
                meta = self._consumer.list_topics(ptopic, timeout=self.timeout).topics.get(ptopic)
            except KafkaException as e:
                raise PublishError(
                    f"table `{table}`: reading the topics of `{self.bootstrap}` failed: "
                    f"{e.args[0].str()}",
                    topic=topic,
                    table=table,
                ) from e
            if meta is None or meta.error is not None:
                return None
            return read_position(self._consumer, topic, table, timeout=self.timeout)

    def close(self) -> None:
        with self._lock:
            self._consumer.close()
