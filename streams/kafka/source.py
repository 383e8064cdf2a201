"""The Kafka source as a Python data source (`spark.readStream.format("warehouse_kafka")`).

The driver side (`KafkaStreamReader`) lives in Spark's long-running Python planner
worker: it discovers partitions, answers `latestOffset` with admission control, and
plans `[start, end)` ranges. `read()` runs on executors and fetches one range into
Arrow batches (`fetch.read_range`). Offsets are `{"topic": {"partition": offset}}`.

With `record_wait_ms`, a trigger of a continuous query that finds nothing new waits for
the next record with a consumer's fetch, which the broker answers as soon as a record is
in, and plans the batch then; without it Spark asks again a polling delay later. With
`wake_file` the wait ends within `_WAKE_LOOK_S` of that file's appearance (a stop), and
of the process's parent's exit (a killed driver's JVM).
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from streams._worker_gc import freeze_imports
from streams.kafka.errors import DataLossError, KafkaConfigError
from streams.kafka.initial_offsets import InitialOffsetsLog, subscription_text
from streams.kafka.offsets import (
    OffsetRange,
    Offsets,
    cap_at,
    from_json_dict,
    pack_ranges,
    parse_starting_offsets,
    rate_limit,
    resolve_start,
    split_ranges,
    to_json_dict,
)

logger = logging.getLogger(__name__)

SOURCE_NAME = "warehouse_kafka"

SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestamp_type", IntegerType()),
        StructField(
            "headers",
            ArrayType(
                StructType([StructField("key", StringType()), StructField("value", BinaryType())])
            ),
        ),
    ]
)

SCHEMA_WITHOUT_HEADERS = StructType([f for f in SCHEMA.fields if f.name != "headers"])
"""`include_headers=false`: reading and handing over headers costs even when all null."""

DEFAULT_SPLIT_OFFSETS = 200_000
DEFAULT_BATCH_RECORDS = 10_000
"""Records a task turns into one Arrow batch at most (`batch_records`)."""
DEFAULT_ISOLATION_LEVEL: Final = "read_committed"
"""Kafka's isolation level a table's stream reads with (`read_kafka_stream`): aborted
transactions' records are never read."""
DEFAULT_MAX_OFFSETS_PER_TRIGGER = 4_000_000
"""Records one micro-batch reads at most when `max_offsets_per_trigger` is not given: a
backlog is read in batches of this size, so what a batch holds (its tasks, its
quarantine, a retried batch's work) is bounded by configuration, not by the backlog.
Each batch costs a fixed ~0.2 s here (planning, its job's start and tail, the commits),
a fifth of a 1M-record batch's time on 2 cores (docs/decisions/0003)."""
_CLIENT_PREFIX = "kafka."
_END_CHECKS = 3
"""Times `latestOffset` reads a partition's end before it holds an end below the query's
position as the log's (`_check_loss`), `_END_CHECK_PAUSE_S` apart."""
_END_CHECK_PAUSE_S = 0.5
_WAIT_FETCH_MS = 5000
"""How long the broker holds a fetch of a trigger waiting for records (`record_wait_ms`):
an idle wait costs a fetch request this often. A held fetch cost the bundled broker about
1 ms of CPU (2 ms/s at 500 ms, nothing measurable at 5 s; docs/decisions/0079), and the
broker answers it as soon as a record is in, so the hold only sets how often an idle
wait asks."""
_WAKE_LOOK_S = 1.0
"""Seconds between two looks for the wake file in a trigger's wait for records."""
_WAIT_FETCH_BYTES = 64 << 10
"""What a waiting trigger's fetch may bring per partition: it only learns that records
are in (the batch's tasks read them)."""


def _behind_text(tp: tuple[str, int], position: int, end: int, start: int) -> str:
    return (
        f"Topic `{tp[0]}` partition {tp[1]}: the query's position is offset {position}, "
        f"but the partition's log ends at offset {end} (and starts at {start}): the topic "
        "was deleted and created again, or the broker lost records it had acknowledged"
    )


@dataclass(frozen=True)
class FetchOptions:
    """How a task reads its ranges: what `read()` needs besides the ranges."""

    bootstrap: str
    client_config: Mapping[str, Any]
    isolation_level: str
    on_data_loss: str
    batch_records: int


