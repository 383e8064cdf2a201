"""Errors of the quality package."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from warehouse.errors import WarehouseError


class QualityError(WarehouseError):
    """Something about data quality went wrong (bad check set-up, unreadable table)."""


class ExpectationFailed(QualityError):
    """A row-level expectation with `on_violation: fail` was violated in a batch.

    Raised inside the table's `foreachBatch`, so it stops the streaming query;
    the batch is not committed and is retried from the checkpoint on restart.
    """

    def __init__(
        self,
        *,
        table: str,
        expectation: str,
        batch_id: int,
        failed: int,
        checked: int,
        rows: Sequence[dict[str, Any]],
    ) -> None:
        shown = "\n".join(f"  {row}" for row in rows)
        message = (
            f"Table `{table}`: expectation `{expectation}` failed for {failed} of {checked} "
            f"rows in batch {batch_id} (on_violation: fail). "
            f"First {len(rows)} offending rows:\n{shown}\n"
            "Fix the upstream data, or change `on_violation` to `quarantine`, `drop` or "
            "`warn` in the table's YAML, then restart the query (the batch is retried)."
        )
        super().__init__(message, table=table)
        self.expectation = expectation
        self.batch_id = batch_id
        self.failed = failed
        self.checked = checked
        self.rows = list(rows)


class CheckSetupError(QualityError):
    """`warehouse check` was asked for something that does not exist (table, layer)."""
