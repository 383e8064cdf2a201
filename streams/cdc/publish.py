"""Materialized views out: a table's change feed published to a compacted topic.

`publish_changes` is called after each committed batch of a table (the runtime
calls it from the table's `foreachBatch`, after `write_batch`). It does not look
at the batch: it publishes every Delta version the topic has not received yet,
read from the table's change data feed, so a batch whose publish failed or was
killed is caught up by the next call, and a replayed batch finds nothing left.

Exactly-once for `read_committed` consumers: the records of the versions
`[start, end]` and a marker — offset `end + 1` committed for the consumer group
`warehouse-publish.<table>` on partition 0 of the topic, with the Delta table id
as the offset's metadata — go in one Kafka transaction
(`send_offsets_to_transaction`). The next call reads the marker after
`init_transactions` (which fences and aborts a killed predecessor's open
transaction, same `transactional.id`), so it starts exactly after the last
committed version. A new table at the same path (another table id) starts at
version 0. Against a broker without transactions the records are produced
idempotently keyed and the marker is committed after them: at-least-once,
and replays are harmless upserts of a compacted topic.

Records: key = JSON of the sink keys (`{"user_id": 7}`), value = JSON of the
row's post-image (every table column), a delete = a tombstone (null value).
Headers `warehouse.table` and `warehouse.version` name the origin. For an SCD2
table (`mode="scd2"`) the value is the key's current version; a version that
closes the current row without a new one (a delete) is a tombstone.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from streams.cdc.changelog import ChangeRecord, PublishMode, changelog_records
from streams.cdc.errors import PublishError
from streams.delta import crash_point
from streams.kafka import KafkaAdminError, ensure_topic

logger = logging.getLogger(__name__)

MARKER_PARTITION = 0
HEADER_TABLE = "warehouse.table"
HEADER_VERSION = "warehouse.version"
_NO_TRANSACTIONS = {
    KafkaError._UNSUPPORTED_FEATURE,
    KafkaError.UNSUPPORTED_VERSION,
    KafkaError._NOT_IMPLEMENTED,
}


def marker_group(table: str) -> str:
    """The consumer group whose committed offset marks what was published."""
    return f"warehouse-publish.{table}"


def transactional_id(table: str) -> str:
    """Stable per table: a restarted publisher fences its killed predecessor."""
    return f"warehouse-publish.{table}"


@dataclass(frozen=True)
class PublishResult:
    """What one call did: versions `[first_version, last_version]`, records, guarantee."""

    table: str
    topic: str
    first_version: int | None
    last_version: int | None
    records: int = 0
    tombstones: int = 0
    transactional: bool = True

    @property
    def skipped(self) -> bool:
        return self.first_version is None


def _committed_marker(consumer: Consumer, topic: str, table_id: str, timeout: float) -> int:
    """The first version not yet published (0 when nothing was, or for another table id)."""
    tp = consumer.committed([TopicPartition(topic, MARKER_PARTITION)], timeout=timeout)[0]
    if tp.error is not None:
        raise PublishError(f"reading the publish marker of topic `{topic}` failed: {tp.error}")
    if tp.offset < 0:
        return 0
    try:
        meta = json.loads(tp.metadata or "{}")
    except ValueError:
        meta = {}
    if meta.get("table_id") != table_id:
        logger.warning(
            "topic %s: publish marker %d belongs to table id %s, not %s; publishing the "
            "new table from version 0",
            topic,
            tp.offset,
            meta.get("table_id"),
            table_id,
        )
        return 0
    return int(tp.offset)


def _produce_all(producer: Producer, topic: str, records: list[ChangeRecord], table: str) -> None:
    failures: list[str] = []

    def delivered(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            failures.append(err.str())

    for r in records:
        headers = [(HEADER_TABLE, table.encode()), (HEADER_VERSION, str(r.version).encode())]
        while True:
            try:
                producer.produce(
                    topic, key=r.key, value=r.value, headers=headers, on_delivery=delivered
                )
                break
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.1)
    remaining = producer.flush(60)
    if remaining or failures:
        raise PublishError(
            f"topic `{topic}`: {len(failures)} record(s) of table `{table}` were not delivered "
            f"({remaining} still queued): {failures[:3]}",
            topic=topic,
            table=table,
        )


def _abort(producer: Producer, topic: str, table: str) -> None:
    try:
        producer.abort_transaction(30)
    except KafkaException as e:  # the broker aborts it anyway when the timeout expires
        logger.warning(
            "topic %s: aborting the publish transaction of %s failed: %s", topic, table, e
        )


def publish_changes(
    path: str,
    *,
    bootstrap: str,
    topic: str,
    keys: Sequence[str],
    table: str | None = None,
    mode: PublishMode = "upsert",
    partitions: int = 1,
    transactional: bool | None = None,
    client_config: Mapping[str, Any] | None = None,
    max_versions: int = 100,
    timeout: float = 60.0,
) -> PublishResult:
    """Publish the Delta versions of `path` that `topic` has not received yet.

    `table` names the publisher (transactional id, marker group, log lines; default:
    the path's last component). `transactional=None` uses a transaction when the
    broker supports them and falls back (logging that the guarantee is at-least-once)
    when it does not; `False` forces the fallback. A backlog is published in
    transactions of at most `max_versions` table versions each (each with its marker).
    """
    name = table or str(path).rstrip("/").rsplit("/", 1)[-1]
    if max_versions < 1:
        raise PublishError(
            f"table `{name}`: `max_versions` must be at least 1 (got `{max_versions}`)",
            topic=topic,
            table=name,
        )
    if not keys:
        raise PublishError(
            f"table `{name}`: publishing to `{topic}` needs the sink keys (the record keys of "
            "the compacted topic). Use a sink with `keys`.",
            topic=topic,
            table=name,
        )
    try:
        delta = DeltaTable(str(path))
    except TableNotFoundError as e:
        raise PublishError(
            f"table `{name}`: no Delta table at `{path}` to publish from; run the table first.",
            topic=topic,
            table=name,
        ) from e
    end = delta.version()
    table_id = delta.metadata().id
    conf = {"bootstrap.servers": bootstrap, **dict(client_config or {})}
    try:
        ensure_topic(
            bootstrap,
            topic,
            partitions=partitions,
            config={"cleanup.policy": "compact"},
            client_config=client_config,
            timeout=timeout,
        )
    except KafkaAdminError as e:
        raise PublishError(
            f"table `{name}`: topic `{topic}` could not be created: {e}", topic=topic, table=name
        ) from e
    consumer = Consumer(
        {
            **conf,
            "group.id": marker_group(name),
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    producer: Producer | None = None
    try:
        use_txn = transactional is not False
        if use_txn:
            producer = Producer(
                {
                    **conf,
                    "transactional.id": transactional_id(name),
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 5,
                }
            )
            try:
                producer.init_transactions(timeout)
            except KafkaException as e:
                if transactional is None and e.args[0].code() in _NO_TRANSACTIONS:
                    logger.warning(
                        "topic %s: the broker does not support transactions (%s); publishing "
                        "table %s at-least-once (idempotent keyed upserts)",
                        topic,
                        e.args[0].str(),
                        name,
                    )
                    use_txn = False
                    producer = None
                else:
                    raise PublishError(
                        f"table `{name}`: starting the transactional producer "
                        f"`{transactional_id(name)}` on `{bootstrap}` failed: {e.args[0].str()}",
                        topic=topic,
                        table=name,
                    ) from e
        start = _committed_marker(consumer, topic, table_id, timeout)
        if start > end:
            logger.info(
                "table %s: versions up to %d already published to %s; nothing to do",
                name,
                end,
                topic,
            )
            return PublishResult(name, topic, None, None, transactional=use_txn)
        total = tombstones = 0
        for first in range(start, end + 1, max_versions):
            last = min(first + max_versions - 1, end)
            records = _read_changes(delta, path, name, topic, keys, mode, first, last)
            marker = TopicPartition(
                topic,
                MARKER_PARTITION,
                last + 1,
                json.dumps({"table_id": table_id, "version": last}),
            )
            if use_txn:
                assert producer is not None
                _publish_transaction(producer, consumer, topic, name, records, marker, timeout)
            else:
                _publish_at_least_once(conf, consumer, topic, name, records, marker)
            total += len(records)
            tombstones += sum(1 for r in records if r.value is None)
            logger.info(
                "table %s: published versions %d..%d to %s: %d record(s)%s",
                name,
                first,
                last,
                topic,
                len(records),
                "" if use_txn else " (at-least-once)",
            )
        return PublishResult(name, topic, start, end, total, tombstones, use_txn)
    finally:
        consumer.close()
        if producer is not None:
            producer.flush(5)


def _read_changes(
    delta: DeltaTable,
    path: str,
    name: str,
    topic: str,
    keys: Sequence[str],
    mode: PublishMode,
    first: int,
    last: int,
) -> list[ChangeRecord]:
    try:
        changes = pa.table(delta.load_cdf(starting_version=first, ending_version=last).read_all())
    except DeltaError as e:
        raise PublishError(
            f"table `{name}`: reading the change feed of `{path}` versions {first}..{last} "
            f"failed: {e}. The table needs `delta.enableChangeDataFeed=true` from version "
            f"{first} on (tables created by the warehouse have it), and its change files "
            "must not be vacuumed before they are published.",
            topic=topic,
            table=name,
        ) from e
    return changelog_records(changes, keys, mode=mode)


def _publish_transaction(
    producer: Producer,
    consumer: Consumer,
    topic: str,
    table: str,
    records: list[ChangeRecord],
    marker: TopicPartition,
    timeout: float,
) -> None:
    producer.begin_transaction()
    try:
        _produce_all(producer, topic, records, table)
        crash_point("publish_before_commit")
        producer.send_offsets_to_transaction([marker], consumer.consumer_group_metadata(), timeout)
        deadline = time.monotonic() + timeout
        while True:
            try:
                producer.commit_transaction(max(1.0, deadline - time.monotonic()))
                break
            except KafkaException as e:
                if e.args[0].retriable() and time.monotonic() < deadline:
                    continue
                raise
    except (KafkaException, PublishError) as e:
        _abort(producer, topic, table)
        if isinstance(e, PublishError):
            raise
        raise PublishError(
            f"table `{table}`: the publish transaction to `{topic}` failed and was aborted: "
            f"{e.args[0].str()}. Nothing of it is visible to read_committed consumers; the "
            "next batch publishes these versions again.",
            topic=topic,
            table=table,
        ) from e
    crash_point("publish_after_commit")


def _publish_at_least_once(
    conf: Mapping[str, Any],
    consumer: Consumer,
    topic: str,
    table: str,
    records: list[ChangeRecord],
    marker: TopicPartition,
) -> None:
    producer = Producer({**conf, "acks": "all", "max.in.flight.requests.per.connection": 1})
    _produce_all(producer, topic, records, table)
    crash_point("publish_before_commit")
    try:
        consumer.commit(offsets=[marker], asynchronous=False)
    except KafkaException as e:
        raise PublishError(
            f"table `{table}`: the records reached `{topic}` but the publish marker could not "
            f"be committed: {e.args[0].str()}. The next batch publishes them again (harmless "
            "upserts of a compacted topic).",
            topic=topic,
            table=table,
        ) from e
    crash_point("publish_after_commit")
