"""parse_kafka on real Spark: good/bad split with reasons, for every format.

Input frames have the Kafka source's columns; the read path itself is covered by
test_source.py against a real broker.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from streams.kafka import KafkaConfigError, hashes_of, parse_hashes, parse_kafka, record_hash
from streams.kafka.source import SCHEMA
from tests.support.rows import assert_rows

pytestmark = pytest.mark.spark

TS = dt.datetime(2026, 1, 2, 3, 4, 5)


def kafka_frame(spark, records: list[tuple[bytes | str | None, bytes | str | None]]) -> DataFrame:
    def b(x: bytes | str | None) -> bytes | None:
        return x.encode() if isinstance(x, str) else x

    rows = [(b(k), b(v), "t", 0, i, TS, 0, None) for i, (k, v) in enumerate(records)]
    return spark.createDataFrame(rows, SCHEMA)


ORDERS = "order_id bigint, amount double, city string"


class Persisting:
    """A `persist` hook for parse_kafka that keeps what it persisted, to unpersist after."""

    def __init__(self) -> None:
        self.frames: list[DataFrame] = []

    def __call__(self, frame: DataFrame) -> DataFrame:
        self.frames.append(frame.persist())
        return self.frames[-1]

    def unpersist(self) -> None:
        for frame in self.frames:
            frame.unpersist()


def test_json_good_and_bad_with_reasons(spark) -> None:
    df = kafka_frame(
        spark,
        [
            (None, '{"order_id": 1, "amount": 12.5, "city": "Oslo"}'),
            (None, "not json"),
            (None, '{"order_id": 2, "amount": "lots"}'),
            (None, '{"amount": 3.0}'),
            (None, "[1, 2]"),
            (None, '{"order_id": 4, "amount": 1, "extra": true}'),
            (None, '{"order_id": null, "amount": 1}'),
            (None, None),
        ],
    )
    good, bad = parse_kafka(df, format="json", schema=ORDERS, required=["order_id"])
    assert_rows(
        good,
        [
            Row(
                order_id=1,
                amount=12.5,
                city="Oslo",
                _topic="t",
                _partition=0,
                _offset=0,
                _timestamp=TS,
            ),
            Row(
                order_id=4,
                amount=1.0,
                city=None,
                _topic="t",
                _partition=0,
                _offset=5,
                _timestamp=TS,
            ),
        ],
    )
    assert_rows(
        bad.select("_offset", "_error"),
        [
            Row(_offset=1, _error="invalid JSON"),
            Row(_offset=2, _error="field `amount`: expected double, got string"),
            Row(_offset=3, _error="missing required field `order_id`"),
            Row(_offset=4, _error="not a JSON object (got array<bigint>)"),
            Row(_offset=6, _error="missing required field `order_id`"),
            Row(_offset=7, _error="value is null"),
        ],
    )
    assert bad.columns == [
        "key",
        "value",
        "_topic",
        "_partition",
        "_offset",
        "_timestamp",
        "_error",
    ]
    raw = bad.where("_offset = 1").select("value").first()
    assert raw is not None and bytes(raw.value) == b"not json"


def test_json_accepts_a_struct_type_schema(spark) -> None:
    from pyspark.sql.types import LongType, StructField, StructType

    schema = StructType([StructField("id", LongType())])
    good, bad = parse_kafka(kafka_frame(spark, [(None, '{"id": 7}')]), format="json", schema=schema)
    assert [r.id for r in good.collect()] == [7]
    assert bad.count() == 0


def test_raw_keeps_key_and_value_bytes(spark) -> None:
    df = kafka_frame(spark, [(b"k1", b"\x00\x01"), (None, None)])
    good, bad = parse_kafka(df, format="raw")
    assert_rows(
        good.select("key", "value", "_offset"),
        [
            Row(key=bytearray(b"k1"), value=bytearray(b"\x00\x01"), _offset=0),
            Row(key=None, value=None, _offset=1),
        ],
    )
    assert bad.count() == 0


USERS = "user_id bigint, city string"


def test_debezium_envelope_bare_and_wrapped(spark) -> None:
    df = kafka_frame(
        spark,
        [
            (
                "k",
                '{"payload": {"before": null, "after": {"user_id": 1, "city": "Oslo"}, "op": "c", "source": {"ts_ms": 100}}}',
            ),
            (
                "k",
                '{"before": {"user_id": 1, "city": "Oslo"}, "after": {"user_id": 1, "city": "Rome"}, "op": "u", "source": {"ts_ms": 200}}',
            ),
            (
                "k",
                '{"before": {"user_id": 1, "city": "Rome"}, "after": null, "op": "d", "source": {"ts_ms": 300}}',
            ),
            ("k", None),  # tombstone after a delete: skipped, not bad
            ("k", '{"after": {"user_id": 2, "city": "Pisa"}, "op": "r", "source": {"ts_ms": 50}}'),
            ("k", '{"after": {"user_id": 3}, "op": "x", "source": {"ts_ms": 1}}'),
            ("k", '{"after": null, "op": "c", "source": {"ts_ms": 1}}'),
            ("k", '{"after": {"user_id": "three"}, "op": "c", "source": {"ts_ms": 1}}'),
            ("k", "{oops"),
        ],
    )
    good, bad = parse_kafka(df, format="debezium-json", schema=USERS, required=["user_id"])
    assert_rows(
        good.select("user_id", "city", "_op", "_source_ts_ms", "_offset"),
        [
            Row(user_id=1, city="Oslo", _op="c", _source_ts_ms=100, _offset=0),
            Row(user_id=1, city="Rome", _op="u", _source_ts_ms=200, _offset=1),
            Row(user_id=1, city="Rome", _op="d", _source_ts_ms=300, _offset=2),
            Row(user_id=2, city="Pisa", _op="r", _source_ts_ms=50, _offset=4),
        ],
    )
    assert_rows(
        bad.select("_offset", "_error"),
        [
            Row(_offset=5, _error="unsupported Debezium op `x`"),
            Row(_offset=6, _error="missing row image `after`"),
            Row(_offset=7, _error="field `user_id`: expected bigint, got string"),
            Row(_offset=8, _error="invalid JSON"),
        ],
    )


def _lsn_change(op: str, uid: int, city: str, source: dict, *, connect: bool) -> str:
    """A Debezium change whose `source` is `source`, bare or in a Connect envelope (schema
    as Debezium's Postgres connector writes it: `lsn` an optional int64)."""
    payload = {"before": None, "after": {"user_id": uid, "city": city}, "op": op}
    payload["source"] = source
    if not connect:
        return json.dumps(payload)
    row = {
        "type": "struct",
        "optional": True,
        "fields": [
            {"field": "user_id", "type": "int64", "optional": False},
            {"field": "city", "type": "string", "optional": True},
        ],
    }
    schema = {
        "type": "struct",
        "optional": False,
        "fields": [
            {**row, "field": "before"},
            {**row, "field": "after"},
            {"field": "op", "type": "string", "optional": False},
            {
                "field": "source",
                "type": "struct",
                "optional": False,
                "fields": [
                    {"field": "ts_ms", "type": "int64", "optional": False},
                    {"field": "lsn", "type": "int64", "optional": True},
                    {"field": "txId", "type": "int64", "optional": True},
                ],
            },
        ],
    }
    return json.dumps({"schema": schema, "payload": payload})


@pytest.mark.parametrize("connect", [False, True], ids=["plain", "connect-envelope"])
def test_debezium_source_lsn(spark, connect: bool) -> None:
    """`_source_lsn` is the source's `lsn` as a bigint (Postgres WAL positions pass 2^32),
    null where the source has none (a database without a log sequence number)."""
    big = 0x1_2345_6789
    df = kafka_frame(
        spark,
        [
            ("k", _lsn_change("r", 1, "Oslo", {"ts_ms": 100, "lsn": 23890872}, connect=connect)),
            # two changes of one transaction: one commit time, two positions in the log
            (
                "k",
                _lsn_change("u", 1, "Rome", {"ts_ms": 200, "lsn": big, "txId": 7}, connect=connect),
            ),
            (
                "k",
                _lsn_change(
                    "u", 1, "Pisa", {"ts_ms": 200, "lsn": big + 56, "txId": 7}, connect=connect
                ),
            ),
            ("k", _lsn_change("c", 2, "Bern", {"ts_ms": 300}, connect=connect)),
        ],
    )
    good, bad = parse_kafka(df, format="debezium-json", schema=USERS, connect=connect)
    assert_rows(
        good.select("user_id", "city", "_source_ts_ms", "_source_lsn"),
        [
            Row(user_id=1, city="Oslo", _source_ts_ms=100, _source_lsn=23890872),
            Row(user_id=1, city="Rome", _source_ts_ms=200, _source_lsn=big),
            Row(user_id=1, city="Pisa", _source_ts_ms=200, _source_lsn=big + 56),
            Row(user_id=2, city="Bern", _source_ts_ms=300, _source_lsn=None),
        ],
    )
    assert dict(good.dtypes)["_source_lsn"] == "bigint"
    assert bad.count() == 0


def test_upsert_json_values_and_deletes(spark) -> None:
    df = kafka_frame(
        spark,
        [
            ('{"user_id": 1}', '{"user_id": 1, "city": "Oslo"}'),
            ('{"user_id": 1}', None),
            ("plain-key", None),
            ('{"user_id": 2}', '{"user_id": "two"}'),
        ],
    )
    good, bad = parse_kafka(df, format="upsert-json", schema=USERS, required=["user_id"])
    assert_rows(
        good.select("user_id", "city", "_deleted", "_key", "_offset"),
        [
            Row(
                user_id=1, city="Oslo", _deleted=False, _key=bytearray(b'{"user_id": 1}'), _offset=0
            ),
            Row(user_id=1, city=None, _deleted=True, _key=bytearray(b'{"user_id": 1}'), _offset=1),
        ],
    )
    assert_rows(
        bad.select("_offset", "_error"),
        [
            Row(_offset=2, _error="tombstone key is not a JSON object"),
            Row(_offset=3, _error="field `user_id`: expected bigint, got string"),
        ],
    )


def test_parse_errors_name_the_problem(spark) -> None:
    df = kafka_frame(spark, [(None, "{}")])
    with pytest.raises(KafkaConfigError, match="needs a schema"):
        parse_kafka(df, format="json")
    with pytest.raises(KafkaConfigError, match="Unknown Kafka format `avro`"):
        parse_kafka(df, format="avro", schema=ORDERS)  # type: ignore[arg-type]
    with pytest.raises(KafkaConfigError, match="Required field `id` is not in the schema"):
        parse_kafka(df, format="json", schema=ORDERS, required=["id"])
    with pytest.raises(KafkaConfigError, match="`value` is missing"):
        parse_kafka(df.drop("value"), format="json", schema=ORDERS)
    with pytest.raises(KafkaConfigError, match="Key column `id` is not in the schema") as info:
        parse_kafka(df, format="upsert-json", schema=ORDERS, keys=["id"])
    assert info.value.option == "keys"
    with pytest.raises(KafkaConfigError, match="Format `raw` has no payload columns"):
        parse_kafka(df, format="raw", keys=["id"])
    with pytest.raises(KafkaConfigError, match="not to format `json`") as info:
        parse_kafka(df, format="json", schema=ORDERS, connect=True)
    assert info.value.option == "connect"
    with pytest.raises(KafkaConfigError, match="Unknown Kafka format `upsert-connect-json`"):
        parse_kafka(df, format="upsert-connect-json", schema=ORDERS)  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt", ["json", "raw", "debezium-json", "upsert-json"])
def test_persist_hook_sees_every_record_once_and_feeds_both_results(spark, fmt: str) -> None:
    records = [
        ("k1", '{"order_id": 1, "amount": 2.0}'),
        ("k2", "not json"),
        ("k3", None),
    ]
    schema = None if fmt == "raw" else ORDERS
    plain = parse_kafka(kafka_frame(spark, records), format=fmt, schema=schema)
    persist = Persisting()
    hooked = parse_kafka(kafka_frame(spark, records), format=fmt, schema=schema, persist=persist)
    seen = persist.frames
    try:
        assert len(seen) == 1 and seen[0].count() == len(records)
        assert sorted(hooked.good.collect()) == sorted(plain.good.collect())
        assert sorted(hooked.bad.collect()) == sorted(plain.bad.collect())
        assert seen[0].storageLevel.useMemory
    finally:
        persist.unpersist()


@pytest.mark.parametrize("fmt", ["json", "raw", "debezium-json", "upsert-json"])
@pytest.mark.parametrize("persisted", [False, True])
def test_observe_counts_records_and_flagged_in_the_first_action(
    spark, fmt: str, persisted: bool
) -> None:
    from pyspark.sql import Observation

    records = [
        ("k1", '{"order_id": 1, "amount": 2.0}'),
        ("k2", "not json"),
        ("k3", None),
        ('{"order_id": 3}', '{"order_id": "three"}'),
    ]
    schema = None if fmt == "raw" else ORDERS
    plain = parse_kafka(kafka_frame(spark, records), format=fmt, schema=schema)
    persist = Persisting()
    seen = Observation(f"parse-{fmt}-{persisted}")
    observed = parse_kafka(
        kafka_frame(spark, records),
        format=fmt,
        schema=schema,
        observe=seen,
        persist=persist if persisted else None,
    )
    try:
        # Writing `good` alone is what the runtime does; the counts cover `bad` too.
        good = observed.good.collect()
        metrics = dict(seen.get)
        listed = metrics.pop("flagged_at", None)
        assert metrics == {"records": len(records), "flagged": plain.bad.count()}
        if persisted or fmt == "raw":
            assert "flagged_at" not in seen.get  # nothing to read again: no list
        else:
            # the records bound for `bad`, named by their coordinates
            at = record_hash(F.col("_topic"), F.col("_partition"), F.col("_offset"))
            assert parse_hashes(listed) == {r[0] for r in plain.bad.select(at).collect()}
        assert sorted(good) == sorted(plain.good.collect())
        assert sorted(observed.bad.collect()) == sorted(plain.bad.collect())
        # raw flags nothing; the others flag the three records that are not a good row
        # (a Debezium tombstone is neither good nor bad, but it is a record).
        assert seen.get["flagged"] == (0 if fmt == "raw" else 3)
    finally:
        persist.unpersist()


def test_hashes_of_lists_the_flagged_rows_up_to_the_cap(spark, monkeypatch) -> None:
    import streams.kafka.parse_frames as frames

    df = spark.range(0, 40, numPartitions=3)
    flagged, at = F.col("id") % 10 == 0, F.xxhash64("id")

    def listed() -> set[int] | None:
        return parse_hashes(df.select(hashes_of(flagged, at).alias("at")).first()["at"])

    expected = {r[0] for r in df.where(flagged).select(at).collect()}
    assert len(expected) == 4 and listed() == expected
    assert parse_hashes("") == set()  # nothing flagged
    monkeypatch.setattr(frames, "SUSPECTS_CAP", 3)
    assert listed() is None  # four flagged rows: more than the cap


@pytest.mark.parametrize("fmt", ["json", "debezium-json", "upsert-json"])
def test_each_record_is_parsed_once(spark, fmt: str) -> None:
    # Spark pushes a filter below the projection it filters on and inlines what the
    # condition references: without a barrier between them, `good` and `bad` would each
    # parse every record twice (once in the filter, once in the projection).
    records = [("k1", '{"order_id": 1, "amount": 2.0}'), ("k2", "not json"), ("k3", None)]
    parsed = parse_kafka(kafka_frame(spark, records), format=fmt, schema=ORDERS)
    parses = 2 if fmt == "upsert-json" else 1  # upsert-json parses the key as well
    for name, frame in (("good", parsed.good), ("bad", parsed.bad)):
        plan = frame._jdf.queryExecution().executedPlan().toString()
        assert plan.count("from_json(") == parses, f"{name}:\n{plan}"
    # Same rows as the persisted path, which parses once into the cache.
    persist = Persisting()
    ref = parse_kafka(kafka_frame(spark, records), format=fmt, schema=ORDERS, persist=persist)
    try:
        assert sorted(parsed.good.collect()) == sorted(ref.good.collect())
        assert sorted(parsed.bad.collect()) == sorted(ref.bad.collect())
        assert parsed.bad.count() >= 1
    finally:
        persist.unpersist()


def test_expressions_are_built_once_and_serve_every_frame(spark) -> None:
    # Building the parse's Columns is ~1500 Py4J calls; a stream parses every batch with
    # the same format and schema, so they are built once and applied to each new frame.
    from streams.kafka import parse as parse_module

    schema = "order_id bigint, note string"  # used by no other test: a fresh entry
    before = parse_module._exprs.cache_info()
    first = parse_kafka(
        kafka_frame(spark, [(None, '{"order_id": 1, "note": "a"}'), (None, "{bad")]),
        format="json",
        schema=schema,
        required=["order_id"],
    )
    second = parse_kafka(
        kafka_frame(spark, [(None, '{"order_id": 2}'), (None, '{"note": "no id"}')]),
        format="json",
        schema=schema,
        required=["order_id"],
    )
    other = parse_kafka(
        kafka_frame(spark, [(None, '{"note": "no id"}')]), format="json", schema=schema
    )
    after = parse_module._exprs.cache_info()
    assert after.misses - before.misses == 2  # (schema, required) and (schema, no required)
    assert after.hits - before.hits == 1
    assert [(r.order_id, r.note) for r in first.good.collect()] == [(1, "a")]
    assert [r._error for r in first.bad.collect()] == ["invalid JSON"]
    assert [(r.order_id, r.note) for r in second.good.collect()] == [(2, None)]
    assert [r._error for r in second.bad.collect()] == ["missing required field `order_id`"]
    assert [(r.order_id, r.note) for r in other.good.collect()] == [(None, "no id")]