class KafkaInputPartition(InputPartition):
    """The `[start, end)` ranges one Spark task reads with one consumer, and how.

    Carrying the fetch options makes a planned partition readable on its own, also
    outside `read()`: the landing path (`streams.landing`) reads the partitions Spark
    planned for a micro-batch (`planned_partitions`) in its own tasks."""

    def __init__(self, ranges: Sequence[OffsetRange], fetch: FetchOptions | None = None) -> None:
        super().__init__(tuple(ranges))
        self.ranges = tuple(ranges)
        self.fetch = fetch


def input_partitions(
    start: Mapping[tuple[str, int], int],
    end: Mapping[tuple[str, int], int],
    fetch: FetchOptions,
    *,
    split_offsets: int = DEFAULT_SPLIT_OFFSETS,
    max_tasks: int | None = None,
) -> list[KafkaInputPartition]:
    """The tasks that read `[start, end)` of each partition: ranges longer than
    `split_offsets` split, packed into at most `max_tasks` tasks (one per range when
    None), each read by one consumer with `fetch`."""
    ranges = split_ranges(start, end, max_split=split_offsets)
    groups = pack_ranges(ranges, max_tasks or len(ranges) or 1)
    logger.info(
        "kafka source: %d range(s) in %d task(s), %d offsets",
        len(ranges),
        len(groups),
        sum(r.size for r in ranges),
    )
    return [KafkaInputPartition(g, fetch) for g in groups]


