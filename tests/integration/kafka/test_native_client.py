"""Spark's own `kafka` source (the Java Kafka client) against the bundled broker.

The Java client is used unchanged, with Spark's own options: subscribe and
subscribePattern (Metadata through the admin client), partitions and topics found
while a query runs, starting offsets by position and by timestamp (ListOffsets),
read_committed over transactions (Fetch with aborted transactions, the last stable
offset), batch reads with ending offsets, failOnDataLoss after DeleteRecords, the
deprecated consumer-group offset fetching, and Spark's `kafka` sink (the Java producer,
idempotent by default).

Every test asserts whole records: topic, partition, offset, key, value, timestamp
(with its type) and headers.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from streams.kafka import ensure_topic, read_kafka_stream
from streams.kafka.admin import add_partitions
from tests.integration.kafka.helpers import run_available_now
from tests.support.broker_clients import produce_transactions

pytestmark = [
    pytest.mark.spark,
    pytest.mark.kafka,
    pytest.mark.native,
    pytest.mark.usefixtures("native_jars"),
]

BASE_TS = (int(time.time()) // 60 - 24 * 60) * 60_000
"""CreateTime of the records the tests write (ms): a day before the run, far enough from now
that no default timestamp passes unnoticed, and inside the broker's 7-day retention (its
retention check deletes records older than that while the tests run, as Kafka's does)."""

Headers = tuple[tuple[str, bytes | None], ...] | None


class Rec(NamedTuple):
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: Headers
    timestamp_type: int = 0
    """0 CreateTime, 1 LogAppendTime (Spark's `timestampType`, which the native engine
    names `timestamp_type`)."""


_COLUMNS = (
    "topic",
    "partition",
    "offset",
    "key",
    "value",
    "unix_millis(timestamp) AS ts",
    "timestamp_type",
    "headers",
)


def _rows(df) -> list[Rec]:
    """The records of a (batch) DataFrame of Spark's Kafka columns."""
    out = []
    for r in df.selectExpr(*_COLUMNS).collect():
        headers = (
            None
            if r.headers is None
            else tuple((h.key, None if h.value is None else bytes(h.value)) for h in r.headers)
        )
        out.append(
            Rec(
                r.topic,
                r.partition,
                r.offset,
                None if r.key is None else bytes(r.key),
                None if r.value is None else bytes(r.value),
                r.ts,
                headers,
                r.timestamp_type,
            )
        )
    return out


Out = tuple[str, int, "str | bytes | None", "str | bytes | None", "int | None", Headers]
"""A record to write: `(topic, partition, key, value, CreateTime or None, headers)`."""


def _rec(msg, headers: Headers) -> Rec:
    """A confluent-kafka message as a record, with `headers` (a producer's delivery report
    carries none: the caller keeps the ones written)."""
    kind, ts = msg.timestamp()
    return Rec(
        msg.topic(),
        msg.partition(),
        msg.offset(),
        msg.key(),
        msg.value(),
        ts,
        headers,
        int(kind == TIMESTAMP_LOG_APPEND_TIME),
    )


