"""Engine resolution: Spark's native `kafka`/`delta` data sources, or the Python ones.

`engines: {kafka: auto, delta: auto}` picks `native` when the JVM classes are on
the class path (a cluster with the jars, Databricks) and `python` otherwise
(the pip-only default: `streams.kafka` / `streams.delta`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Literal

from warehouse.runtime.errors import RuntimeConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from warehouse.spec.config import Engines

logger = logging.getLogger(__name__)

EngineKind = Literal["kafka", "delta"]
NATIVE_CLASSES: dict[str, str] = {
    "kafka": "org.apache.spark.sql.kafka010.KafkaSourceProvider",
    "delta": "io.delta.tables.DeltaTable",
}
NATIVE_PACKAGES: dict[str, str] = {
    "kafka": "org.apache.spark:spark-sql-kafka-0-10_2.13",
    "delta": "io.delta:delta-spark_2.13",
}


def native_available(spark: SparkSession, kind: EngineKind) -> bool:
    """Whether the JVM of `spark` can load the native data source class for `kind`."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:  # Spark Connect: no py4j gateway to ask.
        return False
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(NATIVE_CLASSES[kind], False, loader)
    except Exception as e:  # noqa: BLE001  # a probe: py4j raises Py4JJavaError and others
        logger.debug("native %s engine not available: %s", kind, e)
        return False
    return True


def resolve_engine(spark: SparkSession, kind: EngineKind, setting: str) -> Literal["python", "native"]:
    """Turn `auto|native|python` into the engine to use for `kind` on this session."""
    if setting == "python":
        return "python"
    available = native_available(spark, kind)
    if setting == "native":
        if not available:
            raise RuntimeConfigError(
                f"`engines.{kind}: native` needs the JVM class `{NATIVE_CLASSES[kind]}`, "
                "which is not on this Spark's class path. Add the package "
                f"`{NATIVE_PACKAGES[kind]}` to the cluster (e.g. `--packages`), or set "
                f"`engines.{kind}: auto` (or `python`) in conf/<env>.yml."
            )
        return "native"
    if setting != "auto":
        raise RuntimeConfigError(
            f"`engines.{kind}: {setting}` is not an engine; use `auto`, `native` or `python`."
        )
    return "native" if available else "python"


def resolve_engines(spark: SparkSession, engines: Engines) -> dict[str, str]:
    """The engines of an environment, resolved once per run: `kafka` and `delta`
    (`python` or `native`), and `parse` (`arrow` where a table allows it, or `spark`)."""
    return {
        "kafka": resolve_engine(spark, "kafka", engines.kafka),
        "delta": resolve_engine(spark, "delta", engines.delta),
        "parse": "spark" if engines.parse == "spark" else "arrow",
    }
