"""What a SparkSession is, classic (a py4j gateway to the driver's JVM) or Spark Connect.

A Spark Connect session (`SparkSession.builder.remote(...)`, Databricks serverless and
standard access mode, `pyspark-client`) has no JVM in this process: no `_jvm`, `_jdf`
or `sparkContext`. The few things this package asked the JVM for are asked here in a
way both kinds of session answer.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

CONNECT_PARALLELISM = 2
"""Tasks to plan for where a Connect session says nothing of its server's cores (no
`spark.default.parallelism`, a master that is not `local[N]`)."""


def is_connect(spark: SparkSession) -> bool:
    """Whether `spark` is a Spark Connect session (`pyspark.sql.connect`)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def default_parallelism(spark: SparkSession) -> int:
    """The session's default parallelism: the SparkContext's on a classic session; on
    Spark Connect `spark.default.parallelism`, else the N of a `local[N]` master, else
    `CONNECT_PARALLELISM`."""
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    configured = spark.conf.get("spark.default.parallelism", None)
    if configured:
        return int(configured)
    match = re.fullmatch(r"local\[(\d+)(?:,\s*\d+)?\]", spark.conf.get("spark.master", "") or "")
    return int(match.group(1)) if match else CONNECT_PARALLELISM


_formats: dict[tuple[str, str], bool] = {}
"""What a Connect server answered, by session id and format: one round trip each."""


def connect_has_format(spark: SparkSession, name: str) -> bool:
    """Whether the Spark Connect server of `spark` has the data source `name` (`kafka`,
    `delta`), asked once per session.

    A read of the format without options is analysed on the server: it fails there either
    way, with `DATA_SOURCE_NOT_FOUND` when the format is not on the server's class path,
    and with a missing option (`subscribe`, `path`) when it is. No data is read."""
    key = (str(spark.session_id), name)  # type: ignore[attr-defined]
    if key not in _formats:
        from pyspark.errors import PySparkException

        try:
            spark.read.format(name).load().schema  # noqa: B018 - analysed on the server
            found = True
        except PySparkException as e:
            found = e.getCondition() != "DATA_SOURCE_NOT_FOUND"
            logger.debug("the Connect server's answer for the %s format: %s", name, e)
        _formats[key] = found
    return _formats[key]
