"""Send generated records to Kafka: all at once, or paced at a steady rate."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from warehouse.errors import WarehouseError
from warehouse.generate.model import TOPICS, Record
from warehouse.spec.table import TopicSource

if TYPE_CHECKING:
    from warehouse.spec.model import LoadedProject

logger = logging.getLogger(__name__)


class GenerateError(WarehouseError):
    """Producing the example's records failed."""

    exit_code = 1


class GenerateArgumentError(GenerateError):
    """`--events`/`--rate` out of range."""

    exit_code = 2


class GenerateProjectError(GenerateError):
    """The project reads none of the topics the generator produces."""

    exit_code = 2


def check_generate_project(project: LoadedProject) -> None:
    """Refuse a project none of whose tables reads a topic of the example's: the
    generator's events would go to topics nothing reads (a `warehouse init` project reads
    `events`). A project reading some of them (the example, or part of it) is fed."""
    read = {
        name: (defn, defn.spec.source.kafka)
        for name, defn in project.tables.items()
        if isinstance(defn.spec.source, TopicSource)
    }
    for _, k in read.values():
        if any(t in TOPICS for t in k.topic_list):
            return
        if k.pattern and any(re.fullmatch(k.pattern, t) for t in TOPICS):
            return
    produces = ", ".join(f"`{t}`" for t in TOPICS)
    if not read:
        reads = "no table of this project reads Kafka"
    else:
        name, (defn, k) = next(iter(read.items()))
        topics = ", ".join(f"`{t}`" for t in k.topic_list) or f"the pattern `{k.pattern}`"
        reads = f"this project reads none of them (table `{name}` ({defn.path}) reads {topics})"
    raise GenerateProjectError(
        f"`warehouse generate` produces the bundled example's events to {produces}, and "
        f"{reads}. Feed this project's topics with `warehouse produce --topic T FILE` "
        "(JSON lines), or run the generator in the example project (the repository's root)."
    )


@dataclass
class ProduceStats:
    """What was sent: records per topic, and the wall time it took."""

    records: int = 0
    per_topic: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    def line(self) -> str:
        topics = ", ".join(f"{t} {n}" for t, n in sorted(self.per_topic.items()))
        return f"produced {self.records} records in {self.seconds:.1f}s ({topics})"


def ensure_topics(bootstrap: str, *, client_config: Mapping[str, Any] | None = None) -> None:
    """Create the example's source topics (with their partition counts) when missing."""
    from streams.kafka import ensure_topic

    for topic, partitions in TOPICS.items():
        ensure_topic(bootstrap, topic, partitions=partitions, client_config=client_config)


def _wait_until(deadline: float, stop: threading.Event | None) -> bool:
    """Sleep until `deadline` (monotonic seconds); True when `stop` was set meanwhile."""
    wait = deadline - time.monotonic()
    if wait <= 0:
        return False
    if stop is not None:
        return stop.wait(wait)
    time.sleep(wait)
    return False


def _send(producer: Any, rec: Record, delivered: Callable[[Any, Any], None]) -> None:
    """Hand `rec` to the client, waiting for room in its queue while it is full."""
    while True:
        try:
            producer.produce(rec.topic, key=rec.key, value=rec.value, on_delivery=delivered)
            return
        except BufferError:
            producer.poll(0.1)


def produce_records(
    bootstrap: str,
    records: Iterable[Record],
    *,
    pace_from: float | None = None,
    client_config: Mapping[str, Any] | None = None,
    stop: threading.Event | None = None,
    progress: Callable[[ProduceStats], None] | None = None,
    on_sent: Callable[[Record, float], None] | None = None,
    progress_every: int = 1000,
) -> ProduceStats:
    """Produce `records` in order. With `pace_from`, a record whose `Record.at` is past it
    waits until `at - pace_from` seconds after the call started, so arrivals follow the
    generator's timeline in real time (earlier records go at once).

    `on_sent(record, wall_time)` is called as each record is handed to the client
    (the latency benchmark uses it); `stop` ends a paced run early.
    """
    from confluent_kafka import KafkaException, Producer

    conf = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "linger.ms": 5 if pace_from is not None else 20,
        "compression.type": "none",
        **dict(client_config or {}),
    }
    producer = Producer(conf)
    errors: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(f"{msg.topic()}: {err.str()}")

    stats = ProduceStats()
    started = time.monotonic()
    try:
        for rec in records:
            if stop is not None and stop.is_set():
                break
            if pace_from is not None and rec.at > pace_from:
                if _wait_until(started + (rec.at - pace_from), stop):
                    break
            _send(producer, rec, delivered)
            if on_sent is not None:
                on_sent(rec, time.time())
            producer.poll(0)
            stats.records += 1
            stats.per_topic[rec.topic] += 1
            if progress is not None and stats.records % progress_every == 0:
                stats.seconds = time.monotonic() - started
                progress(stats)
            if errors:
                break
        left = producer.flush(60)
    except KafkaException as e:
        raise GenerateError(f"producing to `{bootstrap}` failed: {e}") from e
    stats.seconds = time.monotonic() - started
    if errors or left:
        detail = "; ".join(errors[:3]) or f"{left} record(s) not delivered within 60s"
        raise GenerateError(
            f"producing the example's records to `{bootstrap}` failed: {detail}. "
            "Check that the broker is running (`warehouse broker status`)."
        )
    logger.info("%s", stats.line())
    return stats
