"""The session factory reuses the running session; engine resolution on this JVM."""

from __future__ import annotations

import pytest

from warehouse.runtime.engines import native_available, resolve_engine
from warehouse.runtime.errors import RuntimeConfigError
from warehouse.runtime.session import get_session
from warehouse.spec.config import SparkSettings

pytestmark = pytest.mark.spark


def test_get_session_returns_the_active_session_and_never_a_second(spark) -> None:
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    got = get_session(SparkSettings(master="local[1]", conf={"spark.sql.shuffle.partitions": "7"}))
    assert got is spark
    assert SparkContext._active_spark_context is context
    # The caller's configuration is left alone.
    assert got.conf.get("spark.sql.shuffle.partitions") == "2"


def test_local_defaults_reach_the_launched_jvm(spark) -> None:
    """`LOCAL_DEFAULTS` hold static confs (read once, when the JVM starts): they must be
    in the launched session, not set on it afterwards."""
    from warehouse.runtime.session import LOCAL_DEFAULTS

    jconf = spark.sparkContext._jsc.sc().conf()
    for key in ("spark.sql.codegen.cache.maxEntries", "spark.sql.session.timeZone"):
        assert jconf.get(key) == LOCAL_DEFAULTS[key]
    assert spark.conf.get("spark.sql.codegen.cache.maxEntries") == "1000"
    # local[2]: Delta rebuilds snapshots in one task per core, not its cluster default of 50.
    assert spark.conf.get("spark.databricks.delta.snapshotPartitions") == "2"


def test_auto_resolves_to_native_where_the_jars_are_and_says_how_to_get_them(
    spark, native_jars, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from warehouse.runtime import engines

    # The test session carries the jars `make install` cached, as the CLI's sessions do.
    # The choice is logged once per session: forget what earlier tests had logged.
    monkeypatch.setattr(engines, "_logged", set())
    caplog.set_level("INFO", logger="warehouse.runtime.engines")
    assert resolve_engine(spark, "kafka", "auto") == "native"
    assert resolve_engine(spark, "delta", "auto") == "native"
    assert resolve_engine(spark, "kafka", "python") == "python"
    assert "kafka engine: native (`auto`: org.apache.spark.sql.kafka010" in caplog.text
    saved = dict(engines.NATIVE_CLASSES)
    try:  # a class this JVM lacks: auto falls back, native asked for says which jar
        engines.NATIVE_CLASSES["delta"] = "io.delta.tables.NoSuchClass"
        assert resolve_engine(spark, "delta", "auto") == "python"
        with pytest.raises(RuntimeConfigError, match=r"io\.delta:delta-spark_4\.2_2\.13") as e:
            resolve_engine(spark, "delta", "native")
        assert "make install" in str(e.value)
    finally:
        engines.NATIVE_CLASSES.clear()
        engines.NATIVE_CLASSES.update(saved)


def test_native_probe_sees_classes_that_are_on_the_class_path(spark) -> None:
    # The probe itself must be able to answer yes: a Spark class is always there.
    from warehouse.runtime import engines

    saved = dict(engines.NATIVE_CLASSES)
    try:
        engines.NATIVE_CLASSES["kafka"] = "org.apache.spark.sql.SparkSession"
        assert native_available(spark, "kafka") is True
        assert resolve_engine(spark, "kafka", "native") == "native"
    finally:
        engines.NATIVE_CLASSES.clear()
        engines.NATIVE_CLASSES.update(saved)


def test_python_workers_import_the_installed_pyspark_not_the_source_zip(spark) -> None:
    # The session fixture is launched as the CLI launches its own (spark_home.launching):
    # a worker importing pyspark from python/lib/pyspark.zip compiles it from source, a
    # second per worker, paid again by every streaming query's Python source.
    from warehouse.runtime.spark_home import installed_home

    if installed_home() is None:
        pytest.skip("pyspark is not pip-installed here: Spark's own python/ folder is used")
    files = spark.range(2).rdd.map(lambda _: __import__("pyspark").__file__).collect()
    assert files and all(".zip" not in f for f in files), files
