"""`max_bytes_per_trigger`: a micro-batch bounded in bytes, on both engines.

Neither engine can know the size of a range of offsets before it reads it: Spark's
`kafka` source (4.2) takes `maxOffsetsPerTrigger`, `minOffsetsPerTrigger` and
`maxTriggerDelay`, and no byte bound; the Python source plans a batch's offsets on the
driver before its tasks read them. So when a query starts, the size of the topics'
records is sampled (their key and value, the last `SAMPLE` records of each partition,
read_committed) and the byte bound becomes a bound in records, `max_bytes // mean`,
which both engines then apply as they apply `max_offsets_per_trigger` (the smaller of
the two wins). It is as good as the sample: records much larger than the newest ones
make batches larger than the bound. A topic without records yet bounds nothing by bytes
until the query starts again.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow.compute as pc
from confluent_kafka.admin import AdminClient

from streams.kafka.admin import end_offsets, topic_partitions
from streams.kafka.fetch import RECORD_SCHEMA, consumer_config, read_range
from streams.kafka.offsets import OffsetRange

logger = logging.getLogger(__name__)

SAMPLE = 100
"""Records read from the end of each partition to size the topics' records."""


def mean_record_bytes(
    bootstrap: str, topics: Iterable[str], *, client_config: Mapping[str, Any] | None = None
) -> float | None:
    """The mean size (key and value bytes) of the last `SAMPLE` records of each partition
    of `topics`; None when they hold none."""
    names = list(topics)
    if not names:
        return None
    ends = end_offsets(bootstrap, names, client_config=client_config, read_committed=True)
    conf = consumer_config(
        bootstrap, dict(client_config or {}), isolation_level="read_committed", size=SAMPLE
    )
    count = size = 0
    for topic, parts in ends.items():
        for partition, end in parts.items():
            if end == 0:
                continue
            rng = OffsetRange(topic, partition, max(0, end - SAMPLE), end)
            for batch in read_range(rng, conf, RECORD_SCHEMA, on_data_loss="skip"):
                count += batch.num_rows
                for column in ("key", "value"):
                    size += pc.sum(pc.binary_length(batch.column(column))).as_py() or 0
    return size / count if count else None


def records_for_bytes(
    max_bytes: int,
    *,
    bootstrap: str,
    topics: Iterable[str] | None,
    pattern: str | None,
    client_config: Mapping[str, Any] | None = None,
) -> int | None:
    """`max_bytes` as a number of records of the topics (`topics`, or those `pattern`
    matches now), at least 1; None when the topics hold no record to size."""
    if topics is None:
        regex = re.compile(pattern or "")
        admin = AdminClient({"bootstrap.servers": bootstrap, **dict(client_config or {})})
        topics = [t for t in topic_partitions(admin) if regex.fullmatch(t)]
    names = list(topics)
    mean = mean_record_bytes(bootstrap, names, client_config=client_config)
    if mean is None:
        logger.info(
            "kafka source %s: no record to size yet; max_bytes_per_trigger bounds nothing "
            "until the query starts again",
            ",".join(names),
        )
        return None
    records = max(1, int(max_bytes // max(mean, 1.0)))
    logger.info(
        "kafka source %s: records of %.0f bytes on average; max_bytes_per_trigger %d is %d "
        "record(s) per batch",
        ",".join(names),
        mean,
        max_bytes,
        records,
    )
    return records
