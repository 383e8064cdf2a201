"""A layered real-time data warehouse on Spark, Kafka and Delta (docs/architecture.md).

`Project.load(path, env=...)` reads and validates a project;
`project.pipeline(spark, layer=...).run(once=True)` runs it on your SparkSession.
`SparkSession.builder.remote("local[2]").config(map=local_connect_conf())` starts a
local Spark Connect server set up as the framework's own local sessions are.
A Python transform `(DataFrame, TransformContext) -> DataFrame` receives a
`TransformContext`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from warehouse.exports import lazy_exports

if TYPE_CHECKING:
    from warehouse.compile.transform import TransformContext
    from warehouse.errors import WarehouseError
    from warehouse.project import Project
    from warehouse.runtime.session import local_connect_conf
    from warehouse.spec.errors import Problem, ProjectError

_EXPORTS = {
    "Problem": "warehouse.spec.errors",
    "Project": "warehouse.project",
    "ProjectError": "warehouse.spec.errors",
    "TransformContext": "warehouse.compile.transform",
    "WarehouseError": "warehouse.errors",
    "local_connect_conf": "warehouse.runtime.session",
}
"""Each public name and the module it comes from, imported on first use: Spark's Python
workers import this package to unpickle the landing tasks' rules and quarantine rows
(`warehouse.quality.arrow_rows`, `.arrow_quarantine`), which need none of the rest."""

__all__ = [
    "Problem",
    "Project",
    "ProjectError",
    "TransformContext",
    "WarehouseError",
    "local_connect_conf",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
