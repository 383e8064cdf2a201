"""The publisher's Kafka side: its topics and producer (`ensure_published_topic`,
`start_producer`), and one step of a publish on the wire: a slice of changelog records
and the position after them, in one Kafka transaction (or, without transactions,
records then position).

`streams.cdc.publish` cuts a backlog into these steps and decides what a failed one
means; this module only writes one and says how it ended: `TransactionFailed` when the
transaction was aborted (nothing of it visible to read_committed consumers), a
`PublishError` otherwise.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from streams.cdc.changelog import ChangeRecord
from streams.cdc.errors import PublishError
from streams.cdc.position import (
    POSITION_PARTITION,
    Position,
    position_key,
    position_topic,
    transactional_id,
)
from streams.delta import crash_point
from streams.kafka import KafkaAdminError, ensure_topic

logger = logging.getLogger(__name__)

HEADER_TABLE = "warehouse.table"
HEADER_VERSION = "warehouse.version"
FENCED = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
_NO_TRANSACTIONS = {
    KafkaError._UNSUPPORTED_FEATURE,
    KafkaError.UNSUPPORTED_VERSION,
    KafkaError._NOT_IMPLEMENTED,
}
_POLL = 1.0
"""Seconds one `flush` waits before the delivery's progress is looked at again."""


class TransactionFailed(PublishError):
    """A publish transaction failed and was aborted: none of its records and not its
    position are visible to read_committed consumers, so it can be tried again."""


def ensure_published_topic(
    bootstrap: str,
    topic: str,
    *,
    table: str,
    partitions: int,
    config: Mapping[str, str],
    client_config: Mapping[str, Any] | None,
    timeout: float,
) -> None:
    """Create `topic` (the published topic or its position topic) when it is missing."""
    try:
        ensure_topic(
            bootstrap,
            topic,
            partitions=partitions,
            config=config,
            client_config=client_config,
            timeout=timeout,
        )
    except KafkaAdminError as e:
        raise PublishError(
            f"table `{table}`: topic `{topic}` could not be created: {e}", topic=topic, table=table
        ) from e


def start_producer(
    conf: Mapping[str, Any],
    *,
    table: str,
    topic: str,
    transactional: bool | None,
    timeout: float,
) -> tuple[Producer, bool]:
    """The publisher's producer and whether it is transactional. `transactional=None`:
    transactional when the broker supports transactions, else (logged) idempotent keyed
    upserts, at-least-once; `True` fails without them; `False` never tries."""
    if transactional is not False:
        producer = Producer(
            {
                **conf,
                "transactional.id": transactional_id(table),
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
            }
        )
        try:
            producer.init_transactions(timeout)
            return producer, True
        except KafkaException as e:
            producer.close()
            if transactional is not None or e.args[0].code() not in _NO_TRANSACTIONS:
                raise PublishError(
                    f"table `{table}`: starting the transactional producer "
                    f"`{transactional_id(table)}` on `{conf.get('bootstrap.servers')}` failed: "
                    f"{e.args[0].str()}",
                    topic=topic,
                    table=table,
                ) from e
            logger.warning(
                "topic %s: the broker does not support transactions (%s); publishing "
                "table %s at-least-once (idempotent keyed upserts)",
                topic,
                e.args[0].str(),
                table,
            )
    producer = Producer({**conf, "acks": "all", "max.in.flight.requests.per.connection": 1})
    return producer, False


def record_size(record: ChangeRecord) -> int:
    """What a record weighs in a transaction's byte bound: its key and value."""
    return len(record.key or b"") + len(record.value or b"")


def _produce(
    producer: Producer, topic: str, table: str, records: Sequence[ChangeRecord], report: Any
) -> None:
    for r in records:
        headers = [
            (HEADER_TABLE, table.encode()),
            (HEADER_VERSION, str(r.version).encode()),
            *r.headers,
        ]
        while True:
            try:
                producer.produce(
                    topic, key=r.key, value=r.value, headers=headers, on_delivery=report
                )
                break
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.1)


def _produce_position(
    producer: Producer, topic: str, table: str, position: Position, report: Any = None
) -> None:
    producer.produce(
        position_topic(topic),
        key=position_key(table),
        value=position.value(),
        partition=POSITION_PARTITION,
        headers=[(HEADER_TABLE, table.encode())],
        on_delivery=report,
    )


