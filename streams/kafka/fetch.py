"""Executor side of the Kafka source: read one offset range into Arrow record batches.

Per-record Python work is the cost here (docs/decisions/0001), so each `consume()` result of
up to `batch_records` messages becomes one Arrow batch through `map` over the unbound
`Message` accessors (no bound-method objects, no per-record dicts or tuples beyond the
timestamp pair librdkafka returns) and column-wise Arrow construction.
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections.abc import Iterator, Mapping
from itertools import chain
from typing import Any

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from streams.kafka.errors import DataLossError, KafkaConfigError, KafkaReadError
from streams.kafka.offsets import OffsetRange

logger = logging.getLogger(__name__)

HEADER_TYPE = pa.list_(
    pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
)

_value = Message.value
_key = Message.key
_offset = Message.offset
_timestamp = Message.timestamp
_headers = Message.headers
_error = Message.error
_partition = Message.partition
_topic = Message.topic

_RECORD_COLUMNS = 7
"""key, value, topic, partition, offset, timestamp, timestampType; then `headers` if asked."""
# Spark's native source reports Kafka's TimestampType ids: CreateTime 0, LogAppendTime 1;
# librdkafka numbers them 1 and 2 (0 = not available).
_LOSS_CODES = {KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET}


def consumer_config(
    bootstrap: str, client_config: Mapping[str, Any], *, isolation_level: str, size: int
) -> dict[str, Any]:
    """librdkafka settings for reading one exact range as fast as the client allows.

    `fetch.queue.backoff.ms=2`: how long librdkafka waits before fetching again once the
    prefetch queue is full. The default 1000 ms caps small records at ~150k/s; 0 makes
    its fetcher thread spin a whole core for as long as the queue stays full, which is
    whenever Spark is slower than the fetch (measured: 3.0 s of CPU in 3 s of not
    consuming, 0.08 s with 2 ms; the framework's ODS batch of 1M records used 12-16 s of
    Python-worker CPU with 0 and 4.6 s with 2). `auto.offset.reset=error`: a start offset
    that retention already deleted must surface as data loss, never a silent jump.

    The prefetch is bounded by bytes, `queued.max.messages.kbytes` 4 MiB, and one
    partition's fetch by `max.partition.fetch.bytes` 1 MiB (librdkafka's and Kafka's
    default): a range ends inside a partition, and what librdkafka fetched and parsed
    past its end is thrown away; a deep queue also costs CPU of its own. Reading and
    typing 1M records in ranges of 125k costs ~20% more CPU, broker included, with
    256 MiB and 16 MiB (docs/benchmarks.md, "Kafka read: prefetch"; docs/decisions/0005).
    """
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"warehouse-source-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
        "isolation.level": isolation_level,
        "fetch.queue.backoff.ms": 2,
        "fetch.wait.max.ms": 10,
        "fetch.max.bytes": 64 * 1024 * 1024,
        "max.partition.fetch.bytes": 1024 * 1024,
        "queued.min.messages": max(1000, min(size, 1_000_000)),
        "queued.max.messages.kbytes": 4 * 1024,
        "receive.message.max.bytes": 100 * 1024 * 1024,
        "check.crcs": False,
    }
    conf.update(client_config)
    # The source tracks offsets in Spark's checkpoint; committing to a group would
    # only leak state into the broker.
    conf["enable.auto.commit"] = False
    conf["enable.partition.eof"] = True
    conf["auto.offset.reset"] = "error"
    return conf


def _offsets(msgs: list[Message]) -> pa.Array:
    """The run's offsets. They increase strictly within a partition, so a run whose last
    offset is `n - 1` past its first has no gap: a range, with no per-record call."""
    n, first, last = len(msgs), msgs[0].offset(), msgs[-1].offset()
    if last - first == n - 1:
        return pa.array(np.arange(first, last + 1, dtype=np.int64))
    return pa.array(list(map(_offset, msgs)), pa.int64())


def _to_batch(msgs: list[Message], topic: str, partition: int, schema: pa.Schema) -> pa.RecordBatch:
    n = len(msgs)
    # `(type, ms)` pairs flattened straight into one int64 array: no list of tuples and
    # no Python loop over them (measured 290 against 440 ns per record with the offsets).
    ts = np.fromiter(
        chain.from_iterable(map(_timestamp, msgs)), dtype=np.int64, count=2 * n
    ).reshape(n, 2)
    kind, ms = ts[:, 0], ts[:, 1]
    missing = kind == 0  # librdkafka: no timestamp
    timestamps = pa.array(
        ms * 1000, pa.timestamp("us", tz="UTC"), mask=missing if missing.any() else None
    )
    arrays = [
        pa.array(list(map(_key, msgs)), pa.binary()),
        pa.array(list(map(_value, msgs)), pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),  # constant per run: no per-row objects
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        _offsets(msgs),
        timestamps,
        pa.array((kind - 1).astype(np.int32)),
    ]
    if len(schema) > _RECORD_COLUMNS:  # the source's `headers` column (include_headers)
        headers = _headers_array(list(map(_headers, msgs)))
        arrays.append(pa.nulls(n, HEADER_TYPE) if headers is None else headers)
    return _record_batch(arrays, schema)


def _record_batch(arrays: list[pa.Array], schema: pa.Schema) -> pa.RecordBatch:
    """`arrays` (the record columns, then headers when `schema` has them) as a batch of
    `schema`, each cast to its field's type where it differs."""
    return pa.RecordBatch.from_arrays(
        [a.cast(f.type) if a.type != f.type else a for a, f in zip(arrays, schema, strict=True)],
        schema=schema,
    )


