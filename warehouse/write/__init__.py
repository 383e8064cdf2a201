"""The write strategies: how one table's micro-batch is parsed, judged and committed.

A table's strategy is chosen once, when it compiles (`TableProgram.strategy`,
`warehouse.compile.strategy`); `strategies(program)` gives the strategies a batch goes
through, in order: each writes it or leaves it to the next (a replay, a batch the Arrow
path cannot take), and the last, `CachedWrite`, takes every batch.

- `ArrowWrite` (`arrow.py`, with `arrow_files.py`): Kafka JSON landed through Arrow in
  Spark's tasks;
- `OnePassWrite` (`one_pass.py`): parsed, judged and written as read;
- `CachedWrite` (`cached.py`): persisted, judged whole, written.

They share `BatchContext` (`context.py`): the batch, its commit info, its quarantine
and quality events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from warehouse.write.arrow import ArrowWrite
from warehouse.write.cached import CachedWrite
from warehouse.write.context import BatchContext, Outcome
from warehouse.write.one_pass import OnePassWrite

if TYPE_CHECKING:
    from warehouse.compile.program import TableProgram


class WriteStrategy(Protocol):
    """One way of writing a batch. `name` is what the batch's log line calls it."""

    name: str

    def write(self, batch: BatchContext) -> Outcome | None:
        """Write `batch` exactly once and say what was done, or None to leave it to the
        next strategy (nothing committed then)."""
        ...


def strategies(program: TableProgram) -> tuple[WriteStrategy, ...]:
    """The strategies `program`'s batches go through, in order."""
    cached = CachedWrite(program)
    if program.strategy == "cached":
        return (cached,)
    one_pass = OnePassWrite(program)
    if program.strategy == "one_pass":
        return (one_pass, cached)
    return (ArrowWrite(program), one_pass, cached)


__all__ = [
    "ArrowWrite",
    "BatchContext",
    "CachedWrite",
    "OnePassWrite",
    "Outcome",
    "WriteStrategy",
    "strategies",
]
