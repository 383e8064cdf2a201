"""From table specs to Structured Streaming queries (no Spark import at module import).

`build_plan`/`render` describe what each table compiles to (`warehouse plan`);
`build_query` wires one table's query; `build_graph` orders the tables.
"""

from __future__ import annotations

from warehouse.compile.errors import CompileError, SelectionError, TransformError
from warehouse.compile.graph import TableGraph, build_graph
from warehouse.compile.plan import TablePlan, build_plan, plan_table, render, select_tables
from warehouse.compile.query import CompiledQuery, TransformContext, build_query

__all__ = [
    "CompileError",
    "CompiledQuery",
    "SelectionError",
    "TableGraph",
    "TablePlan",
    "TransformContext",
    "TransformError",
    "build_graph",
    "build_plan",
    "build_query",
    "plan_table",
    "render",
    "select_tables",
]