def read_partition(partition: KafkaInputPartition, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The records of `partition`'s ranges as Arrow batches of `schema` (a subset of the
    source's columns, in its order)."""
    from streams.kafka.fetch import read_ranges

    fetch, conf = _consumer_config(partition)
    return read_ranges(
        list(partition.ranges),
        conf,
        schema,
        on_data_loss=fetch.on_data_loss,
        batch_records=fetch.batch_records,
    )


def partition_reader(partition: KafkaInputPartition) -> str:
    """The client `read_partition` reads `partition` with in this process: `native` (the
    column reader) or `python` (confluent-kafka's `Consumer`)."""
    from streams.kafka.fetch import reader_for

    return reader_for(_consumer_config(partition)[1])


def _consumer_config(partition: KafkaInputPartition) -> tuple[FetchOptions, dict[str, Any]]:
    from streams.kafka.fetch import consumer_config

    fetch = partition.fetch
    if fetch is None:
        raise KafkaConfigError("A Kafka input partition without fetch options.", option="fetch")
    conf = consumer_config(
        fetch.bootstrap,
        dict(fetch.client_config),
        isolation_level=fetch.isolation_level,
        size=max(r.size for r in partition.ranges),
    )
    return fetch, conf


class _Options:
    """Options of the source, parsed and checked once (the reader is re-created on
    every planning call, so this stays cheap and never connects)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        opts = {k.lower(): v for k, v in options.items()}
        self.bootstrap = opts.get("bootstrap") or opts.get("kafka.bootstrap.servers")
        if not self.bootstrap:
            raise KafkaConfigError(
                "The Kafka source needs `bootstrap` (e.g. `127.0.0.1:9092`).", option="bootstrap"
            )
        topics = opts.get("topics") or opts.get("subscribe")
        pattern = opts.get("pattern") or opts.get("subscribepattern")
        if bool(topics) == bool(pattern):
            raise KafkaConfigError(
                "The Kafka source needs exactly one of `topics` (a list) or `pattern` (a regex); "
                f"got topics=`{topics}`, pattern=`{pattern}`.",
                option="topics",
            )
        self.topics = [t.strip() for t in topics.split(",") if t.strip()] if topics else None
        try:
            self.pattern = re.compile(pattern) if pattern else None
        except re.error as e:
            raise KafkaConfigError(
                f"Topic pattern `{pattern}` is not a valid regular expression: {e}.",
                option="pattern",
            ) from e
        self.starting = parse_starting_offsets(
            opts.get("starting_offsets") or opts.get("startingoffsets") or "earliest"
        )
        mopt = opts.get("max_offsets_per_trigger") or opts.get("maxoffsetspertrigger")
        self.max_offsets = (
            _positive_int(mopt, "max_offsets_per_trigger")
            if mopt
            else DEFAULT_MAX_OFFSETS_PER_TRIGGER
        )
        self.split_offsets = _positive_int(
            opts.get("split_offsets", str(DEFAULT_SPLIT_OFFSETS)), "split_offsets"
        )
        tasks = opts.get("max_tasks")
        self.max_tasks = _positive_int(tasks, "max_tasks") if tasks else None
        self.batch_records = _positive_int(
            opts.get("batch_records", str(DEFAULT_BATCH_RECORDS)), "batch_records"
        )
        loss = opts.get("on_data_loss", "fail").lower()
        if opts.get("faildataloss") is not None:
            loss = "fail" if opts["faildataloss"].lower() == "true" else "skip"
        if loss not in ("fail", "skip"):
            raise KafkaConfigError(
                f"on_data_loss must be `fail` or `skip`, got `{loss}`.", option="on_data_loss"
            )
        self.on_data_loss = loss
        level = opts.get("isolation_level", "read_committed").lower()
        if level not in ("read_committed", "read_uncommitted"):
            raise KafkaConfigError(
                f"isolation_level must be `read_committed` or `read_uncommitted`, got `{level}`.",
                option="isolation_level",
            )
        self.isolation_level = level
        headers = opts.get("include_headers") or opts.get("includeheaders") or "true"
        if headers.lower() not in ("true", "false"):
            raise KafkaConfigError(
                f"include_headers must be `true` or `false`, got `{headers}`.",
                option="include_headers",
            )
        self.include_headers = headers.lower() == "true"
        client: dict[str, Any] = json.loads(opts.get("client_config", "{}") or "{}")
        for k, v in options.items():
            if k.lower().startswith(_CLIENT_PREFIX) and k.lower() != "kafka.bootstrap.servers":
                client[k[len(_CLIENT_PREFIX) :]] = v
        self.client_config = client
        wait = opts.get("record_wait_ms", "0")
        self.record_wait = 0.0 if wait == "0" else _positive_int(wait, "record_wait_ms") / 1000
        self.wake_file = opts.get("wake_file") or None
        ckpt = opts.get("checkpoint_location")
        subscription = subscription_text(self.topics, pattern, cluster=opts.get("cluster"))
        self.initial_log = InitialOffsetsLog(ckpt, subscription) if ckpt else None

    def matches(self, topic: str) -> bool:
        if self.topics is not None:
            return topic in self.topics
        assert self.pattern is not None
        return self.pattern.fullmatch(topic) is not None and not topic.startswith("__")


def _positive_int(value: str, option: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n <= 0:
        raise KafkaConfigError(
            f"`{option}` must be a positive integer, got `{value}`.", option=option
        )
    return n


class KafkaDataSource(DataSource):
    """`spark.readStream.format("warehouse_kafka").option("bootstrap", ...)`; see
    `streams.kafka.read_kafka_stream` for the options."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return SCHEMA if _Options(self.options).include_headers else SCHEMA_WITHOUT_HEADERS

    def streamReader(self, schema: StructType) -> KafkaStreamReader:
        return KafkaStreamReader(self.options, schema)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Driver-side planner and executor-side reader of Kafka ranges.

    Concurrency: Spark calls the driver methods from one planner thread; `read()` runs
    on a pickled copy per task, which opens its own consumer. The admin client is
    created lazily and never pickled.
    """

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self._opts = _Options(options)
        self._schema = schema
        self._admin: Any = None
        self._waiter: Any = None
        self._target: Offsets | None = None
        # The log ends the last `latestOffset` listed, for the `reportLatestOffset` that
        # Spark calls right after it (None once reported).
        self._ends: Offsets | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_admin"] = None
        state["_waiter"] = None
        return state

    # -- driver side ---------------------------------------------------------------
    def _client(self) -> Any:
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient(
                {"bootstrap.servers": self._opts.bootstrap, **self._opts.client_config}
            )
        return self._admin

    def _partitions(self) -> dict[str, list[int]]:
        from streams.kafka.admin import topic_partitions

        listed = topic_partitions(self._client(), self._opts.topics)
        return {t: ps for t, ps in listed.items() if self._opts.matches(t)}

    def _watermarks(self, parts: Mapping[str, Sequence[int]]) -> tuple[Offsets, Offsets]:
        from streams.kafka.admin import watermarks

        return watermarks(
            self._client(), parts, read_committed=self._opts.isolation_level == "read_committed"
        )

    def initialOffset(self) -> dict:
        # Spark asks again when it replays an uncommitted batch 0: answer what the first
        # call resolved, or the replay plans from a moved `latest` (initial_offsets.py).
        log = self._opts.initial_log
        if log is not None:
            saved = log.read()
            if saved is not None:
                logger.info("kafka source starts at %s (recorded in %s)", saved, log.path)
                return saved
        low, high = self._watermarks(self._partitions())
        start = to_json_dict(resolve_start(self._opts.starting, low, high))
        if log is not None:
            log.write(start)
        logger.info("kafka source starts at %s", start)
        return start

    def _check_loss(self, start: Offsets, low: Offsets, high: Offsets) -> Offsets:
        """Effective start per known partition; raises or warns on offsets already gone:
        below the log's start (retention), or past its end (the topic was deleted and
        created again, or the broker lost records it had): the query's position is then
        in a log that no longer exists, and the new log is read from its start."""
        eff: Offsets = {}
        for tp, off in start.items():
            if tp not in high:
                self._loss(tp, off, None, f"Topic `{tp[0]}` partition {tp[1]} no longer exists")
                continue
            if off < low[tp]:
                self._loss(
                    tp,
                    off,
                    low[tp],
                    f"Topic `{tp[0]}` partition {tp[1]}: offset {off} is no longer available, "
                    f"the earliest offset is {low[tp]} (deleted by retention?)",
                )
                eff[tp] = low[tp]
            elif off > high[tp]:
                self._loss(tp, off, low[tp], _behind_text(tp, off, high[tp], low[tp]))
                eff[tp] = low[tp]
            else:
                eff[tp] = off
        for tp in high:
            eff.setdefault(tp, low[tp])
        return eff

    def _loss(self, tp: tuple[str, int], expected: int, earliest: int | None, what: str) -> None:
        if self._opts.on_data_loss == "skip":
            logger.warning("%s; skipping ahead (on_data_loss=skip)", what)
            return
        raise DataLossError(
            f'{what}. Set on_data_loss="skip" to continue from the log\'s earliest offset, '
            "or reset the query's checkpoint.",
            topic=tp[0],
            partition=tp[1],
            expected_offset=expected,
            earliest_offset=earliest,
        )

    def _latest_all(self) -> tuple[Offsets, Offsets]:
        low, high = self._watermarks(self._partitions())
        return low, high

    def _ends_of(self, parts: Mapping[str, Sequence[int]]) -> Offsets:
        from streams.kafka.admin import latest_offsets

        return latest_offsets(
            self._client(), parts, read_committed=self._opts.isolation_level == "read_committed"
        )

    def _starts_of(self, parts: Mapping[str, Sequence[int]]) -> Offsets:
        from streams.kafka.admin import earliest_offsets

        return earliest_offsets(self._client(), parts)

    def prepareForTriggerAvailableNow(self) -> None:
        _, high = self._latest_all()
        self._target = high
        logger.info("kafka source: available-now target %s", to_json_dict(high))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self._opts.max_offsets:
            return ReadMaxRows(self._opts.max_offsets)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json_dict(start)
        parts = self._partitions()
        high = self._ends_of(parts)
        for _ in range(_END_CHECKS - 1):
            if not any(tp in high and off > high[tp] for tp, off in begin.items()):
                break
            # A leader that just took over can report an end below what it acknowledged
            # for a moment (KAFKA-7703, which Spark's source also asks again for).
            time.sleep(_END_CHECK_PAUSE_S)
            parts = self._partitions()
            high = self._ends_of(parts)
        if high == begin and high and self._target is None and self._opts.record_wait > 0:
            if self._wait_for_records(high):
                parts = self._partitions()
                high = self._ends_of(parts)
        self._ends = high
        if high == begin:
            # Nothing new, on the same partitions: no position is past a log's end or
            # below its start (which is at most its end), so where the logs start needs
            # no listing. An idle query asks this at every poll (docs/decisions/0057).
            return to_json_dict(high)
        eff = self._check_loss(begin, self._starts_of(parts), high)
        end: Offsets = {tp: max(high[tp], eff[tp]) for tp in high}
        if self._target is not None:
            end = cap_at(end, self._target, eff)
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(eff, end, limit.max_rows)
        # A partition the source was reading but that vanished (skip mode) drops out.
        return to_json_dict(end)

    def _wait_for_records(self, ends: Offsets) -> bool:
        """Whether a record (or an error) came in at `ends` within the wait: a consumer
        assigned at the ends fetches, and the broker holds each fetch until a record is
        in or `fetch.wait.max.ms` is over; it is unassigned before the trigger goes on,
        so it fetches nothing more (docs/decisions/0072)."""
        from confluent_kafka import TopicPartition

        if self._waiter is None:
            from confluent_kafka import Consumer

            self._waiter = Consumer(
                {
                    "bootstrap.servers": self._opts.bootstrap,
                    **self._opts.client_config,
                    # Never joins a group: `assign` only, nothing committed.
                    "group.id": f"warehouse-wait-{uuid.uuid4().hex}",
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    "enable.partition.eof": False,
                    "isolation.level": self._opts.isolation_level,
                    "fetch.wait.max.ms": _WAIT_FETCH_MS,
                    "max.partition.fetch.bytes": _WAIT_FETCH_BYTES,
                }
            )
        self._waiter.assign([TopicPartition(t, p, off) for (t, p), off in ends.items()])
        wake = self._opts.wake_file
        deadline = time.monotonic() + self._opts.record_wait
        parent = os.getppid()
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or (wake is not None and os.path.exists(wake)):
                    return False
                if os.getppid() != parent:  # Spark's JVM is gone: no one to answer
                    return False
                if self._waiter.consume(num_messages=1, timeout=min(left, _WAKE_LOOK_S)):
                    return True
        finally:
            self._waiter.unassign()

    def reportLatestOffset(self) -> dict | None:
        # Spark asks right after `latestOffset`, at every trigger, an idle query's too:
        # the ends that call listed are this trigger's, as Spark's own Kafka source
        # reports them, without asking the broker again (docs/decisions/0057).
        if self._ends is not None:
            ends, self._ends = self._ends, None
            return to_json_dict(ends)
        try:
            _, high = self._latest_all()
        except Exception as e:  # noqa: BLE001 - reporting must not fail a batch; planning reports it
            logger.debug("kafka source: latest offset not reported: %s", e)
            return None
        return to_json_dict(high)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, stop = from_json_dict(start), from_json_dict(end)
        # A partition whose end is below its start was found behind the position when the
        # batch was planned (`_check_loss`): its new log is read from its start.
        if not any(stop.get(tp, 0) != begin.get(tp, -1) for tp in stop):
            return []
        parts: dict[str, list[int]] = {}
        for t, p in stop:
            parts.setdefault(t, []).append(p)
        low, _ = self._watermarks(parts)
        eff: Offsets = {}
        for tp, hi in stop.items():
            lo = begin.get(tp)
            if lo is None:  # discovered after the batch's start: begin at earliest
                lo = low.get(tp, 0)
            elif lo > hi:
                self._loss(tp, lo, low.get(tp), _behind_text(tp, lo, hi, low.get(tp, 0)))
                lo = low.get(tp, 0)
            elif tp in low and lo < low[tp] and lo < hi:
                self._loss(
                    tp,
                    lo,
                    low[tp],
                    f"Topic `{tp[0]}` partition {tp[1]}: offset {lo} is no longer available, "
                    f"the earliest offset is {low[tp]} (deleted by retention?)",
                )
                lo = low[tp]
            eff[tp] = lo
        fetch = FetchOptions(
            self._opts.bootstrap,
            dict(self._opts.client_config),
            self._opts.isolation_level,
            self._opts.on_data_loss,
            self._opts.batch_records,
        )
        return input_partitions(
            eff, stop, fetch, split_offsets=self._opts.split_offsets, max_tasks=self._opts.max_tasks
        )

    def commit(self, end: dict) -> None:
        return None

    def stop(self) -> None:
        self._admin = None

    # -- executor side -------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[Any]:
        from pyspark.sql.pandas.types import to_arrow_schema

        freeze_imports()
        assert isinstance(partition, KafkaInputPartition)
        return read_partition(partition, to_arrow_schema(self._schema, timezone="UTC"))
