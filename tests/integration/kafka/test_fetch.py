"""The source's reader (`read_range`) against a real broker process, without Spark,
with each client: the column reader (`_rdfetch`, the default) and confluent-kafka's
`Consumer`. Both must return the same batches."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from pyspark.sql.pandas.types import to_arrow_schema

from streams.kafka import DataLossError, KafkaConfigError
from streams.kafka.admin import end_offsets, ensure_topic, produce
from streams.kafka.fetch import (
    consumer_config,
    native_reader_error,
    read_range,
    read_ranges,
    reader_for,
)
from streams.kafka.offsets import OffsetRange
from streams.kafka.source import SCHEMA, SCHEMA_WITHOUT_HEADERS
from tests.integration.kafka.helpers import topic_with_deleted_head
from tests.support.broker_clients import produce_transactions

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

ARROW = to_arrow_schema(SCHEMA, timezone="UTC")
READERS = ["native", "python"]


def test_the_column_reader_is_built_and_loads() -> None:
    # The install compiles it (setup.py); without it every source read falls back to
    # the slower Python client, which must not happen unnoticed.
    assert native_reader_error() is None


def _read(bootstrap: str, rng: OffsetRange, **kwargs) -> list[tuple[int, bytes]]:
    conf = consumer_config(bootstrap, {}, isolation_level="read_committed", size=rng.size)
    out = []
    for batch in read_range(rng, conf, ARROW, **kwargs):
        out += zip(
            batch.column("offset").to_pylist(), batch.column("value").to_pylist(), strict=True
        )
    return out


@pytest.mark.parametrize("reader", READERS)
def test_a_range_up_to_the_log_end_does_not_wait_for_more_records(broker, unique, reader) -> None:
    # Each micro-batch reads up to the high watermark, where no later record can fill
    # a `consume` call's batch. With a poll timeout longer than this test's own timeout,
    # a reader that asked for more records than the range holds would never finish.
    topic = unique("tail")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    produce(broker.bootstrap, topic, [(None, f"v{i}") for i in range(300)], partition=0)
    assert end_offsets(broker.bootstrap, topic)[topic] == {0: 300}
    got = _read(broker.bootstrap, OffsetRange(topic, 0, 100, 300), poll_timeout=600, reader=reader)
    assert got == [(o, f"v{o}".encode()) for o in range(100, 300)]
    # A range ending before the log's end stops at its end, records after it unread.
    got = _read(broker.bootstrap, OffsetRange(topic, 0, 0, 7), poll_timeout=600, reader=reader)
    assert [o for o, _ in got] == list(range(7))


@pytest.mark.parametrize("reader", READERS)
def test_a_range_whose_tail_is_a_transaction_marker_ends_at_its_position(
    broker, unique, reader
) -> None:
    # The last offset is the commit marker: no record will ever arrive for it, so the
    # range ends through the consumer's position once a poll comes back empty.
    topic = unique("marker")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    produce_transactions(
        broker.bootstrap, unique("tx"), topic, [([(None, f"t{i}") for i in range(20)], True)]
    )
    end = end_offsets(broker.bootstrap, topic)[topic][0]
    assert end == 21  # 20 records and the marker
    got = _read(broker.bootstrap, OffsetRange(topic, 0, 0, end), poll_timeout=0.2, reader=reader)
    assert got == [(o, f"t{o}".encode()) for o in range(20)]


def _table(bootstrap: str, ranges: list[OffsetRange], schema: pa.Schema, **kwargs) -> pa.Table:
    conf = consumer_config(bootstrap, {}, isolation_level="read_committed", size=1000)
    batches = list(read_ranges(ranges, conf, schema, batch_records=50, **kwargs))
    assert all(b.schema == schema for b in batches)
    t = pa.Table.from_batches(batches, schema)
    return t.sort_by([("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")])


@pytest.mark.parametrize("arrow", [ARROW, to_arrow_schema(SCHEMA_WITHOUT_HEADERS, timezone="UTC")])
def test_both_readers_return_the_same_records(broker, unique, arrow) -> None:
    # One task's round over two topics and three partitions, ranges cut inside the log,
    # with what a record can carry: null and empty keys and values, headers (one with a
    # null value), and aborted transactions that read_committed skips.
    a, b = unique("a"), unique("b")
    for t in (a, b):
        ensure_topic(broker.bootstrap, t, partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(400):
        producer.produce(
            a if i % 3 else b,
            partition=i % 2,
            key=None if i % 7 == 0 else (b"" if i % 11 == 0 else f"k{i}".encode()),
            value=None if i % 13 == 0 else (b"" if i % 17 == 0 else f'{{"i":{i}}}'.encode()),
            headers=[("h", f"{i}".encode()), ("empty", None)] if i % 5 == 0 else None,
        )
    producer.flush(30)
    produce_transactions(
        broker.bootstrap,
        unique("tx"),
        b,
        [([(None, f"gone-{i}") for i in range(30)], False), ([(None, "kept")], True)],
        partition=1,
    )
    ends = {t: end_offsets(broker.bootstrap, t)[t] for t in (a, b)}
    ranges = [
        OffsetRange(a, 0, 3, ends[a][0] - 5),
        OffsetRange(a, 1, 0, ends[a][1]),
        OffsetRange(b, 1, 10, ends[b][1]),  # ends on the commit marker
    ]
    native = _table(broker.bootstrap, ranges, arrow, reader="native")
    python = _table(broker.bootstrap, ranges, arrow, reader="python")
    assert native.equals(python)
    expected = sum(r.size for r in ranges) - 30 - 2  # aborted records, two markers
    assert native.num_rows == expected
    assert b"kept" in native.column("value").to_pylist()
    assert not any(v and v.startswith(b"gone") for v in native.column("value").to_pylist())
    if "headers" in arrow.names:
        headers = native.column("headers").to_pylist()
        assert sum(h is not None for h in headers) > 20
        assert all(h is None or h[1] == {"key": "empty", "value": None} for h in headers)


@pytest.mark.parametrize("reader", READERS)
def test_data_loss_fails_or_skips_to_the_earliest_offset(broker_factory, unique, reader) -> None:
    topic = unique("loss")
    bootstrap, earliest, end = topic_with_deleted_head(broker_factory, topic)
    rng = OffsetRange(topic, 0, 0, end)
    with pytest.raises(DataLossError, match=f"`{topic}` partition 0: offset 0 is no longer"):
        _read(bootstrap, rng, reader=reader)
    got = [o for o, _ in _read(bootstrap, rng, reader=reader, on_data_loss="skip")]
    assert got and got[0] >= earliest and got == list(range(got[0], end))


def test_a_setting_only_the_python_client_takes_is_read_with_it(broker, unique) -> None:
    topic = unique("cb")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    produce(broker.bootstrap, topic, [(None, "one")])
    errors: list[object] = []
    conf = consumer_config(
        broker.bootstrap, {"error_cb": errors.append}, isolation_level="read_committed", size=1
    )
    rng = OffsetRange(topic, 0, 0, 1)
    assert reader_for(conf) == "python"
    assert reader_for({k: v for k, v in conf.items() if k != "error_cb"}) == "native"
    batches = list(read_range(rng, conf, ARROW))  # auto: the Python client, which takes it
    assert [v for b in batches for v in b.column("value").to_pylist()] == [b"one"]
    with pytest.raises(KafkaConfigError, match="error_cb needs the Python client"):
        list(read_range(rng, conf, ARROW, reader="native"))
    with pytest.raises(ValueError, match="reader must be one of auto, native, python"):
        list(read_range(rng, conf, ARROW, reader="c"))


def test_the_column_readers_client_names_a_bad_setting_and_refuses_use_after_close() -> None:
    from streams.kafka import _rdfetch

    assert native_reader_error() is None  # loads librdkafka into the module
    with pytest.raises(ValueError, match="librdkafka setting fetch.wait.max.ms=soon"):
        _rdfetch.Consumer([("bootstrap.servers", "127.0.0.1:1"), ("fetch.wait.max.ms", "soon")])
    c = _rdfetch.Consumer([("bootstrap.servers", "127.0.0.1:1"), ("group.id", "g")])
    assert c.consume(10, 10, False) == (None, [])  # nothing assigned: nothing comes
    c.close()
    c.close()  # twice is fine
    with pytest.raises(RuntimeError, match="consumer is closed"):
        c.consume(10, 10, False)


def test_a_process_without_the_column_reader_reads_with_consume_and_says_so_once(
    broker, unique
) -> None:
    # An install without a C compiler: the import of the extension fails. The source
    # still reads every record, and says once, as a warning, what it costs.
    topic = unique("plain")
    ensure_topic(broker.bootstrap, topic, partitions=1)
    produce(broker.bootstrap, topic, [(None, "one"), (None, "two")])
    script = f"""
import logging, sys
sys.modules["streams.kafka._rdfetch"] = None  # as where it is not built
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
from pyspark.sql.pandas.types import to_arrow_schema
from streams.kafka.fetch import consumer_config, read_range, reader_for
from streams.kafka.offsets import OffsetRange
from streams.kafka.source import SCHEMA
conf = consumer_config({broker.bootstrap!r}, {{}}, isolation_level="read_committed", size=2)
print(reader_for(conf))
for _ in range(2):
    rng = OffsetRange({topic!r}, 0, 0, 2)
    batches = read_range(rng, conf, to_arrow_schema(SCHEMA, timezone="UTC"))
    print([v for b in batches for v in b.column("value").to_pylist()])
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["python", "[b'one', b'two']", "[b'one', b'two']"]
    warnings = [ln for ln in done.stderr.splitlines() if ln.startswith("WARNING")]
    assert len(warnings) == 1, done.stderr
    assert "reading with confluent-kafka's Consumer, at about twice the CPU" in warnings[0]
    assert "streams.kafka._rdfetch is not built" in warnings[0]
