"""`kafka_json_append` refuses what it cannot land with a `LandingConfigError` naming the
table and the field, before it reads or writes anything (real Spark session, no broker:
nothing is read)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql.types import (
    DateType,
    DecimalType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from streams.delta import DeltaTarget
from streams.landing import LandingConfigError, LandingError, kafka_json_append

pytestmark = [pytest.mark.spark]


def payload(*fields: StructField) -> StructType:
    return StructType(list(fields))


def test_a_payload_arrow_does_not_parse_names_the_fields(spark, tmp_path: Path) -> None:
    target = DeltaTarget(str(tmp_path / "t"), app_id="ods_x:q", table="ods_x")
    wrong = payload(
        StructField("id", LongType()),
        StructField("day", DateType()),
        StructField("amount", DecimalType(12, 2)),
    )
    with (
        pytest.raises(LandingConfigError) as e,
        kafka_json_append(spark, [], target, 0, payload=wrong),
    ):
        pass
    assert isinstance(e.value, LandingError)
    assert (e.value.table, e.value.path, e.value.field) == ("ods_x", target.path, "day")
    assert str(e.value).startswith(
        "Delta table `ods_x`: payload field(s) `day` (`date`), `amount` (`decimal(12,2)`) "
        "have types Arrow does not parse"
    )
    assert "`bigint`" in str(e.value)  # what it takes
    assert not Path(target.path).exists()


def test_an_empty_payload_or_a_target_that_does_not_append_is_refused(
    spark, tmp_path: Path
) -> None:
    target = DeltaTarget(str(tmp_path / "t"), app_id="ods_x:q", table="ods_x")
    with pytest.raises(LandingConfigError, match="the payload has no fields"):
        with kafka_json_append(spark, [], target, 0, payload=payload()):
            pass
    upsert = DeltaTarget(
        str(tmp_path / "u"), mode="upsert", keys=["id"], app_id="dwd_x:q", table="dwd_x"
    )
    good = payload(StructField("id", StringType()))
    with pytest.raises(LandingConfigError) as e:
        with kafka_json_append(spark, [], upsert, 0, payload=good):
            pass
    assert e.value.field == "mode" and e.value.table == "dwd_x"
    assert (
        "Delta table `dwd_x`: `kafka_json_append` appends, but the target's mode is `upsert`"
        in str(e.value)
    )
    assert not Path(upsert.path).exists()
