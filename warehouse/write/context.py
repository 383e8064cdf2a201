"""What every write strategy shares: one batch (`BatchContext`), what a strategy did with
it (`Outcome`), and reading an `Observation` without blocking (`observed`).

pyspark is imported inside functions.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Observation, SparkSession

    from warehouse.compile.program import TableProgram

logger = logging.getLogger(__name__)


class Outcome(NamedTuple):
    """What a strategy did with a batch (version None: already committed)."""

    rows_in: int
    written: int
    quarantined: int
    dropped: int
    version: int | None


class BatchContext:
    """One micro-batch of one table, as its write strategies see it: the batch's frame,
    its commit info, the frames persisted and views registered for it (released by
    `close`), its quarantine and quality events.

    Concurrency: one per batch, used from the query thread only."""

    def __init__(
        self, program: TableProgram, df: DataFrame, batch_id: int, *, may_replay: bool = True
    ) -> None:
        self.program = program
        self.df = df
        self.batch_id = batch_id
        self.may_replay = may_replay
        """False when the batch cannot be a replay: it is not the first batch of its
        query's start (Spark replays only the newest batch of the offset log, the first
        one a start runs)."""
        self.registered: list[str] = []
        """Temporary views registered for this batch (dropped by `close`)."""
        self.warned: dict[str, int] = {}
        """Rows that failed a `warn` expectation (its quality events' `failed`), by
        expectation."""
        self._cached: list[DataFrame] = []
        self._info: dict[str, Any] | None = None
        self._replay: bool | None = None

    @property
    def spark(self) -> SparkSession:
        return self.df.sparkSession

    @property
    def table(self) -> str:
        return self.program.name

    @property
    def info(self) -> dict[str, Any]:
        """What each commit of this batch records (`Targets.commit_info`), read once."""
        if self._info is None:
            self._info = self.program.targets.commit_info(self.batch_id)
        return self._info

    @property
    def replay(self) -> bool:
        """Whether the table already has this batch (a replay after a crash between the
        Delta commit and Spark's commit log), asked once, and only of a batch that may be
        one (`may_replay`). Each write's own guard still skips a batch its table has."""
        if self._replay is None:
            self._replay = self.may_replay and self.program.targets.committed(self.batch_id)
        return self._replay

    def cache(self, frame: DataFrame) -> DataFrame:
        """`frame` persisted for the rest of the batch (unpersisted by `close`)."""
        frame = frame.persist()
        self._cached.append(frame)
        return frame

    def write(self, df: DataFrame) -> int | None:
        """Commit `df` to the table as this batch; the new version, or None when the batch
        was already committed."""
        return self.program.targets.write(df, self.batch_id, self.info)

    def parse_quarantine(self, bad: DataFrame) -> DataFrame:
        """Quarantine rows of the `bad` frame of `parse_kafka`."""
        from warehouse.quality.quarantine import quarantine_from_parse_errors

        return quarantine_from_parse_errors(bad, batch_id=self.batch_id)

    def write_quarantine(self, parts: list[DataFrame], *, rows: int | None = None) -> int:
        """Union the quarantine frames and commit them if there is any row; the rows
        committed (none when the quarantine already has this batch: a replay). `rows`:
        their number when the caller knows it exactly; else they are persisted and
        counted first."""
        q = union(parts)
        if rows is None:
            q = self.cache(q)
            rows = q.count()
        if (
            rows
            and self.program.targets.write(q, self.batch_id, self.info, quarantine=True) is None
        ):
            return 0
        return rows

    def record_quality(self, metrics: list[dict[str, Any]]) -> None:
        """Write the batch's per-expectation metrics to `_quality_events` and count the
        rows that failed a `warn` expectation."""
        from warehouse.quality.events import write_quality_events

        for m in metrics:
            if m["on_violation"] == "warn" and m["failed"]:
                self.warned[m["expectation"]] = self.warned.get(m["expectation"], 0) + int(
                    m["failed"]
                )
        write_quality_events(
            self.spark,
            self.program.events_root,
            metrics,
            app_id=self.program.targets.app_id(),
            batch_id=self.batch_id,
            retention=self.program.events_retention,
        )

    def close(self) -> None:
        """Unpersist what the batch persisted and drop the views it registered."""
        for frame in reversed(self._cached):
            frame.unpersist()
        self._cached.clear()
        for view in self.registered:
            self.spark.catalog.dropTempView(view)
        self.registered.clear()


def observed(observation: Observation | None, *, wait: float = 10.0) -> dict[str, Any] | None:
    """An `Observation`'s metrics once an action has reported them, waiting up to `wait`
    seconds; else None. (`Observation.get` would block forever when no action ran the
    observed plan.)"""
    if observation is None:
        return None
    # pyspark's Java-side Observation: the only way to ask whether an action has
    # reported the metrics without blocking (pyspark has no public non-blocking check).
    jo = getattr(observation, "_jo", None)
    if jo is None:
        # Spark Connect's Observation: the response of the action that ran the observed
        # plan fills it before the action returns; empty until then.
        result = getattr(observation, "_result", None)
        return dict(result) if result else None
    deadline = time.monotonic() + wait
    while not jo.future().isCompleted():
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.01)
    return observation.get


def union(frames: list[DataFrame]) -> DataFrame:
    """The frames' rows in one frame, by column name."""
    out = frames[0]
    for other in frames[1:]:
        out = out.unionByName(other)
    return out
