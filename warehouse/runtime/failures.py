"""Which query failures starting the query again cures, and how often to try.

A streaming Python data source's worker may miss Spark's fixed window to connect
back to the JVM on a busy machine (`TRANSIENT_ERRORS`); the runner starts such a
query again under a `RetryPolicy`. Everything else is a real failure, reported by
`query_failure`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from warehouse.errors import root_cause_line
from warehouse.runtime.errors import QueryFailedError

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery

    from warehouse.compile.plan import TablePlan
    from warehouse.runtime.writer import BatchStats

TRANSIENT_ERRORS: tuple[str, ...] = (
    "Python worker failed to connect back",
    "Timed out while waiting for the Python worker to connect back",
)
"""Query failures that starting the query again cures. Spark gives each new Python worker
a fixed 10 s to connect back to the JVM (`PythonWorkerFactory.createSimpleWorker`; Spark
4.3 has no setting for it, and `spark.python.worker.reuse` does not apply: every
streaming Python data source starts its own worker when its query starts). On a busy
machine starting several such queries, a worker can miss that window."""


def is_transient(error: BaseException | str | None) -> bool:
    """Whether `error` (an exception, or its text) is one of `TRANSIENT_ERRORS`."""
    texts: list[str] = []
    seen: set[int] = set()
    while isinstance(error, BaseException) and id(error) not in seen:
        seen.add(id(error))
        texts += [str(error), str(getattr(error, "_stackTrace", "") or "")]
        error = error.__cause__ or error.__context__
    if isinstance(error, str):
        texts.append(error)
    return any(t in text for text in texts for t in TRANSIENT_ERRORS)


@dataclass(frozen=True)
class RetryPolicy:
    """How often a query that failed transiently is started again, and the pauses between."""

    attempts: int = 8
    """Starts per table, the first included (5 s + 10 + 20 + 40 + 3 x 60 s of pauses: at
    load average 20 on 2 cores, a query with two Python sources missed the window 4 times
    in a row)."""
    pause: float = 5.0
    """Seconds before the second start; doubled for each further one, up to `max_pause`."""
    max_pause: float = 60.0

    def pause_before(self, attempt: int) -> float:
        return min(self.max_pause, self.pause * 2 ** max(0, attempt - 2))


STATE_CHANGED: tuple[str, ...] = (
    "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE",
    "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE",
    "STATE_STORE_INVALID_VALUE_SCHEMA_EVOLUTION",
    "STATE_STORE_COLUMN_FAMILY_SCHEMA_INCOMPATIBLE",
    "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA",
    "STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY",
)
"""Spark's errors for a checkpoint whose state (an aggregate's, a deduplication's, a join's)
was written by a different definition of the table: its SQL's measures or groups, its
dedupe keys, its operators changed. Starting again does not cure them; starting the
table over from its input does."""


INPUT_REPLACED: tuple[str, ...] = (
    "DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE",
    "was replaced since this stream last read it",
)
"""delta-spark's error, and the Python Delta source's words
(`streams.delta.source.TABLE_REPLACED`), for a checkpoint whose position is in an input
table that has since been replaced (`warehouse reset`, or deleted and written again):
the position names nothing in the new table, so the reader starts over."""


DATA_LOSS = (
    # The Python source (streams.kafka's DataLossError).
    re.compile(
        r"Topic `(?P<topic>[^`]+)` partition (?P<partition>\d+): the query's position is "
        r"offset (?P<position>\d+), but the partition's log ends at offset (?P<end>\d+)"
    ),
    # Spark's Kafka source (`failOnDataLoss`).
    re.compile(
        r"Partition (?P<topic>\S+)-(?P<partition>\d+)(?:'s)? offset was changed from "
        r"(?P<position>\d+) to (?P<end>\d+)"
    ),
)
"""A Kafka source that found a partition's log ending below the query's position."""


def _data_loss(plan: TablePlan, text: str) -> QueryFailedError | None:
    """A table whose topic's log ends below its position: where, and the two ways on."""
    found = next((m for m in (r.search(text) for r in DATA_LOSS) if m is not None), None)
    if found is None:
        return None
    topic, partition, position, end = found.group("topic", "partition", "position", "end")
    return QueryFailedError(
        f"Table `{plan.name}` ({plan.file}): topic `{topic}` partition {partition} ends at "
        f"offset {end}, below offset {position}, where the table's checkpoint "
        f"{plan.checkpoint_path} is: the topic was deleted and created again, or the broker "
        "lost records it had acknowledged. Nothing was written. To go on in the log there "
        f"is now, set `on_data_loss: skip` under `source.kafka` in {plan.file} (each batch "
        "that skips records this way records them as `warehouse.dataLoss` in its commit "
        f"info); to rebuild the table from the topic as it is: `warehouse run "
        f"--full-refresh {plan.name}`.",
        table=plan.name,
        layer=plan.layer,
    )


