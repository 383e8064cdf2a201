"""End to end: CDC topic → SCD2 dimension table → published topic → read back = the table.

A real streaming query (Kafka source, availableNow) applies Debezium changes to an
SCD2 table and publishes the table's changes after every batch; reading the
compacted topic back gives exactly the table's current rows.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from streams.cdc import publish_changes, read_ktable
from streams.delta import DeltaTarget, write_batch
from streams.kafka import parse_kafka, read_kafka_stream
from streams.kafka.admin import ensure_topic, produce
from tests.integration.cdc.helpers import USERS_DDL, debezium, read_table, user
from tests.support.rows import assert_rows

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def _change(op: str, uid: int, t: int, name: str = "", city: str = "") -> tuple[str, str]:
    before = user(uid, "old", "old") if op in ("u", "d") else None
    after = None if op == "d" else user(uid, name, city)
    return json.dumps({"user_id": uid}), debezium(op, t, before=before, after=after)


def test_cdc_topic_to_scd2_table_to_published_topic_and_back(
    spark, broker, tmp_path: Path, unique, engine: str
) -> None:
    bs = broker.bootstrap
    source, published, name = unique("shop.users"), unique("mv.dim_users"), unique("dim_users")
    ensure_topic(bs, source)
    path = str(tmp_path / "dim_users")
    target = DeltaTarget(
        path,
        mode="scd2",
        keys=["user_id"],
        sequence_by="_source_ts_ms",
        app_id=f"{name}:q",
        engine=engine,
    )

    def apply(batch, batch_id: int) -> None:
        good = parse_kafka(batch, format="debezium-json", schema=USERS_DDL).good
        write_batch(good, batch_id, target)
        publish_changes(
            path, bootstrap=bs, topic=published, keys=["user_id"], table=name, mode="scd2"
        )

    def run() -> None:
        stream = read_kafka_stream(
            spark, bootstrap=bs, topics=source, max_offsets_per_trigger=5, engine=engine
        )
        query = (
            stream.writeStream.foreachBatch(apply)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(600)
        assert query.exception() is None

    produce(
        bs,
        source,
        [
            _change("r", 1, 100, "ann", "paris"),
            _change("r", 2, 100, "bob", "rome"),
            _change("r", 3, 100, "cy", "bern"),
            _change("c", 4, 150, "dee", "lima"),
            _change("u", 1, 200, "ann", "oslo"),
            _change("d", 2, 210),
            (json.dumps({"user_id": 2}), None),  # tombstone after the delete
        ],
    )
    run()
    produce(
        bs,
        source,
        [
            _change("u", 1, 190, "ann", "late"),  # older than the table: ignored
            _change("c", 2, 300, "bob", "kyiv"),  # reinsert after delete
            _change("d", 3, 310),
            _change("u", 4, 320, "dee", "quito"),
            _change("u", 4, 330, "dee", "sucre"),
        ],
    )
    run()

    table = read_table(
        spark, path, ["user_id", "name", "city", "valid_from", "valid_to", "is_current"]
    )
    current = table.filter(F.col("is_current")).drop("valid_to")
    assert sorted((r.user_id, r.city) for r in current.collect()) == [
        (1, "oslo"),
        (2, "kyiv"),
        (4, "sucre"),
    ]
    back = read_ktable(spark, bs, published, schema=table.schema).select(*current.columns)
    assert_rows(back, current.collect())
    inferred = read_ktable(spark, bs, published)  # no schema: types inferred from the JSON
    assert sorted((r.user_id, r.city, r.is_current) for r in inferred.collect()) == [
        (1, "oslo", True),
        (2, "kyiv", True),
        (4, "sucre", True),
    ]
