"""Running a project: the SparkSession factory, engine resolution, the pipeline runner and
the foreachBatch writer it gives each query, one run of a table outside a pipeline
(`warehouse test`), status, recover and reset, and what changed since each table last ran."""

from __future__ import annotations

from warehouse.runtime.changes import table_changes
from warehouse.runtime.engines import resolve_engine, resolve_engines
from warehouse.runtime.errors import QueryFailedError, RecoverError, RuntimeConfigError
from warehouse.runtime.failures import RetryPolicy
from warehouse.runtime.one_run import new_checkpoint, run_batch, run_until_done
from warehouse.runtime.pipeline import Pipeline
from warehouse.runtime.recover import recover, reset
from warehouse.runtime.results import RunResult
from warehouse.runtime.session import get_session
from warehouse.runtime.status import status

__all__ = [
    "Pipeline",
    "QueryFailedError",
    "RecoverError",
    "RetryPolicy",
    "RunResult",
    "RuntimeConfigError",
    "get_session",
    "new_checkpoint",
    "recover",
    "reset",
    "resolve_engine",
    "resolve_engines",
    "run_batch",
    "run_until_done",
    "status",
    "table_changes",
]
