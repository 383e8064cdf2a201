"""`engine="native"`: delta-spark's own format, only where its jars are on the classpath."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import Row

from streams.delta import (
    DeltaTarget,
    NativeEngineUnavailableError,
    native_delta_available,
    read_delta_stream,
    recorded_offsets,
    write_batch,
)

pytestmark = pytest.mark.spark


def test_without_delta_spark_native_fails_naming_the_fix(spark, tmp_path: Path) -> None:
    if native_delta_available(spark):
        pytest.skip("delta-spark is on the classpath here")
    target = DeltaTarget(str(tmp_path / "t"), app_id="a:q", engine="native")
    df = spark.createDataFrame([Row(id=1)])
    with pytest.raises(NativeEngineUnavailableError, match="delta-spark") as info:
        write_batch(df, 0, target)
    assert info.value.path == target.path
    with pytest.raises(NativeEngineUnavailableError):
        read_delta_stream(spark, str(tmp_path / "t"), engine="native")


@pytest.mark.native
def test_native_append_is_idempotent_and_records_offsets(spark, tmp_path: Path) -> None:
    if not native_delta_available(spark):
        pytest.skip("no delta-spark jars on this JVM (no Maven here); runs on a cluster")
    target = DeltaTarget(str(tmp_path / "t"), app_id="a:q", engine="native")
    info = {"warehouse.sourceOffsets": '{"t": {"0": 2}}'}
    df = spark.createDataFrame([Row(id=1), Row(id=2)])
    write_batch(df, 0, target, commit_info=info)
    write_batch(df, 0, target, commit_info=info)
    assert spark.read.format("delta").load(target.path).count() == 2
    assert recorded_offsets(target.path) == {"t": {"0": 2}}
