"""`LogManager`: every partition log under one data directory, plus topic metadata.

Layout of the data directory:

    <data_dir>/topics.json          topic name -> {topic_id, partitions, configs (overrides)}
    <data_dir>/<topic>-<partition>/ one PartitionLog per partition (Kafka's layout)

`topics.json` is replaced atomically (write, fsync, rename). Topic names are
validated like Kafka's (`[a-zA-Z0-9._-]`, 1-249 characters, not `.` or `..`),
so no name can address a path outside the data directory.

Flushing: `flush_dirty()` fsyncs every log with unflushed appends: the server
calls it once per produce request under `durability=sync` (all the appends of
the request, and of requests that arrived meanwhile, share the fsyncs) and
`flush_due(now_ms)` on a timer for the interval policy. Both may run in a
thread pool while the loop thread appends.

I/O errors: the data dir is the broker's one log directory. A failed append or
fsync in any partition takes it offline (`LogDirFailureChannel`, as Kafka does):
`get_log` and `flush_dirty` then raise `KafkaStorageError`, so every produce and
fetch answers KAFKA_STORAGE_ERROR, and retention and compaction stop, until the
broker is restarted and recovery has run.

Concurrency: topic administration (create/delete/alter/add partitions, load,
close) must come from one thread (the server's loop); `get_log` and the flush,
retention and compaction methods are safe from any thread.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from streams.broker.errors import (
    InvalidPartitionsError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from streams.broker.storage.cleaner_manager import LogCleanerManager
from streams.broker.storage.config import CleanerConfig, LogConfig
from streams.broker.storage.files import (
    DELETE_DIR_SUFFIX,
    TOPICS_FILE,
    partition_dir_name,
    write_atomically,
)
from streams.broker.storage.log import PartitionLog, wall_clock_ms
from streams.broker.storage.log_dir import LogDirFailureChannel

logger = logging.getLogger(__name__)

_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")
MAX_TOPIC_NAME = 249
_FLUSH_THREADS = 8


def validate_topic_name(name: object) -> str:
    """Return `name` if Kafka would accept it as a topic name; raise `InvalidTopicError`."""
    if not isinstance(name, str) or not name:
        raise InvalidTopicError(
            f"Topic name `{name!r}` is empty or not a string; give 1-249 characters."
        )
    if name in (".", ".."):
        raise InvalidTopicError(
            f"Topic name `{name}` is not allowed; `.` and `..` are reserved.", topic=name
        )
    if len(name) > MAX_TOPIC_NAME:
        raise InvalidTopicError(
            f"Topic name `{name[:40]}...` is {len(name)} characters; the limit is {MAX_TOPIC_NAME}.",
            topic=name,
        )
    if not _LEGAL.fullmatch(name):
        bad = sorted({c for c in name if not _LEGAL.fullmatch(c)})
        raise InvalidTopicError(
            f"Topic name `{name}` contains {''.join(bad)!r}; only ASCII letters, digits, `.`, `_` "
            "and `-` are allowed.",
            topic=name,
        )
    return name


@dataclass(frozen=True)
class TopicMetadata:
    """A topic as stored in `topics.json`; `configs` are the overrides of the defaults."""

    name: str
    topic_id: str  # uuid4 hex string (Kafka's topic id)
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False


class LogManager:
    """All partition logs of a data directory; see the module docstring."""

    def __init__(
        self,
        data_dir: Path | str,
        *,
        default_config: LogConfig | None = None,
        cleaner_config: CleanerConfig | None = None,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.default_config = default_config or LogConfig()
        self.cleaner = LogCleanerManager(
            self.data_dir,
            dedupe_buffer_bytes=(cleaner_config or CleanerConfig()).dedupe_buffer_size,
        )
        self._clock = clock
        self._topics: dict[str, TopicMetadata] = {}
        self._configs: dict[str, LogConfig] = {}
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._lock = threading.RLock()
        self.failures = LogDirFailureChannel()
        self._loaded = False
        self._flush_pool: ThreadPoolExecutor | None = None

    # -- lifecycle ------------------------------------------------------------------

    def load(self) -> LogManager:
        """Read topics.json and open (recover) every partition; returns self."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for leftover in self.data_dir.glob(f"*{DELETE_DIR_SUFFIX}"):
            logger.info("Data dir %s: removing deleted partition %s", self.data_dir, leftover.name)
            shutil.rmtree(leftover, ignore_errors=True)
        path = self.data_dir / TOPICS_FILE
        if path.exists():
            try:
                raw = json.loads(path.read_text())
                topics = [TopicMetadata(**t) for t in raw["topics"]]
            except (ValueError, KeyError, TypeError) as e:
                raise UnknownServerError(
                    f"Data dir `{self.data_dir}`: `{TOPICS_FILE}` is unreadable ({e}). Restore it "
                    "from a backup or move the data dir away to start empty.",
                    path=str(path),
                ) from e
            for meta in topics:
                self._topics[meta.name] = meta
                self._configs[meta.name] = LogConfig.from_kafka(
                    meta.configs, base=self.default_config
                )
                for p in range(meta.partitions):
                    self._open_log(meta.name, p)
        self._loaded = True
        logger.info(
            "Data dir %s: loaded %d topic(s), %d partition(s)",
            self.data_dir,
            len(self._topics),
            len(self._logs),
        )
        return self

    def close(self) -> None:
        """Flush and close every log (clean shutdown)."""
        with self._lock:
            logs = list(self._logs.values())
            self._logs.clear()
            pool, self._flush_pool = self._flush_pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        for log in logs:
            try:
                log.close()
            except OSError as e:  # the data dir is offline now: the others close without a flush
                logger.error("Log %s: flush at shutdown failed: %s", log.name, e)

    def __enter__(self) -> LogManager:
        return self if self._loaded else self.load()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- topics -----------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str] | None = None,
        *,
        internal: bool = False,
    ) -> TopicMetadata:
        """Create a topic with `partitions` partitions and config overrides `configs`."""
        validate_topic_name(name)
        if name in self._topics:
            raise TopicAlreadyExistsError(f"Topic `{name}` already exists.", topic=name)
        if not isinstance(partitions, int) or partitions < 1:
            raise InvalidPartitionsError(
                f"Topic `{name}`: partition count `{partitions}` must be at least 1.", topic=name
            )
        config = LogConfig.from_kafka(dict(configs or {}), base=self.default_config)
        meta = TopicMetadata(
            name, uuid.uuid4().hex, partitions, config.overrides(self.default_config), internal
        )
        with self._lock:
            self._topics[name] = meta
            self._configs[name] = config
            self._persist()
            self.cleaner.forget(
                name
            )  # a topic of that name deleted earlier was clean, not this one
            for p in range(partitions):
                self._remove_stale_dir(name, p)
                self._open_log(name, p)
        logger.info("Created topic %s with %d partition(s) %s", name, partitions, meta.configs)
        return meta

    def delete_topic(self, name: str) -> None:
        meta = self._topic(name)
        with self._lock:
            del self._topics[name]
            del self._configs[name]
            self._persist()
            tag = uuid.uuid4().hex[:8]
            for p in range(meta.partitions):
                log = self._logs.pop((name, p), None)
                if log is not None:
                    log.close()
                src = self.data_dir / partition_dir_name(name, p)
                if src.exists():
                    dst = self.data_dir / f"{src.name}.{tag}{DELETE_DIR_SUFFIX}"
                    src.rename(dst)
                    shutil.rmtree(dst, ignore_errors=True)
            self.cleaner.forget(name)
        logger.info("Deleted topic %s", name)

    def add_partitions(self, name: str, total: int) -> TopicMetadata:
        """Grow topic `name` to `total` partitions."""
        meta = self._topic(name)
        if not isinstance(total, int) or total <= meta.partitions:
            raise InvalidPartitionsError(
                f"Topic `{name}` has {meta.partitions} partition(s); the new count `{total}` must "
                "be larger (partitions can only be added).",
                topic=name,
            )
        new = TopicMetadata(meta.name, meta.topic_id, total, meta.configs, meta.internal)
        with self._lock:
            self._topics[name] = new
            self._persist()
            for p in range(meta.partitions, total):
                self._remove_stale_dir(name, p)
                self._open_log(name, p)
        return new

    def topics(self) -> dict[str, TopicMetadata]:
        """name -> metadata of every topic."""
        return dict(self._topics)

    def find_topic(self, name: str) -> TopicMetadata | None:
        """The metadata of topic `name`, None when there is none: what a request asks of
        every partition it names, without the copy of every topic `topics()` makes."""
        return self._topics.get(name)

    def topic(self, name: str) -> TopicMetadata:
        return self._topic(name)

    def topic_config(self, name: str) -> LogConfig:
        """The effective config of topic `name` (defaults + overrides)."""
        self._topic(name)
        return self._configs[name]

    def alter_topic_config(self, name: str, changes: Mapping[str, str | None]) -> LogConfig:
        """Apply `changes` (value None resets a key to the default) and persist them."""
        meta = self._topic(name)
        config = self._configs[name].with_changes(changes)
        for key, value in changes.items():
            if value is None:
                config = config.with_changes({key: self.default_config.to_kafka()[key]})
        with self._lock:
            self._configs[name] = config
            self._topics[name] = TopicMetadata(
                meta.name,
                meta.topic_id,
                meta.partitions,
                config.overrides(self.default_config),
                meta.internal,
            )
            self._persist()
            for p in range(meta.partitions):
                self._logs[(name, p)].config = config
        return config

    def get_log(self, topic: str, partition: int) -> PartitionLog:
        """The log of one partition; raises `UnknownTopicOrPartitionError`, or
        `KafkaStorageError` when the data dir is offline."""
        log = self._logs.get((topic, partition))
        if log is None:
            raise UnknownTopicOrPartitionError(
                f"Partition `{topic}-{partition}` does not exist on this broker.",
                topic=topic,
                partition=partition,
            )
        self.failures.check(self.data_dir, name=log.name)
        return log

    @property
    def offline(self) -> bool:
        """True once an I/O error took the data dir offline (see the module docstring)."""
        return self.failures.is_offline(self.data_dir)

    def logs(self) -> list[tuple[str, int, PartitionLog]]:
        with self._lock:
            return [(t, p, log) for (t, p), log in self._logs.items()]

    # -- background work ----------------------------------------------------------------

    def flush_dirty(self) -> int:
        """fsync every log with unflushed data; returns how many were flushed.

        Logs are flushed in parallel (fsync releases the GIL and devices serve
        concurrent syncs better than a queue of them), so one call costs about
        one fsync however many partitions a produce request touched. Raises the
        `OSError` of a failed fsync, or `KafkaStorageError` once the data dir is
        offline: a produce waiting on this flush must never be acknowledged then.
        """
        self.failures.check(self.data_dir, name=str(self.data_dir))
        dirty = [log for _, _, log in self.logs() if log.dirty]
        self._flush_all(dirty)
        return len(dirty)

    def flush_due(self, now_ms: int | None = None) -> int:
        """fsync the logs whose flush.ms / flush.messages (or durability=sync) ask for it."""
        now = self._clock() if now_ms is None else now_ms
        due = [log for _, _, log in self.logs() if log.flush_due(now)]
        self._flush_all(due)
        return len(due)

    def _flush_all(self, logs: list[PartitionLog]) -> None:
        if len(logs) <= 1:
            for log in logs:
                log.flush()
            return
        with self._lock:
            if self._flush_pool is None:
                self._flush_pool = ThreadPoolExecutor(
                    max_workers=_FLUSH_THREADS, thread_name_prefix="log-flush"
                )
            pool = self._flush_pool
        for future in [pool.submit(log.flush) for log in logs]:
            future.result()

    def run_retention(self, now_ms: int | None = None) -> int:
        """Delete segments past retention.ms / retention.bytes; returns segments deleted."""
        if self.offline:
            return 0
        now = self._clock() if now_ms is None else now_ms
        return sum(log.delete_old_segments(now) for _, _, log in self.logs())

    def run_compaction(self, now_ms: int | None = None) -> int:
        """Clean the compacted logs whose dirty ratio asks for it (`LogCleanerManager`);
        returns segments rewritten."""
        if self.offline:
            return 0
        now = self._clock() if now_ms is None else now_ms
        return self.cleaner.clean_due(self.logs(), now)

    # -- internals ------------------------------------------------------------------------

    def _topic(self, name: str) -> TopicMetadata:
        meta = self._topics.get(name)
        if meta is None:
            raise UnknownTopicOrPartitionError(f"Topic `{name}` does not exist.", topic=name)
        return meta

    def _remove_stale_dir(self, topic: str, partition: int) -> None:
        """A new partition starts empty even if a crash left an old directory behind
        (e.g. between persisting a topic deletion and removing its directories)."""
        d = self.data_dir / partition_dir_name(topic, partition)
        if d.exists():
            logger.warning(
                "Data dir %s: removing stale %s before creating it", self.data_dir, d.name
            )
            dst = self.data_dir / f"{d.name}.{uuid.uuid4().hex[:8]}{DELETE_DIR_SUFFIX}"
            d.rename(dst)
            shutil.rmtree(dst, ignore_errors=True)

    def _open_log(self, topic: str, partition: int) -> PartitionLog:
        d = self.data_dir / partition_dir_name(topic, partition)
        if d.resolve().parent != self.data_dir.resolve():
            raise InvalidTopicError(
                f"Topic `{topic}` would be stored outside the data dir.", topic=topic
            )
        log = PartitionLog(
            d,
            config=self._configs[topic],
            clock=self._clock,
            name=f"{topic}-{partition}",
            failures=self.failures,
        )
        self._logs[(topic, partition)] = log
        return log

    def _persist(self) -> None:
        data = {
            "version": 1,
            "topics": [
                {
                    "name": m.name,
                    "topic_id": m.topic_id,
                    "partitions": m.partitions,
                    "configs": m.configs,
                    "internal": m.internal,
                }
                for m in sorted(self._topics.values(), key=lambda m: m.name)
            ],
        }
        write_atomically(self.data_dir / TOPICS_FILE, json.dumps(data, indent=1).encode())
