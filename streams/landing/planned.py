"""The Kafka ranges Spark planned for a micro-batch, read back from the batch's DataFrame.

`foreachBatch` hands the batch over as a DataFrame whose plan already holds the input
partitions our source planned (`KafkaStreamReader.partitions`), pickled by Spark's
Python data source. A batch writer that reads Kafka itself (`streams.landing.kafka_json`)
takes them from there: the exact `[start, end)` per partition Spark recorded in its
offset log for this batch, replays included, with no second planning that could differ.

This walks Spark internals (`LogicalRDD` → `DataSourceRDD` → `PythonStreamingInputPartition`)
through Py4J. Anything unexpected, a Spark Connect session or the native `kafka`
source, gives None, and the caller keeps to the DataFrame; the tests run it on the
pinned Spark, so an upgrade that moves these classes fails a test rather than
silently changing the path.
"""

from __future__ import annotations

import logging
import pickle
from typing import Any

from pyspark.sql import DataFrame

from streams.kafka import KafkaInputPartition

logger = logging.getLogger(__name__)

_MAX_DEPTH = 16


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


def planned_partitions(df: DataFrame) -> list[KafkaInputPartition] | None:
    """The input partitions of a micro-batch DataFrame of the Python Kafka source, in
    Spark's order; None when `df` is anything else or they cannot be read."""
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
        for part in rdd.partitions():
            inputs = part.inputPartition().iterator()
            while inputs.hasNext():
                picked = inputs.next().pickedPartition()
                obj = pickle.loads(bytes(picked))  # written by our own planner
                if not isinstance(obj, KafkaInputPartition) or obj.fetch is None:
                    return None
                found.append(obj)
        return found
    except Exception as e:  # noqa: BLE001 - Py4J errors of a Spark whose internals differ
        logger.info("Kafka ranges of the batch not readable from its plan: %s", e)
        return None