def send(bootstrap: str, records: Iterable[Out], **config: object) -> list[Rec]:
    """Write `records` with one producer (`config` added to its settings); what the broker
    acknowledged, with offsets and the timestamp it reported (LogAppendTime where the topic
    says so)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    acked: list[Rec] = []
    errors: list[Any] = []

    def on_delivery(headers: Headers):
        def report(err, msg) -> None:
            if err is not None:
                errors.append(err)
                return
            acked.append(_rec(msg, headers))

        return report

    for topic, partition, key, value, ts, headers in records:
        producer.produce(
            topic,
            key=key,
            value=value,
            partition=partition,
            timestamp=ts or 0,
            headers=list(headers) if headers else None,
            on_delivery=on_delivery(headers),
        )
    assert producer.flush(30) == 0 and not errors, errors
    return acked


def fill(bootstrap: str, topic: str, counts: dict[int, int], *, tag: str = "v") -> list[Rec]:
    """`counts[p]` records into partition `p`: key `k<i>`, CreateTime `BASE_TS + 1000 i`, a
    header on every other record."""
    return send(
        bootstrap,
        (
            (
                topic,
                p,
                f"k{i}" if i % 3 else None,
                f"{tag}-{p}-{i}",
                BASE_TS + 1000 * i,
                (("n", str(i).encode()), ("empty", None)) if i % 2 == 0 else None,
            )
            for p, n in counts.items()
            for i in range(n)
        ),
    )


def read_available_now(df, checkpoint: Path) -> tuple[list[list[Rec]], dict[str, Any]]:
    """Run `df` with Trigger.AvailableNow: each batch's records, and the end offsets the
    last batch wrote to the checkpoint's offset log."""
    batches: list[list[Rec]] = []
    run_available_now(df, lambda b, _i: batches.append(_rows(b)), checkpoint)
    logs = [p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()]
    if not logs:
        return batches, {}
    last = max(logs, key=lambda p: int(p.name))
    # An offset log entry: a version line, the batch's metadata, then one line per source.
    return batches, json.loads(last.read_text().splitlines()[2])


class Live:
    """A query running on the default trigger; `drain()` waits for all available data and
    returns the records read since the last call."""

    def __init__(self, df, checkpoint: Path) -> None:
        self._batches: list[list[Rec]] = []
        self._seen = 0
        self.query = (
            df.writeStream.foreachBatch(lambda b, _i: self._batches.append(_rows(b)))
            .option("checkpointLocation", str(checkpoint))
            .start()
        )

    def drain(self, *, at_least: int = 0, timeout: float = 120.0) -> list[Rec]:
        """`at_least`: keep waiting (up to `timeout` s) until that many records arrived,
        for data the source sees only after a metadata refresh (partitions added)."""
        deadline = time.monotonic() + timeout
        while True:
            self.query.processAllAvailable()
            count = sum(len(b) for b in self._batches[self._seen :])
            if count >= at_least or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        new = self._batches[self._seen :]
        self._seen = len(self._batches)
        return sorted(r for b in new for r in b)

    def end_offsets(self) -> dict[str, Any]:
        progress = self.query.lastProgress
        return json.loads(progress["sources"][0]["endOffset"])

    def stop(self) -> None:
        self.query.stop()


def native(spark, bootstrap: str, **options: str):
    """Spark's `kafka` stream with options as given (for what `read_kafka_stream` does not
    expose, such as timestamps)."""
    reader = spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    reader = reader.option("includeHeaders", "true")
    for k, v in options.items():
        reader = reader.option(k, v)
    # The columns as the native engine gives them (`read_kafka_stream`), so one reader of
    # rows serves both.
    return reader.load().withColumnRenamed("timestampType", "timestamp_type")


def test_subscribe_several_topics_and_partitions_added_while_running(
    spark, broker, unique, tmp_path
) -> None:
    a, b = unique("sub-a"), unique("sub-b")
    ensure_topic(broker.bootstrap, a, partitions=2)
    ensure_topic(broker.bootstrap, b, partitions=1)
    written = fill(broker.bootstrap, a, {0: 7, 1: 4}) + fill(broker.bootstrap, b, {0: 5})
    df = read_kafka_stream(
        spark, bootstrap=broker.bootstrap, topics=[a, b], engine="native", max_offsets_per_trigger=6
    )
    live = Live(df, tmp_path / "cp")
    try:
        assert live.drain() == sorted(written)
        assert live.end_offsets() == {a: {"0": 7, "1": 4}, b: {"0": 5}}

        # Grown while the query runs: the new partitions are read from their start.
        add_partitions(broker.bootstrap, a, 4)
        grown = fill(broker.bootstrap, a, {2: 3, 3: 1, 0: 1}, tag="grown")
        assert sorted(r.partition for r in grown) == [0, 2, 2, 2, 3]
        got = live.drain(at_least=len(grown))
        assert got == sorted(grown)
        assert [(r.partition, r.offset) for r in got] == [(0, 7), (2, 0), (2, 1), (2, 2), (3, 0)]
        assert live.end_offsets()[a] == {"0": 8, "1": 4, "2": 3, "3": 1}
    finally:
        live.stop()


