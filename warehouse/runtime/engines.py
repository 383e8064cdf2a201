"""Engine resolution: Spark's native `kafka`/`delta` data sources, or the Python ones.

`engines: {kafka: auto, delta: auto}` picks `native` when the JVM classes are on
the class path (sessions the framework starts after `make install`, a cluster with the
jars, Databricks) and `python` otherwise (the pip-only path: `streams.kafka` /
`streams.delta`). A classic session's JVM is asked whether the class loads; a Spark
Connect session has no JVM here, so its server is asked whether it knows the format
(`streams.sessions.connect_has_format`). The choice and its reason are logged once per session and setting.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Literal

from streams.sessions import connect_has_format, is_connect
from warehouse.compile.engines import ResolvedEngines
from warehouse.runtime.errors import RuntimeConfigError
from warehouse.runtime.jars import installed_packages

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from warehouse.spec.config import Engines

logger = logging.getLogger(__name__)

EngineKind = Literal["kafka", "delta"]
NATIVE_CLASSES: dict[str, str] = {
    "kafka": "org.apache.spark.sql.kafka010.KafkaSourceProvider",
    "delta": "io.delta.tables.DeltaTable",
}
_logged: set[tuple[int, str, str, str]] = set()


def native_package(kind: EngineKind) -> str:
    """The Maven coordinates that provide `kind`'s native engine for this pyspark."""
    packages = installed_packages()
    if kind == "kafka":
        return packages.kafka
    return packages.delta or "io.delta:delta-spark_<spark major.minor>_2.13:<delta version>"


def native_available(spark: SparkSession, kind: EngineKind) -> bool:
    """Whether the JVM of `spark` can load the native data source class for `kind`."""
    if is_connect(spark):
        return connect_has_format(spark, kind)
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return False
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(NATIVE_CLASSES[kind], False, loader)
    except Exception as e:  # noqa: BLE001 - py4j wraps ClassNotFoundException in its own types
        logger.debug("native %s engine not available: %s", kind, e)
        return False
    return True


def _log_choice(spark: SparkSession, kind: EngineKind, setting: str, chosen: str) -> None:
    key = (id(spark), kind, setting, chosen)
    if key in _logged:
        return
    _logged.add(key)
    if setting != "auto":
        why = f"`engines.{kind}: {setting}`"
    elif chosen == "native":
        why = f"`auto`: {NATIVE_CLASSES[kind]} is on the {_where(spark)} class path"
    else:
        why = (
            f"`auto`: {NATIVE_CLASSES[kind]} is not on the {_where(spark)} class path "
            f"(`{native_package(kind)}`; `make install` caches it)"
        )
    logger.info("%s engine: %s (%s)", kind, chosen, why)


def _where(spark: SparkSession) -> str:
    return "Spark Connect server's" if is_connect(spark) else "session's"


def resolve_engine(
    spark: SparkSession, kind: EngineKind, setting: str
) -> Literal["python", "native"]:
    """Turn `auto|native|python` into the engine to use for `kind` on this session."""
    if setting not in ("auto", "native", "python"):
        raise RuntimeConfigError(
            f"`engines.{kind}: {setting}` is not an engine; use `auto`, `native` or `python`."
        )
    if setting == "python":
        chosen: Literal["python", "native"] = "python"
    else:
        available = native_available(spark, kind)
        if setting == "native" and not available:
            raise RuntimeConfigError(
                f"`engines.{kind}: native` needs the JVM class `{NATIVE_CLASSES[kind]}`, "
                f"which is not on this Spark's class path. It comes with `{native_package(kind)}`: "
                "run `make install` (or `warehouse jars fetch`) so that "
                "sessions the framework starts carry it, add it to your cluster "
                "(`spark-submit --packages ...`), or set "
                f"`engines.{kind}: auto` (or `python`) in conf/<env>.yml."
            )
        chosen = "native" if available else "python"
    _log_choice(spark, kind, setting, chosen)
    return chosen


def resolve_engines(spark: SparkSession, engines: Engines) -> ResolvedEngines:
    """The engines of an environment, resolved once per run: the Kafka and Delta engines
    (`python` or `native`), and `parse` (`arrow` where a table allows it, or `spark`)."""
    return ResolvedEngines.named(
        resolve_engine(spark, "kafka", engines.kafka),
        resolve_engine(spark, "delta", engines.delta),
        "spark" if engines.parse == "spark" else "arrow",
    )
