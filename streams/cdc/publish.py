"""Materialized views out: a table's change feed published to a compacted topic.

`publish_changes` is called after each committed batch of a table (the runtime
calls it from the table's `foreachBatch`, after `write_batch`). It does not look
at the batch: it publishes every Delta version the topic has not received yet,
read from the table's change data feed, so a batch whose publish failed or was
killed is caught up by the next call, and a replayed batch finds nothing left.

Exactly-once for `read_committed` consumers: the records of the versions
`[start, end]` and the table's position after them — a record of the compacted topic
`<topic>.publish-position` (`streams.cdc.position`: the Delta table id and the first
version not yet published) — go in one Kafka transaction. The next call reads the
position after `init_transactions` (which fences and aborts a killed predecessor's
open transaction, same `transactional.id`), so it starts exactly after the last
committed version. A new table at the same path (another table id) starts at
version 0. Against a broker without transactions the records are produced
idempotently keyed and the position is written after them: at-least-once,
and replays are harmless upserts of a compacted topic.

Records: key = JSON of the sink keys (`{"user_id": 7}`), value = JSON of the
row's post-image (every table column), a delete = a tombstone (null value).
Headers `warehouse.table` and `warehouse.version` name the origin. For an SCD2
table (`mode="scd2"`) the value is the key's current version; a version that
closes the current row without a new one (a delete) is a tombstone.
"""

from __future__ import annotations

import contextlib
import logging
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from streams.cdc.changelog import ChangeRecord, PublishMode, changelog_records
from streams.cdc.errors import PublishError
from streams.cdc.position import (
    POSITION_PARTITION,
    POSITION_TOPIC_CONFIG,
    Position,
    legacy_position,
    marker_group,
    position_key,
    position_topic,
    read_position,
)
from streams.delta import KeptTable, crash_point
from streams.kafka import KafkaAdminError, ensure_topic

logger = logging.getLogger(__name__)

HEADER_TABLE = "warehouse.table"
HEADER_VERSION = "warehouse.version"
_FENCED = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
_NO_TRANSACTIONS = {
    KafkaError._UNSUPPORTED_FEATURE,
    KafkaError.UNSUPPORTED_VERSION,
    KafkaError._NOT_IMPLEMENTED,
}


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


