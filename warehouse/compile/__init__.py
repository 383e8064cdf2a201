"""From table specs to Structured Streaming queries (no Spark import at module import).

`build_plan`/`render` describe what each table compiles to (`warehouse plan`);
`build_query` wires one table's query around the foreachBatch function its caller
(the runtime) gives it; `apply_transform` runs a table's SQL or Python transform.
"""

from __future__ import annotations

from warehouse.compile.errors import CompileError, SelectionError, TransformError
from warehouse.compile.plan import TablePlan, build_plan, plan_table, render, select_tables
from warehouse.compile.query import BatchFactory, CompiledQuery, ForeachBatch, build_query
from warehouse.compile.transform import TransformContext, apply_transform

__all__ = [
    "BatchFactory",
    "CompileError",
    "CompiledQuery",
    "ForeachBatch",
    "SelectionError",
    "TablePlan",
    "TransformContext",
    "TransformError",
    "apply_transform",
    "build_plan",
    "build_query",
    "plan_table",
    "render",
    "select_tables",
]
