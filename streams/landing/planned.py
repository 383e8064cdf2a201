"""The Kafka ranges Spark planned for a micro-batch, read back from the batch's DataFrame.

`foreachBatch` hands the batch over as a DataFrame whose plan already holds the input
partitions its source planned: our source's (`KafkaStreamReader.partitions`), pickled by
Spark's Python data source, or Spark's own `kafka` source's (`KafkaBatchInputPartition`,
one offset range of one Kafka partition each). A batch writer that reads Kafka itself
(`streams.landing.kafka_json`) takes them from there: the exact `[start, end)` per
partition Spark recorded in its offset log for this batch, replays included, with no
second planning that could differ. Spark's own source's ranges are split and packed
into tasks as our source would (`streams.kafka.input_partitions`), to be read with the
fetch options the caller gives.

This walks Spark internals (`LogicalRDD` → `DataSourceRDD` → the input partitions)
through Py4J. Anything unexpected, a Spark Connect session, another source, gives None,
and the caller keeps to the DataFrame; the tests run it on the pinned Spark, so an
upgrade that moves these classes fails a test rather than silently changing the path.
"""

from __future__ import annotations

import logging
import pickle
from typing import Any

from pyspark.sql import DataFrame

from streams.kafka import FetchOptions, KafkaInputPartition, input_partitions
from streams.sessions import default_parallelism

logger = logging.getLogger(__name__)

_MAX_DEPTH = 16
_NATIVE_PARTITION = "KafkaBatchInputPartition"


def _source_rdd(rdd: Any) -> Any | None:
    """The `DataSourceRDD` under a chain of one-parent RDDs, or None."""
    for _ in range(_MAX_DEPTH):
        if rdd.getClass().getSimpleName() == "DataSourceRDD":
            return rdd
        deps = rdd.dependencies()
        if deps.size() != 1:
            return None
        rdd = deps.head().rdd()
    return None


def planned_partitions(
    df: DataFrame, fetch: FetchOptions | None = None, *, max_tasks: int | None = None
) -> list[KafkaInputPartition] | None:
    """The input partitions of a micro-batch DataFrame of a Kafka source, in Spark's
    order; None when `df` is anything else or they cannot be read.

    Our source's partitions carry their fetch options. Spark's own source's ranges are
    read with `fetch` (None: not read, the result is None), split and packed into at
    most `max_tasks` tasks (default: Spark's default parallelism), as our source plans
    them."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return None
    try:
        plan = jdf.queryExecution().analyzed()
        if plan.getClass().getSimpleName() != "LogicalRDD":
            return None
        rdd = _source_rdd(plan.rdd())
        if rdd is None:
            return None
        found: list[KafkaInputPartition] = []
        start: dict[tuple[str, int], int] = {}
        end: dict[tuple[str, int], int] = {}
        for part in rdd.partitions():
            inputs = part.inputPartition().iterator()
            while inputs.hasNext():
                planned = inputs.next()
                if planned.getClass().getSimpleName() == _NATIVE_PARTITION:
                    rng = planned.offsetRange()
                    tp = (rng.topicPartition().topic(), rng.topicPartition().partition())
                    lo, hi = rng.fromOffset(), rng.untilOffset()
                    # Spark splits a partition's range in pieces under `minPartitions`.
                    start[tp] = min(start.get(tp, lo), lo)
                    end[tp] = max(end.get(tp, hi), hi)
                    continue
                obj = pickle.loads(bytes(planned.pickedPartition()))  # our own planner's
                if not isinstance(obj, KafkaInputPartition) or obj.fetch is None:
                    return None
                found.append(obj)
        if not start:
            return found
        if found or fetch is None:
            return None
        tasks = max_tasks or default_parallelism(df.sparkSession)
        return input_partitions(start, end, fetch, max_tasks=tasks)
    except Exception as e:  # noqa: BLE001 - Py4J errors of a Spark whose internals differ
        logger.info("Kafka ranges of the batch not readable from its plan: %s", e)
        return None