def test_subscribe_pattern_picks_up_a_topic_created_later(spark, broker, unique, tmp_path) -> None:
    prefix = unique("pat")
    first, later, other = f"{prefix}.a", f"{prefix}.b", f"{prefix}-not"
    ensure_topic(broker.bootstrap, first, partitions=2)
    ensure_topic(broker.bootstrap, other, partitions=1)
    written = fill(broker.bootstrap, first, {0: 3, 1: 2})
    fill(broker.bootstrap, other, {0: 2})
    df = read_kafka_stream(
        spark, bootstrap=broker.bootstrap, pattern=f"{prefix}\\..*", engine="native"
    )
    live = Live(df, tmp_path / "cp")
    try:
        assert live.drain() == sorted(written)

        ensure_topic(broker.bootstrap, later, partitions=2)
        created = fill(broker.bootstrap, later, {0: 2, 1: 3}, tag="later")
        more = fill(broker.bootstrap, first, {1: 1}, tag="more")
        assert live.drain() == sorted(created + more)
        assert live.end_offsets() == {first: {"0": 3, "1": 3}, later: {"0": 2, "1": 3}}
    finally:
        live.stop()


def _interleave(bootstrap: str, topic: str, unique) -> dict[str, int]:
    """Two transactions interleaved on partition 0 with a plain record between: A aborts,
    B commits. The offset of each record by value."""
    a = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("tx-a")})
    b = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("tx-b")})
    offsets: dict[str, int] = {}

    def write(producer: Producer, value: str) -> None:
        def report(err, msg) -> None:
            assert err is None, err
            offsets[value] = msg.offset()

        producer.produce(topic, key=b"i", value=value, partition=0, on_delivery=report)
        assert producer.flush(30) == 0

    for p in (a, b):
        p.init_transactions(30)
        p.begin_transaction()
    write(a, "a-0")
    write(b, "b-0")
    write(Producer({"bootstrap.servers": bootstrap}), "plain")
    write(a, "a-1")
    b.commit_transaction(30)
    a.abort_transaction(30)
    return offsets


def test_read_committed_and_uncommitted_over_transactions(spark, broker, unique, tmp_path) -> None:
    topic = unique("txn")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    aborted = [("a", f"aborted-{i}") for i in range(3)]
    committed = [("c", f"committed-{i}") for i in range(4)]
    produce_transactions(
        broker.bootstrap, unique("tx"), topic, [(aborted, False), (committed, True)]
    )
    # Offsets: aborted 0-2, abort marker 3, committed 4-7, commit marker 8.
    late = _interleave(broker.bootstrap, topic, unique)
    assert late == {"a-0": 9, "b-0": 10, "plain": 11, "a-1": 12}  # markers: 13 (B), 14 (A)

    def read(level: str, name: str, **kw: Any) -> tuple[list[list[Rec]], Any]:
        df = read_kafka_stream(
            spark,
            bootstrap=broker.bootstrap,
            topics=topic,
            engine="native",
            isolation_level=level,  # type: ignore[arg-type]
            **kw,
        )
        return read_available_now(df, tmp_path / name)

    def values(batches: list[list[Rec]]) -> list[tuple[int, bytes | None, bytes | None]]:
        return sorted((r.offset, r.key, r.value) for b in batches for r in b)

    committed_rows = [(4 + i, b"c", f"committed-{i}".encode()) for i in range(4)] + [
        (10, b"i", b"b-0"),
        (11, b"i", b"plain"),
    ]
    # Two offsets a batch: most ranges start or end inside a transaction or on a marker.
    batches, end = read("read_committed", "committed", max_offsets_per_trigger=2)
    assert values(batches) == committed_rows
    assert len(batches) >= 7
    assert end == {topic: {"0": 15}}  # past the last marker

    batches, end = read("read_uncommitted", "uncommitted")
    assert values(batches) == sorted(
        [(i, b"a", f"aborted-{i}".encode()) for i in range(3)]
        + committed_rows
        + [(9, b"i", b"a-0"), (12, b"i", b"a-1")]
    )
    assert end == {topic: {"0": 15}}


