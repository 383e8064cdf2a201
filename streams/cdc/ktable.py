"""A compacted changelog topic read back into a table: the latest value per key.

Reads every partition from its start to its end (with `read_committed`, the last
stable offset: aborted and open transactions are not part of the table), keeps
the last value of each key and drops the keys whose last record is a tombstone.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa
from confluent_kafka import Consumer, KafkaException, TopicPartition

from streams.cdc.errors import KTableError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

logger = logging.getLogger(__name__)


def latest_values(
    bootstrap: str,
    topic: str,
    *,
    isolation: Literal["read_committed", "read_uncommitted"] = "read_committed",
    client_config: Mapping[str, Any] | None = None,
    timeout: float = 60.0,
    poll_timeout: float = 0.5,
) -> dict[bytes, bytes]:
    """`{key: value}` of the topic: the last record per key, tombstoned keys removed.
    `poll_timeout`: the longest one `consume` call waits; only a partition whose tail is
    transaction markers or aborted records waits it out before its position ends it."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            **dict(client_config or {}),
            "group.id": f"warehouse-ktable-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        ends = _end_offsets(consumer, bootstrap, topic, timeout)
        if not ends:
            return {}
        consumer.assign([TopicPartition(topic, p, low) for p, (low, _) in ends.items()])
        return _read_to_ends(consumer, topic, ends, timeout, poll_timeout)
    except KafkaException as e:
        raise KTableError(
            f"topic `{topic}`: reading it back failed: {e.args[0].str()}", topic=topic
        ) from e
    finally:
        consumer.close()


def _end_offsets(
    consumer: Consumer, bootstrap: str, topic: str, timeout: float
) -> dict[int, tuple[int, int]]:
    """`{partition: (low, high)}` of the topic's partitions that hold records."""
    meta = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
    if meta is None or meta.error is not None or not meta.partitions:
        raise KTableError(
            f"topic `{topic}` does not exist on `{bootstrap}` "
            f"({meta.error if meta is not None else 'no metadata'}); publish the table first.",
            topic=topic,
        )
    ends: dict[int, tuple[int, int]] = {}
    for p in sorted(meta.partitions):
        low, high = consumer.get_watermark_offsets(
            TopicPartition(topic, p), timeout=timeout, cached=False
        )
        if high > low:
            ends[p] = (low, high)
    return ends


def _read_to_ends(
    consumer: Consumer,
    topic: str,
    ends: dict[int, tuple[int, int]],
    timeout: float,
    poll_timeout: float,
) -> dict[bytes, bytes]:
    """The last value per key of the partitions of `ends` (assigned from their low
    offsets) up to their high offsets, tombstoned keys removed."""
    table: dict[bytes, bytes] = {}
    deadline = time.monotonic() + timeout
    highs = {p: high for p, (_, high) in ends.items()}
    pending = dict(highs)
    at = {p: low for p, (low, _) in ends.items()}  # next offset expected
    while pending:
        if time.monotonic() > deadline:
            raise KTableError(
                f"topic `{topic}`: reading up to the end offsets {highs} took longer than "
                f"{timeout:.0f}s (still missing partitions {sorted(pending)}). Is a "
                "transaction left open on the topic?",
                topic=topic,
            )
        # At most what is left: `consume` returns when it has that many or after its
        # timeout, and nothing follows the end offsets to fill a larger request.
        want = sum(max(0, end - at[p]) for p, end in pending.items())
        for msg in consumer.consume(max(1, min(1000, want)), timeout=poll_timeout):
            if msg.error() is not None:
                raise KTableError(
                    f"topic `{topic}`: reading partition {msg.partition()} failed: "
                    f"{msg.error().str()}",
                    topic=topic,
                )
            at[msg.partition()] = msg.offset() + 1
            _apply(table, msg.key(), msg.value())
        # transaction markers occupy offsets too: the position is past them
        for tp in consumer.position([TopicPartition(topic, p) for p in pending]):
            if tp.offset >= pending[tp.partition]:
                del pending[tp.partition]
    return table


def _apply(table: dict[bytes, bytes], key: bytes | None, value: bytes | None) -> None:
    """One changelog record: a value sets its key, a tombstone removes it; a record
    without a key has no row to be."""
    if key is None:
        return
    if value is None:
        table.pop(key, None)
    else:
        table[key] = value


def read_ktable(
    spark: SparkSession | None,
    bootstrap: str,
    topic: str,
    *,
    schema: StructType | str | None = None,
    isolation: Literal["read_committed", "read_uncommitted"] = "read_committed",
    client_config: Mapping[str, Any] | None = None,
    timeout: float = 60.0,
) -> DataFrame | pa.Table:
    """The table a compacted JSON changelog topic holds: latest value per key, no tombstones.

    Without `spark`, a `pyarrow.Table` built from the JSON objects (types inferred by
    Arrow: timestamps and decimals stay strings). With `spark`, a DataFrame: the values
    parsed with `from_json` when `schema` (a StructType or DDL string) is given,
    otherwise the Arrow table above.
    """
    values = latest_values(
        bootstrap, topic, isolation=isolation, client_config=client_config, timeout=timeout
    )
    texts = [v.decode("utf-8") for v in values.values()]
    if spark is None or schema is None:
        try:
            table = pa.Table.from_pylist([json.loads(t) for t in texts])
        except (ValueError, pa.ArrowException) as e:
            raise KTableError(
                f"topic `{topic}`: a value is not a JSON object Arrow can type: {e}", topic=topic
            ) from e
        if spark is None:
            return table
        if table.num_columns == 0:
            from pyspark.sql.types import StructType

            return spark.createDataFrame([], StructType([]))
        return spark.createDataFrame(table)
    from pyspark.sql import functions as F

    raw = spark.createDataFrame([(t,) for t in texts], "value string")
    return raw.select(F.from_json("value", schema).alias("v")).select("v.*")