def _produce_all(
    producer: Producer,
    topic: str,
    records: list[ChangeRecord],
    table: str,
    *,
    transaction: bool,
) -> None:
    """Produce `records` and wait until they are delivered. In a `transaction` a failed
    record fails its commit, so no delivery reports are asked for: a fenced producer's
    `flush` raises its fatal error before it runs the reports' callbacks, and every
    call a callback makes then fails with a `SystemError`."""
    failures: list[str] = []

    def delivered(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            failures.append(err.str())

    report = None if transaction else delivered
    for r in records:
        headers = [(HEADER_TABLE, table.encode()), (HEADER_VERSION, str(r.version).encode())]
        while True:
            try:
                producer.produce(
                    topic, key=r.key, value=r.value, headers=headers, on_delivery=report
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

    `table` names the publisher (transactional id, position key, log lines; default:
    the path's last component). `transactional=None` uses a transaction when the
    broker supports them and falls back (logging that the guarantee is at-least-once)
    when it does not; `False` forces the fallback. A backlog is published in
    transactions of at most `max_versions` table versions each (each with its position).
    One call with clients of its own; a caller that publishes after every batch keeps a
    `Publisher` instead.
    """
    with Publisher(
        path,
        bootstrap=bootstrap,
        topic=topic,
        keys=keys,
        table=table,
        mode=mode,
        partitions=partitions,
        transactional=transactional,
        client_config=client_config,
        max_versions=max_versions,
        timeout=timeout,
    ) as publisher:
        return publisher.publish()


class Publisher:
    """`publish_changes` for a caller that publishes a table again and again (a table's
    writer, after each batch): its clients are kept between calls.

    The first call (and the first after a failure) ensures the topic, starts the
    transactional producer (`init_transactions`: fences a previous publisher of the
    table and aborts its open transaction) and reads the position. A later call starts
    after the versions its own last transaction committed, without reading the position:
    only a publisher that fenced this one could have moved it, and then this one's
    transaction fails and the call starts over. Not thread-safe: one caller at a time;
    `close()` when done.
    """

    def __init__(
        self,
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
    ) -> None:
        self.path = str(path)
        self.name = table or self.path.rstrip("/").rsplit("/", 1)[-1]
        if max_versions < 1:
            raise PublishError(
                f"table `{self.name}`: `max_versions` must be at least 1 (got `{max_versions}`)",
                topic=topic,
                table=self.name,
            )
        if not keys:
            raise PublishError(
                f"table `{self.name}`: publishing to `{topic}` needs the sink keys (the record "
                "keys of the compacted topic). Use a sink with `keys`.",
                topic=topic,
                table=self.name,
            )
        self.bootstrap = bootstrap
        self.topic = topic
        self.keys = list(keys)
        self.mode: PublishMode = mode
        self.partitions = partitions
        self.transactional = transactional
        self.max_versions = max_versions
        self.timeout = timeout
        self._conf = {
            "bootstrap.servers": bootstrap,
            **dict(client_config or {}),
            "error_cb": self._on_error,
        }
        self._their_error_cb = (client_config or {}).get("error_cb")
        self._client_config = client_config
        self._table = KeptTable(self.path)
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._use_txn = transactional is not False
        self._next: tuple[str, int] | None = None
        """(table id, first version not yet published) after this publisher's own commit."""
        self._lost_brokers = False
        """Set by the clients' error callback: every broker was down, or a fatal error."""

    def __enter__(self) -> Publisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the clients (the next `publish` starts them again)."""
        consumer, producer = self._consumer, self._producer
        self._consumer = self._producer = None
        self._next = None
        self._lost_brokers = False
        self._use_txn = self.transactional is not False
        if consumer is not None:
            consumer.close()
        if producer is not None:
            producer.flush(5)
            with warnings.catch_warnings():
                # A fenced producer's abort fails again here; `_abort` logged it.
                warnings.simplefilter("ignore", RuntimeWarning)
                producer.close()

    def publish(self) -> PublishResult:
        """Publish the versions the topic has not received yet (see `publish_changes`).

        Kept clients that lost every broker since the last call are replaced first. Kept
        clients that fail (fenced by another publisher of the table) are closed and
        started again once, as a new publisher would be; a failure with clients started
        in this call is raised, and closes them."""
        name, topic = self.name, self.topic
        delta = self._table.get()  # kept open: a publish per batch reads only new commits
        if delta is None:
            raise PublishError(
                f"table `{name}`: no Delta table at `{self.path}` to publish from; run the "
                "table first.",
                topic=topic,
                table=name,
            )
        if self._consumer is not None:
            self._drop_if_disconnected()
        while True:
            kept = self._consumer is not None
            try:
                return self._publish(delta)
            except BaseException as e:
                self._close_quietly()
                if not kept or not isinstance(e, (KafkaException, PublishError)):
                    raise
                logger.warning(
                    "table %s: publishing to %s with the clients kept from the last call "
                    "failed (%s); starting them again",
                    name,
                    topic,
                    e,
                )

    def _drop_if_disconnected(self) -> None:
        """Close kept clients that lost every broker since the last call (their errors
        are reported when they are polled): librdkafka's transactional producer that has
        been through a restart of its coordinator can wait without end in its next
        `send_offsets_to_transaction`, whatever its timeout."""
        for client in (self._producer, self._consumer):
            if client is not None:
                client.poll(0)
        if self._lost_brokers:
            logger.info(
                "table %s: the publisher's clients lost their brokers since the last call; "
                "starting them again",
                self.name,
            )
            self._close_quietly()

    def _on_error(self, error: KafkaError) -> None:
        if error.code() == KafkaError._ALL_BROKERS_DOWN or error.fatal():
            self._lost_brokers = True
        if self._their_error_cb is not None:
            self._their_error_cb(error)

    def _close_quietly(self) -> None:
        with contextlib.suppress(KafkaException):
            self.close()

    def _publish(self, delta: DeltaTable) -> PublishResult:
        name, topic = self.name, self.topic
        end = delta.version()
        table_id = delta.metadata().id
        consumer = self._consumer or self._start()
        if self._next is not None and self._next[0] == table_id:
            start = self._next[1]
        else:
            start = self._read_position(consumer, table_id)
        if start > end:
            logger.info(
                "table %s: versions up to %d already published to %s; nothing to do",
                name,
                end,
                topic,
            )
            return PublishResult(name, topic, None, None, transactional=self._use_txn)
        total = tombstones = 0
        for first in range(start, end + 1, self.max_versions):
            last = min(first + self.max_versions - 1, end)
            records = _read_changes(
                delta, self.path, name, topic, self.keys, self.mode, first, last
            )
            position = Position(table_id, last + 1)
            assert self._producer is not None
            if self._use_txn:
                _publish_transaction(self._producer, topic, name, records, position, self.timeout)
            else:
                _publish_at_least_once(self._producer, topic, name, records, position)
            self._next = (table_id, last + 1)
            total += len(records)
            tombstones += sum(1 for r in records if r.value is None)
            logger.info(
                "table %s: published versions %d..%d to %s: %d record(s)%s",
                name,
                first,
                last,
                topic,
                len(records),
                "" if self._use_txn else " (at-least-once)",
            )
        return PublishResult(name, topic, start, end, total, tombstones, self._use_txn)

    def _read_position(self, consumer: Consumer, table_id: str) -> int:
        """The first version not yet published: the table's position record, else the
        position an older publisher committed as a group offset; 0 for another table id
        (a table created again at the path) or none."""
        name, topic = self.name, self.topic
        at = read_position(consumer, topic, name, timeout=self.timeout)
        if at is None:
            at = legacy_position(consumer, topic, timeout=self.timeout)
        if at is None:
            return 0
        if at.table_id != table_id:
            logger.warning(
                "topic %s: publish position %d belongs to table id %s, not %s; publishing "
                "the new table from version 0",
                topic,
                at.version,
                at.table_id,
                table_id,
            )
            return 0
        return at.version

    def _start(self) -> Consumer:
        """Ensure the topics, open the position's consumer and start the producer."""
        name, topic = self.name, self.topic
        for t, partitions, config in (
            (topic, self.partitions, {"cleanup.policy": "compact"}),
            (position_topic(topic), 1, POSITION_TOPIC_CONFIG),
        ):
            try:
                ensure_topic(
                    self.bootstrap,
                    t,
                    partitions=partitions,
                    config=config,
                    client_config=self._client_config,
                    timeout=self.timeout,
                )
            except KafkaAdminError as e:
                raise PublishError(
                    f"table `{name}`: topic `{t}` could not be created: {e}",
                    topic=topic,
                    table=name,
                ) from e
        self._consumer = Consumer(
            {
                **self._conf,
                "group.id": marker_group(name),  # reads a position kept as its offset
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        if self._use_txn:
            producer = Producer(
                {
                    **self._conf,
                    "transactional.id": transactional_id(name),
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 5,
                }
            )
            try:
                producer.init_transactions(self.timeout)
                self._producer = producer
            except KafkaException as e:
                producer.close()
                if self.transactional is None and e.args[0].code() in _NO_TRANSACTIONS:
                    logger.warning(
                        "topic %s: the broker does not support transactions (%s); publishing "
                        "table %s at-least-once (idempotent keyed upserts)",
                        topic,
                        e.args[0].str(),
                        name,
                    )
                    self._use_txn = False
                else:
                    raise PublishError(
                        f"table `{name}`: starting the transactional producer "
                        f"`{transactional_id(name)}` on `{self.bootstrap}` failed: "
                        f"{e.args[0].str()}",
                        topic=topic,
                        table=name,
                    ) from e
        if not self._use_txn:
            self._producer = Producer(
                {**self._conf, "acks": "all", "max.in.flight.requests.per.connection": 1}
            )
        return self._consumer


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


def _produce_position(
    producer: Producer, topic: str, table: str, marker: Position, on_delivery: Any = None
) -> None:
    producer.produce(
        position_topic(topic),
        key=position_key(table),
        value=marker.value(),
        partition=POSITION_PARTITION,
        headers=[(HEADER_TABLE, table.encode())],
        on_delivery=on_delivery,
    )


def _publish_transaction(
    producer: Producer,
    topic: str,
    table: str,
    records: list[ChangeRecord],
    marker: Position,
    timeout: float = 60.0,
) -> None:
    producer.begin_transaction()
    try:
        _produce_position(producer, topic, table, marker)
        _produce_all(producer, topic, records, table, transaction=True)
        crash_point("publish_before_commit")
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
        if e.args[0].code() in _FENCED:
            raise PublishError(
                f"table `{table}`: another publisher of the table (transactional id "
                f"`{transactional_id(table)}`) fenced this one: {e.args[0].str()}. Nothing of "
                "this transaction is visible to read_committed consumers; this publisher "
                "starts over from its position.",
                topic=topic,
                table=table,
            ) from e
        raise PublishError(
            f"table `{table}`: the publish transaction to `{topic}` failed and was aborted: "
            f"{e.args[0].str()}. Nothing of it is visible to read_committed consumers; the "
            "next batch publishes these versions again.",
            topic=topic,
            table=table,
        ) from e
    crash_point("publish_after_commit")


def _publish_at_least_once(
    producer: Producer,
    topic: str,
    table: str,
    records: list[ChangeRecord],
    marker: Position,
) -> None:
    _produce_all(producer, topic, records, table, transaction=False)
    crash_point("publish_before_commit")
    failed: list[str] = []

    def delivered(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            failed.append(err.str())

    try:
        _produce_position(producer, topic, table, marker, delivered)
        if producer.flush(60) or failed:
            raise PublishError(f"not delivered: {failed or 'still queued'}")
    except (KafkaException, PublishError) as e:
        raise PublishError(
            f"table `{table}`: the records reached `{topic}` but the publish position could "
            f"not be written to `{position_topic(topic)}`: {e}. The next batch publishes them "
            "again (harmless upserts of a compacted topic).",
            topic=topic,
            table=table,
        ) from e
    crash_point("publish_after_commit")
