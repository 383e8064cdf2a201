"""From table specs to typed programs (no Spark import at module import).

`build_program` turns one table into a `TableProgram`: its input, stream, transform,
compiled row checks, targets, write strategy and publish target, decided once;
`build_plan`/`render` describe what each table compiles to (`warehouse plan`);
`apply_transform` runs a table's SQL or Python transform.
"""

from __future__ import annotations

from warehouse.compile.engines import ResolvedEngines
from warehouse.compile.errors import CheckpointError, CompileError, SelectionError, TransformError
from warehouse.compile.inputs import KafkaInput, TableInput
from warehouse.compile.plan import TablePlan, build_plan, plan_table, render, select_tables
from warehouse.compile.program import PublishTarget, TableProgram, build_program
from warehouse.compile.strategy import ArrowLanding, Strategy
from warehouse.compile.targets import Targets
from warehouse.compile.transform import CompiledTransform, TransformContext, apply_transform

__all__ = [
    "ArrowLanding",
    "CheckpointError",
    "CompileError",
    "CompiledTransform",
    "KafkaInput",
    "PublishTarget",
    "ResolvedEngines",
    "SelectionError",
    "Strategy",
    "TableInput",
    "TablePlan",
    "TableProgram",
    "Targets",
    "TransformContext",
    "TransformError",
    "apply_transform",
    "build_plan",
    "build_program",
    "plan_table",
    "render",
    "select_tables",
]