class _PyRun:
    """Records `[i, j)` of one `consume()` result, all of one partition."""

    __slots__ = ("msgs", "schema")

    def __init__(self, msgs: list[Message], schema: pa.Schema) -> None:
        self.msgs = msgs
        self.schema = schema

    def offset(self, k: int) -> int:
        return self.msgs[k].offset()

    def __len__(self) -> int:
        return len(self.msgs)

    def before(self, end: int) -> int:
        """How many leading records have an offset below `end`."""
        msgs = self.msgs
        lo, hi = 0, len(msgs)
        while lo < hi:
            mid = (lo + hi) // 2
            if msgs[mid].offset() < end:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def batch(self, n: int, topic: str, partition: int) -> pa.RecordBatch:
        return _to_batch(self.msgs[:n], topic, partition, self.schema)


class _PyClient:
    """confluent-kafka's `Consumer`, one Python `Message` per record."""

    def __init__(self, conf: Mapping[str, Any], schema: pa.Schema, multi_topic: bool) -> None:
        self.consumer = Consumer(dict(conf))
        self.schema = schema
        self.multi_topic = multi_topic

    def assign(self, parts: list[tuple[str, int, int]]) -> None:
        self.consumer.assign([TopicPartition(t, p, o) for t, p, o in parts])

    def consume(self, want: int, timeout: float) -> tuple[list[tuple[Any, Any]], list[Any]]:
        """`[(cursor key, run)]` of the records that came, and the events after them."""
        msgs = self.consumer.consume(num_messages=want, timeout=timeout)
        events: list[Message] = []
        if msgs and any(map(_error, msgs)):
            events = [m for m in msgs if m.error() is not None]
            msgs = [m for m in msgs if m.error() is None]
        if not msgs:
            return [], events
        runs = _runs(msgs, self.multi_topic)
        return [(key, _PyRun(msgs[i:j], self.schema)) for key, i, j in runs], events

    def pause(self, parts: list[tuple[str, int]]) -> None:
        self.consumer.pause([TopicPartition(t, p) for t, p in parts])

    def position(self, parts: list[tuple[str, int]]) -> list[int]:
        return [
            tp.offset for tp in self.consumer.position([TopicPartition(t, p) for t, p in parts])
        ]

    def low_watermark(self, topic: str, partition: int) -> int:
        return self.consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=30, cached=False
        )[0]

    def close(self) -> None:
        self.consumer.close()


class _Event:
    """An error or end-of-partition message of the column reader, read like a `Message`."""

    __slots__ = ("_error", "_offset", "_partition", "_topic")

    def __init__(self, topic: str | None, partition: int, offset: int, code: int, what: str):
        self._topic, self._partition, self._offset = topic, partition, offset
        self._error = KafkaError(code, what)

    def error(self) -> KafkaError:
        return self._error

    def topic(self) -> str | None:
        return self._topic

    def partition(self) -> int | None:
        return None if self._partition < 0 else self._partition

    def offset(self) -> int:
        return self._offset