def wait_delivered(producer: Producer, topic: str, table: str, stall: float) -> None:
    """Wait until every produced record is delivered or failed, however long that takes
    while deliveries go on: a large or slow transaction is not cut off by a fixed
    timeout. Fails (`PublishError`) only when nothing was delivered for `stall` seconds;
    librdkafka fails a record itself after `message.timeout.ms` (for a transactional
    producer at most `transaction.timeout.ms`)."""
    remaining = len(producer)
    quiet_since = time.monotonic()
    while remaining:
        left = producer.flush(_POLL)
        if left < remaining:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > stall:
            raise PublishError(
                f"topic `{topic}`: no record of table `{table}` was delivered for {stall:.0f}s "
                f"({left} still queued). Is the broker reachable?",
                topic=topic,
                table=table,
            )
        remaining = left


def publish_transaction(
    producer: Producer,
    topic: str,
    table: str,
    records: Sequence[ChangeRecord],
    position: Position,
    timeout: float,
) -> None:
    """`records` and `position` in one transaction. In a transaction a failed record
    fails its commit, so no delivery reports are asked for: a fenced producer's `flush`
    raises its fatal error before it runs the reports' callbacks, and every call a
    callback makes then fails with a `SystemError`."""
    producer.begin_transaction()
    try:
        _produce_position(producer, topic, table, position)
        _produce(producer, topic, table, records, None)
        wait_delivered(producer, topic, table, timeout)
        crash_point("publish_before_commit")
        _commit(producer, timeout)
    except (KafkaException, PublishError) as e:
        _abort(producer, topic, table)
        raise _failed(e, topic, table, len(records)) from e
    crash_point("publish_after_commit")


def _commit(producer: Producer, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            producer.commit_transaction(max(1.0, deadline - time.monotonic()))
            return
        except KafkaException as e:
            if e.args[0].retriable() and time.monotonic() < deadline:
                continue
            raise


def _failed(e: Exception, topic: str, table: str, count: int) -> TransactionFailed:
    if isinstance(e, KafkaException) and e.args[0].code() in FENCED:
        return TransactionFailed(
            f"table `{table}`: the publish transaction of {count} record(s) was fenced "
            f"(transactional id `{transactional_id(table)}`): {e.args[0].str()}. Either "
            "another publisher of the table started, or the broker aborted the transaction "
            "when it outlived `transaction.timeout.ms`. Nothing of it is visible to read_committed "
            "consumers; this publisher starts over from its position.",
            topic=topic,
            table=table,
        )
    reason = e.args[0].str() if isinstance(e, KafkaException) else str(e)
    return TransactionFailed(
        f"table `{table}`: the publish transaction of {count} record(s) to `{topic}` failed "
        f"and was aborted: {reason}. Nothing of it is visible to read_committed consumers; "
        "it is published again, in smaller transactions.",
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


def publish_at_least_once(
    producer: Producer,
    topic: str,
    table: str,
    records: Sequence[ChangeRecord],
    position: Position,
    timeout: float,
) -> None:
    """`records`, delivered, then `position`: a crash in between publishes them again
    (upserts of the same values on a compacted topic)."""
    failures: list[str] = []

    def delivered(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            failures.append(err.str())

    _produce(producer, topic, table, records, delivered)
    wait_delivered(producer, topic, table, timeout)
    if failures:
        raise PublishError(
            f"topic `{topic}`: {len(failures)} record(s) of table `{table}` were not "
            f"delivered: {failures[:3]}",
            topic=topic,
            table=table,
        )
    crash_point("publish_before_commit")
    try:
        _produce_position(producer, topic, table, position, delivered)
        wait_delivered(producer, topic, table, timeout)
        if failures:
            raise PublishError(f"not delivered: {failures[:3]}")
    except (KafkaException, PublishError) as e:
        raise PublishError(
            f"table `{table}`: the records reached `{topic}` but the publish position could "
            f"not be written to `{position_topic(topic)}`: {e}. The next batch publishes them "
            "again (harmless upserts of a compacted topic).",
            topic=topic,
            table=table,
        ) from e
    crash_point("publish_after_commit")
