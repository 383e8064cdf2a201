"""The Python Kafka source on real Spark against a real broker process.

Every test checks records by their Kafka coordinates `(topic, partition, offset)`:
each offset exactly once, nothing outside the requested range.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from streams.kafka import DataLossError, KafkaConfigError, read_kafka_stream
from streams.kafka.admin import add_partitions, ensure_topic, produce
from tests.integration.kafka.helpers import fill, run_available_now, topic_with_deleted_head
from tests.support.broker_clients import produce_transactions

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

Coord = tuple[str, int, int]


class Run:
    """Runs one `availableNow` query into foreachBatch and keeps what each batch saw."""

    def __init__(self, spark, checkpoint: Path) -> None:
        self.spark = spark
        self.checkpoint = checkpoint
        self.batches: list[list[tuple[str, int, int, bytes | None]]] = []

    def __call__(self, **kwargs: Any) -> list[tuple[str, int, int, bytes | None]]:
        df = read_kafka_stream(self.spark, **kwargs)
        seen: list[list[tuple[str, int, int, bytes | None]]] = []

        def sink(batch, batch_id: int) -> None:
            rows = batch.select("topic", "partition", "offset", "value").collect()
            seen.append(
                [
                    (
                        r.topic,
                        r.partition,
                        r.offset,
                        bytes(r.value) if r.value is not None else None,
                    )
                    for r in rows
                ]
            )

        run_available_now(df, sink, self.checkpoint)
        self.batches += seen
        return [r for b in seen for r in b]


def coords(rows: list[tuple[str, int, int, Any]]) -> list[Coord]:
    return sorted((t, p, o) for t, p, o, _ in rows)


def test_exact_ranges_across_rate_limited_batches(spark, broker, unique, tmp_path) -> None:
    topic = unique("exact")
    ensure_topic(broker.bootstrap, topic, partitions=3)
    fill(broker.bootstrap, topic, {0: 120, 1: 40, 2: 7})
    run = Run(spark, tmp_path / "cp")
    rows = run(
        bootstrap=broker.bootstrap, topics=topic, max_offsets_per_trigger=50, split_offsets=30
    )
    expected = [(topic, p, o) for p, n in {0: 120, 1: 40, 2: 7}.items() for o in range(n)]
    assert coords(rows) == sorted(expected)  # every offset once: no loss, no duplicate
    assert len(run.batches) >= 4 and all(len(b) <= 50 for b in run.batches)
    # records and coordinates belong together
    assert all(v == f"v-{p}-{o}".encode() for _, p, o, v in rows)

    # The checkpoint resumes exactly after the last batch.
    fill(broker.bootstrap, topic, {1: 5}, tag="w")
    again = run(bootstrap=broker.bootstrap, topics=topic, max_offsets_per_trigger=50)
    assert coords(again) == [(topic, 1, o) for o in range(40, 45)]


def test_starting_offsets_latest_and_explicit(spark, broker, unique, tmp_path) -> None:
    topic = unique("start")
    ensure_topic(broker.bootstrap, topic, partitions=2)
    fill(broker.bootstrap, topic, {0: 10, 1: 10})

    latest = Run(spark, tmp_path / "latest")
    assert latest(bootstrap=broker.bootstrap, topics=[topic], starting_offsets="latest") == []
    fill(broker.bootstrap, topic, {0: 3}, tag="late")
    rows = latest(bootstrap=broker.bootstrap, topics=[topic], starting_offsets="latest")
    assert coords(rows) == [(topic, 0, o) for o in range(10, 13)]

    explicit = Run(spark, tmp_path / "explicit")
    rows = explicit(
        bootstrap=broker.bootstrap, topics=topic, starting_offsets={topic: {"0": 11, "1": -1}}
    )
    assert coords(rows) == [(topic, 0, 11), (topic, 0, 12)]


def test_pattern_picks_up_new_topics_and_partitions(spark, broker, unique, tmp_path) -> None:
    prefix = unique("pat")
    first, second = f"{prefix}.a", f"{prefix}.b"
    ensure_topic(broker.bootstrap, first, partitions=1)
    fill(broker.bootstrap, first, {0: 4})
    run = Run(spark, tmp_path / "cp")
    kwargs = dict(bootstrap=broker.bootstrap, pattern=f"{prefix}\\..*")
    assert coords(run(**kwargs)) == [(first, 0, o) for o in range(4)]

    ensure_topic(broker.bootstrap, second, partitions=1)
    fill(broker.bootstrap, second, {0: 2})
    add_partitions(broker.bootstrap, first, 2)
    fill(broker.bootstrap, first, {0: 1, 1: 3})
    rows = run(**kwargs)
    assert coords(rows) == sorted(
        [(first, 0, 4)] + [(first, 1, o) for o in range(3)] + [(second, 0, 0), (second, 0, 1)]
    )


def test_data_loss_fails_or_skips(spark, broker_factory, unique, tmp_path) -> None:
    topic = unique("loss")
    bootstrap, earliest, end = topic_with_deleted_head(broker_factory, topic)

    with pytest.raises(Exception) as info:
        Run(spark, tmp_path / "fail")(
            bootstrap=bootstrap, topics=topic, starting_offsets={topic: {"0": 0}}
        )
    message = str(info.value)
    assert DataLossError.__name__ in message or "no longer available" in message
    assert f"`{topic}` partition 0: offset 0" in message and "earliest offset is" in message

    rows = Run(spark, tmp_path / "skip")(
        bootstrap=bootstrap, topics=topic, starting_offsets={topic: {"0": 0}}, on_data_loss="skip"
    )
    got = coords(rows)
    low_now = got[0][2]
    assert low_now >= earliest
    assert got == [(topic, 0, o) for o in range(low_now, end)]


def test_read_committed_skips_aborted_records(spark, broker, unique, tmp_path) -> None:
    topic = unique("txn")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    aborted = [(None, f"aborted-{i}") for i in range(3)]
    committed = [(None, f"committed-{i}") for i in range(4)]
    produce_transactions(
        broker.bootstrap, unique("tx"), topic, [(aborted, False), (committed, True)]
    )
    # The range ends on a commit marker: the read must still terminate.
    rows = Run(spark, tmp_path / "cp")(bootstrap=broker.bootstrap, topics=topic)
    assert sorted(v for *_, v in rows) == [f"committed-{i}".encode() for i in range(4)]
    assert len({o for _, _, o, _ in rows}) == 4


def test_native_engine_reads_the_same_ranges(spark, broker, unique, tmp_path, native_jars) -> None:
    topic = unique("native")
    ensure_topic(broker.bootstrap, topic, partitions=2)
    fill(broker.bootstrap, topic, {0: 30, 1: 5})
    run = Run(spark, tmp_path / "cp")
    rows = run(
        bootstrap=broker.bootstrap, topics=topic, max_offsets_per_trigger=10, engine="native"
    )
    assert coords(rows) == sorted(
        [(topic, 0, o) for o in range(30)] + [(topic, 1, o) for o in range(5)]
    )


def test_native_engine_takes_a_request_timeout_longer_than_its_default(
    spark, broker, unique, tmp_path, native_jars
) -> None:
    # The native source shortens the Java client's timeouts (a dead leader is given up on
    # sooner); a project's longer request timeout moves the API timeout with it, which
    # Kafka's admin client would otherwise refuse as shorter than the request timeout.
    topic = unique("timeouts")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    fill(broker.bootstrap, topic, {0: 7})
    rows = Run(spark, tmp_path / "cp")(
        bootstrap=broker.bootstrap,
        topics=topic,
        engine="native",
        client_config={"request.timeout.ms": "40000"},
    )
    assert coords(rows) == [(topic, 0, o) for o in range(7)]


def test_native_engine_takes_consumer_settings_spark_manages_itself(
    spark, broker, unique, tmp_path, native_jars
) -> None:
    # A project's client settings are librdkafka's, for every client of both engines; a
    # consumer's offset and deserializer settings mean nothing to either engine (the
    # framework reads ranges by offset), and Spark's source refuses them as options.
    topic = unique("managed")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    fill(broker.bootstrap, topic, {0: 4})
    managed = {"enable.auto.commit": "false", "auto.offset.reset": "latest"}
    for engine in ("native", "python"):
        rows = Run(spark, tmp_path / f"cp-{engine}")(
            bootstrap=broker.bootstrap, topics=topic, engine=engine, client_config=managed
        )
        assert coords(rows) == [(topic, 0, o) for o in range(4)], engine


def test_native_engine_reads_a_backlog_in_bounded_batches_by_default(
    spark, broker, unique, tmp_path, native_jars, monkeypatch
) -> None:
    # Spark's own source has no default read limit; the native engine gives it the Python
    # engine's (1M records), here made 10 so that a small backlog shows it.
    import streams.kafka.engine

    monkeypatch.setattr(streams.kafka.engine, "DEFAULT_MAX_OFFSETS_PER_TRIGGER", 10)
    topic = unique("bounded")
    ensure_topic(broker.bootstrap, topic, partitions=2)
    fill(broker.bootstrap, topic, {0: 30, 1: 5})
    run = Run(spark, tmp_path / "cp")
    rows = run(bootstrap=broker.bootstrap, topics=topic, engine="native")
    assert coords(rows) == sorted(
        [(topic, 0, o) for o in range(30)] + [(topic, 1, o) for o in range(5)]
    )
    sizes = [len(b) for b in run.batches if b]
    assert sum(sizes) == 35 and max(sizes) <= 10 and len(sizes) >= 4, sizes


@pytest.mark.parametrize("headers", [False, True])
def test_both_engines_give_the_same_columns(spark, broker, unique, native_jars, headers) -> None:
    topic = unique("columns")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    schemas = {
        engine: read_kafka_stream(
            spark, bootstrap=broker.bootstrap, topics=topic, engine=engine, include_headers=headers
        ).schema.simpleString()
        for engine in ("python", "native")
    }
    expected = (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestamp_type:int"
        + (",headers:array<struct<key:string,value:binary>>" if headers else "")
        + ">"
    )
    assert schemas == {"python": expected, "native": expected}


def test_parse_kafka_on_the_stream_itself(spark, broker, unique, tmp_path) -> None:
    from streams.kafka import parse_kafka
    from streams.kafka.admin import produce_json

    topic = unique("parsed")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    produce_json(broker.bootstrap, topic, [{"id": 1, "amount": 2.5}, {"id": "x"}], key="id")
    produce(broker.bootstrap, topic, [(b"k", b"{broken")])
    stream = read_kafka_stream(spark, bootstrap=broker.bootstrap, topics=topic)
    good, bad = parse_kafka(stream, format="json", schema="id bigint, amount double")
    assert good.isStreaming and bad.isStreaming
    seen: list[tuple] = []
    query = (
        good.writeStream.foreachBatch(
            lambda b, _i: seen.extend((r.id, r.amount, r._offset) for r in b.collect())
        )
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(240), "query did not finish in 240 s"
    assert query.exception() is None
    assert seen == [(1, 2.5, 0)]


def test_headers_are_read_or_left_out(spark, broker, unique, tmp_path) -> None:
    from pyspark.sql import Row

    topic = unique("headers")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, value=b"v0", headers=[("trace", b"t-0"), ("n", None)])
    producer.produce(topic, value=b"v1")
    assert producer.flush(30) == 0

    def read(include: bool) -> tuple[list[str], list[tuple]]:
        got: list[tuple[list[str], list[tuple]]] = []

        def sink(batch, _batch_id: int) -> None:
            cols = batch.columns
            picked = ["offset", "value"] + (["headers"] if "headers" in cols else [])
            got.append((cols, [tuple(r) for r in batch.select(*picked).collect()]))

        df = read_kafka_stream(
            spark, bootstrap=broker.bootstrap, topics=topic, include_headers=include
        )
        query = (
            df.writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / f"cp-{include}"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(240)
        assert query.exception() is None
        return got[0][0], sorted(r for _, rows in got for r in rows)

    cols, rows = read(True)
    assert cols[-1] == "headers"
    assert [(o, bytes(v), h) for o, v, h in rows] == [
        (0, b"v0", [Row(key="trace", value=bytearray(b"t-0")), Row(key="n", value=None)]),
        (1, b"v1", None),
    ]
    cols, rows = read(False)
    assert "headers" not in cols and len(cols) == 7
    assert [(o, bytes(v)) for o, v in rows] == [(0, b"v0"), (1, b"v1")]
    with pytest.raises(Exception, match="include_headers must be `true` or `false`"):
        spark.readStream.format("warehouse_kafka").option("bootstrap", broker.bootstrap).option(
            "topics", topic
        ).option("include_headers", "sometimes").load()


def test_max_bytes_per_trigger_bounds_each_batch_on_both_engines(
    spark, broker, unique, tmp_path, engine: str
) -> None:
    """Records of 1,000 bytes read 20,000 bytes at a time: batches of 20 records (the
    byte bound, turned into records by the size of the topic's records), every offset
    once. A `max_offsets_per_trigger` below it still wins."""
    topic = unique("bytes")
    ensure_topic(broker.bootstrap, topic, partitions=2)
    for p in (0, 1):
        produce(broker.bootstrap, topic, [(None, "x" * 1000) for _ in range(100)], partition=p)
    run = Run(spark, tmp_path / "cp")
    kw = {"bootstrap": broker.bootstrap, "topics": topic, "engine": engine}
    rows = run(**kw, max_bytes_per_trigger=20_000)
    assert coords(rows) == sorted((topic, p, o) for p in (0, 1) for o in range(100))
    assert len(run.batches) == 10 and all(len(b) == 20 for b in run.batches)

    smaller = Run(spark, tmp_path / "cp2")
    smaller(**kw, max_bytes_per_trigger=20_000, max_offsets_per_trigger=8)
    assert max(len(b) for b in smaller.batches) == 8


def test_the_latest_offset_reported_is_the_one_the_trigger_planned_from(broker, unique) -> None:
    """Spark asks a source `reportLatestOffset` right after `latestOffset`, at every
    trigger (an idle query's too): the answer is the ends that call listed, as Spark's
    own Kafka source gives them, not a second listing; asked again without a
    `latestOffset` between, the source lists the ends anew."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from streams.kafka.source import SCHEMA, KafkaStreamReader

    topic = unique("report")
    ensure_topic(broker.bootstrap, topic, partitions=2)
    fill(broker.bootstrap, topic, {0: 3, 1: 2})
    reader = KafkaStreamReader({"bootstrap": broker.bootstrap, "topics": topic}, SCHEMA)
    start = {topic: {"0": 0, "1": 0}}
    planned = {topic: {"0": 3, "1": 2}}
    assert reader.latestOffset(start, ReadAllAvailable()) == planned
    fill(broker.bootstrap, topic, {0: 4})
    assert reader.reportLatestOffset() == planned
    assert reader.reportLatestOffset() == {topic: {"0": 7, "1": 2}}
    # nothing new since the position: the same position, and the trigger's ends reported
    assert reader.latestOffset({topic: {"0": 7, "1": 2}}, ReadAllAvailable()) == {
        topic: {"0": 7, "1": 2}
    }
    assert reader.reportLatestOffset() == {topic: {"0": 7, "1": 2}}


def test_a_waiting_trigger_answers_once_a_committed_record_is_in(broker, unique) -> None:
    """With `record_wait_ms`, a trigger that finds nothing new waits for a record and
    answers with the new ends once one is readable: a record of an open transaction is
    not (read_committed), its commit is. Without the option the trigger answers at once
    with nothing new; an available-now run never waits."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from streams.kafka.source import SCHEMA, KafkaStreamReader

    topic = unique("wait")
    ensure_topic(broker.bootstrap, topic, partitions=2)
    fill(broker.bootstrap, topic, {0: 1, 1: 1})
    at_end = {topic: {"0": 1, "1": 1}}
    options = {"bootstrap": broker.bootstrap, "topics": topic}
    assert KafkaStreamReader(options, SCHEMA).latestOffset(at_end, ReadAllAvailable()) == at_end

    waiting = KafkaStreamReader({**options, "record_wait_ms": "600000"}, SCHEMA)
    answer: list[dict] = []
    trigger = threading.Thread(
        target=lambda: answer.append(waiting.latestOffset(at_end, ReadAllAvailable())),
        daemon=True,
    )
    trigger.start()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": unique("t")})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, key="k", value="v", partition=1)
    producer.flush(30)
    time.sleep(1.0)  # the record is in the log, its transaction open: not readable yet
    assert trigger.is_alive() and answer == []
    producer.commit_transaction(30)
    trigger.join(timeout=60)
    assert answer == [{topic: {"0": 1, "1": 3}}]  # the record and its commit marker
    assert waiting.reportLatestOffset() == {topic: {"0": 1, "1": 3}}

    once = KafkaStreamReader({**options, "record_wait_ms": "600000"}, SCHEMA)
    once.prepareForTriggerAvailableNow()
    done: list[dict] = []
    trigger = threading.Thread(
        target=lambda: done.append(
            once.latestOffset({topic: {"0": 1, "1": 3}}, ReadAllAvailable())
        ),
        daemon=True,
    )
    trigger.start()
    trigger.join(timeout=60)
    assert done == [{topic: {"0": 1, "1": 3}}]


def test_a_wait_ends_with_nothing_new(broker, unique) -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from streams.kafka.source import SCHEMA, KafkaStreamReader

    topic = unique("wait-idle")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    fill(broker.bootstrap, topic, {0: 2})
    reader = KafkaStreamReader(
        {"bootstrap": broker.bootstrap, "topics": topic, "record_wait_ms": "300"}, SCHEMA
    )
    assert reader.latestOffset({topic: {"0": 2}}, ReadAllAvailable()) == {topic: {"0": 2}}
    with pytest.raises(KafkaConfigError, match="record_wait_ms"):
        KafkaStreamReader(
            {"bootstrap": broker.bootstrap, "topics": topic, "record_wait_ms": "soon"}, SCHEMA
        )


def test_the_wake_file_ends_a_wait_for_records(broker, unique, tmp_path) -> None:
    """A stop creates the query's wake file: a trigger waiting for records answers then
    with nothing new, and later triggers do not wait while the file is there."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from streams.kafka.source import SCHEMA, KafkaStreamReader

    topic = unique("wait-wake")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    fill(broker.bootstrap, topic, {0: 2})
    wake = tmp_path / "t-1"
    reader = KafkaStreamReader(
        {"bootstrap": broker.bootstrap, "topics": topic, "record_wait_ms": "600000",
         "wake_file": str(wake)},
        SCHEMA,
    )  # fmt: skip
    at_end = {topic: {"0": 2}}
    answer: list[dict] = []
    trigger = threading.Thread(
        target=lambda: answer.append(reader.latestOffset(at_end, ReadAllAvailable())),
        daemon=True,
    )
    trigger.start()
    time.sleep(1.5)
    assert trigger.is_alive() and answer == []  # waiting
    wake.write_text("")
    trigger.join(timeout=60)  # a wait the wake did not end would take 600 s
    assert answer == [at_end]
    assert reader.latestOffset(at_end, ReadAllAvailable()) == at_end