class _ColRun:
    """Records `[i, j)` of one column reader result, all of one partition."""

    __slots__ = ("cols", "i", "j", "offsets")

    def __init__(self, cols: _Columns, i: int, j: int) -> None:
        self.cols, self.i, self.j = cols, i, j
        self.offsets = cols.offsets[i:j]

    def offset(self, k: int) -> int:
        return int(self.offsets[k])

    def __len__(self) -> int:
        return self.j - self.i

    def before(self, end: int) -> int:
        return int(np.searchsorted(self.offsets, end))

    def batch(self, n: int, topic: str, partition: int) -> pa.RecordBatch:
        return self.cols.batch(self.i, n, topic, partition)


class _Columns:
    """One `_rdfetch` result as Arrow arrays over its buffers (no copy)."""

    def __init__(self, records: tuple, schema: pa.Schema) -> None:
        topics, tix, part, off, kind, ms, key, value, headers = records
        self.schema = schema
        self.topics = topics
        self.topic_ix = np.frombuffer(tix, np.int32)
        self.partitions = np.frombuffer(part, np.int32)
        self.offsets = np.frombuffer(off, np.int64)
        n = len(self.offsets)
        kind = np.frombuffer(kind, np.int32)
        missing = kind == 0  # librdkafka: no timestamp
        self.arrays = [
            _binary(n, key),
            _binary(n, value),
            pa.array(self.offsets),
            pa.array(
                np.frombuffer(ms, np.int64) * 1000,
                pa.timestamp("us", tz="UTC"),
                mask=missing if missing.any() else None,
            ),
            pa.array(kind - 1),
        ]
        self.headers = None if headers is None else _headers_array(headers)

    def runs(self, multi_topic: bool) -> list[tuple[Any, _ColRun]]:
        part, tix = self.partitions, self.topic_ix
        change = part[1:] != part[:-1]
        if multi_topic:
            change |= tix[1:] != tix[:-1]
        edges = [0, *(np.flatnonzero(change) + 1).tolist(), len(part)]
        out = []
        for i, j in zip(edges, edges[1:], strict=False):
            p = int(part[i])
            key = (self.topics[tix[i]], p) if multi_topic else p
            out.append((key, _ColRun(self, i, j)))
        return out

    def batch(self, i: int, n: int, topic: str, partition: int) -> pa.RecordBatch:
        key, value, offsets, timestamps, kind = (a.slice(i, n) for a in self.arrays)
        arrays = [
            key,
            value,
            pa.repeat(pa.scalar(topic, pa.string()), n),
            pa.repeat(pa.scalar(partition, pa.int32()), n),
            offsets,
            timestamps,
            kind,
        ]
        if len(self.schema) > _RECORD_COLUMNS:
            arrays.append(
                pa.nulls(n, HEADER_TYPE) if self.headers is None else self.headers.slice(i, n)
            )
        return _record_batch(arrays, self.schema)


def _binary(n: int, column: tuple[bytes, bytes, bytes | None]) -> pa.Array:
    offsets, data, valid = column
    return pa.Array.from_buffers(
        pa.binary(),
        n,
        [None if valid is None else pa.py_buffer(valid), pa.py_buffer(offsets), pa.py_buffer(data)],
    )


def _headers_array(hdrs: list[list[tuple[str, bytes | None]] | None]) -> pa.Array | None:
    if not any(hdrs):
        return None
    return pa.array(
        [None if h is None else [{"key": k, "value": v} for k, v in h] for h in hdrs],
        HEADER_TYPE,
    )