def test_read_committed_waits_for_an_open_transaction(spark, broker, unique, tmp_path) -> None:
    topic = unique("open-txn")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    before = fill(broker.bootstrap, topic, {0: 2})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": unique("tx")})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(
            topic, key=b"t", value=f"open-{i}".encode(), partition=0, timestamp=BASE_TS
        )
    assert producer.flush(30) == 0
    after = fill(broker.bootstrap, topic, {0: 1}, tag="after")  # offset 5, behind the open txn

    df = read_kafka_stream(spark, bootstrap=broker.bootstrap, topics=topic, engine="native")
    live = Live(df, tmp_path / "cp")
    try:
        assert live.drain() == sorted(before)
        assert live.end_offsets() == {topic: {"0": 2}}  # the last stable offset
        producer.commit_transaction(30)
        got = live.drain()
        assert [(r.offset, r.value) for r in got] == [
            (2, b"open-0"),
            (3, b"open-1"),
            (4, b"open-2"),
        ] + [(r.offset, r.value) for r in after]
        assert live.end_offsets() == {topic: {"0": 7}}
    finally:
        live.stop()


def test_record_shapes(spark, broker, unique, tmp_path) -> None:
    """Compressed batches read from inside a batch, a record over the consumer's 1 MiB
    partition fetch size, null keys and values, and LogAppendTime."""
    shapes, appended = unique("shapes"), unique("append-time")
    ensure_topic(broker.bootstrap, shapes, partitions=6, config={"max.message.bytes": "4194304"})
    ensure_topic(
        broker.bootstrap, appended, partitions=1, config={"message.timestamp.type": "LogAppendTime"}
    )
    written: list[Rec] = []
    for p, codec in enumerate(("gzip", "snappy", "lz4", "zstd")):
        # linger: the six records go in one batch, which the reads below start inside
        records = [(shapes, p, f"k{i}", f"{codec}-{i}" * 20, BASE_TS + i, None) for i in range(6)]
        written += send(broker.bootstrap, records, **{"compression.type": codec, "linger.ms": 200})
    big = os.urandom(3 * 1024 * 1024 // 2)
    written += send(
        broker.bootstrap,
        [(shapes, 4, b"big", v, BASE_TS, None) for v in (b"before", big, b"after")],
        **{"message.max.bytes": 4194304},
    )
    written += send(
        broker.bootstrap,
        [(shapes, 5, b"gone", None, BASE_TS, None), (shapes, 5, None, b"no key", BASE_TS, None)],
    )
    stamped = send(
        broker.bootstrap, [(appended, 0, None, f"a{i}", BASE_TS, None) for i in range(2)]
    )
    assert all(r.timestamp_type == 1 and r.timestamp > BASE_TS for r in stamped)

    starting = {shapes: {str(p): 2 for p in range(4)} | {"4": -2, "5": -2}, appended: {"0": -2}}
    df = read_kafka_stream(
        spark,
        bootstrap=broker.bootstrap,
        topics=[shapes, appended],
        starting_offsets=starting,
        engine="native",
    )
    batches, _ = read_available_now(df, tmp_path / "cp")
    expected = [r for r in written if r.partition >= 4 or r.offset >= 2] + stamped
    assert sorted(r for b in batches for r in b) == sorted(expected)


def test_offsets_fetched_by_a_consumer_group(spark, broker, unique, tmp_path) -> None:
    """Spark's deprecated offset fetching: a driver consumer that subscribes in a group
    (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup) instead of the admin
    client."""
    session = spark.newSession()  # the shared session's conf stays as it is
    session.conf.set("spark.sql.streaming.kafka.useDeprecatedOffsetFetching", "true")
    prefix = unique("group")
    a, b = f"{prefix}.a", f"{prefix}.b"
    ensure_topic(broker.bootstrap, a, partitions=2)
    ensure_topic(broker.bootstrap, b, partitions=1)
    written = fill(broker.bootstrap, a, {0: 4, 1: 2}) + fill(broker.bootstrap, b, {0: 3})
    for name, kw in (("topics", {"topics": [a, b]}), ("pattern", {"pattern": f"{prefix}\\..*"})):
        df = read_kafka_stream(session, bootstrap=broker.bootstrap, engine="native", **kw)
        batches, end = read_available_now(df, tmp_path / name)
        assert sorted(r for batch in batches for r in batch) == sorted(written), name
        assert end == {a: {"0": 4, "1": 2}, b: {"0": 3}}


@pytest.fixture(scope="module")
def timed(broker) -> tuple[str, list[Rec]]:
    """A topic of 2 partitions: 5 records at CreateTime BASE_TS + 0..4 s in partition 0,
    3 at BASE_TS + 0..2 s in partition 1."""
    topic = f"timed-{time.time_ns()}"
    ensure_topic(broker.bootstrap, topic, partitions=2)
    return topic, fill(broker.bootstrap, topic, {0: 5, 1: 3})


def _select(written: list[Rec], wanted: dict[int, range]) -> list[Rec]:
    return sorted(r for r in written if r.offset in wanted.get(r.partition, range(0)))


@pytest.mark.parametrize(
    ("options", "wanted"),
    [
        ({"startingOffsets": "earliest"}, {0: range(5), 1: range(3)}),
        ({"startingOffsets": '{"T": {"0": 2, "1": -2}}'}, {0: range(2, 5), 1: range(3)}),
        ({"startingTimestamp": str(BASE_TS + 1500)}, {0: range(2, 5), 1: range(2, 3)}),
        (
            {"startingOffsetsByTimestamp": json.dumps({"T": {"0": BASE_TS + 2500, "1": BASE_TS}})},
            {0: range(3, 5), 1: range(3)},
        ),
        (
            # Past partition 1's last record: no offset for it, so it starts at latest.
            {
                "startingTimestamp": str(BASE_TS + 3500),
                "startingOffsetsByTimestampStrategy": "latest",
            },
            {0: range(4, 5)},
        ),
    ],
    ids=["earliest", "json", "timestamp", "timestamp-per-partition", "timestamp-past-the-end"],
)
def test_starting_positions(spark, broker, timed, tmp_path, options, wanted) -> None:
    topic, written = timed
    opts = {k: v.replace('"T"', json.dumps(topic)) for k, v in options.items()}
    df = native(spark, broker.bootstrap, subscribe=topic, **opts)
    batches, end = read_available_now(df, tmp_path / "cp")
    assert sorted(r for b in batches for r in b) == _select(written, wanted)
    assert end == {topic: {"0": 5, "1": 3}}


def test_starting_latest_reads_only_what_comes_after(spark, broker, unique, tmp_path) -> None:
    topic = unique("latest")
    ensure_topic(broker.bootstrap, topic, partitions=2)
    fill(broker.bootstrap, topic, {0: 3, 1: 2})
    df = read_kafka_stream(
        spark, bootstrap=broker.bootstrap, topics=topic, starting_offsets="latest", engine="native"
    )
    live = Live(df, tmp_path / "cp")
    try:
        assert live.drain() == []
        late = fill(broker.bootstrap, topic, {1: 2}, tag="late")
        assert live.drain() == sorted(late)
        assert [r.offset for r in late] == [2, 3]
    finally:
        live.stop()


def test_batch_read_with_ending_offsets(spark, broker, timed) -> None:
    topic, written = timed

    def read(**options: str) -> list[Rec]:
        reader = spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
        reader = reader.option("subscribe", topic).option("includeHeaders", "true")
        for k, v in options.items():
            reader = reader.option(k, v)
        return sorted(_rows(reader.load().withColumnRenamed("timestampType", "timestamp_type")))

    assert read() == sorted(written)
    assert read(
        startingOffsets=json.dumps({topic: {"0": 1, "1": -2}}),
        endingOffsets=json.dumps({topic: {"0": 4, "1": -1}}),
    ) == _select(written, {0: range(1, 4), 1: range(3)})
    assert read(
        startingTimestamp=str(BASE_TS + 1000), endingTimestamp=str(BASE_TS + 2000)
    ) == _select(written, {0: range(1, 2), 1: range(1, 2)})


def test_fail_on_data_loss_after_delete_records(spark, broker, unique, tmp_path) -> None:
    topic = unique("loss")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    first = fill(broker.bootstrap, topic, {0: 10})
    checkpoint = tmp_path / "cp"

    def run(fail: bool) -> list[Rec]:
        df = read_kafka_stream(
            spark,
            bootstrap=broker.bootstrap,
            topics=topic,
            engine="native",
            on_data_loss="fail" if fail else "skip",
        )
        batches, _ = read_available_now(df, checkpoint)
        return sorted(r for b in batches for r in b)

    assert run(True) == sorted(first)
    second = fill(broker.bootstrap, topic, {0: 10}, tag="second")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    done = admin.delete_records([TopicPartition(topic, 0, 15)], request_timeout=30)
    assert done[TopicPartition(topic, 0)].result(30).low_watermark == 15  # type: ignore[index]

    # The checkpoint resumes at 10, which the broker no longer has.
    with pytest.raises(Exception, match="Some data may have been lost"):
        run(True)
    # failOnDataLoss=false replays the same batch without the lost records.
    assert run(False) == [r for r in sorted(second) if r.offset >= 15]


def _consume(bootstrap: str, topic: str, partitions: int, count: int) -> list[Rec]:
    """`count` records of `topic` read from offset 0 by confluent-kafka (librdkafka)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "fetch.wait.max.ms": 50}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[Rec] = []
    deadline = time.monotonic() + 30
    try:
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append(_rec(msg, tuple(msg.headers() or ()) or None))
    finally:
        consumer.close()
    return sorted(out)


def test_spark_kafka_sink_writes_what_another_client_reads(spark, broker, unique) -> None:
    """Spark's `kafka` sink: the Java producer (idempotent by default) writes records that
    librdkafka reads back whole."""
    topic = unique("sink")
    ensure_topic(broker.bootstrap, topic, partitions=2)
    rows = [
        (
            None if i == 3 else f"k{i}",
            None if i == 4 else f"v{i}",
            i % 2,
            [("h", f"{i}".encode()), ("null", None)] if i % 2 else None,
        )
        for i in range(8)
    ]
    schema = (
        "key string, value string, partition int, headers array<struct<key:string,value:binary>>"
    )
    before = int(time.time() * 1000)
    (
        spark.createDataFrame(rows, schema)
        .coalesce(1)
        .write.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", topic)
        .save()
    )
    after = int(time.time() * 1000)
    got = _consume(broker.bootstrap, topic, 2, len(rows))
    assert all(before <= r.timestamp <= after and r.timestamp_type == 0 for r in got)
    expected = [
        Rec(
            topic,
            p,
            offset,
            None if k is None else k.encode(),
            None if v is None else v.encode(),
            0,
            None if h is None else tuple(h),
        )
        for p in (0, 1)
        for offset, (k, v, _, h) in enumerate(r for r in rows if r[2] == p)
    ]
    assert [r._replace(timestamp=0) for r in got] == sorted(expected)
