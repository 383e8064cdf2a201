"""Topic administration and producing for the framework, the generator and tests.

Thin, blocking helpers over confluent-kafka's `AdminClient` and `Producer`:
every call waits for the broker's answer and raises `KafkaAdminError` naming
the topic when the broker says no.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic, OffsetSpec

from streams.kafka.errors import KafkaAdminError

logger = logging.getLogger(__name__)

Records = Iterable[tuple[bytes | str | None, bytes | str | None]]

_TIMEOUT_S = 30.0


def admin_client(bootstrap: str, client_config: Mapping[str, Any] | None = None) -> AdminClient:
    """An admin client of `bootstrap`, for a caller that keeps one to pass to `end_offsets`;
    its connections close when the last reference to it is dropped."""
    return AdminClient({"bootstrap.servers": bootstrap, **dict(client_config or {})})


def _wait_for_partitions(admin: AdminClient, topic: str, partitions: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    seen = -1
    while time.monotonic() < deadline:
        md = admin.list_topics(topic=topic, timeout=10)
        tmd = md.topics.get(topic)
        if tmd is not None and tmd.error is None:
            seen = len(tmd.partitions)
            if seen >= partitions and all(p.leader >= 0 for p in tmd.partitions.values()):
                return
        time.sleep(0.05)
    raise KafkaAdminError(
        f"Topic `{topic}`: metadata still shows {seen} partition(s) with a leader after "
        f"{timeout:.0f}s, expected {partitions}. Check that the broker is healthy.",
        topic=topic,
    )


def ensure_topic(
    bootstrap: str,
    topic: str,
    *,
    partitions: int = 1,
    config: Mapping[str, str] | None = None,
    client_config: Mapping[str, Any] | None = None,
    timeout: float = _TIMEOUT_S,
) -> None:
    """Create `topic` if it does not exist (idempotent) and wait until metadata shows it.

    An existing topic with fewer partitions is grown to `partitions`; its config is
    left alone. A new topic gets the broker's `default.replication.factor` (replication
    factor -1 in the request), so it is replicated on a cluster and has one copy on the
    bundled single-node broker.
    """
    admin = admin_client(bootstrap, client_config)
    new = NewTopic(
        topic,
        num_partitions=partitions,
        replication_factor=-1,
        config={k: str(v) for k, v in (config or {}).items()},
    )
    future = admin.create_topics([new], operation_timeout=timeout, request_timeout=timeout)[topic]
    try:
        future.result(timeout=timeout)
        logger.info("created topic %s with %d partition(s)", topic, partitions)
    except TimeoutError as e:
        raise KafkaAdminError(
            f"Topic `{topic}` could not be created on `{bootstrap}`: no answer within "
            f"{timeout:g}s. Check that the broker is running and reachable there.",
            topic=topic,
        ) from e
    except KafkaException as e:
        err = e.args[0]
        if err.code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise KafkaAdminError(
                f"Topic `{topic}` could not be created on `{bootstrap}`: {err.str()}.",
                topic=topic,
            ) from e
        md = admin.list_topics(topic=topic, timeout=timeout).topics.get(topic)
        have = len(md.partitions) if md is not None else 0
        if 0 < have < partitions:
            grow = admin.create_partitions([NewPartitions(topic, partitions)])[topic]
            try:
                grow.result(timeout=timeout)
            except KafkaException as ge:
                raise KafkaAdminError(
                    f"Topic `{topic}`: could not grow from {have} to {partitions} partitions: "
                    f"{ge.args[0].str()}.",
                    topic=topic,
                ) from ge
            logger.info("grew topic %s from %d to %d partitions", topic, have, partitions)
    _wait_for_partitions(admin, topic, partitions, timeout)


def add_partitions(
    bootstrap: str,
    topic: str,
    total: int,
    *,
    client_config: Mapping[str, Any] | None = None,
    timeout: float = _TIMEOUT_S,
) -> None:
    """Grow `topic` to `total` partitions and wait until metadata shows them."""
    admin = admin_client(bootstrap, client_config)
    try:
        admin.create_partitions([NewPartitions(topic, total)])[topic].result(timeout=timeout)
    except KafkaException as e:
        raise KafkaAdminError(
            f"Topic `{topic}`: could not grow to {total} partitions: {e.args[0].str()}.",
            topic=topic,
        ) from e
    _wait_for_partitions(admin, topic, total, timeout)


def _as_bytes(v: bytes | str | None) -> bytes | None:
    return v.encode() if isinstance(v, str) else v


def produce(
    bootstrap: str,
    topic: str,
    records: Records,
    *,
    partition: int | None = None,
    client_config: Mapping[str, Any] | None = None,
    timeout: float = 60.0,
) -> int:
    """Produce `(key, value)` records to `topic`, flush, and return how many were delivered.

    Raises `KafkaAdminError` naming the topic and the first delivery error when any
    record was not acknowledged.
    """
    conf = {
        "bootstrap.servers": bootstrap,
        "linger.ms": 5,
        "batch.num.messages": 10000,
        "queue.buffering.max.messages": 500000,
        "enable.idempotence": False,
        **dict(client_config or {}),
    }
    producer = Producer(conf)
    errors: list[str] = []
    delivered = 0

    def on_delivery(err: KafkaError | None, _msg: object) -> None:
        nonlocal delivered
        if err is not None:
            errors.append(err.str())
        else:
            delivered += 1

    extra = {} if partition is None else {"partition": partition}
    for key, value in records:
        while True:
            try:
                producer.produce(
                    topic,
                    value=_as_bytes(value),
                    key=_as_bytes(key),
                    on_delivery=on_delivery,
                    **extra,
                )
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(timeout)
    if remaining:
        errors.append(f"{remaining} record(s) still unacknowledged after {timeout:.0f}s")
    if errors:
        raise KafkaAdminError(
            f"Topic `{topic}`: {len(errors)} record(s) not delivered to `{bootstrap}`; "
            f"first error: {errors[0]}.",
            topic=topic,
        )
    return delivered


def produce_json(
    bootstrap: str,
    topic: str,
    rows: Iterable[Mapping[str, Any] | None],
    *,
    key: str | Sequence[str] | Callable[[Mapping[str, Any]], Any] | None = None,
    client_config: Mapping[str, Any] | None = None,
) -> int:
    """Produce each row as a JSON value; `key` is a field name, a list of fields (JSON
    object key), or a function of the row. A `None` row is produced as a tombstone
    only through `produce`; here it is rejected."""

    def key_of(row: Mapping[str, Any]) -> bytes | None:
        if key is None:
            return None
        if callable(key):
            k = key(row)
        elif isinstance(key, str):
            k = row[key]
        else:
            return json.dumps({f: row[f] for f in key}, separators=(",", ":")).encode()
        return None if k is None else (k if isinstance(k, bytes) else str(k).encode())

    def records() -> Iterable[tuple[bytes | None, bytes]]:
        for i, row in enumerate(rows):
            if row is None:
                raise KafkaAdminError(
                    f"Topic `{topic}`: row {i} is None; produce tombstones with `produce` "
                    "and an explicit key.",
                    topic=topic,
                )
            yield key_of(row), json.dumps(row, separators=(",", ":"), default=str).encode()

    return produce(bootstrap, topic, records(), client_config=client_config)


def _list_offsets(
    admin: AdminClient,
    tps: list[TopicPartition],
    spec: OffsetSpec,
    *,
    read_committed: bool,
    timeout: float,
) -> dict[tuple[str, int], int]:
    if not tps:
        return {}
    from confluent_kafka import IsolationLevel

    level = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
    futures = admin.list_offsets(
        {tp: spec for tp in tps}, isolation_level=level, request_timeout=timeout
    )
    out: dict[tuple[str, int], int] = {}
    for tp, fut in futures.items():
        try:
            out[(tp.topic, tp.partition)] = fut.result(timeout=timeout).offset
        except KafkaException as e:
            raise KafkaAdminError(
                f"Topic `{tp.topic}` partition {tp.partition}: listing offsets failed: "
                f"{e.args[0].str()}.",
                topic=tp.topic,
            ) from e
    return out


def topic_partitions(
    admin: AdminClient, topics: Iterable[str] | None = None, *, timeout: float = _TIMEOUT_S
) -> dict[str, list[int]]:
    """Partitions per topic from metadata; `topics=None` lists every non-internal topic."""
    md = admin.list_topics(timeout=timeout)
    wanted = None if topics is None else set(topics)
    out: dict[str, list[int]] = {}
    for name, tmd in md.topics.items():
        if wanted is not None and name not in wanted:
            continue
        if wanted is None and name.startswith("__"):
            continue
        if tmd.error is not None and tmd.error.code() != KafkaError.NO_ERROR:
            continue
        out[name] = sorted(tmd.partitions)
    return out


def watermarks(
    admin: AdminClient,
    partitions: Mapping[str, Sequence[int]],
    *,
    read_committed: bool = True,
    timeout: float = _TIMEOUT_S,
) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """`(earliest, latest)` offset per `(topic, partition)`. With `read_committed` the
    latest is the last stable offset (no open transaction's records beyond it)."""
    return earliest_offsets(admin, partitions, timeout=timeout), latest_offsets(
        admin, partitions, read_committed=read_committed, timeout=timeout
    )


def earliest_offsets(
    admin: AdminClient, partitions: Mapping[str, Sequence[int]], *, timeout: float = _TIMEOUT_S
) -> dict[tuple[str, int], int]:
    """Where the log of every `(topic, partition)` starts (the first offset retention or a
    deletion left)."""
    tps = [TopicPartition(t, p) for t, ps in partitions.items() for p in ps]
    return _list_offsets(admin, tps, OffsetSpec.earliest(), read_committed=False, timeout=timeout)


def latest_offsets(
    admin: AdminClient,
    partitions: Mapping[str, Sequence[int]],
    *,
    read_committed: bool = True,
    timeout: float = _TIMEOUT_S,
) -> dict[tuple[str, int], int]:
    """Where the log of every `(topic, partition)` ends; with `read_committed`, the last
    stable offset."""
    tps = [TopicPartition(t, p) for t, ps in partitions.items() for p in ps]
    return _list_offsets(
        admin, tps, OffsetSpec.latest(), read_committed=read_committed, timeout=timeout
    )


def log_offsets(
    bootstrap: str,
    topics: Iterable[str],
    *,
    client_config: Mapping[str, Any] | None = None,
) -> tuple[dict[str, dict[int, int]], dict[str, dict[int, int]]]:
    """`(start, end)`: where the log of every partition of `topics` starts (the first
    offset retention or a deletion left) and ends, `{topic: {partition: offset}}`. A
    topic that does not exist is left out."""
    admin = admin_client(bootstrap, client_config)
    parts = topic_partitions(admin, list(topics))
    low, high = watermarks(admin, parts, read_committed=False)
    start: dict[str, dict[int, int]] = {t: {} for t in parts}
    end: dict[str, dict[int, int]] = {t: {} for t in parts}
    for (t, p), off in low.items():
        start[t][p] = off
    for (t, p), off in high.items():
        end[t][p] = off
    return start, end


def end_offsets(
    bootstrap: str,
    topics: str | Iterable[str],
    *,
    client_config: Mapping[str, Any] | None = None,
    read_committed: bool = False,
    admin: AdminClient | None = None,
) -> dict[str, dict[int, int]]:
    """The log end offset of every partition of `topics`: `{topic: {partition: offset}}`.
    `admin`: a client to ask with, kept by a caller that asks again and again; else one
    is made for this call."""
    names = [topics] if isinstance(topics, str) else list(topics)
    if admin is None:
        admin = admin_client(bootstrap, client_config)
    parts = topic_partitions(admin, names)
    missing = [t for t in names if t not in parts]
    if missing:
        raise KafkaAdminError(
            f"Topic `{missing[0]}` does not exist on `{bootstrap}`; create it with "
            "`ensure_topic` first.",
            topic=missing[0],
        )
    _, high = watermarks(admin, parts, read_committed=read_committed)
    out: dict[str, dict[int, int]] = {t: {} for t in names}
    for (t, p), off in high.items():
        out[t][p] = off
    return out