class _NativeClient:
    """`_rdfetch.Consumer`: librdkafka's records copied into Arrow buffers in C."""

    def __init__(self, conf: Mapping[str, Any], schema: pa.Schema, multi_topic: bool) -> None:
        from streams.kafka import _rdfetch

        self.consumer = _rdfetch.Consumer([(k, _conf_text(v)) for k, v in conf.items()])
        self.schema = schema
        self.multi_topic = multi_topic
        self.headers = len(schema) > _RECORD_COLUMNS

    def assign(self, parts: list[tuple[str, int, int]]) -> None:
        _native_call(self.consumer.assign, parts)

    def consume(self, want: int, timeout: float) -> tuple[list[tuple[Any, Any]], list[Any]]:
        records, events = self.consumer.consume(want, int(timeout * 1000), self.headers)
        runs = [] if records is None else _Columns(records, self.schema).runs(self.multi_topic)
        return runs, [_Event(*e) for e in events]

    def pause(self, parts: list[tuple[str, int]]) -> None:
        _native_call(self.consumer.pause, parts)

    def position(self, parts: list[tuple[str, int]]) -> list[int]:
        return _native_call(self.consumer.position, parts)

    def low_watermark(self, topic: str, partition: int) -> int:
        return _native_call(self.consumer.watermarks, topic, partition, 30_000)[0]

    def close(self) -> None:
        self.consumer.close()


def _native_call(call: Any, *args: Any) -> Any:
    """A column reader call, its failures raised as confluent-kafka's are."""
    try:
        return call(*args)
    except RuntimeError as e:
        raise KafkaException(KafkaError(KafkaError._FAIL, str(e))) from e


def _conf_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class _Cursor:
    """Progress of one range inside a task's consumer."""

    __slots__ = ("done", "pos", "rng")

    def __init__(self, rng: OffsetRange) -> None:
        self.rng = rng
        self.pos = rng.start
        self.done = rng.start >= rng.end


def _runs(msgs: list[Message], multi_topic: bool) -> list[tuple[Any, int, int]]:
    """Split a consume() result into runs of one partition: `(key, i, j)`. librdkafka
    hands out whole fetched batches per partition, so runs are long."""
    parts = list(map(_partition, msgs))
    keys: list[Any] = list(zip(map(_topic, msgs), parts, strict=True)) if multi_topic else parts
    if keys[0] == keys[-1] and (len(set(keys)) == 1):
        return [(keys[0], 0, len(msgs))]
    out: list[tuple[Any, int, int]] = []
    i = 0
    for j in range(1, len(keys) + 1):
        if j == len(keys) or keys[j] != keys[i]:
            out.append((keys[i], i, j))
            i = j
    return out


READERS = ("auto", "native", "python")
"""`read_ranges(reader=)`: `native` the column reader (`_rdfetch`, C), `python`
confluent-kafka's `Consumer`, `auto` the column reader where it loads and the settings
are all plain values (a callable, such as an OAuth token callback, needs the Python
client)."""


@functools.cache
def native_reader_error() -> str | None:
    """Why the column reader cannot be used in this process, or None if it can."""
    try:
        from streams.kafka import _rdfetch
    except ImportError as e:
        return f"streams.kafka._rdfetch is not built ({e}); reinstall with a C compiler"
    path = _librdkafka_path()
    if path is None:
        return "confluent-kafka's librdkafka was not found among the loaded libraries"
    try:
        _rdfetch.load(path)
    except OSError as e:
        return str(e)
    return None


def _librdkafka_path() -> str | None:
    """The librdkafka confluent-kafka loaded (its wheel bundles one under a hashed name),
    so that both clients share one library."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip("\n").split(maxsplit=5)[-1]
                if "librdkafka" in path.rsplit("/", 1)[-1]:
                    return path
    except OSError:
        pass
    import glob
    from pathlib import Path

    import confluent_kafka

    pkg = Path(confluent_kafka.__file__).parent
    found = glob.glob(str(pkg.parent / "confluent_kafka.libs" / "librdkafka*")) + glob.glob(
        str(pkg / ".dylibs" / "librdkafka*")
    )
    return found[0] if found else None


@functools.cache
def _warn_python_client(error: str) -> None:
    """Once per process: an install whose column reader is not built, or does not load,
    reads at about twice the CPU per record (docs/decisions/0062)."""
    logger.warning(
        "kafka source: reading with confluent-kafka's Consumer, at about twice the CPU "
        "per record of the column reader: %s",
        error,
    )


def reader_for(conf: Mapping[str, Any], reader: str = "auto") -> str:
    """Which client `read_ranges(..., reader=reader)` reads `conf` with: `native` (the
    column reader) or `python` (confluent-kafka's `Consumer`)."""
    return "native" if _client_class(reader, conf) is _NativeClient else "python"


def _client_class(reader: str, conf: Mapping[str, Any]) -> type:
    if reader not in READERS:
        raise ValueError(f"reader must be one of {', '.join(READERS)}, not {reader!r}")
    if reader == "python":
        return _PyClient
    plain = all(isinstance(v, str | int | float | bool) for v in conf.values())
    error = native_reader_error()
    if reader == "native":
        if error is not None:
            raise KafkaConfigError(
                f"The native Kafka reader is not available: {error}.", option="reader"
            )
        if not plain:
            names = [k for k, v in conf.items() if not isinstance(v, str | int | float | bool)]
            raise KafkaConfigError(
                "The native Kafka reader takes settings of plain values only; "
                f"{', '.join(names)} needs the Python client.",
                option=names[0],
            )
        return _NativeClient
    if error is not None:
        _warn_python_client(error)
    return _NativeClient if error is None and plain else _PyClient


RECORD_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
    ]
)
"""A Kafka record's columns as Spark's `kafka` source names them, for a driver-side read
of a few records (`read_range(rng, conf, RECORD_SCHEMA)`)."""


