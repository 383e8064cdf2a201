"""The `foreachBatch` function of a table on a Spark Connect session.

Under Spark Connect the client pickles the function given to `foreachBatch` and the
server runs it in a Python worker of its own, for the whole life of the query. That
worker shares no memory with the client: `BatchWriter`'s lock, the run's `BatchGate`,
its `BatchStats` and callbacks would be copies nobody reads. So what travels is only
what a batch needs to write, `RemoteBatches`: the table's program without its stream
(the query's own plan), its write strategies built on the server at the first batch,
and the publisher of a published view. The client learns what happened from the query
(its progress, its exception) and from each batch's outcome, which the worker writes
next to the query's checkpoint (`write_outcome`, `<checkpoint>/warehouse-outcomes/<id>.json`)
before the batch returns and the client reads once the progress shows the batch
(`read_outcome`); `BatchWriter.function` chooses which function a query gets, once, when
the query starts.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from typing import TYPE_CHECKING, Any, NamedTuple

import streams.storage as storage
from warehouse.write import BatchContext, Outcome, WriteStrategy, strategies

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from streams.cdc import Publisher
    from warehouse.compile.program import TableProgram

logger = logging.getLogger(__name__)


class RemoteBatches:
    """Picklable callable for `foreachBatch` on Spark Connect: runs each batch through the
    table's write strategies and publishes after the commit, in the server's worker.

    Concurrency: Spark calls it one batch at a time in one worker process; nothing in it
    is shared with the client after pickling."""

    def __init__(self, program: TableProgram) -> None:
        # The stream is the query's plan, on the client's session: not the worker's to hold.
        self.program = dataclasses.replace(program, stream=None)  # type: ignore[arg-type]
        self._strategies: tuple[WriteStrategy, ...] | None = None
        self._publisher: Publisher | None = None
        self._dead_letters: Publisher | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"program": self.program}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.program = state["program"]
        self._strategies = None
        self._publisher = None
        self._dead_letters = None

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        if self._strategies is None:
            self._strategies = strategies(self.program)
        batch = BatchContext(self.program, batch_df, batch_id)
        try:
            for strategy in self._strategies:
                out = strategy.write(batch)
                if out is not None:
                    break
            else:
                raise AssertionError(f"table {self.program.name}: no strategy wrote the batch")
            if out.rows_in <= 0 and out.written <= 0 and out.quarantined == 0:
                run_plan(batch_df)  # an empty batch (none read, or not counted)
            sent = self._send_dead_letters() if self.program.dead_letters is not None else 0
            published = self._publish() if self.program.publish is not None else 0
        finally:
            batch.close()
            leave_release_to_the_server(batch_df)
        write_outcome(
            self.program.targets.checkpoint,
            batch_id,
            RemoteOutcome(
                out,
                batch.warned,
                time.monotonic() - started,
                published=published,
                dead_letters=sent,
            ),
        )

    def _send_dead_letters(self) -> int:
        if self._dead_letters is None:
            self._dead_letters = self.program.new_dead_letter_publisher()
        return self._dead_letters.publish().records

    def _publish(self) -> int:
        if self._publisher is None:
            self._publisher = self.program.new_publisher()
        return self._publisher.publish().records


def run_plan(batch_df: DataFrame) -> None:
    """Run an empty batch's plan once more, into Spark's `noop` sink.

    On a Connect server a write of an empty batch may commit nothing without running the
    batch's plan (its rows were none), and a stateful query then fails the batch: its
    state stores did not commit ("STATE_STORE_COMMIT_VALIDATION_FAILED ... Expected 2
    commits but got 0"). Running the plan commits them; an empty batch costs little."""
    batch_df.write.format("noop").mode("overwrite").save()


def leave_release_to_the_server(batch_df: DataFrame) -> None:
    """Keep pyspark's worker from asking the server to drop the batch's DataFrame.

    The server drops it itself once the function returns (Spark's
    `StreamingForeachBatchHelper`). The worker also asks, when the batch's DataFrame is
    garbage-collected (`CachedRemoteRelation.__del__`, right after the function returns),
    with a call that has no deadline and can wait forever for an answer the server has
    sent (SPARK-58846): the batch never returns, and the query and the run wait on it.
    Clearing the relation's id, after the batch's last use of it, makes that call none."""
    plan = getattr(batch_df, "_plan", None)
    if type(plan).__name__ == "CachedRemoteRelation" and hasattr(plan, "_relation_id"):
        plan._relation_id = None


OUTCOMES = "warehouse-outcomes"
"""The folder of a Connect query's checkpoint that holds its batches' outcomes."""


def _outcome_location(checkpoint: str, batch_id: int) -> str:
    return storage.join(checkpoint, OUTCOMES, f"{batch_id}.json")


class RemoteOutcome(NamedTuple):
    """What a batch on a Connect server did: its write strategy's `outcome`, the rows that
    failed each `warn` expectation, its seconds, and the records it published to the
    table's view and sent to its dead-letter topic after its commits."""

    outcome: Outcome
    warned: dict[str, int]
    seconds: float
    published: int = 0
    dead_letters: int = 0


def write_outcome(checkpoint: str, batch_id: int, done: RemoteOutcome) -> None:
    """Record what batch `batch_id` did for the client (`read_outcome`): one small file,
    written whole, before the batch returns and so before its progress is reported."""
    record = {
        **done.outcome._asdict(),
        "warned": done.warned,
        "seconds": round(done.seconds, 3),
        "published": done.published,
        "dead_letters": done.dead_letters,
    }
    storage.write_text(_outcome_location(checkpoint, batch_id), json.dumps(record))


def read_outcome(checkpoint: str, batch_id: int) -> RemoteOutcome | None:
    """What the worker recorded of batch `batch_id` (`write_outcome`), removed once read;
    None when there is no record (a batch that ran before the worker wrote them)."""
    location = _outcome_location(checkpoint, batch_id)
    text = storage.read_text(location)
    if text is None:
        return None
    record = json.loads(text)
    storage.remove(location)
    return RemoteOutcome(
        Outcome(*(record[f] for f in Outcome._fields)),
        {str(k): int(v) for k, v in record["warned"].items()},
        float(record["seconds"]),
        int(record.get("published", 0)),
        int(record.get("dead_letters", 0)),
    )
