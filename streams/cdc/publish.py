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
closes the current row without a new one (a delete) is a tombstone. Those are the
records of the default `ChangeFeed` (`TableChanges`); another feed publishes other
records of the versions with the same positions and transactions: `DeadLetters`, a
quarantine table's rows as their original records (`streams.cdc.deadletter`).
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from deltalake import DeltaTable

from streams.cdc.changelog import ChangeRecord, PublishMode
from streams.cdc.errors import PublishError
from streams.cdc.feed import ChangeFeed, TableChanges
from streams.cdc.position import (
    POSITION_TOPIC_CONFIG,
    Position,
    legacy_position,
    marker_group,
    position_topic,
    read_position,
)
from streams.cdc.produce import (
    TransactionFailed,
    ensure_published_topic,
    publish_at_least_once,
    publish_transaction,
    record_size,
    start_producer,
)
from streams.cdc.stale import stale_keys
from streams.delta import KeptTable

logger = logging.getLogger(__name__)

MAX_RECORDS = 50_000
"""Records one publish transaction holds at most, unless the caller says otherwise."""
MAX_BYTES = 16 * 1024 * 1024
"""Bytes of keys and values one publish transaction holds at most (one record more
when a single record is larger)."""
RETRIES = 6
"""Aborted transactions in a row one call tries again, each time half as large."""
_FIRST_WINDOW = 16
_MAX_WINDOW = 1024
"""Versions of the change feed read at once: from 16, halved or doubled by what they hold."""


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
    max_records: int = MAX_RECORDS,
    max_bytes: int = MAX_BYTES,
    max_versions: int | None = None,
    timeout: float = 60.0,
) -> PublishResult:
    """Publish the Delta versions of `path` that `topic` has not received yet.

    `table` names the publisher (transactional id, position key, log lines; default:
    the path's last component). `transactional=None` uses a transaction when the
    broker supports them and falls back (logging that the guarantee is at-least-once)
    when it does not; `False` forces the fallback. A backlog is published in
    transactions of at most `max_records` records and `max_bytes` bytes of keys and
    values (and, when given, `max_versions` versions), each with its position; a
    version larger than that is split. One call with clients of its own; a caller that
    publishes after every batch keeps a `Publisher` instead.
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
        max_records=max_records,
        max_bytes=max_bytes,
        max_versions=max_versions,
        timeout=timeout,
    ) as publisher:
        return publisher.publish()


@dataclass
class _Progress:
    """What one call has published so far, across its transactions and retries."""

    first: int | None = None
    last: int | None = None
    records: int = 0
    tombstones: int = 0


class Publisher:
    """`publish_changes` for a caller that publishes a table again and again (a table's
    writer, after each batch): its clients are kept between calls.

    The first call (and the first after a failure) ensures the topics, starts the
    transactional producer (`init_transactions`: fences a previous publisher of the
    table and aborts its open transaction) and reads the position. A later call starts
    after what its own last transaction committed, without reading the position:
    only a publisher that fenced this one could have moved it, and then this one's
    transaction fails and the call starts over. A transaction that fails is aborted and
    published again with new clients, in transactions half as large, up to
    `RETRIES` times in a row; they grow back by half again after each one that commits.
    Not thread-safe: one caller at a time; `close()` when done.
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
        max_records: int = MAX_RECORDS,
        max_bytes: int = MAX_BYTES,
        max_versions: int | None = None,
        timeout: float = 60.0,
        feed: ChangeFeed | None = None,
        topic_config: Mapping[str, str] | None = None,
        missing_table: Literal["fail", "skip"] = "fail",
    ) -> None:
        """`feed`: what is published of the table's versions (default: its changelog by
        `keys` and `mode`, `TableChanges`); `topic_config`: the published topic's
        configuration when the publisher creates it (default: compacted);
        `missing_table="skip"`: a call before the table exists publishes nothing (a
        quarantine table is created by the first batch that quarantines)."""
        self.path = str(path)
        self.name = table or self.path.rstrip("/").rsplit("/", 1)[-1]
        for what, value in (
            ("max_records", max_records),
            ("max_bytes", max_bytes),
            ("max_versions", 1 if max_versions is None else max_versions),
        ):
            if value < 1:
                raise PublishError(
                    f"table `{self.name}`: `{what}` must be at least 1 (got `{value}`)",
                    topic=topic,
                    table=self.name,
                )
        if feed is None and not keys:
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
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.max_versions = max_versions
        self.timeout = timeout
        self._feed: ChangeFeed = feed or TableChanges(
            self.path, self.name, topic, tuple(keys), mode
        )
        self._topic_config = dict(
            {"cleanup.policy": "compact"} if topic_config is None else topic_config
        )
        self._missing_table = missing_table
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
        self._next: Position | None = None
        """Where this publisher's own last commit left the position."""
        self._lost_brokers = False
        """Set by the clients' error callback: every broker was down, or a fatal error."""
        self._bound = (max_records, max_bytes)
        """The records and bytes of the next transaction: halved after a failed one."""
        self._window = min(_FIRST_WINDOW, max_versions or _FIRST_WINDOW)
        """Versions read from the change feed at once: fewer when they held more records
        than a transaction takes, more when they held few."""

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
            with contextlib.suppress(KafkaException):  # a fenced producer's flush raises
                producer.flush(5)
            with warnings.catch_warnings():
                # A fenced producer's abort fails again here; `_abort` logged it.
                warnings.simplefilter("ignore", RuntimeWarning)
                producer.close()

    def publish(self) -> PublishResult:
        """Publish the versions the topic has not received yet (see `publish_changes`).

        Kept clients that lost every broker since the last call are replaced first. Kept
        clients that fail (fenced by another publisher of the table) are closed and
        started again once, as a new publisher would be; an aborted transaction is tried
        again (`Publisher`); any other failure with clients started in this call is
        raised, and closes them."""
        name, topic = self.name, self.topic
        delta = self._table.get()  # kept open: a publish per batch reads only new commits
        if delta is None and self._missing_table == "skip":
            return PublishResult(name, topic, None, None, transactional=self._use_txn)
        if delta is None:
            raise PublishError(
                f"table `{name}`: no Delta table at `{self.path}` to publish from; run the "
                "table first.",
                topic=topic,
                table=name,
            )
        if self._consumer is not None:
            self._drop_if_disconnected()
        done, aborted = _Progress(), 0
        while True:
            kept = self._consumer is not None
            try:
                return self._publish(delta, done)
            except BaseException as e:
                self._close_quietly()
                if isinstance(e, TransactionFailed) and aborted < RETRIES:
                    aborted += 1
                    self._shrink(e)
                elif not kept or not isinstance(e, (KafkaException, PublishError)):
                    raise
                else:
                    logger.warning(
                        "table %s: publishing to %s with the clients kept from the last call "
                        "failed (%s); starting them again",
                        name,
                        topic,
                        e,
                    )

    def _shrink(self, e: TransactionFailed) -> None:
        records, size = self._bound
        self._bound = (max(1, records // 2), max(1, size // 2))
        logger.warning(
            "table %s: %s The publisher's clients: starting them again, for transactions "
            "of at most %d records and %d bytes",
            self.name,
            e,
            *self._bound,
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

    def _publish(self, delta: DeltaTable, done: _Progress) -> PublishResult:
        name, topic = self.name, self.topic
        end = delta.version()
        table_id = delta.metadata().id
        consumer = self._consumer or self._start()
        at = self._next
        if at is None or at.table_id != table_id:
            at = self._read_position(consumer, table_id)
        if at.clearing:
            at = self._clear(delta, at, done) if self._feed.clears else Position(table_id, 0)
        if at.version > end:
            if done.first is None:
                logger.info(
                    "table %s: versions up to %d already published to %s; nothing to do",
                    name,
                    end,
                    topic,
                )
            return self._result(done)
        while at.version <= end:
            last = min(end, at.version + self._window - 1)
            records = self._feed.read(delta, at.version, last)
            self._adapt_window(len(records))
            for step, after in self._steps(records[at.records :], at, last):
                self._commit(step, after)
                if done.first is None:
                    done.first = at.version
                done.records += len(step)
                done.tombstones += sum(1 for r in step if r.value is None)
                done.last = after.version - 1 if after.records == 0 else after.version
                at = after
        return self._result(done)

    def _result(self, done: _Progress) -> PublishResult:
        return PublishResult(
            self.name,
            self.topic,
            done.first,
            done.last if done.first is not None else None,
            done.records,
            done.tombstones,
            self._use_txn,
        )

    def _cuts(self, records: list[ChangeRecord]) -> Iterator[tuple[int, int]]:
        """`records[i:j]` of each transaction within the bounds (at least one record;
        an empty list is one empty transaction). The bounds are read as each transaction
        is cut: a commit lets them grow, and a failure ends the call."""
        i = 0
        while True:
            limit, budget = self._bound
            j, size = i, 0
            while j < len(records) and j - i < limit:
                size += record_size(records[j])
                if j > i and size > budget:
                    break
                j += 1
            yield i, j
            if j == len(records):
                return
            i = j

    def _steps(
        self, records: list[ChangeRecord], at: Position, last: int
    ) -> Iterator[tuple[list[ChangeRecord], Position]]:
        """`records` (from `at` on, to the end of version `last`) cut into transactions,
        each with the position after it. A transaction that ends inside a version
        positions at the count of that version's records it leaves published; one that
        ends with `last` positions at `last + 1`."""
        index, version = at.records, at.version
        for i, j in self._cuts(records):
            for r in records[i:j]:
                index = index + 1 if r.version == version else 1
                version = r.version
            if j == len(records):
                yield records[i:j], Position(at.table_id, last + 1)
                return
            following = records[j].version
            yield (
                records[i:j],
                Position(at.table_id, following, index if following == version else 0),
            )

    def _clear(self, delta: DeltaTable, at: Position, done: _Progress) -> Position:
        """Tombstone the topic's keys the table does not have (a table built again), in
        transactions whose positions say `clearing` until the last; the position to
        publish the table from. Keys tombstoned by an earlier, interrupted call are no
        longer live in the topic, so they are not tombstoned twice."""
        stale = stale_keys(
            delta,
            bootstrap=self.bootstrap,
            topic=self.topic,
            keys=self.keys,
            mode=self.mode,
            client_config=self._client_config,
            timeout=self.timeout,
        )
        start = Position(at.table_id, 0)
        if not stale:
            return start
        logger.warning(
            "table %s: %d key(s) of topic %s are no key of the table (built again, table id "
            "%s); tombstoning them before it is published from version 0",
            self.name,
            len(stale),
            self.topic,
            at.table_id,
        )
        records = [ChangeRecord(delta.version(), k, None) for k in stale]
        for i, j in self._cuts(records):
            after = start if j == len(records) else at
            self._commit(records[i:j], after)
            done.first = 0 if done.first is None else done.first
            done.records += j - i
            done.tombstones += j - i
        return start

    def _commit(self, step: list[ChangeRecord], after: Position) -> None:
        assert self._producer is not None
        if self._use_txn:
            publish_transaction(self._producer, self.topic, self.name, step, after, self.timeout)
            records, size = self._bound
            self._bound = (
                min(self.max_records, records + records // 2 + 1),
                min(self.max_bytes, size + size // 2 + 1),
            )
        else:
            publish_at_least_once(self._producer, self.topic, self.name, step, after, self.timeout)
        self._next = after
        logger.info(
            "table %s: published %d record(s) to %s, position now version %d (+%d)%s",
            self.name,
            len(step),
            self.topic,
            after.version,
            after.records,
            "" if self._use_txn else " (at-least-once)",
        )

    def _adapt_window(self, records: int) -> None:
        if records > 2 * self.max_records:
            self._window = max(1, self._window // 2)
        elif records < self.max_records // 2:
            self._window = min(self.max_versions or _MAX_WINDOW, self._window * 2)

    def _read_position(self, consumer: Consumer, table_id: str) -> Position:
        """Where to start: the table's position record, else the position an older
        publisher committed as a group offset; version 0 for another table id (a table
        created again at the path) or none."""
        name, topic = self.name, self.topic
        at = read_position(consumer, topic, name, timeout=self.timeout)
        if at is None:
            at = legacy_position(consumer, topic, timeout=self.timeout)
        if at is None:
            return Position(table_id, 0, clearing=True)
        if at.table_id != table_id:
            logger.warning(
                "topic %s: publish position %d belongs to table id %s, not %s; publishing "
                "the new table from version 0",
                topic,
                at.version,
                at.table_id,
                table_id,
            )
            return Position(table_id, 0, clearing=True)
        return at

    def _start(self) -> Consumer:
        """Ensure the topics, open the position's consumer and start the producer."""
        for t, partitions, config in (
            (self.topic, self.partitions, self._topic_config),
            (position_topic(self.topic), 1, POSITION_TOPIC_CONFIG),
        ):
            ensure_published_topic(
                self.bootstrap,
                t,
                table=self.name,
                partitions=partitions,
                config=config,
                client_config=self._client_config,
                timeout=self.timeout,
            )
        self._consumer = Consumer(
            {
                **self._conf,
                "group.id": marker_group(self.name),  # reads a position kept as its offset
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        self._producer, self._use_txn = start_producer(
            self._conf,
            table=self.name,
            topic=self.topic,
            transactional=self.transactional if self._use_txn else False,
            timeout=self.timeout,
        )
        return self._consumer