def read_ranges(
    ranges: list[OffsetRange],
    conf: Mapping[str, Any],
    schema: pa.Schema,
    *,
    on_data_loss: str = "fail",
    batch_records: int = 10000,
    stall_timeout: float = 120.0,
    poll_timeout: float = 1.0,
    reader: str = "auto",
) -> Iterator[pa.RecordBatch]:
    """Yield exactly the records of each range (`[start, end)` per partition) as Arrow
    batches, one consumer for all of them. Gaps (compaction, transaction markers,
    aborted records under read_committed) are skipped; a range ends when a record at
    or past its end arrives, or the client reports the partition's end or position
    at or past it. `poll_timeout`: the longest one `consume` call waits for records;
    only a range whose tail is gaps waits it out before the position check ends it.
    `reader`: which client reads (`READERS`)."""
    from streams.kafka.offsets import rounds

    client_class = _client_class(reader, conf)
    # One consumer per round: a partition read twice by one task (two pieces of a
    # split) starts fresh instead of depending on pause/resume state.
    for rnd in rounds(ranges):
        client = client_class(conf, schema, len({r.topic for r in rnd}) > 1)
        try:
            yield from _read_round(
                client, rnd, on_data_loss, batch_records, stall_timeout, poll_timeout
            )
        finally:
            client.close()


def read_range(
    rng: OffsetRange, conf: Mapping[str, Any], schema: pa.Schema, **kwargs: Any
) -> Iterator[pa.RecordBatch]:
    """`read_ranges` of a single range."""
    return read_ranges([rng], conf, schema, **kwargs)


def _read_round(  # noqa: C901 - the fetch loop, kept whole: its state is shared across steps
    client: Any,
    rnd: list[OffsetRange],
    on_data_loss: str,
    batch_records: int,
    stall_timeout: float,
    poll_timeout: float,
) -> Iterator[pa.RecordBatch]:
    multi_topic = client.multi_topic
    cursors = {((r.topic, r.partition) if multi_topic else r.partition): _Cursor(r) for r in rnd}
    active = [c for c in cursors.values() if not c.done]
    if not active:
        return
    client.assign([(c.rng.topic, c.rng.partition, c.pos) for c in active])
    left = len(active)
    last_progress = time.monotonic()

    def finish(cur: _Cursor) -> None:
        nonlocal left
        if not cur.done:
            cur.done = True
            left -= 1
            # Stop prefetching past the range; records that still arrive are dropped.
            _best_effort(client.pause, [(cur.rng.topic, cur.rng.partition)])

    def key_of(m: Any) -> Any:
        return (m.topic(), m.partition()) if multi_topic else m.partition()

    while left > 0:
        # Never ask for more records than the ranges have left: `consume` returns once it
        # has `num_messages` or after its timeout, and a range that ends at the log's
        # end has nothing after it to fill the batch, so every task reading up to the
        # high watermark (each micro-batch's last range of a partition) waited the whole
        # second (measured: 1.1-1.3 s for the last 62.5k or 125k records of a partition,
        # 0.2-0.35 s for the same number of records ending before the log's end).
        want = sum(c.rng.end - c.pos for c in cursors.values() if not c.done)
        runs, events = client.consume(max(1, min(batch_records, want)), poll_timeout)
        for key, run in runs:
            cur = cursors.get(key)
            if cur is None or cur.done:
                continue  # prefetched past a finished range
            end = cur.rng.end
            n = len(run)
            if run.offset(n - 1) >= end:
                n = run.before(end)
                finish(cur)
            if n:
                cur.pos = run.offset(n - 1) + 1
                yield run.batch(n, cur.rng.topic, cur.rng.partition)
                if cur.pos >= end:
                    finish(cur)
        if runs:
            last_progress = time.monotonic()
        # Events come after the records fetched before them, so handle them last.
        for m in events:
            _on_event(m, cursors, key_of, finish, client, on_data_loss, rnd)
        if runs or left == 0:
            continue
        # No record came: a range whose tail is only control records ends here.
        waiting = [c for c in cursors.values() if not c.done]
        positions = client.position([(c.rng.topic, c.rng.partition) for c in waiting])
        for cur, pos in zip(waiting, positions, strict=True):
            if pos >= cur.rng.end:
                finish(cur)
        if left and time.monotonic() - last_progress > stall_timeout:
            cur = next(c for c in cursors.values() if not c.done)
            raise KafkaReadError(
                f"Topic `{cur.rng.topic}` partition {cur.rng.partition}: no record arrived for "
                f"{stall_timeout:.0f}s at offset {cur.pos} while reading up to {cur.rng.end}. "
                "Is the broker reachable and the partition's leader available?",
                topic=cur.rng.topic,
                partition=cur.rng.partition,
            )


