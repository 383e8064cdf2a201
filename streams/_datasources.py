"""Registering this package's Python data sources with a session, once.

Registering a source again replaces it, and Spark warns each time ("The data source ...
replaced a previously registered data source"). A classic session is asked whether it
has the source (its `DataSourceManager`); Spark Connect has no JVM to ask, so a session
there is remembered by identity once it has been given the source.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSource

_given_without_jvm: set[tuple[int, str]] = set()


def register_once(spark: SparkSession, source: type[DataSource]) -> None:
    """Register `source` with `spark` unless the session already has it."""
    name = source.name()
    jsession = getattr(spark, "_jsparkSession", None)
    if jsession is not None:
        if not jsession.sessionState().dataSourceManager().dataSourceExists(name):
            spark.dataSource.register(source)
        return
    if (id(spark), name) not in _given_without_jvm:
        spark.dataSource.register(source)
        _given_without_jvm.add((id(spark), name))