def query_failure(
    plan: TablePlan,
    stats: BatchStats,
    query: StreamingQuery | None,
    e: BaseException | None,
    *,
    readers: Sequence[str] = (),
) -> QueryFailedError:
    """The error a failed query is reported with: a `WarehouseError` our code raised as it
    is, anything else as `QueryFailedError` quoting its root cause. `readers` are the
    tables that read this one as a stream, directly or not: a table started over takes
    them with it."""
    cause = stats.error or e
    if cause is not None and hasattr(cause, "exit_code"):
        return cause  # type: ignore[return-value]  # a WarehouseError from our code
    text = str(cause) if cause is not None else str(query.exception() if query else "")
    first = root_cause_line(text)
    code = next((c for c in STATE_CHANGED if f"[{c}]" in text), None)
    if code is not None:
        # Spark's first sentence of it, without the STREAM_FAILED wrapping around it.
        said = text[text.find(f"[{code}]") :].splitlines()[0].split(". ")[0].rstrip(".")
        why = (
            f"the state its checkpoint {plan.checkpoint_path} keeps no longer fits its "
            f"definition ({said}): its aggregation, deduplication, join or their keys "
            "changed since that state was written"
        )
        keep = "restore the definition the checkpoint was written with"
        return _start_over(plan, why, readers, keep=keep)
    types = getattr(cause, "types", None)  # streams.delta's DeltaSchemaError
    if types is not None:
        return _type_changed(plan, str(getattr(cause, "column", "")), *types, readers=readers)
    partitioning = getattr(cause, "partitioning", None)  # the same error, of `partition_by`
    if partitioning is not None:
        return _partitioning_changed(plan, *partitioning, readers=readers)
    lost = _data_loss(plan, text) if plan.source_kind == "kafka" else None
    if lost is not None:
        return lost
    if any(m in text for m in INPUT_REPLACED):
        inputs = " or ".join(f"`{u}`" for u in plan.upstreams) or "its input table"
        why = (
            f"its input table {inputs} was replaced (reset, or deleted and written again) "
            f"since its checkpoint {plan.checkpoint_path} last read it, and the position "
            "the checkpoint holds is in the old table"
        )
        return _start_over(plan, why, readers)
    return QueryFailedError(
        f"Table `{plan.name}` (layer `{plan.layer}`): the streaming query failed: "
        f"{first.rstrip('.')}. Fix the cause and run again; the checkpoint "
        f"{plan.checkpoint_path} resumes where the last committed batch ended.",
        table=plan.name,
        layer=plan.layer,
    )


def build_failure(
    table: str, layer: str, e: BaseException, *, inputs: Sequence[str] = ()
) -> QueryFailedError:
    """The error a table whose query could not be built is reported with (an input table
    Delta cannot read, a source that refuses its options): names the table, quotes the
    cause and lists the `inputs` to look at (descriptions such as "table `x` at PATH")."""
    line = root_cause_line(e).rstrip(".")
    if ":" not in line.split(" ", 1)[0]:  # the cause's text does not say what it is
        line = f"{type(e).__name__}: {line}"
    look = "; its inputs: " + ", ".join(inputs) if inputs else ""
    return QueryFailedError(
        f"Table `{table}` (layer `{layer}`): its query could not be built: {line}{look}. "
        "Repair or rebuild what the cause names (`warehouse status` shows each table), "
        "then run again; nothing was written.",
        table=table,
        layer=layer,
    )


def _type_changed(
    plan: TablePlan, column: str, was: str, now: str, *, readers: Sequence[str]
) -> QueryFailedError:
    """A batch whose column changed type: where to change it back, or the resets that
    rebuild the table with the new type."""
    why = (
        f"column `{column}` has type `{was}` in the table {plan.table_path} but `{now}` in "
        "the batch, and a table does not change a column's type"
    )
    if plan.transform is not None:
        keep = f"cast `{column}` back to `{was}` in its query ({plan.transform})"
    elif plan.source_kind == "kafka":
        keep = (
            f"give `{column}` back its type in the payload schema the table reads its "
            f"records with ({plan.source.split(' from ')[0]})"
        )
    else:
        keep = f"restore the definition that gave `{column}` the type `{was}`"
    return _start_over(plan, why, readers, keep=keep)


def _partitioning_changed(
    plan: TablePlan, was: Sequence[str], now: Sequence[str], *, readers: Sequence[str]
) -> QueryFailedError:
    """A sink whose `partition_by` is not the table's: set it back, or the resets that
    rebuild the table partitioned anew."""
    table, sink = ("[" + ", ".join(p) + "]" for p in (was, now))
    how = f"partitioned by {table}" if was else "not partitioned"
    why = (
        f"the table {plan.table_path} is {how} but its sink asks for partitions by {sink}, "
        "and a table keeps the partitioning it was created with"
    )
    keep = (
        f"set `partition_by: {table}` in its sink again"
        if was
        else "remove `partition_by` from its sink"
    )
    return _start_over(plan, why, readers, keep=keep)


def _start_over(
    plan: TablePlan, why: str, readers: Sequence[str], *, keep: str | None = None
) -> QueryFailedError:
    """A failure only starting the table over from its input cures: `why`, then the
    resets to run (the table's, and its stream readers')."""
    again = (
        "reads " + " and ".join(f"`{u}`" for u in plan.upstreams) + " again from the start"
        if plan.source_kind == "table" and plan.upstreams
        else "reads its input again from the start"
    )
    also = (
        " and the tables that read it as a stream ("
        + ", ".join(f"`{r}`" for r in readers)
        + "), whose checkpoints hold positions in the table being replaced,"
        if readers
        else ""
    )
    return QueryFailedError(
        f"Table `{plan.name}` ({plan.file}): {why}. Nothing was written. To rebuild the "
        f"table from its input: `warehouse run --full-refresh {plan.name}`: it resets the "
        f"table{also} and {again}." + (f" To keep the table as it is, {keep}." if keep else ""),
        table=plan.name,
        layer=plan.layer,
    )