def _best_effort(call: Any, tps: list[tuple[str, int]]) -> bool:
    """pause is asynchronous in librdkafka and may time out under load; retry a few
    times, then go on: correctness never depends on it."""
    for _ in range(3):
        try:
            call(tps)
            return True
        except KafkaException as e:
            logger.debug("kafka source: %s(%s) failed: %s", call.__name__, tps, e)
    return False


def _on_event(
    m: Message,
    cursors: dict[Any, _Cursor],
    key_of: Any,
    finish: Any,
    client: Any,
    on_data_loss: str,
    rnd: list[OffsetRange],
) -> None:
    err = m.error()
    cur = cursors.get(key_of(m)) if m.partition() is not None else None
    if err.code() == KafkaError._PARTITION_EOF:
        # The client reached the partition's end (high watermark, or LSO under
        # read_committed): every record before it has been delivered.
        if cur is not None and m.offset() >= cur.rng.end:
            finish(cur)
    elif err.code() in _LOSS_CODES and cur is not None:
        cur.pos = _on_out_of_range(client, cur.rng, cur.pos, err, on_data_loss)
        if cur.pos >= cur.rng.end:
            finish(cur)
        else:
            # A new assignment, not a seek: the partition's fetch stopped in an error
            # state that a seek does not leave. Every other range goes on from where it
            # is; what was fetched for it and not yet handed out is fetched again.
            client.assign(
                [(c.rng.topic, c.rng.partition, c.pos) for c in cursors.values() if not c.done]
            )
    elif err.fatal() or not err.retriable():
        rng = cur.rng if cur is not None else rnd[0]
        raise KafkaReadError(
            f"Topic `{rng.topic}` partition {rng.partition}: reading offsets "
            f"[{rng.start}, {rng.end}) failed: {err.str()}.",
            topic=rng.topic,
            partition=rng.partition,
        )
    else:
        logger.warning("kafka source: retriable error: %s", err.str())


def _on_out_of_range(
    client: Any, rng: OffsetRange, pos: int, err: KafkaError, on_data_loss: str
) -> int:
    low = client.low_watermark(rng.topic, rng.partition)
    if on_data_loss != "skip":
        raise DataLossError(
            f"Topic `{rng.topic}` partition {rng.partition}: offset {pos} is no longer "
            f"available, the earliest offset is {low} (deleted by retention?). Records "
            f'[{pos}, {min(low, rng.end)}) are lost. Set on_data_loss="skip" to continue '
            "from the earliest offset, or reset the query.",
            topic=rng.topic,
            partition=rng.partition,
            expected_offset=pos,
            earliest_offset=low,
        )
    logger.warning(
        "topic %s partition %d: offsets [%d, %d) were deleted before they were read; "
        "skipping to %d (%s)",
        rng.topic,
        rng.partition,
        pos,
        low,
        low,
        err.str(),
    )
    return low
