"""The tables a query's SQL reads as snapshots, kept in Spark's cache
(`snapshots: {max_age: ...}`; docs/architecture.md, "Snapshots").

Runtime state shared by the queries of one session: the compiled program reads the
kept copies (`build_program(snapshots=...)`), the runner refreshes them between
batches and releases them when the query stops.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

logger = logging.getLogger(__name__)


@dataclass
class KeptSnapshot:
    """One table a `SnapshotCache` keeps: its path, the DataFrame whose copy is cached,
    and the table's version when that copy was read (the copy holds it or a newer one).
    `users`: the caches sharing it (`kept_snapshot`)."""

    path: str
    frame: DataFrame
    version: int | None = None
    users: int = 0
    key: tuple[int, str, str] | None = None
    """Its place in the session's shared snapshots (`kept_snapshot`), if there."""


_KEPT: dict[tuple[int, str, str], KeptSnapshot] = {}
_KEPT_LOCK = threading.Lock()


def read_snapshot(spark: SparkSession, path: str, *, engine: str) -> DataFrame:
    """The latest version of a Delta table as a static DataFrame (stream–static joins)."""
    from streams.delta import delta_engine

    return delta_engine(engine).read_snapshot(spark, path)


def kept_snapshot(spark: SparkSession, path: str, *, engine: str) -> KeptSnapshot:
    """The snapshot of `path` that the queries of this session keep, shared: Spark caches
    by plan, so two copies of one table would be one entry, and a query that read its
    copy again or stopped would drop the other's. A `SnapshotCache` counts itself among
    its users; the last to release it unpersists it."""
    key = (id(spark), engine, path)
    with _KEPT_LOCK:
        k = _KEPT.get(key)
        if k is None:
            frame = read_snapshot(spark, path, engine=engine)
            k = _KEPT[key] = KeptSnapshot(path, frame, key=key)
        return k


def _release_kept(k: KeptSnapshot) -> None:
    with _KEPT_LOCK:
        k.users -= 1
        if k.users > 0:
            return
        if k.key is not None and _KEPT.get(k.key) is k:
            del _KEPT[k.key]
    k.frame.unpersist(blocking=False)


class SnapshotCache:
    """The snapshots one query keeps.

    Spark's cache manager puts a cached copy in place of every read of the same table in
    a plan, the streaming query's included, so a batch plans no Delta log read and no
    state rebuild of a new version. Once the copies are older than `max_age` seconds,
    `refresh` reads each table's version from its log and reads again the copy of each
    that has a newer one: the same DataFrame unpersisted and persisted again, so the
    streaming plan, which holds that DataFrame's plan, finds the new copy. A batch
    therefore joins a copy at most `max_age` behind its table. On the native engine a
    write to one of the tables through this session (delta-spark's commands) also
    refreshes its copy: Spark caches again every plan that reads what it writes.

    Concurrency: the runner's thread calls `refresh` and `release`; the shared copies'
    user counts are kept under a lock."""

    def __init__(
        self,
        table: str,
        kept: dict[str, KeptSnapshot],
        max_age: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.table = table
        self.kept = kept
        self.max_age = max_age
        self._clock = clock
        self.read_at = clock()
        for k in kept.values():
            with _KEPT_LOCK:
                k.users += 1
                first = k.users == 1
            if first:  # else shared: another query keeps it already
                self._read(k)

    @staticmethod
    def _read(k: KeptSnapshot) -> None:
        from streams.delta import latest_version

        k.version = latest_version(k.path)  # before the copy: it holds this or newer
        k.frame.unpersist(blocking=False)
        k.frame.persist()

    def refresh(self) -> list[str]:
        """Once the copies are older than `max_age`, read again those whose table has a
        newer version; the tables read again. A read that fails is logged and tried
        again after another `max_age`; the batches then read the table themselves, and
        fail if they cannot either."""
        now = self._clock()
        if now - self.read_at < self.max_age:
            return []
        from streams.delta import latest_version

        self.read_at = now
        read = []
        for name, k in self.kept.items():
            try:
                if k.version is not None and latest_version(k.path) == k.version:
                    continue  # the copy is the newest version
                self._read(k)
                read.append(name)
            except Exception as e:  # noqa: BLE001 - the next batch reads it and reports
                logger.warning(
                    "table %s: could not read snapshot `%s` again: %s", self.table, name, e
                )
        if read:
            logger.debug("table %s: snapshots %s read again", self.table, ", ".join(read))
        return read

    def release(self) -> None:
        """Let go of the copies (the query has stopped); one no other query keeps is
        dropped from Spark's cache."""
        for k in self.kept.values():
            _release_kept(k)
